//===- Pipeline.cpp - the training pipeline and pass registration ---------===//
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;

const char *const weft::kTrainingStages[] = {
    "forward",   "layout",    "autodiff",   "optimizer",
    "propagate", "partition", "plan-memory"};
const int weft::kNumTrainingStages =
    int(sizeof(kTrainingStages) / sizeof(kTrainingStages[0]));

void weft::addOnnxLowering(OpPassManager &pm) {
  pm.addNestedPass<func::FuncOp>(createWeftRaiseOnnx());
  // What no pattern raised trains on the generic path.
  pm.addNestedPass<func::FuncOp>(createWeftLowerOnnxGeneric());
}

void weft::addTrainingStage(OpPassManager &pm, int stage,
                            const TrainingPipelineOptions &o) {
  const bool sharded = !o.layout.mesh.empty();
  const std::string name = kTrainingStages[stage];
  // Before the raise, which refuses next-token training of an encoder.
  if (name == "forward" && o.maskedLm && !o.forwardOnly)
    pm.addNestedPass<func::FuncOp>(createWeftMaskedLm(o.masking));
  // An imported ONNX graph becomes weft's ops (no-op for other models).
  if (name == "forward")
    addOnnxLowering(pm);
  if (name == "forward" && o.forwardOnly)
    pm.addNestedPass<func::FuncOp>(createWeftReturnLogits());
  if (name == "layout" && sharded)
    pm.addPass(createWeftApplyLayout(o.layout));
  if (name == "autodiff" && o.computeDtype != "f32")
    pm.addNestedPass<func::FuncOp>(
        createWeftMixedPrecision(WeftMixedPrecisionOptions{o.computeDtype}));
  // A forward-only program has no gradients to compute or apply.
  if (o.forwardOnly && (name == "autodiff" || name == "optimizer"))
    return;
  if (name == "autodiff")
    pm.addNestedPass<func::FuncOp>(createWeftAutodiff());
  if (name == "autodiff" && o.recompute != "none")
    pm.addNestedPass<func::FuncOp>(
        createWeftRecompute(WeftRecomputeOptions{o.recompute}));
  if (name == "optimizer")
    pm.addNestedPass<func::FuncOp>(createWeftInsertAdamW(o.optimizer));
  if (name == "propagate" && sharded)
    pm.addPass(createWeftPropagateSharding());
  WeftAccumulateGradientsOptions accumulate;
  accumulate.microbatches = o.microbatches;
  accumulate.gatherOnce = o.gatherParamsOnce;
  if (name == "partition" && !sharded && o.microbatches != 1)
    pm.addNestedPass<func::FuncOp>(createWeftAccumulateGradients(accumulate));
  if (name == "partition" && sharded) {
    pm.addPass(createWeftPartition());
    pm.addNestedPass<func::FuncOp>(createWeftFoldCollectives());
    // Before bucketing, which then buckets the once-per-step reductions.
    if (o.microbatches != 1)
      pm.addNestedPass<func::FuncOp>(createWeftAccumulateGradients(accumulate));
    // Before bucketing: each stage buckets its own gradients.
    if (o.pipeline.stages > 1)
      pm.addPass(createWeftCutStages(o.pipeline));
    WeftBucketGradientsOptions buckets;
    buckets.bucketBytes = o.bucketBytes;
    buckets.zeroBucketBytes = o.zeroBucketBytes;
    pm.addNestedPass<func::FuncOp>(createWeftBucketGradients(buckets));
    WeftPrefetchParamsOptions prefetch;
    prefetch.distance = o.prefetchOps;
    pm.addNestedPass<func::FuncOp>(createWeftPrefetchParams(prefetch));
  }
  if (name == "plan-memory")
    pm.addNestedPass<func::FuncOp>(createWeftPlanMemory());
}

weft::WeftCutStagesOptions weft::pipelineOptions(llvm::StringRef mesh,
                                                 llvm::StringRef boundaries,
                                                 llvm::StringRef schedule) {
  WeftCutStagesOptions o;
  o.boundaries = boundaries.str();
  o.schedule = schedule.str();
  SmallVector<StringRef> axes;
  mesh.split(axes, ',');
  for (StringRef a : axes) {
    auto [name, size] = a.split('=');
    int64_t n;
    if (name.trim() == "pp" && !size.trim().getAsInteger(10, n))
      o.stages = n;
  }
  return o;
}

void weft::buildTrainingPipeline(OpPassManager &pm,
                                 const TrainingPipelineOptions &o) {
  for (int stage = 0; stage < kNumTrainingStages; ++stage)
    addTrainingStage(pm, stage, o);
  if (!o.output.empty())
    pm.addPass(createWeftEmitProgram(WeftEmitProgramOptions{o.output}));
}

namespace {
/// weft-opt's spelling of TrainingPipelineOptions: weft-compile's flags.
struct PipelineFlags : public PassPipelineOptions<PipelineFlags> {
  Option<double> lr{*this, "lr", llvm::cl::init(1e-3)};
  Option<double> beta1{*this, "beta1", llvm::cl::init(0.9)};
  Option<double> beta2{*this, "beta2", llvm::cl::init(0.95)};
  Option<double> eps{*this, "adam-eps", llvm::cl::init(1e-8)};
  Option<double> weightDecay{*this, "weight-decay", llvm::cl::init(0.1)};
  Option<std::string> schedule{*this, "schedule", llvm::cl::init("constant")};
  Option<int64_t> warmupSteps{*this, "warmup-steps", llvm::cl::init(0)};
  Option<int64_t> totalSteps{*this, "total-steps", llvm::cl::init(0)};
  Option<double> minLr{*this, "min-lr", llvm::cl::init(0.0)};
  Option<std::string> mesh{*this, "mesh", llvm::cl::init("")};
  Option<std::string> layout{*this, "layout", llvm::cl::init("data")};
  Option<int64_t> zero{*this, "zero", llvm::cl::init(0)};
  Option<bool> sequenceParallel{*this, "sequence-parallel",
                                llvm::cl::init(false)};
  Option<int64_t> bucketBytes{*this, "bucket-bytes",
                              llvm::cl::init(25 * 1048576)};
  Option<int64_t> zeroBucketBytes{*this, "zero-bucket-bytes",
                                  llvm::cl::init(0)};
  Option<int64_t> prefetchOps{*this, "prefetch-ops", llvm::cl::init(16)};
  Option<int64_t> microbatches{*this, "microbatches", llvm::cl::init(1)};
  Option<std::string> zero3Gather{*this, "zero3-gather",
                                  llvm::cl::init("step")};
  Option<std::string> dtype{*this, "dtype", llvm::cl::init("f32")};
  Option<std::string> stages{*this, "stages", llvm::cl::init("")};
  Option<std::string> recompute{*this, "recompute", llvm::cl::init("none")};
  Option<std::string> pipelineSchedule{*this, "pipeline-schedule",
                                       llvm::cl::init("1f1b")};
  Option<std::string> output{*this, "output", llvm::cl::init("")};
  Option<bool> forwardOnly{*this, "forward-only", llvm::cl::init(false)};
  Option<std::string> loss{*this, "loss", llvm::cl::init("next-token")};
  Option<int64_t> maskToken{*this, "mask-token", llvm::cl::init(-1)};
  Option<double> maskProb{*this, "mask-prob", llvm::cl::init(0.15)};
  Option<int64_t> maskSeed{*this, "mask-seed", llvm::cl::init(0)};
};
} // namespace

void weft::registerWeftPassesAndPipelines() {
  registerWeftPasses();
  // PassPipelineRegistration's builder cannot fail; this one refuses a
  // --loss it does not know instead of training next-token.
  registerPassPipeline(
      "weft-training-pipeline",
      "what weft-compile runs: layout, autodiff, AdamW, propagation, "
      "partition, memory plan and (with output=FILE) emission",
      [](OpPassManager &pm, StringRef text,
         function_ref<LogicalResult(const Twine &)> error) -> LogicalResult {
        PipelineFlags f;
        if (failed(f.parseFromString(text)))
          return failure();
        if (f.loss != "next-token" && f.loss != "masked-lm" &&
            f.loss != "cross-entropy" && f.loss != "mse")
          return error("weft-training-pipeline: loss must be next-token, "
                       "masked-lm, cross-entropy or mse, got '" +
                       f.loss + "'");
        TrainingPipelineOptions o;
        o.optimizer.lr = f.lr;
        o.optimizer.beta1 = f.beta1;
        o.optimizer.beta2 = f.beta2;
        o.optimizer.eps = f.eps;
        o.optimizer.weightDecay = f.weightDecay;
        o.optimizer.schedule = f.schedule;
        o.optimizer.warmupSteps = f.warmupSteps;
        o.optimizer.totalSteps = f.totalSteps;
        o.optimizer.minLr = f.minLr;
        o.layout.mesh = f.mesh;
        o.layout.layout = f.layout;
        o.layout.zero = f.zero;
        o.layout.sequenceParallel = f.sequenceParallel;
        o.bucketBytes = f.bucketBytes;
        o.zeroBucketBytes = f.zeroBucketBytes;
        o.prefetchOps = f.prefetchOps;
        o.microbatches = f.microbatches;
        o.gatherParamsOnce = f.zero3Gather != "microbatch";
        // weft-mixed-precision refuses anything but f32 and bf16.
        o.computeDtype = f.dtype;
        o.recompute = f.recompute;
        // The mesh's pp axis, if any, holds the stages.
        o.pipeline = pipelineOptions(f.mesh, f.stages, f.pipelineSchedule);
        o.layout.pipelineAxis = o.pipeline.stages > 1 ? "pp" : "";
        o.forwardOnly = f.forwardOnly;
        // mse: the model's own weft.mse_loss, nothing to mask.
        o.maskedLm = f.loss == "masked-lm" || f.loss == "cross-entropy";
        o.masking.givenTargets = f.loss == "cross-entropy";
        o.masking.maskToken = f.maskToken;
        o.masking.maskProb = f.maskProb;
        o.masking.seed = f.maskSeed;
        o.output = f.output;
        buildTrainingPipeline(pm, o);
        return success();
      },
      [](function_ref<void(const detail::PassOptions &)> handler) {
        handler(PipelineFlags());
      });
}
