//===- Pipeline.cpp - the training pipeline and pass registration ---------===//
#include "passes/Passes.h"

#include "mlir/Pass/PassRegistry.h"

using namespace mlir;

void weft::buildTrainingPipeline(OpPassManager &pm,
                                 const WeftInsertAdamWOptions &optimizer,
                                 const std::string &output) {
  pm.addNestedPass<func::FuncOp>(createWeftAutodiff());
  pm.addNestedPass<func::FuncOp>(createWeftInsertAdamW(optimizer));
  pm.addNestedPass<func::FuncOp>(createWeftPlanMemory());
  if (!output.empty())
    pm.addPass(createWeftEmitProgram(WeftEmitProgramOptions{output}));
}

namespace {
struct TrainingPipelineOptions
    : public PassPipelineOptions<TrainingPipelineOptions> {
  Option<double> lr{*this, "lr", llvm::cl::init(1e-3)};
  Option<std::string> output{*this, "output", llvm::cl::init("")};
};
} // namespace

void weft::registerWeftPassesAndPipelines() {
  registerWeftPasses();
  PassPipelineRegistration<TrainingPipelineOptions>(
      "weft-training-pipeline",
      "autodiff, AdamW, memory plan and (with output=FILE) emission",
      [](OpPassManager &pm, const TrainingPipelineOptions &opts) {
        WeftInsertAdamWOptions optimizer;
        optimizer.lr = opts.lr;
        buildTrainingPipeline(pm, optimizer, opts.output);
      });
}
