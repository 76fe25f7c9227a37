//===- TrainingPipeline.cpp - the training pipeline and pass registration -===//
#include "passes/Passes.h"
#include "passes/TrainingFlags.h"
#include "program/Program.h"

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

namespace {
// An axis's size in a mesh spec ("dp=2,tp=4", parsed by parseMeshSpec
// alone); 1 when it has none or the spec is bad (weft-apply-layout
// refuses it, naming the entry).
int64_t meshAxisSize(const std::string &spec, const std::string &axis) {
  weft::Mesh mesh;
  return weft::parseMeshSpec(spec, mesh).ok() ? mesh.count({axis}) : 1;
}
} // namespace

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
  if (name == "forward" && (o.documents >= 0 || o.attentionMask) &&
      !o.forwardOnly)
    pm.addNestedPass<func::FuncOp>(createWeftPackDocuments(
        WeftPackDocumentsOptions{o.documents, o.attentionMask}));
  if (name == "forward" && o.forwardOnly)
    pm.addNestedPass<func::FuncOp>(createWeftReturnLogits());
  // Megatron's vocabulary split needs tp to divide the vocabulary, and
  // ZeRO's split of a table's rows over dp needs dp to divide its part:
  // pad it (exactly: the padding is outside the loss and the checkpoints).
  // Without, GPT-2's 50,257-row table kept whole state on every rank under
  // ZeRO (31% of its parameters).
  const int64_t tp = meshAxisSize(o.layout.mesh, "tp"),
                dp = meshAxisSize(o.layout.mesh, "dp");
  const bool vocabOverTp = o.layout.layout == "megatron" && tp > 1,
             vocabOverDp = o.layout.zero > 0 && dp > 1;
  // Megatron's layout splits by structural roles; a layout file's split
  // of a fused QKV dim takes its blocks from them; the padding finds the
  // vocabulary by them.
  if (name == "layout" && sharded && (o.layout.layout != "data" || vocabOverDp))
    pm.addPass(createWeftInferTpRoles());
  if (name == "layout" && (vocabOverTp || vocabOverDp) && !o.forwardOnly)
    pm.addPass(createWeftPadVocab(
        WeftPadVocabOptions{(vocabOverTp ? tp : 1) * (vocabOverDp ? dp : 1)}));
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
  if (name == "partition" && !sharded && o.microbatches != 1) {
    pm.addNestedPass<func::FuncOp>(createWeftAccumulateGradients(accumulate));
    // Added to the buffer as made: each micro-batch's gradients are not
    // all in the arena at once.
    pm.addNestedPass<func::FuncOp>(createWeftStoreGradientsEarly());
  }
  if (name == "partition" && sharded) {
    pm.addPass(createWeftPartition());
    pm.addNestedPass<func::FuncOp>(createWeftFoldCollectives());
    // Sequence parallelism's gathered inputs: gathered again in the
    // backward, not kept (before micro-batches and stages copy the step).
    // ZeRO-3 gathered per micro-batch: its parameters likewise.
    pm.addNestedPass<func::FuncOp>(createWeftRegatherActivations(
        WeftRegatherActivationsOptions{!o.gatherParamsOnce}));
    // Megatron's: an input gradient's all-reduce under the weight
    // gradient's GEMM.
    pm.addNestedPass<func::FuncOp>(createWeftOverlapInputGradientReductions());
    // Before bucketing, which then buckets the once-per-step reductions.
    if (o.microbatches != 1)
      pm.addNestedPass<func::FuncOp>(createWeftAccumulateGradients(accumulate));
    // After accumulation, whose once-per-step reductions stay.
    pm.addNestedPass<func::FuncOp>(createWeftStoreGradientsEarly());
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
  if (name == "plan-memory") {
    // After partitioning: a row-parallel bias follows its all-reduce.
    pm.addNestedPass<func::FuncOp>(createWeftFuseBias());
    pm.addNestedPass<func::FuncOp>(createWeftFuseTableGrad());
    // After partitioning: a vocabulary split already has its statistics.
    pm.addNestedPass<func::FuncOp>(createWeftShareLossStats());
    pm.addNestedPass<func::FuncOp>(createWeftPlanMemory());
  }
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
  Option<std::string> contextParallel{*this, "context-parallel",
                                      llvm::cl::init("all-gather")};
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
  Option<int64_t> virtualStages{*this, "virtual-stages", llvm::cl::init(1)};
  Option<int64_t> classes{*this, "classes", llvm::cl::init(0)};
  Option<bool> onnxModel{*this, "onnx-model", llvm::cl::init(false),
                         llvm::cl::desc("the module is an imported model.onnx "
                                        "(--loss mse and --classes need one)")};
  Option<std::string> output{*this, "output", llvm::cl::init("")};
  Option<bool> forwardOnly{*this, "forward-only", llvm::cl::init(false)};
  Option<std::string> loss{*this, "loss", llvm::cl::init("next-token")};
  Option<int64_t> maskToken{*this, "mask-token", llvm::cl::init(-1)};
  Option<double> maskProb{*this, "mask-prob", llvm::cl::init(0.15)};
  Option<int64_t> maskSeed{*this, "mask-seed", llvm::cl::init(0)};
  Option<int64_t> documents{*this, "documents", llvm::cl::init(-1)};
  Option<bool> attentionMask{*this, "attention-mask", llvm::cl::init(false)};
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
        // weft-compile's flags, checked and mapped by the same function.
        TrainingFlags t;
        t.lr = f.lr;
        t.beta1 = f.beta1;
        t.beta2 = f.beta2;
        t.eps = f.eps;
        t.weightDecay = f.weightDecay;
        t.schedule = f.schedule;
        t.warmupSteps = f.warmupSteps;
        t.totalSteps = f.totalSteps;
        t.minLr = f.minLr;
        t.mesh = f.mesh;
        t.layout = f.layout;
        t.zero = f.zero;
        t.sequenceParallel = f.sequenceParallel;
        t.contextParallel = f.contextParallel;
        t.bucketMb = double(f.bucketBytes) / 1048576.0;
        t.zeroBucketMb = double(f.zeroBucketBytes) / 1048576.0;
        t.prefetchOps = f.prefetchOps;
        t.microbatches = f.microbatches;
        t.zero3Gather = f.zero3Gather;
        t.dtype = f.dtype;
        t.recompute = f.recompute;
        t.stages = f.stages;
        t.pipelineSchedule = f.pipelineSchedule;
        t.virtualStages = f.virtualStages;
        t.forwardOnly = f.forwardOnly;
        t.loss = f.loss;
        t.classes = f.classes;
        t.maskToken = f.maskToken;
        t.maskProb = f.maskProb;
        t.maskSeed = f.maskSeed;
        t.documents = f.documents;
        t.attentionMask = f.attentionMask;
        t.output = f.output;
        t.onnxModel = f.onnxModel;
        auto note = [&](const auto &option) {
          if (option.hasValue())
            t.given.insert(option.ArgStr.str());
        };
        note(f.lr), note(f.beta1), note(f.beta2), note(f.eps);
        note(f.weightDecay), note(f.schedule), note(f.warmupSteps);
        note(f.totalSteps), note(f.minLr), note(f.mesh), note(f.bucketBytes);
        note(f.zero3Gather), note(f.pipelineSchedule), note(f.virtualStages);
        note(f.stages), note(f.loss), note(f.classes), note(f.maskToken);
        note(f.maskProb), note(f.maskSeed), note(f.documents);
        note(f.contextParallel);
        // weft-opt spells --bucket-mb in bytes.
        if (t.given.erase("bucket-bytes"))
          t.given.insert("bucket-mb");
        TrainingPipelineOptions o;
        if (std::string problem = buildTrainingOptions(t, o); !problem.empty())
          return error("weft-training-pipeline: " + problem);
        buildTrainingPipeline(pm, o);
        return success();
      },
      [](function_ref<void(const detail::PassOptions &)> handler) {
        handler(PipelineFlags());
      });
}
