//===- TrainingFlags.cpp - the training flags, checked once ---------------===//
#include "passes/TrainingFlags.h"
#include "program/PipelineSchedule.h"
#include "program/Program.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>

using namespace weft;

namespace {
std::string number(double v) {
  std::string s;
  llvm::raw_string_ostream(s) << llvm::format("%g", v);
  return s;
}
} // namespace

std::string weft::checkLossFlags(const TrainingFlags &f) {
  if (f.loss != "next-token" && f.loss != "masked-lm" &&
      f.loss != "cross-entropy" && f.loss != "mse")
    return "--loss must be next-token, masked-lm, cross-entropy or mse, got '" +
           f.loss + "'";
  if (f.loss == "mse" && !f.onnxModel)
    return "--loss mse trains a model.onnx's output against float targets; " +
           (f.model.empty() ? std::string("the model") : "'" + f.model + "'") +
           " is not one";
  if (f.given.count("classes") && (f.loss != "cross-entropy" || !f.onnxModel))
    return "--classes states a model.onnx classifier's classes for --loss "
           "cross-entropy, which is not given";
  if (f.given.count("classes") && (f.classes < 1 || f.classes > INT32_MAX))
    return "--classes must be 1 to 2^31-1, got " + std::to_string(f.classes);
  return "";
}

std::string weft::buildTrainingOptions(const TrainingFlags &f,
                                       TrainingPipelineOptions &o) {
  if (f.dtype != "f32" && f.dtype != "f64" && f.dtype != "bf16")
    return "--dtype must be f32, f64 or bf16, got '" + f.dtype + "'";
  // Checked before the conversion to bytes (a double past int64 or a NaN
  // would make it undefined).
  for (auto [flag, mb] :
       {std::pair<const char *, double>{"--bucket-mb", f.bucketMb},
        {"--zero-bucket-mb", f.zeroBucketMb}})
    if (!(mb >= 0 && mb <= 1048576))
      return std::string(flag) + " must be 0 to 1048576 (1 TiB), got " +
             number(mb);
  if (f.microbatches < 1 || f.microbatches > (int64_t(1) << 20))
    return "--microbatches must be 1 to 2^20, got " +
           std::to_string(f.microbatches);
  if (f.zero3Gather != "step" && f.zero3Gather != "microbatch")
    return "--zero3-gather must be step or microbatch, got '" + f.zero3Gather +
           "'";
  if (std::string loss = checkLossFlags(f); !loss.empty())
    return loss;
  if (f.loss != "masked-lm")
    for (const char *flag : {"mask-token", "mask-prob", "mask-seed"})
      if (f.given.count(flag))
        return std::string("--") + flag +
               " is about --loss masked-lm, which is not given";
  if (f.given.count("documents") &&
      (f.forwardOnly || f.loss == "masked-lm" || f.loss == "mse"))
    return std::string("--documents packs rows of a causal model's "
                       "training; it does not apply to ") +
           (f.forwardOnly ? "--forward-only" : "--loss " + f.loss);
  if (f.attentionMask && f.given.count("documents"))
    return "--attention-mask and --documents both say where a row's "
           "sequences start; give one";
  if (f.attentionMask && f.loss != "cross-entropy")
    return "--attention-mask trains padded rows on given targets (-100 at "
           "the padding): it needs --loss cross-entropy";
  if (f.attentionMask && f.onnxModel)
    return "--attention-mask pads a builtin model's rows (a name or "
           "config.json); an ONNX graph pads them by its own attention_mask "
           "input, which weft imports as it is: compile it without the flag";
  if (f.given.count("documents") && f.onnxModel)
    return "--documents needs the model's attention as weft's own (a "
           "builtin model or config.json); an ONNX graph's mask is its own";
  if (f.given.count("documents") &&
      (f.documents < 0 || f.documents > INT32_MAX))
    return "--documents must be a token id (0 to 2^31-1), got " +
           std::to_string(f.documents);
  if (f.recompute != "none" && f.recompute != "selective" &&
      f.recompute != "full")
    return "--recompute must be none, selective or full, got '" + f.recompute +
           "'";
  if (f.zero < 0 || f.zero > 3)
    return "--zero must be 0, 1, 2 or 3, got " + std::to_string(f.zero);
  if (f.layout.empty())
    return "--layout is empty: expected data, megatron or a layout JSON file";
  weft::Mesh mesh;
  if (f.given.count("mesh") || !f.mesh.empty())
    if (Status s = parseMeshSpec(f.mesh, mesh); !s.ok())
      return "--mesh: " + s.message();
  const bool sharded = !f.mesh.empty();
  if (!sharded && (f.zero != 0 || f.sequenceParallel || f.layout != "data"))
    return "--layout, --zero and --sequence-parallel need --mesh";
  if (f.contextParallel != "all-gather" && f.contextParallel != "all-to-all" &&
      f.contextParallel != "ring")
    return "--context-parallel must be all-gather, all-to-all or ring, got '" +
           f.contextParallel + "'";
  if (f.given.count("context-parallel") &&
      (mesh.axisIndex("cp") < 0 || mesh.Dims[size_t(mesh.axisIndex("cp"))] < 2))
    return "--context-parallel is about a sequence split over cp: --mesh "
           "needs a cp axis of 2 or more ranks";
  const int64_t pp =
      mesh.axisIndex("pp") >= 0 ? mesh.Dims[size_t(mesh.axisIndex("pp"))] : 1;
  if (f.forwardOnly) {
    // What a forward-only program does not have: refused, not ignored.
    // ZeRO-3 shards the parameters themselves (inference's memory too);
    // stages 1 and 2 shard what only training has.
    std::string trainingOnly = f.microbatches != 1          ? "--microbatches"
                               : f.recompute != "none"      ? "--recompute"
                               : f.zero == 1 || f.zero == 2 ? "--zero 1/2"
                                                            : "";
    for (const char *flag :
         {"lr", "beta1", "beta2", "adam-eps", "weight-decay", "schedule",
          "warmup-steps", "total-steps", "min-lr", "bucket-mb", "zero3-gather",
          "pipeline-schedule", "virtual-stages", "stages", "loss", "mask-token",
          "mask-prob", "mask-seed"})
      if (trainingOnly.empty() && f.given.count(flag))
        trainingOnly = std::string("--") + flag;
    if (!trainingOnly.empty())
      return trainingOnly + " is about training; a --forward-only program has "
                            "no gradients or optimizer state";
    if (pp > 1)
      return "--forward-only does not cut pipeline stages: the --mesh pp axis "
             "must be 1";
  }
  if (f.virtualStages < 1 || f.virtualStages > 1024)
    return "--virtual-stages must be 1 to 1024, got " +
           std::to_string(f.virtualStages);
  const bool interleaved = f.pipelineSchedule == "interleaved";
  const bool json = llvm::StringRef(f.pipelineSchedule).ends_with(".json");
  const bool custom =
      json || llvm::StringRef(f.pipelineSchedule).starts_with("custom:");
  if (interleaved != (f.virtualStages > 1) && !custom)
    return interleaved ? "--pipeline-schedule interleaved needs "
                         "--virtual-stages V of 2 or more"
                       : "--virtual-stages " + std::to_string(f.virtualStages) +
                             " needs --pipeline-schedule interleaved (or a "
                             "JSON schedule naming chunks)";
  std::string scheduleSpec = f.pipelineSchedule;
  if (interleaved)
    scheduleSpec = "interleaved:" + std::to_string(f.virtualStages);
  if (PipelineSchedule parsed;
      !json && (!parsePipelineSchedule(scheduleSpec, parsed).ok() ||
                (parsed.Kind == PipelineScheduleKind::Custom && !custom)))
    return "--pipeline-schedule: unknown pipeline schedule '" +
           f.pipelineSchedule +
           "' (expected gpipe, 1f1b, interleaved, zb-h1 or a .json file)";
  if (pp <= 1 && (f.given.count("stages") ||
                  f.given.count("pipeline-schedule") || f.virtualStages > 1))
    return std::string(f.given.count("stages") ? "--stages"
                       : f.virtualStages > 1   ? "--virtual-stages"
                                               : "--pipeline-schedule") +
           " needs a pp axis of 2 or more in --mesh";
  if (f.given.count("stages") && f.stages.empty())
    return "--stages is empty: expected each stage's layers, as 0-5,6-11";
  if (interleaved && f.microbatches % pp != 0)
    return "--pipeline-schedule interleaved runs micro-batches in rounds of "
           "pp: --microbatches " +
           std::to_string(f.microbatches) +
           " is not a multiple of pp=" + std::to_string(pp);
  if (json) {
    // Each stage's runs, {"stages": [["F0", "B0", ...], ...]}: travels to
    // the passes in its compact form.
    auto text = llvm::MemoryBuffer::getFile(f.pipelineSchedule);
    if (!text)
      return "cannot read --pipeline-schedule '" + f.pipelineSchedule +
             "': " + text.getError().message();
    PipelineSchedule parsed;
    if (Status s =
            parsePipelineScheduleJson((*text)->getBuffer().str(), pp,
                                      f.microbatches, f.virtualStages, parsed);
        !s.ok())
      return "--pipeline-schedule '" + f.pipelineSchedule + "': " + s.message();
    scheduleSpec = pipelineScheduleSpec(parsed);
  }

  o = TrainingPipelineOptions();
  o.optimizer.lr = f.lr;
  o.optimizer.beta1 = f.beta1;
  o.optimizer.beta2 = f.beta2;
  o.optimizer.eps = f.eps;
  o.optimizer.weightDecay = f.weightDecay;
  o.optimizer.schedule = f.schedule;
  o.optimizer.warmupSteps = f.warmupSteps;
  o.optimizer.totalSteps = f.totalSteps;
  o.optimizer.minLr = f.minLr;
  if (sharded) {
    o.layout.mesh = f.mesh;
    o.layout.layout = f.layout;
    o.layout.zero = f.zero;
    o.layout.sequenceParallel = f.sequenceParallel;
    o.layout.contextParallel = f.contextParallel;
  }
  o.bucketBytes = int64_t(f.bucketMb * 1048576.0);
  o.zeroBucketBytes = int64_t(f.zeroBucketMb * 1048576.0);
  o.prefetchOps = f.prefetchOps;
  o.microbatches = f.microbatches;
  o.gatherParamsOnce = f.zero3Gather == "step";
  // bf16: the model is built in f32 (its master weights) and
  // weft-mixed-precision makes its activations bf16.
  o.computeDtype = f.dtype == "bf16" ? "bf16" : "f32";
  o.recompute = f.recompute;
  o.forwardOnly = f.forwardOnly;
  // mse: the model's own weft.mse_loss, nothing to mask.
  o.maskedLm = f.loss == "masked-lm" || f.loss == "cross-entropy";
  o.masking.givenTargets = f.loss == "cross-entropy";
  o.masking.maskToken = f.maskToken;
  o.masking.maskProb = f.maskProb;
  o.masking.seed = f.maskSeed;
  o.documents = f.given.count("documents") ? f.documents : -1;
  o.attentionMask = f.attentionMask;
  // weft-cut-stages' options: the mesh's pp axis holds the stages.
  o.pipeline.stages = pp;
  o.pipeline.boundaries = f.stages;
  o.pipeline.schedule = scheduleSpec;
  o.layout.pipelineAxis = pp > 1 ? "pp" : "";
  o.output = f.output;
  return "";
}
