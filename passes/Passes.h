//===- Passes.h - weft passes and pipelines ---------------------*- C++ -*-===//
#ifndef WEFT_PASSES_PASSES_H
#define WEFT_PASSES_PASSES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

#include <memory>
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
} // namespace weft

#endif // WEFT_PASSES_PASSES_H
