//===- weft-compile.cpp - model + options -> runtime program --------------===//
//
//   weft-compile MODEL [--batch B] [--seq S] [--lr X] ... -o OUT
//
// MODEL is a preset name, a Hugging Face style config.json, an ONNX file
// (torch.onnx.export of GPT-2 / Llama; frontends/onnx), or a .mlir file
// holding a forward function in weft IR. The stages are the passes of
// passes/Pipeline.cpp; --emit-mlir=STAGE prints the IR after one of them.
//
//===----------------------------------------------------------------------===//
#include "dialect/AttrNames.h"
#include "dialect/WeftDialect.h"
#include "frontends/builtin/BuildModel.h"
#ifdef WEFT_HAVE_ONNX_IMPORT
#include "frontends/onnx/ImportOnnx.h"
#endif
#include "passes/Explain.h"
#include "passes/Passes.h"
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
    cl::desc("with --microbatches and ZeRO-3: gather each parameter once per "
             "'step' (the default: the gathered copies stay for the step) or "
             "once per 'microbatch' (less memory, M times the traffic)"),
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
             "as 0-5,6-11 (default: even)"),
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
  std::string mesh;
  if (pp > 1)
    mesh = "pp=" + std::to_string(pp); // outermost, as the planner places it
  if (dp > 1)
    mesh += (mesh.empty() ? "" : ",") + std::string("dp=") + std::to_string(dp);
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
      "IR) to a weft training-step program\n");
  if (!planArg.empty()) {
    std::string problem = applyPlan();
    if (!problem.empty())
      return fail(problem);
  }
  if (dtypeArg != "f32" && dtypeArg != "f64" && dtypeArg != "bf16")
    return fail("--dtype must be f32, f64 or bf16, got '" + dtypeArg + "'");
  if (!emitMlirArg.empty() &&
      !llvm::is_contained(llvm::ArrayRef<const char *>(
                              weft::kTrainingStages, weft::kNumTrainingStages),
                          emitMlirArg))
    return fail("unknown --emit-mlir stage '" + emitMlirArg +
                "' (expected forward, layout, autodiff, optimizer, propagate, "
                "partition or plan-memory)");
  // Checked before the conversion to bytes below (a double past int64 or a
  // NaN would make that conversion undefined).
  for (auto [flag, mb] :
       {std::pair<const char *, double>{"--bucket-mb", bucketMbArg},
        {"--zero-bucket-mb", zeroBucketMbArg}})
    if (!(mb >= 0 && mb <= 1048576)) {
      std::string got;
      llvm::raw_string_ostream(got) << llvm::format("%g", mb);
      return fail(std::string(flag) + " must be 0 to 1048576 (1 TiB), got " +
                  got);
    }
  if (microbatchesArg < 1 || microbatchesArg > (int64_t(1) << 20))
    return fail("--microbatches must be 1 to 2^20, got " +
                std::to_string(microbatchesArg));
  if (zero3GatherArg != "step" && zero3GatherArg != "microbatch")
    return fail("--zero3-gather must be step or microbatch, got '" +
                zero3GatherArg + "'");
  if (batchArg >= 1 && batchArg % microbatchesArg != 0)
    return fail("--batch " + std::to_string(batchArg) +
                " is not divisible into --microbatches " +
                std::to_string(microbatchesArg) + " micro-batches");
  if (outputArg.empty() && emitMlirArg.empty() && !explainArg)
    return fail("no output: give -o FILE, --emit-mlir=STAGE or --explain");
  if (!onnxOutputArg.empty() && !StringRef(modelArg).ends_with(".onnx"))
    return fail("--onnx-output names an output of a model.onnx; '" + modelArg +
                "' is not one");
  if (lossArg != "next-token" && lossArg != "masked-lm" &&
      lossArg != "cross-entropy" && lossArg != "mse")
    return fail("--loss must be next-token, masked-lm, cross-entropy or mse, "
                "got '" +
                lossArg + "'");
  if (lossArg == "mse" && !StringRef(modelArg).ends_with(".onnx"))
    return fail("--loss mse trains a model.onnx's output against float "
                "targets; '" +
                modelArg + "' is not one");
  if (classesArg.getNumOccurrences() &&
      (lossArg != "cross-entropy" || !StringRef(modelArg).ends_with(".onnx")))
    return fail("--classes states a model.onnx classifier's classes for "
                "--loss cross-entropy, which is not given");
  if (classesArg.getNumOccurrences() &&
      (classesArg < 1 || classesArg > INT32_MAX))
    return fail("--classes must be 1 to 2^31-1, got " +
                std::to_string(classesArg));
  if (lossArg != "masked-lm")
    for (cl::Option *flag : std::initializer_list<cl::Option *>{
             &maskTokenArg, &maskProbArg, &maskSeedArg})
      if (flag->getNumOccurrences())
        return fail("--" + flag->ArgStr.str() +
                    " is about --loss masked-lm, which is not given");
  if (forwardOnlyArg) {
    // What a forward-only program does not have; refused, not ignored:
    // flags given, and values a --plan row set. ZeRO-3 shards the
    // parameters themselves (gathered per use), which is inference's memory
    // too; stages 1 and 2 shard what only training has.
    std::string trainingOnly = microbatchesArg != 1           ? "--microbatches"
                               : recomputeArg != "none"       ? "--recompute"
                               : zeroArg == 1 || zeroArg == 2 ? "--zero 1/2"
                                                              : "";
    for (cl::Option *flag : std::initializer_list<cl::Option *>{
             &lrArg, &beta1Arg, &beta2Arg, &epsArg, &wdArg, &scheduleArg,
             &warmupArg, &totalArg, &minLrArg, &bucketMbArg, &zero3GatherArg,
             &pipelineScheduleArg, &virtualStagesArg, &stagesArg, &lossArg,
             &maskTokenArg, &maskProbArg, &maskSeedArg})
      if (trainingOnly.empty() && flag->getNumOccurrences())
        trainingOnly = ("--" + flag->ArgStr).str();
    if (!trainingOnly.empty())
      return fail(trainingOnly +
                  " is about training; a --forward-only program has no "
                  "gradients or optimizer state");
    if (weft::pipelineOptions(meshArg, "", "").stages > 1)
      return fail("--forward-only does not cut pipeline stages: the --mesh "
                  "pp axis must be 1");
  }
  bool sharded = !meshArg.empty();
  if (!sharded && (zeroArg != 0 || spArg || layoutArg != "data"))
    return fail("--layout, --zero and --sequence-parallel need --mesh");

  DialectRegistry registry;
  registry.insert<weft::WeftDialect, func::FuncDialect>();
  MLIRContext context(registry);
  context.printOpOnDiagnostic(false);
  context.loadAllAvailableDialects();
  llvm::SourceMgr sources;
  SourceMgrDiagnosticHandler diagnostics(sources, &context);

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
  // A .mlir model can carry any shape: refuse sizes whose byte counts would
  // overflow before any pass computes one.
  if (failed(weft::checkTensorSizes(*module)))
    return 1;
  module->walk([&](func::FuncOp fn) {
    if (!fn->hasAttr(weft::attrname::kModel))
      fn->setAttr(weft::attrname::kModel, StringAttr::get(&context, name));
  });

  weft::TrainingPipelineOptions options;
  options.optimizer.lr = lrArg;
  options.optimizer.beta1 = beta1Arg;
  options.optimizer.beta2 = beta2Arg;
  options.optimizer.eps = epsArg;
  options.optimizer.weightDecay = wdArg;
  options.optimizer.schedule = scheduleArg;
  options.optimizer.warmupSteps = warmupArg;
  options.optimizer.totalSteps = totalArg;
  options.optimizer.minLr = minLrArg;
  if (sharded) {
    options.layout.mesh = meshArg;
    options.layout.layout = layoutArg;
    options.layout.zero = zeroArg;
    options.layout.sequenceParallel = spArg;
  }
  options.bucketBytes = int64_t(bucketMbArg * 1048576.0);
  options.zeroBucketBytes = int64_t(zeroBucketMbArg * 1048576.0);
  options.prefetchOps = prefetchArg;
  options.microbatches = microbatchesArg;
  options.gatherParamsOnce = zero3GatherArg == "step";
  // bf16: the model is built in f32 (its master weights) and
  // weft-mixed-precision makes its activations bf16.
  options.computeDtype = dtypeArg == "bf16" ? "bf16" : "f32";
  if (recomputeArg != "none" && recomputeArg != "selective" &&
      recomputeArg != "full")
    return fail("--recompute must be none, selective or full, got '" +
                recomputeArg + "'");
  options.recompute = recomputeArg;
  options.forwardOnly = forwardOnlyArg;
  options.maskedLm = lossArg == "masked-lm" || lossArg == "cross-entropy";
  options.masking.givenTargets = lossArg == "cross-entropy";
  options.masking.maskToken = maskTokenArg;
  options.masking.maskProb = maskProbArg;
  options.masking.seed = maskSeedArg;
  // A hand-written schedule travels to the passes in its compact form.
  std::string scheduleSpec = pipelineScheduleArg;
  if (virtualStagesArg < 1 || virtualStagesArg > 1024)
    return fail("--virtual-stages must be 1 to 1024, got " +
                std::to_string(virtualStagesArg));
  const bool interleaved = scheduleSpec == "interleaved";
  const bool json = StringRef(scheduleSpec).ends_with(".json");
  if (interleaved != (virtualStagesArg > 1) && !json)
    return fail(interleaved
                    ? "--pipeline-schedule interleaved needs "
                      "--virtual-stages V of 2 or more"
                    : "--virtual-stages " + std::to_string(virtualStagesArg) +
                          " needs --pipeline-schedule interleaved "
                          "(or a JSON schedule naming chunks)");
  if (interleaved)
    scheduleSpec = "interleaved:" + std::to_string(virtualStagesArg);
  options.pipeline = weft::pipelineOptions(meshArg, stagesArg, scheduleSpec);
  if (options.pipeline.stages > 1)
    options.layout.pipelineAxis = "pp";
  else if (!stagesArg.empty() || pipelineScheduleArg.getNumOccurrences() ||
           virtualStagesArg > 1)
    return fail(std::string(!stagesArg.empty()     ? "--stages"
                            : virtualStagesArg > 1 ? "--virtual-stages"
                                                   : "--pipeline-schedule") +
                " needs a pp axis of 2 or more in --mesh");
  if (interleaved && microbatchesArg % options.pipeline.stages != 0)
    return fail("--pipeline-schedule interleaved runs micro-batches in "
                "rounds of pp: --microbatches " +
                std::to_string(microbatchesArg) + " is not a multiple of pp=" +
                std::to_string(options.pipeline.stages));
  if (json) {
    auto text = llvm::MemoryBuffer::getFile(scheduleSpec);
    if (!text)
      return fail("cannot read --pipeline-schedule '" + scheduleSpec +
                  "': " + text.getError().message());
    weft::PipelineSchedule custom;
    if (weft::Status s = weft::parsePipelineScheduleJson(
            (*text)->getBuffer().str(), options.pipeline.stages,
            microbatchesArg, virtualStagesArg, custom);
        !s.ok())
      return fail("--pipeline-schedule '" + scheduleSpec + "': " + s.message());
    scheduleSpec = weft::pipelineScheduleSpec(custom);
  } else if (weft::PipelineSchedule parsed;
             !weft::parsePipelineSchedule(scheduleSpec, parsed).ok() ||
             parsed.Kind == weft::PipelineScheduleKind::Custom) {
    return fail("--pipeline-schedule: unknown pipeline schedule '" +
                pipelineScheduleArg +
                "' (expected gpipe, 1f1b, interleaved, zb-h1 or a .json "
                "file)");
  }
  options.pipeline.schedule = scheduleSpec;

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
    weft::explainStep(*module, llvm::outs());
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
                    " MiB: parameters, gradients, optimizer state and "
                    "activations), over --memory-limit " +
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
