//===- Checkpoint.h - Model/optimizer checkpoints (safetensors) -*- C++ -*-===//
#ifndef WEFT_RUNTIME_CHECKPOINT_H
#define WEFT_RUNTIME_CHECKPOINT_H

#include "runtime/Executor.h"
#include "runtime/checkpoint/Safetensors.h"

#include <string>
#include <vector>

namespace weft {

/// A checkpoint's contents at one step, ready to be written without the
/// executor and without collectives (so on a background thread): host
/// copies of the tensors, and on rank 0 of a mesh layout.json.
struct CheckpointSnapshot {
  int64_t Step = 0;
  int64_t Rank = 0, WorldSize = 1;
  Mesh M; // empty for one rank
  std::string LayoutJson;
  /// How the run read its batches (Executor::batchesDescription()); empty
  /// when unknown.
  std::string Batches;
  std::vector<TensorToWrite> Model, Optimizer;
  std::vector<std::vector<char>> Copies; // owns the tensors
};
/// Recycled: the copies of an earlier snapshot of E, reused when they fit
/// (a fresh copy of GBs costs seconds of page faults on some machines).
Expected<CheckpointSnapshot>
snapshotCheckpoint(const Executor &E, int64_t Step,
                   std::vector<std::vector<char>> Recycled = {});

/// Writes S's files into Dir (created if needed), each durably (temporary
/// name, fsync, rename): model and optimizer safetensors (model-rank<r> and
/// optimizer-rank<r> on a mesh), trainer_state.json ({"step": Step} and,
/// when known, "batches": how the run drew them), on a
/// mesh layout.json, and last the manifest (CheckpointManifest.h); rank 0
/// waits up to WaitSeconds for the other ranks' parts.
Status writeCheckpoint(const CheckpointSnapshot &S, const std::string &Dir,
                       double WaitSeconds);

/// The "batches" of Dir/trainer_state.json: how the run that saved it read
/// its batches ("" when the file or the key is absent).
Expected<std::string> readBatchesDescription(const std::string &Dir);

/// Whether Dir may receive a --save: absent, empty, or a weft checkpoint
/// (a manifest.json beside a checkpoint's own files only). A save replaces Dir
/// whole, so a folder holding anything else (the step-* checkpoints of
/// --save-every, a user's files) is refused, naming what it holds.
Status checkSaveTarget(const std::string &Dir);

/// Saves a complete checkpoint into DIR, collectively (Dir must pass
/// checkSaveTarget). The files are written
/// into DIR.partial and then exchanged with DIR atomically, so a save killed
/// at any instant leaves DIR as it was.
Status saveCheckpoint(const Executor &E, const std::string &Dir, int64_t Step,
                      double WaitSeconds = 600);

/// Loads parameters from Path: a weft checkpoint directory (verified against
/// its manifest first; one without a manifest is refused as incomplete),
/// any other directory (every *.safetensors but
/// grads.safetensors) or one file,
/// accepting names with or without a "transformer." prefix, converting
/// F32/F64/F16/BF16. When the files also hold <name>.exp_avg/_sq they are
/// loaded into Adam m/v. Returns the step of trainer_state.json (0 if none).
///
/// A tensor the program does not use is refused, naming it (a checkpoint of
/// a different model would otherwise load silently), except buffers that
/// hold no trained values (GPT-2's causal-mask `attn.bias` and
/// `attn.masked_bias`, Llama's `rotary_emb.inv_freq`) and an `lm_head.weight`
/// equal to the tied embedding. A tied program whose embedding is missing
/// takes `lm_head.weight` for it (a tied model exported with only the head's
/// name). With AllowUnused, each unused tensor is a line in *Warnings
/// instead.
struct LoadOptions {
  bool AllowUnused = false;
  std::vector<std::string> *Warnings = nullptr;
};
Expected<int64_t> loadCheckpoint(Executor &E, const std::string &Path,
                                 const LoadOptions &Options = {});

/// A barrier over the world that every rank reaches whatever S holds, so a
/// failure on one rank cannot leave the others waiting; returns S, else the
/// barrier's status.
Status checkpointBarrier(const Executor &E, Status S);

/// Writes DIR/grads.safetensors: every parameter's gradient buffer.
Status saveGradients(const Executor &E, const std::string &Dir);

} // namespace weft

#endif // WEFT_RUNTIME_CHECKPOINT_H
