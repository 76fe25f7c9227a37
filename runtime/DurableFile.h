//===- DurableFile.h - Files that are whole or absent -----------*- C++ -*-===//
//
// A checkpoint must survive a kill at any instant. Each file is written to a
// temporary name in its directory, fsync'd, renamed over its final name and
// the directory fsync'd, so a reader sees the old file or the new one, never
// a prefix. Digests let a loader tell a file from another of the same size.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_RUNTIME_DURABLEFILE_H
#define WEFT_RUNTIME_DURABLEFILE_H

#include "program/Status.h"

#include <cstdint>
#include <functional>
#include <string>

namespace weft {

/// Calls Write(TempPath) to create the file's contents at a temporary name
/// beside Path, then fsyncs it, renames it to Path and fsyncs the directory.
/// On failure the temporary file is removed and Path is untouched.
Status writeDurably(const std::string &Path,
                    const std::function<Status(const std::string &)> &Write);
/// writeDurably of Text (a newline is appended).
Status writeTextDurably(const std::string &Path, const std::string &Text);
/// fsync of a directory, so that renames and unlinks in it persist.
Status syncDirectory(const std::string &Dir);

/// Atomically exchanges two directories' names (renameat2 RENAME_EXCHANGE),
/// or renames From to To when To does not exist.
Status exchangeOrRename(const std::string &From, const std::string &To);

/// A 64-bit content hash: four interleaved multiply-rotate lanes over 8-byte
/// words (about memory speed). It detects corruption and mixed-up files; it
/// is not a cryptographic hash.
uint64_t contentHash(const void *Data, size_t Size);

struct FileDigest {
  uint64_t Bytes = 0;
  uint64_t Hash = 0;
  std::string hashHex() const;
};
/// Size and contentHash of a file's bytes.
Expected<FileDigest> digestFile(const std::string &Path);

} // namespace weft

#endif // WEFT_RUNTIME_DURABLEFILE_H
