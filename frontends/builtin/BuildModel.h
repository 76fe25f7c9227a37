//===- BuildModel.h - builtin models as weft IR -----------------*- C++ -*-===//
#ifndef WEFT_FRONTENDS_BUILTIN_BUILDMODEL_H
#define WEFT_FRONTENDS_BUILTIN_BUILDMODEL_H

#include "frontends/builtin/ModelConfig.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace weft {

struct BuildOptions {
  int64_t batch = 8;
  int64_t seq = 64;
  bool f64 = false; // f64 programs exist for exact gradient checks
};

/// The forward function `@forward(tokens, targets) -> loss` of one model: GPT-2
/// or Llama semantics exactly, parameters named as in Hugging Face checkpoints.
/// Returns null and sets `error` when the options do not fit the model (seq
/// beyond its positions, non-positive sizes, heads that do not divide).
mlir::OwningOpRef<mlir::ModuleOp> buildModel(mlir::MLIRContext &context,
                                             const ModelConfig &config,
                                             const BuildOptions &options,
                                             std::string &error);

} // namespace weft

#endif // WEFT_FRONTENDS_BUILTIN_BUILDMODEL_H
