//===- CheckpointManifest.h - What makes a checkpoint complete --*- C++ -*-===//
//
// A weft checkpoint directory is complete when it holds manifest.json, which
// is written last: the step, the world size, the mesh, and every file with
// its size, content hash and the rank that wrote it. On a mesh each rank
// first writes rank-<r>.json (its own files' digests) once its files are
// durable; rank 0 waits for all of them and then writes the manifest, so
// no collective is needed and the write can run on a background thread.
// Loading verifies every file against the manifest and refuses a checkpoint
// whose files disagree with it, naming the file.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_RUNTIME_CHECKPOINTMANIFEST_H
#define WEFT_RUNTIME_CHECKPOINTMANIFEST_H

#include "program/Program.h"
#include "runtime/DurableFile.h"

#include <map>
#include <string>
#include <vector>

namespace weft {

/// Checkpoint steps above this are refused (a JSON number is exact to 2^53;
/// a step this large means a corrupted or crafted file).
constexpr int64_t kMaxCheckpointStep = int64_t(1) << 50;

struct ManifestFile {
  std::string Name; // relative to the checkpoint directory
  int64_t Rank = 0; // the rank that wrote it
  FileDigest Digest;
};

struct Manifest {
  int64_t Step = 0;
  int64_t WorldSize = 1;
  Mesh M; // empty for one rank
  std::vector<ManifestFile> Files;
};

/// A whole file as text, or an error naming it.
Expected<std::string> readTextFile(const std::string &Path);

/// trainer_state.json: {"step": k}, 0 <= k <= kMaxCheckpointStep. Where
/// names the file in messages.
Expected<int64_t> parseTrainerState(const std::string &Text,
                                    const std::string &Where);

/// A sharded checkpoint's layout.json: the mesh it was saved on and every
/// tensor's global layout, each checked against that mesh
/// (checkGlobalLayout: sizes, blocks and axes, overflow-safe).
struct CheckpointLayout {
  Mesh Saved;
  std::map<std::string, Layout> Tensors;
  /// A tensor whose rank files hold padding rows past the model's (a
  /// vocabulary padded for tp): its shape without them, "logical_shape".
  std::map<std::string, Shape> Logical;
};
Expected<CheckpointLayout> parseCheckpointLayout(const std::string &Text,
                                                 const std::string &Where);

/// manifest.json's contents, checked for form (not against any file).
Expected<Manifest> parseManifest(const std::string &Text,
                                 const std::string &Where);

/// Rank Rank's part: digests Names (in Dir) and writes Dir/rank-<Rank>.json.
Status writeRankPart(const std::string &Dir, int64_t Step, int64_t Rank,
                     int64_t WorldSize, const std::vector<std::string> &Names);

/// Rank 0: waits up to WaitSeconds for every other rank's part (a rank that
/// died never writes one), digests its own files Names and writes
/// Dir/manifest.json.
Status writeManifest(const std::string &Dir, int64_t Step, const Mesh &M,
                     int64_t WorldSize, const std::vector<std::string> &Names,
                     double WaitSeconds);

/// Whether Dir holds any file that only a weft checkpoint writes
/// (manifest.json, trainer_state.json, layout.json, optimizer or rank shard
/// files, rank parts).
bool looksLikeWeftCheckpoint(const std::string &Dir);

/// Reads Dir/manifest.json and checks every file it lists (size and hash)
/// and that no weft checkpoint file in Dir is missing from it.
Expected<Manifest> verifyCheckpoint(const std::string &Dir);

} // namespace weft

#endif // WEFT_RUNTIME_CHECKPOINTMANIFEST_H
