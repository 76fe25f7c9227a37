//===- Checkpoint.h - Model/optimizer checkpoints (safetensors) -*- C++ -*-===//
#ifndef WEFT_RUNTIME_CHECKPOINT_H
#define WEFT_RUNTIME_CHECKPOINT_H

#include "runtime/Executor.h"

#include <string>
#include <vector>

namespace weft {

/// Writes DIR/model.safetensors, DIR/optimizer.safetensors
/// (<name>.exp_avg, <name>.exp_avg_sq) and DIR/trainer_state.json
/// ({"step": Step}); creates DIR if needed.
Status saveCheckpoint(const Executor &E, const std::string &Dir, int64_t Step);

/// Loads parameters from Path: a weft checkpoint directory (model and
/// optimizer files), any other directory (every *.safetensors but
/// grads.safetensors) or one file,
/// accepting names with or without a "transformer." prefix, converting
/// F32/F64/F16/BF16. When the files also hold <name>.exp_avg/_sq they are
/// loaded into Adam m/v. Returns the step of trainer_state.json (0 if none).
///
/// A tensor the program does not use is refused, naming it (a checkpoint of
/// a different model would otherwise load silently), except buffers that
/// hold no trained values (GPT-2's causal-mask `attn.bias` and
/// `attn.masked_bias`, Llama's `rotary_emb.inv_freq`) and an `lm_head.weight`
/// equal to the tied embedding. With AllowUnused, each unused tensor is a
/// line in *Warnings instead.
struct LoadOptions {
  bool AllowUnused = false;
  std::vector<std::string> *Warnings = nullptr;
};
Expected<int64_t> loadCheckpoint(Executor &E, const std::string &Path,
                                 const LoadOptions &Options = {});

/// Writes DIR/grads.safetensors: every parameter's gradient buffer.
Status saveGradients(const Executor &E, const std::string &Dir);

} // namespace weft

#endif // WEFT_RUNTIME_CHECKPOINT_H
