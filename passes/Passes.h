//===- Passes.h - weft passes and pipelines ---------------------*- C++ -*-===//
#ifndef WEFT_PASSES_PASSES_H
#define WEFT_PASSES_PASSES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

#include <memory>
#include <optional>
#include <string>

namespace weft {
#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// The whole lowering of a forward model to a runtime program, in order:
/// autodiff, AdamW, memory plan, emission (when `output` is non-empty).
void buildTrainingPipeline(mlir::OpPassManager &pm,
                           const WeftInsertAdamWOptions &optimizer,
                           const std::string &output);

/// Registers every pass and the `weft-training-pipeline` for weft-opt.
void registerWeftPassesAndPipelines();

/// weft's bound on a tensor's dimensions and element count (the runtime's
/// MaxNumElements): past it, byte sizes and arena offsets could overflow
/// int64.
constexpr int64_t kMaxTensorElements = int64_t(1) << 48;

/// Emits an error naming the first tensor value (result or block argument)
/// under `root` that has a dynamic dimension, a dimension past 2^48 or more
/// than 2^48 elements, and fails. weft-compile calls it on its input and
/// weft-plan-memory on its function, so size arithmetic cannot overflow.
mlir::LogicalResult checkTensorSizes(mlir::Operation *root);

/// Bytes of a static tensor type within kMaxTensorElements; std::nullopt for
/// any other type.
std::optional<int64_t> tensorBytes(mlir::Type type);
} // namespace weft

#endif // WEFT_PASSES_PASSES_H
