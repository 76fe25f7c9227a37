//===- weft-compile.cpp - model + options -> runtime program --------------===//
//
//   weft-compile MODEL [--batch B] [--seq S] [--lr X] ... -o OUT
//
// MODEL is a preset name, a Hugging Face style config.json, an ONNX file
// (torch.onnx.export of GPT-2 / Llama; frontends/onnx), or a .mlir file
// holding a forward function in weft IR. The stages are the passes of
// passes/TrainingPipeline.cpp; --emit-mlir=STAGE prints the IR after one of
// them.
//
//===----------------------------------------------------------------------===//
#include "dialect/AttrNames.h"
#include "dialect/WeftDialect.h"
#include "frontends/builtin/BuildModel.h"
#ifdef WEFT_HAVE_ONNX_IMPORT
#include "frontends/onnx/ImportOnnx.h"
#endif
#include "passes/Passes.h"
#include "passes/ToolDiagnostics.h"
#include "passes/TrainingFlags.h"
#include "passes/analysis/Explain.h"
#include "program/JsonDepth.h"
#include "program/PipelineSchedule.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <functional>

using namespace mlir;
namespace cl = llvm::cl;

// Only these options in --help (MLIR and LLVM register hundreds more).
static cl::OptionCategory compileCategory("weft-compile options");

static cl::opt<std::string>
    modelArg(cl::cat(compileCategory), cl::Positional, cl::Required,
             cl::desc("<preset | config.json | model.onnx | model.mlir>"));
static cl::opt<std::string> outputArg(cl::cat(compileCategory), "o",
                                      cl::desc("program file to write"),
                                      cl::value_desc("file"));
static cl::opt<int64_t> batchArg(cl::cat(compileCategory), "batch",
                                 cl::desc("sequences per step"), cl::init(8));
static cl::opt<int64_t> microbatchesArg(
    cl::cat(compileCategory), "microbatches",
    cl::desc("cut each step's batch into this many micro-batches whose "
             "gradients accumulate before one optimizer step (the activation "
             "arena holds one)"),
    cl::init(1));
static cl::opt<std::string> zero3GatherArg(
    cl::cat(compileCategory), "zero3-gather",
    cl::desc("with ZeRO-3: gather each parameter once per 'step' (the "
             "default: the gathered copies stay for the step) or in each "
             "'microbatch', for its forward and again for its backward "
             "(FSDP's way: the least memory, about 2M times the gathers)"),
    cl::init("step"));
static cl::opt<std::string> pipelineScheduleArg(
    cl::cat(compileCategory), "pipeline-schedule",
    cl::desc("with a pp axis in --mesh: gpipe, 1f1b (the default), "
             "interleaved (with --virtual-stages), zb-h1 (zero-bubble: "
             "backwards split into input and weight gradients), or a JSON "
             "file of each stage's runs, {\"stages\": [[\"F0\", \"B0\", "
             "...], ...]} (\"F0.1\": chunk 1, with --virtual-stages; "
             "\"W0\": micro-batch 0's weight gradients)"),
    cl::init("1f1b"));
static cl::opt<int64_t> virtualStagesArg(
    cl::cat(compileCategory), "virtual-stages",
    cl::desc("with --pipeline-schedule interleaved (or a JSON schedule): the "
             "model chunks each pipeline rank holds (V >= 2), rank r "
             "holding chunks r, r+pp, ...; --microbatches must be a "
             "multiple of pp"),
    cl::init(1));
static cl::opt<std::string> stagesArg(
    cl::cat(compileCategory), "stages",
    cl::desc("with a pp axis in --mesh: the layers of each pipeline stage, "
             "as 0-5,6-11 (default: balanced by each layer's FLOPs)"),
    cl::init(""));
static cl::opt<std::string> recomputeArg(
    cl::cat(compileCategory), "recompute",
    cl::desc("none, selective (recompute the attention core in the "
             "backward) or full (each layer's activations from its input)"),
    cl::init("none"));
static cl::opt<std::string> memoryLimitArg(
    cl::cat(compileCategory), "memory-limit",
    cl::desc("refuse the layout if a rank would hold more than this (bytes, "
             "or with KiB, MiB, GiB): parameters, gradients, optimizer state "
             "and activations, per pipeline stage"),
    cl::init(""));
static cl::opt<int64_t> seqArg(cl::cat(compileCategory), "seq",
                               cl::desc("tokens per sequence"), cl::init(64));
static cl::opt<std::string> dtypeArg(
    cl::cat(compileCategory), "dtype",
    cl::desc("f32, f64, or bf16 (bf16 activations and GEMM inputs over f32 "
             "master weights, gradients and Adam state)"),
    cl::init("f32"));
static cl::opt<double> lrArg(cl::cat(compileCategory), "lr",
                             cl::desc("peak learning rate"), cl::init(1e-3));
static cl::opt<double> beta1Arg(cl::cat(compileCategory), "beta1",
                                cl::desc("AdamW beta1"), cl::init(0.9));
static cl::opt<double> beta2Arg(cl::cat(compileCategory), "beta2",
                                cl::desc("AdamW beta2"), cl::init(0.95));
static cl::opt<double> epsArg(cl::cat(compileCategory), "adam-eps",
                              cl::desc("AdamW epsilon"), cl::init(1e-8));
static cl::opt<double>
    wdArg(cl::cat(compileCategory), "weight-decay",
          cl::desc("AdamW decoupled weight decay (matrices only)"),
          cl::init(0.1));
static cl::opt<std::string> scheduleArg(cl::cat(compileCategory), "schedule",
                                        cl::desc("constant or cosine"),
                                        cl::init("constant"));
static cl::opt<int64_t>
    warmupArg(cl::cat(compileCategory), "warmup-steps",
              cl::desc("linear warmup steps of the schedule"), cl::init(0));
static cl::opt<int64_t> totalArg(cl::cat(compileCategory), "total-steps",
                                 cl::desc("cosine schedule length in steps"),
                                 cl::init(0));
static cl::opt<double> minLrArg(cl::cat(compileCategory), "min-lr",
                                cl::desc("cosine schedule floor"),
                                cl::init(0.0));
static cl::opt<std::string> emitMlirArg(
    cl::cat(compileCategory), "emit-mlir",
    cl::desc("print the IR after a stage: forward, layout, autodiff, "
             "optimizer, propagate, partition, plan-memory"),
    cl::value_desc("stage"));
static cl::opt<bool> quietArg(cl::cat(compileCategory), "quiet",
                              cl::desc("no summary line"));
static cl::opt<std::string>
    meshArg(cl::cat(compileCategory), "mesh",
            cl::desc("device mesh, e.g. dp=2,tp=2 (the last axis innermost)"),
            cl::value_desc("axes"));
static cl::opt<std::string>
    layoutArg(cl::cat(compileCategory), "layout",
              cl::desc("data (batch over dp), megatron, or a layout JSON file"),
              cl::init("data"));
static cl::opt<int64_t> zeroArg(cl::cat(compileCategory), "zero",
                                cl::desc("ZeRO stage 0-3"), cl::init(0));
static cl::opt<bool> spArg(cl::cat(compileCategory), "sequence-parallel",
                           cl::desc("split norms and residuals along the "
                                    "sequence over tp"));
static cl::opt<std::string> contextParallelArg(
    cl::cat(compileCategory), "context-parallel",
    cl::desc("how attention sees a sequence split over the cp mesh axis: "
             "all-gather (its keys and values), all-to-all (cp moves from "
             "the sequence to the heads, DeepSpeed's Ulysses) or ring (key "
             "and value blocks passed around, merged by an online softmax)"),
    cl::init("all-gather"));
static cl::opt<double> bucketMbArg(
    cl::cat(compileCategory), "bucket-mb",
    cl::desc("data-parallel gradient bucket size in MiB (0: one all-reduce "
             "per gradient)"),
    cl::init(25.0));
static cl::opt<double> zeroBucketMbArg(
    cl::cat(compileCategory), "zero-bucket-mb",
    cl::desc("ZeRO buckets in MiB: a layer's ZeRO-3 parameters gathered by "
             "one all-gather, ZeRO-2/3 gradients reduce-scattered together "
             "(0, the default: one collective per tensor, faster on CPUs)"),
    cl::init(0.0));
static cl::opt<int64_t> prefetchArg(
    cl::cat(compileCategory), "prefetch-ops",
    cl::desc("ZeRO-3: start each parameter gather this many ops before its "
             "use, asynchronously (0: gather at the use)"),
    cl::init(16));
static cl::opt<std::string> planArg(
    cl::cat(compileCategory), "plan",
    cl::desc("take the layout from weft-plan --json output (its first row, "
             "or --plan-row)"),
    cl::value_desc("file"));
static cl::opt<unsigned> planRowArg(cl::cat(compileCategory), "plan-row",
                                    cl::desc("which layout of --plan"),
                                    cl::init(0));
static cl::opt<bool> allowUnknownKeysArg(
    cl::cat(compileCategory), "allow-unknown-config-keys",
    cl::desc("warn about config.json keys weft does not know, instead of "
             "refusing the config (the model may then differ from what the "
             "config describes)"));
static cl::opt<bool> tieEmbeddingsArg(
    cl::cat(compileCategory), "tie-embeddings",
    cl::desc("model.onnx: an initializer holding the token embedding's values "
             "(a TorchScript export's copy of a tied head) is the table "
             "itself: train them as one tensor"));
static cl::opt<bool> untieEmbeddingsArg(
    cl::cat(compileCategory), "untie-embeddings",
    cl::desc("model.onnx: an initializer holding the token embedding's values "
             "is a second tensor that starts equal: train them as two"));
static cl::opt<bool> freezeConstantsArg(
    cl::cat(compileCategory), "freeze-constants",
    cl::desc("model.onnx: keep float constants that are shaped and used like "
             "weights (what torch.onnx's optimize=True folds a parameter "
             "into) fixed, untrained, instead of refusing the model"));
static cl::opt<bool> forwardOnlyArg(
    cl::cat(compileCategory), "forward-only",
    cl::desc(
        "a program that computes the logits of a batch of tokens (weft-run "
        "--input tokens.npy --output logits.npy): no loss, gradients or "
        "optimizer"));
static cl::opt<std::string>
    lossArg(cl::cat(compileCategory), "loss",
            cl::desc("next-token (a decoder's, the default), masked-lm (an "
                     "encoder's, BERT's: --mask-token hides --mask-prob of the "
                     "positions, which the model predicts) or cross-entropy "
                     "(on targets weft-run is given, -100 where none: "
                     "--tokens and --targets; the output may be a "
                     "classifier's [batch, classes], one label per sample, "
                     "or [batch, seq, classes]) or mse (a model.onnx output's "
                     "mean squared error against float targets weft-run is "
                     "given: a regression head's, PyTorch's MSELoss)"),
            cl::init("next-token"), cl::value_desc("kind"));
static cl::opt<int64_t> classesArg(
    cl::cat(compileCategory), "classes",
    cl::desc("--loss cross-entropy on a classifier's output (a model.onnx's "
             "[batch, classes] or [batch, seq, classes] scores): its number "
             "of classes, stated (the output's last dim; the labels are in "
             "[0, classes))"),
    cl::init(0), cl::value_desc("n"));
static cl::opt<int64_t> documentsArg(
    cl::cat(compileCategory), "documents",
    cl::desc("rows pack documents, each ending with this token id: attention "
             "stays inside a document and positions restart with each, so a "
             "packed row trains exactly like its documents one per row (the "
             "target of an EOS, the next document's first token, counts for "
             "nothing)"),
    cl::init(-1), cl::value_desc("eos-id"));
static cl::opt<bool> attentionMaskArg(
    cl::cat(compileCategory), "attention-mask",
    cl::desc("padded rows (--loss cross-entropy): weft-run is given each "
             "sample's attention mask (1 a token, 0 padding); padding is "
             "neither attended to nor counted and a token's position counts "
             "the tokens before it, so left- and right-padded rows train "
             "exactly like the unpadded sequences"));
static cl::opt<int64_t>
    maskTokenArg(cl::cat(compileCategory), "mask-token",
                 cl::desc("--loss masked-lm: the id of the mask token "
                          "(BERT's [MASK])"),
                 cl::init(-1), cl::value_desc("id"));
static cl::opt<double>
    maskProbArg(cl::cat(compileCategory), "mask-prob",
                cl::desc("--loss masked-lm: the share of positions hidden "
                         "and predicted (default 0.15)"),
                cl::init(0.15), cl::value_desc("p"));
static cl::opt<int64_t>
    maskSeedArg(cl::cat(compileCategory), "mask-seed",
                cl::desc("--loss masked-lm: the seed of which positions are "
                         "hidden (default 0)"),
                cl::init(0), cl::value_desc("n"));
static cl::opt<std::string> onnxOutputArg(
    cl::cat(compileCategory), "onnx-output",
    cl::desc("with a model.onnx of several outputs: the one to train on (the "
             "logits) or, with --forward-only, to compute"),
    cl::value_desc("name"));
static cl::opt<bool>
    explainArg(cl::cat(compileCategory), "explain",
               cl::desc("print the step's collectives (kind, axis, bytes, "
                        "count, reason) and per-rank memory"));
static cl::opt<int64_t> ranksPerNodeArg(
    cl::cat(compileCategory), "ranks-per-node",
    cl::desc("with --explain: also the bytes between nodes of N ranks each "
             "(ranks placed node by node), as the runtime's hierarchical "
             "collectives send them"),
    cl::init(0), cl::value_desc("n"));

namespace {
int fail(const llvm::Twine &message) {
  llvm::errs() << "weft-compile: error: " << message << "\n";
  return 1;
}

// Sets the layout flags from one row of `weft-plan --json`, so that search
// and compile are one workflow. Returns an error message, or "".
std::string applyPlan() {
  auto buffer = llvm::MemoryBuffer::getFile(planArg);
  if (!buffer)
    return "cannot read plan file '" + planArg + "'";
  std::string deep = weft::jsonDepthError((*buffer)->getBuffer().str(),
                                          "plan file '" + planArg + "'");
  if (!deep.empty())
    return deep;
  auto parsed = llvm::json::parse((*buffer)->getBuffer());
  if (!parsed)
    return "plan file '" + planArg +
           "' is not valid JSON: " + llvm::toString(parsed.takeError());
  const llvm::json::Object *row = parsed->getAsObject();
  const llvm::json::Object *root = row;
  if (row && row->getArray("layouts")) {
    const llvm::json::Array &rows = *row->getArray("layouts");
    if (planRowArg >= rows.size())
      return "plan file '" + planArg + "' has " + std::to_string(rows.size()) +
             " layouts, --plan-row " + std::to_string(planRowArg) +
             " is out of range";
    row = rows[planRowArg].getAsObject();
  }
  if (!row)
    return "plan file '" + planArg + "' holds no layout object";
  if (row->getBoolean("master_weights").value_or(false))
    return "the plan counted memory as a framework with bf16 master weights "
           "holds it (weft-plan --master-weights), not as weft does: plan "
           "without --master-weights";
  // weft overlaps both; a row timed without is another framework's step.
  for (const char *key : {"dp_overlap", "tp_overlap"})
    if (!row->getBoolean(key).value_or(true))
      return std::string("the plan timed a framework that does not overlap ") +
             (key[0] == 'd' ? "its gradient reduction"
                            : "its backward's tp collectives") +
             " (" + key + " false: weft-plan --no-" + key[0] +
             "p-overlap), where weft does: plan without that flag";
  if (row->getBoolean("zero1_all_reduce").value_or(false))
    return "the plan timed ZeRO-1 as DeepSpeed's BF16_Optimizer runs it (an "
           "all-reduce, then a gather: weft-plan --zero1-all-reduce), where "
           "weft reduce-scatters the gradients: plan without that flag";
  auto integer = [&](const char *key) -> std::optional<int64_t> {
    return row->getInteger(key);
  };
  for (const char *key :
       {"dp", "tp", "pp", "microbatch", "num_microbatches", "zero"})
    if (!integer(key))
      return "plan layout is missing integer field '" + std::string(key) + "'";
  int64_t dp = *integer("dp"), tp = *integer("tp"), pp = *integer("pp");
  // Pipeline rows run as planned: 1F1B, or interleaved over V chunks.
  if (pp > 1) {
    std::optional<StringRef> schedule = row->getString("schedule");
    std::optional<int64_t> virtualStages = row->getInteger("virtual_stages");
    const int64_t v = virtualStages.value_or(1);
    if (!schedule || (*schedule != "1f1b" && *schedule != "interleaved") ||
        (*schedule == "1f1b") != (v == 1))
      return "the plan uses pp=" + std::to_string(pp) + " with schedule " +
             (schedule ? schedule->str() : std::string("(none)")) +
             " and virtual_stages " + std::to_string(v) +
             ": expected 1f1b with 1, or interleaved with 2 or more";
    pipelineScheduleArg = schedule->str();
    virtualStagesArg = v;
    // The stages the planner costed (uneven where pp does not divide the
    // layers); rows of older planners have none, and the cut balances.
    if (auto stages = row->getString("stages"))
      stagesArg = stages->str();
  }
  // The plan's recomputation, as weft-recompute builds it.
  if (auto r = row->getString("recompute")) {
    if (*r != "none" && *r != "selective" && *r != "full")
      return "the plan uses recompute=" + r->str() +
             ", which weft-compile does not know (none, selective or full)";
    recomputeArg = r->str();
  }
  // The plan's micro-batches accumulate gradients, as planned.
  batchArg = dp * *integer("microbatch") * *integer("num_microbatches");
  microbatchesArg = *integer("num_microbatches");
  if (root)
    if (auto seq = root->getInteger("seq"))
      seqArg = *seq;
  // The dtype the planner costed (bf16 on GPU clusters): its memory and
  // step time are of that program, not of the f32 default. Plans before
  // the field have none.
  if (auto dtype = root ? root->getString("dtype") : std::nullopt) {
    if (*dtype != "bf16" && *dtype != "f32")
      return "plan file '" + planArg + "' has dtype '" + dtype->str() +
             "': expected bf16 or f32";
    if (dtypeArg.getNumOccurrences() && dtypeArg != *dtype)
      return "--dtype " + dtypeArg + " asks for another program than the " +
             "plan, which was costed in " + dtype->str() +
             ": drop --dtype, or plan on a cluster of that dtype";
    dtypeArg = dtype->str();
  }
  std::string mesh;
  if (pp > 1)
    mesh = "pp=" + std::to_string(pp); // outermost, as the planner places it
  if (dp > 1)
    mesh += (mesh.empty() ? "" : ",") + std::string("dp=") + std::to_string(dp);
  // Context parallelism (rows of planners before it have none): inside dp,
  // outside tp.
  if (int64_t cp = row->getInteger("cp").value_or(1); cp > 1) {
    mesh += (mesh.empty() ? "" : ",") + std::string("cp=") + std::to_string(cp);
    // The variant the planner costed (rows before it priced all-gather).
    std::optional<StringRef> context = row->getString("context_parallel");
    contextParallelArg = context ? context->str() : "all-gather";
  }
  if (tp > 1)
    mesh += (mesh.empty() ? "" : ",") + std::string("tp=") + std::to_string(tp);
  meshArg = mesh;
  layoutArg = tp > 1 ? "megatron" : "data";
  zeroArg = *integer("zero");
  // ZeRO-3 as the planner costs it: regathered every micro-batch (memory of
  // one layer and its prefetch, not the whole stage held for the step).
  if (zeroArg == 3) {
    std::optional<StringRef> gather = row->getString("zero3_gather");
    zero3GatherArg = gather ? gather->str() : "microbatch";
  }
  spArg = row->getBoolean("sequence_parallel").value_or(false);
  return "";
}

// The training flags as the user wrote them (and a --plan row set them).
weft::TrainingFlags flags() {
  weft::TrainingFlags f;
  f.lr = lrArg;
  f.beta1 = beta1Arg;
  f.beta2 = beta2Arg;
  f.eps = epsArg;
  f.weightDecay = wdArg;
  f.schedule = scheduleArg;
  f.warmupSteps = warmupArg;
  f.totalSteps = totalArg;
  f.minLr = minLrArg;
  f.mesh = meshArg;
  f.layout = layoutArg;
  f.zero = zeroArg;
  f.sequenceParallel = spArg;
  f.contextParallel = contextParallelArg;
  f.bucketMb = bucketMbArg;
  f.zeroBucketMb = zeroBucketMbArg;
  f.prefetchOps = prefetchArg;
  f.microbatches = microbatchesArg;
  f.zero3Gather = zero3GatherArg;
  f.dtype = dtypeArg;
  f.recompute = recomputeArg;
  f.stages = stagesArg;
  f.pipelineSchedule = pipelineScheduleArg;
  f.virtualStages = virtualStagesArg;
  f.forwardOnly = forwardOnlyArg;
  f.loss = lossArg;
  f.classes = classesArg;
  f.maskToken = maskTokenArg;
  f.maskProb = maskProbArg;
  f.maskSeed = maskSeedArg;
  f.documents = documentsArg;
  f.attentionMask = attentionMaskArg;
  f.onnxModel = StringRef(modelArg).ends_with(".onnx");
  f.model = modelArg;
  for (cl::Option *flag :
       std::initializer_list<cl::Option *>{&lrArg,
                                           &beta1Arg,
                                           &beta2Arg,
                                           &epsArg,
                                           &wdArg,
                                           &scheduleArg,
                                           &warmupArg,
                                           &totalArg,
                                           &minLrArg,
                                           &meshArg,
                                           &bucketMbArg,
                                           &zero3GatherArg,
                                           &pipelineScheduleArg,
                                           &virtualStagesArg,
                                           &stagesArg,
                                           &lossArg,
                                           &classesArg,
                                           &maskTokenArg,
                                           &maskProbArg,
                                           &maskSeedArg,
                                           &documentsArg,
                                           &contextParallelArg})
    if (flag->getNumOccurrences())
      f.given.insert(flag->ArgStr.str());
  // A --plan row's pipeline is asked for as if by flags.
  if (!planArg.empty() && !stagesArg.empty())
    f.given.insert("stages");
  return f;
}

OwningOpRef<ModuleOp> loadModel(MLIRContext &context, llvm::SourceMgr &sources,
                                std::string &name, std::string &error) {
  StringRef model = modelArg;
  if (model.ends_with(".mlir")) {
    name = llvm::sys::path::stem(model).str();
    return parseSourceFile<ModuleOp>(model, sources, &context);
  }
  if (model.ends_with(".onnx")) {
#ifdef WEFT_HAVE_ONNX_IMPORT
    name = llvm::sys::path::stem(model).str();
    weft::OnnxImportOptions options;
    options.forwardOnly = forwardOnlyArg;
    options.givenTargets = lossArg == "cross-entropy";
    options.classes = classesArg;
    options.regression = lossArg == "mse";
    options.maskedLm = lossArg == "masked-lm";
    options.output = onnxOutputArg;
    // The model's own [batch, seq] unless the flags bind them.
    if (batchArg.getNumOccurrences() || !planArg.empty())
      options.batch = batchArg / microbatchesArg;
    if (seqArg.getNumOccurrences() || !planArg.empty())
      options.seq = seqArg;
    options.f64 = dtypeArg == "f64";
    if (tieEmbeddingsArg && untieEmbeddingsArg) {
      error = "--tie-embeddings and --untie-embeddings ask for two models: "
              "give one";
      return nullptr;
    }
    options.twinTables =
        tieEmbeddingsArg     ? weft::OnnxImportOptions::TwinTables::Tie
        : untieEmbeddingsArg ? weft::OnnxImportOptions::TwinTables::Untie
                             : weft::OnnxImportOptions::TwinTables::Ask;
    options.freezeConstants = freezeConstantsArg;
    std::vector<std::string> notes;
    options.notes = &notes;
    auto module = weft::importOnnx(context, modelArg, options, error);
    for (const std::string &note : notes)
      llvm::errs() << "weft-compile: note: " << note << "\n";
    return module;
#else
    error = "cannot read '" + modelArg +
            "': this weft-compile was built without ONNX support "
            "(libonnx-dev and libprotobuf-dev)";
    return nullptr;
#endif
  }
  weft::ConfigOptions configOptions;
  configOptions.allowUnknownKeys = allowUnknownKeysArg;
  weft::ConfigResult config = weft::resolveModel(modelArg, configOptions);
  for (const std::string &warning : config.warnings)
    llvm::errs() << "weft-compile: warning: " << warning << "\n";
  if (!config.ok()) {
    error = config.error;
    return nullptr;
  }
  name = config.config.name;
  if (StringRef(name).ends_with(".json")) // a config file: name it by its stem
    name = llvm::sys::path::stem(name).str();
  weft::BuildOptions options;
  options.batch = batchArg / microbatchesArg; // the model of one micro-batch
  options.seq = seqArg;
  options.f64 = dtypeArg == "f64";
  return weft::buildModel(context, config.config, options, error);
}
} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  // The standard pass-manager flags (--mlir-timing,
  // --mlir-print-ir-after=PASS, --mlir-pass-statistics, ...): accepted,
  // though --help lists only weft-compile's own.
  weft::registerWeftPassesAndPipelines(); // first: the flags name passes
  mlir::registerPassManagerCLOptions();
  mlir::registerDefaultTimingManagerCLOptions();
  cl::HideUnrelatedOptions(compileCategory);
  cl::ParseCommandLineOptions(
      argc, argv,
      "weft-compile: a GPT-2 / Llama model (preset, config.json, ONNX or weft "
      "IR) to a weft training-step program\n\n"
      "  MLIR's pass-manager flags are accepted too (--mlir-timing,\n"
      "  --mlir-print-ir-after=PASS, --mlir-pass-statistics, ...):\n"
      "  --help-hidden lists them.\n");
  if (!planArg.empty()) {
    std::string problem = applyPlan();
    if (!problem.empty())
      return fail(problem);
  }
  if (!emitMlirArg.empty() &&
      !llvm::is_contained(llvm::ArrayRef<const char *>(
                              weft::kTrainingStages, weft::kNumTrainingStages),
                          emitMlirArg))
    return fail("unknown --emit-mlir stage '" + emitMlirArg +
                "' (expected forward, layout, autodiff, optimizer, propagate, "
                "partition or plan-memory)");
  if (outputArg.empty() && emitMlirArg.empty() && !explainArg)
    return fail("no output: give -o FILE, --emit-mlir=STAGE or --explain");
  if (ranksPerNodeArg < 0 || (ranksPerNodeArg > 0 && !explainArg))
    return fail("--ranks-per-node " + llvm::Twine(ranksPerNodeArg) +
                ": a positive count, with --explain");
  if (!onnxOutputArg.empty() && !StringRef(modelArg).ends_with(".onnx"))
    return fail("--onnx-output names an output of a model.onnx; '" + modelArg +
                "' is not one");
  // Every training flag is checked and mapped by the pipeline library
  // (passes/TrainingFlags.h), as weft-opt's and weft-plan's are.
  weft::TrainingPipelineOptions options;
  if (std::string problem = weft::buildTrainingOptions(flags(), options);
      !problem.empty())
    return fail(problem);
  if (batchArg >= 1 && batchArg % microbatchesArg != 0)
    return fail("--batch " + std::to_string(batchArg) +
                " is not divisible into --microbatches " +
                std::to_string(microbatchesArg) + " micro-batches");

  DialectRegistry registry;
  registry.insert<weft::WeftDialect, func::FuncDialect>();
  MLIRContext context(registry);
  context.printOpOnDiagnostic(false);
  context.loadAllAvailableDialects();
  llvm::SourceMgr sources;
  SourceMgrDiagnosticHandler diagnostics(sources, &context);
  // Diagnostics without a file location read "weft-compile: error:", not
  // "<unknown>:0: error:".
  weft::ToolDiagnostics toolDiagnostics(context, "weft-compile");

  std::string name, error;
  OwningOpRef<ModuleOp> module = loadModel(context, sources, name, error);
  if (!module)
    return error.empty() ? 1 : fail(error);
  if (failed(mlir::verify(*module)))
    return 1;
  // The model's own batch x seq (an .onnx or .mlir model may fix them), for
  // the summary below: the ids argument of one micro-batch.
  int64_t modelBatch = batchArg, modelSeq = seqArg;
  // Or, for a graph of named float inputs, their shapes.
  std::string tensorInputs;
  module->walk([&](func::FuncOp fn) {
    for (unsigned i = 0; i < fn.getNumArguments(); ++i)
      if (auto input =
              fn.getArgAttrOfType<StringAttr>(i, weft::attrname::kInput)) {
        std::string shape;
        llvm::raw_string_ostream os(shape);
        llvm::interleave(
            cast<RankedTensorType>(fn.getArgument(i).getType()).getShape(), os,
            "x");
        tensorInputs += (tensorInputs.empty() ? "inputs " : ", ") +
                        input.getValue().str() + " [" + shape + "]";
      }
    auto ids = fn.getNumArguments()
                   ? dyn_cast<RankedTensorType>(fn.getArgument(0).getType())
                   : nullptr;
    if (ids && ids.getRank() == 2 && ids.hasStaticShape()) {
      modelBatch = ids.getShape()[0] * microbatchesArg;
      modelSeq = ids.getShape()[1];
    }
  });
  // A .mlir model's shapes are its own: a --batch or --seq that differs is
  // refused, never ignored (an ONNX model refuses one likewise).
  if (StringRef(modelArg).ends_with(".mlir"))
    for (auto [flag, asked, own] : {std::tuple<cl::Option *, int64_t, int64_t>{
                                        &batchArg, batchArg, modelBatch},
                                    {&seqArg, seqArg, modelSeq}})
      if (flag->getNumOccurrences() && asked != own)
        return fail("--" + flag->ArgStr.str() + " " + std::to_string(asked) +
                    " differs from the " + flag->ArgStr.str() + " of '" +
                    modelArg + "' (" + std::to_string(own) +
                    ", its token ids' shape): a weft IR model's shapes are "
                    "fixed; emit it again at that size, or drop the flag");
  // A .mlir model can carry any shape: refuse sizes whose byte counts would
  // overflow before any pass computes one.
  if (failed(weft::checkTensorSizes(*module)))
    return 1;
  module->walk([&](func::FuncOp fn) {
    if (!fn->hasAttr(weft::attrname::kModel))
      fn->setAttr(weft::attrname::kModel, StringAttr::get(&context, name));
  });

  // The library's pipeline, in one pass manager (with the standard
  // --mlir-* pass-manager flags), split in two only to print a stage.
  int printAfter = -1;
  for (int stage = 0; stage < weft::kNumTrainingStages; ++stage)
    if (emitMlirArg == weft::kTrainingStages[stage])
      printAfter = stage;
  DefaultTimingManager timing;
  applyDefaultTimingManagerCLOptions(timing);
  TimingScope timingRoot = timing.getRootScope();
  auto runStages = [&](int begin, int end) {
    PassManager pm(&context);
    if (failed(applyPassManagerCLOptions(pm)))
      return false;
    pm.enableTiming(timingRoot);
    for (int stage = begin; stage < end; ++stage)
      weft::addTrainingStage(pm, stage, options);
    return succeeded(pm.run(*module));
  };
  if (!runStages(0, printAfter + 1))
    return 1;
  if (printAfter >= 0)
    module->print(llvm::outs()), llvm::outs() << "\n"; // as weft-opt prints
  if (!runStages(printAfter + 1, weft::kNumTrainingStages))
    return 1;
  if (explainArg)
    weft::explainStep(*module, llvm::outs(), ranksPerNodeArg);
  if (!memoryLimitArg.empty()) {
    // "80GiB", "512MiB", "4096": bytes per rank.
    StringRef text = StringRef(memoryLimitArg).trim();
    int64_t unit = 1;
    for (auto [suffix, scale] :
         {std::pair<StringRef, int64_t>{"GiB", int64_t(1) << 30},
          {"MiB", int64_t(1) << 20},
          {"KiB", int64_t(1) << 10}})
      if (text.consume_back(suffix)) {
        unit = scale;
        break;
      }
    uint64_t count;
    int64_t limit;
    if (text.trim().getAsInteger(10, count) || count > uint64_t(INT64_MAX) ||
        __builtin_mul_overflow(int64_t(count), unit, &limit))
      return fail("--memory-limit must be bytes, or a whole number of KiB, "
                  "MiB or GiB, got '" +
                  memoryLimitArg + "'");
    for (const auto &[who, bytes] : weft::memoryPerRank(*module))
      if (bytes > limit)
        return fail(who + " needs " + std::to_string(bytes) + " bytes (" +
                    llvm::formatv("{0:F1}", bytes / 1048576.0).str() +
                    " MiB: parameters, gradients, optimizer state, "
                    "activations, pipeline transfer staging and bf16 "
                    "widening), over "
                    "--memory-limit " +
                    memoryLimitArg + " (" + std::to_string(limit) +
                    " bytes); --explain breaks it down");
  }
  if (outputArg.empty())
    return 0;
  PassManager pm(&context);
  pm.addPass(weft::createWeftEmitProgram(
      weft::WeftEmitProgramOptions{outputArg.getValue()}));
  if (failed(pm.run(*module)))
    return 1;

  if (!quietArg) {
    // A double: a sum of int64 element counts could overflow.
    double params = 0;
    int64_t arena = 0;
    // A pipeline's replicas are counted once, on their own stage; the
    // arena is the largest stage's.
    module->walk([&](weft::ParamOp p) {
      if (!p->hasAttr(weft::attrname::kReplica))
        params += double(p.getType().getNumElements());
    });
    module->walk([&](func::FuncOp fn) {
      if (auto a = fn->getAttrOfType<IntegerAttr>(weft::attrname::kArenaBytes))
        arena = std::max(arena, a.getInt());
    });
    int64_t width = dtypeArg == "f64" ? 8 : 4;
    // Training holds each parameter's value, gradient and Adam m and v.
    const std::string sizes = !tensorInputs.empty()
                                  ? tensorInputs
                                  : "batch " + std::to_string(modelBatch) +
                                        " x seq " + std::to_string(modelSeq);
    llvm::errs() << llvm::format(
        "weft-compile: %s: %.3fM parameters, %s, "
        "activation arena %.1f MiB, %s %.1f MiB -> %s\n",
        name.c_str(), params / 1e6, sizes.c_str(), arena / 1048576.0,
        forwardOnlyArg ? "weights" : "training state",
        (forwardOnlyArg ? 1.0 : 4.0) * params * width / 1048576.0,
        outputArg.c_str());
  }
  return 0;
}
