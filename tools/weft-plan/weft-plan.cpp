//===- weft-plan.cpp - search layouts with the cost model -----------------===//
//
//   weft-plan MODEL --cluster FILE|PRESET --gpus N --global-batch B --seq S
//             [--tokens T] [--top K] [--fix tp=8,pp=4] [--json] [--explain]
//   weft-plan --calibrate -o local.json
//
// MODEL is a preset or a config.json, as for weft-compile, or a forward
// module (`weft-compile MODEL --emit-mlir=forward`, any frontend's): the
// planner reads the IR either way. docs/planner.md has the model's
// equations.
//
//===----------------------------------------------------------------------===//
#include "Calibrate.h"
#include "dialect/WeftDialect.h"
#include "frontends/builtin/BuildModel.h"
#include "passes/ToolDiagnostics.h"
#include "passes/TrainingFlags.h"
#include "planner/Search.h"
#ifdef WEFT_HAVE_BLAS_CORE
#include "runtime/cpu/kernels/BlasCore.h"
#endif

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "passes/Passes.h"
#ifdef WEFT_HAVE_ONNX_IMPORT
#include "frontends/onnx/ImportOnnx.h"
#endif
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>

using namespace weft::cost;
namespace cl = llvm::cl;

// Only these options in --help (MLIR and LLVM register hundreds more).
static cl::OptionCategory planCategory("weft-plan options");

static cl::opt<std::string>
    modelArg(cl::cat(planCategory), cl::Positional,
             cl::desc("<preset | config.json | model.onnx | forward.mlir>"));
static cl::opt<std::string>
    clusterArg(cl::cat(planCategory), "cluster",
               cl::desc("a100-80g, h100-80g, h200-141g, local or a JSON file"),
               cl::value_desc("preset|file"));
static cl::opt<int64_t> gpusArg(cl::cat(planCategory), "gpus",
                                cl::desc("devices"), cl::init(0));
static cl::opt<int64_t> batchArg(cl::cat(planCategory), "global-batch",
                                 cl::desc("sequences per step"), cl::init(0));
static cl::opt<int64_t> seqArg(cl::cat(planCategory), "seq",
                               cl::desc("tokens per sequence"), cl::init(0));
static cl::opt<double> tokensArg(cl::cat(planCategory), "tokens",
                                 cl::desc("tokens to train (for days)"),
                                 cl::init(0));
static cl::opt<int> topArg(cl::cat(planCategory), "top",
                           cl::desc("rows to print"), cl::init(10));
static cl::opt<std::string>
    fixArg(cl::cat(planCategory), "fix",
           cl::desc("constraints: dp,tp,pp,cp,mb,v,schedule,zero,sp,recompute,"
                    "context"),
           cl::value_desc("k=v,..."));
static cl::opt<bool> jsonArg(cl::cat(planCategory), "json",
                             cl::desc("one JSON object per layout"));
static cl::opt<bool>
    explainArg(cl::cat(planCategory), "explain",
               cl::desc("break the best layout's time and memory down"));
static cl::opt<bool> noDpOverlapArg(
    cl::cat(planCategory), "no-dp-overlap",
    cl::desc(
        "gradient reduction does not overlap backward (Megatron-LM 2021)"));
static cl::opt<bool> noTpOverlapArg(
    cl::cat(planCategory), "no-tp-overlap",
    cl::desc("the backward's tp collectives run blocking, under no GEMM "
             "(Megatron-LM 2021, Megatron-DeepSpeed)"));
static cl::opt<bool> zero1AllReduceArg(
    cl::cat(planCategory), "zero1-all-reduce",
    cl::desc("ZeRO-1 all-reduces the whole gradient and gathers the updated "
             "parameters in the optimizer's step (DeepSpeed's BF16_Optimizer, "
             "BLOOM's run), where weft reduce-scatters it: to time a "
             "published run's layout"));
static cl::opt<bool> masterWeightsArg(
    cl::cat(planCategory), "master-weights",
    cl::desc("count the training state as Megatron-LM, DeepSpeed and FSDP "
             "hold it (bf16 weights and gradients, an fp32 master copy "
             "sharded with Adam's state), to time a published run's layout; "
             "weft holds fp32 weights, and weft-compile --plan refuses such "
             "a plan"));
static cl::opt<bool> memoryUncheckedArg(
    cl::cat(planCategory), "memory-unchecked",
    cl::desc("rank layouts that do not fit in memory too (to time a "
             "published run's layout, which fit however its framework held "
             "its activations); the fits column still says"));
static cl::opt<std::string> lossArg(
    cl::cat(planCategory), "loss",
    cl::desc("next-token (default), masked-lm, cross-entropy or mse (as "
             "weft-compile --loss: the same ops to cost, so no mask token "
             "is asked)"),
    cl::init("next-token"), cl::value_desc("kind"));
static cl::opt<int64_t> classesArg(
    cl::cat(planCategory), "classes",
    cl::desc("--loss cross-entropy on a classifier's output: its classes, "
             "as weft-compile --classes"),
    cl::init(0), cl::value_desc("n"));
static cl::opt<bool> calibrateArg(cl::cat(planCategory), "calibrate",
                                  cl::desc("measure this machine (-o FILE)"));
static cl::opt<std::string> outputArg(cl::cat(planCategory), "o",
                                      cl::desc("calibration output"),
                                      cl::value_desc("file"));

namespace {
int fail(const std::string &message) {
  std::cerr << "weft-plan: error: " << message << "\n";
  return 1;
}

nlohmann::json toJson(const Estimate &e) {
  const Layout &l = e.layout;
  nlohmann::json time = nlohmann::json::object(),
                 memory = nlohmann::json::object();
  for (const Term &t : e.timeTerms)
    time[t.name] = {{"seconds", t.value}, {"how", t.how}};
  for (const Term &t : e.memoryTerms)
    memory[t.name] = {{"bytes", t.value}, {"how", t.how}};
  nlohmann::json collectives = nlohmann::json::array();
  for (const CollectiveUse &c : e.collectives)
    collectives.push_back({{"kind", c.kind},
                           {"axis", c.axis},
                           {"tier", c.tier},
                           {"bytes", c.bytes},
                           {"count", c.count},
                           {"seconds", c.seconds},
                           {"why", c.why}});
  return {{"dp", l.dp},
          {"tp", l.tp},
          {"pp", l.pp},
          {"cp", l.cp},
          // How attention sees the other chunks (weft-compile
          // --context-parallel); all-gather where cp = 1.
          {"context_parallel", contextCommName(l.context)},
          {"microbatch", l.microBatch},
          {"num_microbatches", l.numMicroBatches},
          {"schedule", scheduleName(l.schedule)},
          {"virtual_stages", l.virtualStages},
          // Each pipeline chunk's layers, as the planner costed them.
          {"stages", e.stages},
          {"zero", l.zero},
          // The planner's ZeRO-3: each micro-batch gathers the parameters
          // again (one layer gathered, the next prefetched), not once per
          // step (weft-compile --zero3-gather); --plan compiles it so.
          {"zero3_gather", l.zero == 3 ? "microbatch" : "step"},
          {"sequence_parallel", l.sequenceParallel},
          {"recompute", recomputeName(l.recompute)},
          {"dp_overlap", l.dpOverlap},
          {"tp_overlap", l.tpOverlap},
          {"zero1_all_reduce", l.zero1AllReduce},
          // Memory counted as a framework with master weights holds it
          // (--master-weights), not as weft does.
          {"master_weights", l.masterWeights},
          {"compute_s", e.computeS},
          {"tp_comm_s", e.tpCommS},
          {"cp_comm_s", e.cpCommS},
          {"dp_comm_s", e.dpCommS},
          {"pp_bubble_s", e.ppBubbleS},
          {"step_time_s", e.stepS},
          {"mfu", e.mfu},
          {"tflops_per_gpu", e.tflopsPerGpu},
          {"tokens_per_s", e.tokensPerS},
          {"days", e.days},
          {"memory_per_gpu_bytes", e.memoryBytes},
          {"fits", e.fits},
          {"breakdown",
           {{"time", time}, {"memory", memory}, {"collectives", collectives}}}};
}

void printTable(const std::vector<Estimate> &rows, size_t top) {
  std::printf("%4s %3s %3s %3s %-10s %3s %5s %-13s %4s %2s %-9s %9s %9s %9s "
              "%9s %8s %4s %9s %5s %10s %8s\n",
              "dp", "tp", "pp", "cp", "context", "mb", "nmb", "schedule",
              "zero", "sp", "recompute", "compute_s", "tp_comm_s", "dp_comm_s",
              "bubble_s", "mem_GB", "fits", "step_s", "mfu", "tokens/s",
              "days");
  for (size_t i = 0; i < rows.size() && i < top; ++i) {
    const Estimate &e = rows[i];
    const Layout &l = e.layout;
    std::string sched = scheduleName(l.schedule);
    if (l.schedule == Schedule::Interleaved)
      sched += "(v=" + std::to_string(l.virtualStages) + ")";
    // Three significant digits: a tiny model's millisecond step is not 0.
    std::printf("%4lld %3lld %3lld %3lld %-10s %3lld %5lld %-13s %4d %2d %-9s "
                "%9.3g %9.3g %9.3g %9.3g %8.3g %4s %9.3g %5.3f %10.0f %8.3g\n",
                (long long)l.dp, (long long)l.tp, (long long)l.pp,
                (long long)l.cp, l.cp > 1 ? contextCommName(l.context) : "-",
                (long long)l.microBatch, (long long)l.numMicroBatches,
                sched.c_str(), l.zero, int(l.sequenceParallel),
                recomputeName(l.recompute), e.computeS, e.tpCommS, e.dpCommS,
                e.ppBubbleS, e.memoryBytes / 1e9, e.fits ? "yes" : "no",
                e.stepS, e.mfu, e.tokensPerS, e.days);
  }
}

void explain(const Estimate &e, const ModelCost &model, const Hardware &hw) {
  const Layout &l = e.layout;
  std::printf("\nlayout dp=%lld tp=%lld pp=%lld%s mb=%lld x %lld "
              "micro-batches, %s v=%lld, zero=%d, sp=%d, recompute=%s on %s\n",
              (long long)l.dp, (long long)l.tp, (long long)l.pp,
              l.cp > 1 ? (" cp=" + std::to_string(l.cp) + " (" +
                          contextCommName(l.context) + ")")
                             .c_str()
                       : "",
              (long long)l.microBatch, (long long)l.numMicroBatches,
              scheduleName(l.schedule), (long long)l.virtualStages, l.zero,
              int(l.sequenceParallel), recomputeName(l.recompute),
              hw.name.c_str());
  std::printf("model %s: %.4g parameters (IR: %.4g per layer x %lld + %.4g), "
              "%.4g training FLOPs per sequence (IR, fwd + bwd)\n",
              model.dims.name.c_str(), double(model.numParams()),
              double(model.layer.params), (long long)model.dims.numLayers,
              double(model.base.params), model.trainingFlopsPerSequence());
  std::printf("step time:\n");
  for (const Term &t : e.timeTerms)
    std::printf("  %-10s %10.4f s  %s\n", t.name.c_str(), t.value,
                t.how.c_str());
  std::printf("memory per GPU:\n");
  for (const Term &t : e.memoryTerms)
    std::printf("  %-16s %8.2f GB  %s\n", t.name.c_str(), t.value / 1e9,
                t.how.c_str());
  std::printf("collectives per step (per GPU):\n");
  std::printf("  %-26s %-4s %-10s %12s %7s %10s  %s\n", "kind", "axis", "tier",
              "bytes", "count", "seconds", "why");
  for (const CollectiveUse &c : e.collectives)
    std::printf("  %-26s %-4s %-10s %12.0f %7lld %10.4f  %s\n", c.kind.c_str(),
                c.axis.c_str(), c.tier.c_str(), c.bytes, (long long)c.count,
                c.seconds, c.why.c_str());
  std::printf("rates: %.1f TFLOP/s per GPU, MFU %.3f, %.0f tokens/s",
              e.tflopsPerGpu, e.mfu, e.tokensPerS);
  if (e.days > 0)
    std::printf(", %.1f days", e.days);
  std::printf("\n");
}

// The model's forward module at batch 1: built by the builtin frontend, or
// read from a .mlir file (whose sequence length --seq, if given, must be),
// or imported from an .onnx file (its sequence, or --seq where symbolic).
mlir::OwningOpRef<mlir::ModuleOp> loadModel(mlir::MLIRContext &context,
                                            std::string &error) {
  llvm::StringRef path = modelArg;
  if (path.ends_with(".mlir")) {
    llvm::SourceMgr sources;
    mlir::SourceMgrDiagnosticHandler diagnostics(sources, &context);
    weft::ToolDiagnostics toolDiagnostics(context, "weft-plan");
    auto module =
        mlir::parseSourceFile<mlir::ModuleOp>(path, sources, &context);
    if (!module)
      error = "cannot read the module '" + modelArg + "' (diagnostics above)";
    return module;
  }
  if (path.ends_with(".onnx")) {
#ifdef WEFT_HAVE_ONNX_IMPORT
    // The imported graph, lowered to weft's ops as weft-compile does.
    weft::OnnxImportOptions options;
    options.seq = seqArg;
    // Costs are per sequence: a symbolic batch dim is one sample.
    options.symbolicBatch = 1;
    // A classifier's output trains on given labels (--loss cross-entropy).
    options.givenTargets = lossArg == "cross-entropy";
    options.classes = classesArg;
    options.regression = lossArg == "mse";
    options.maskedLm = lossArg == "masked-lm";
    auto module = weft::importOnnx(context, modelArg, options, error);
    if (!module)
      return nullptr;
    mlir::PassManager pm(&context);
    // A masked-LM loss costs what next-token cross-entropy does; any id
    // serves as the mask token here.
    if (lossArg == "masked-lm" || lossArg == "cross-entropy")
      pm.addNestedPass<mlir::func::FuncOp>(weft::createWeftMaskedLm(
          weft::WeftMaskedLmOptions{0, 0.15, 0, options.givenTargets}));
    weft::addOnnxLowering(pm);
    llvm::SourceMgr sources;
    mlir::SourceMgrDiagnosticHandler diagnostics(sources, &context);
    weft::ToolDiagnostics toolDiagnostics(context, "weft-plan");
    if (mlir::failed(pm.run(*module))) {
      error = "cannot plan '" + modelArg +
              "': its graph does not lower to weft's ops (above)" +
              (lossArg == "next-token"
                   ? std::string("; weft-plan plans an encoder with --loss "
                                 "masked-lm, a classifier with --loss "
                                 "cross-entropy --classes N, a regression "
                                 "with --loss mse")
                   : std::string());
      return nullptr;
    }
    return module;
#else
    error = "cannot read '" + modelArg +
            "': this weft-plan was built without ONNX support (libonnx-dev "
            "and libprotobuf-dev)";
    return nullptr;
#endif
  }
  weft::ConfigResult config = weft::resolveModel(modelArg);
  if (!config.ok()) {
    error = config.error;
    return nullptr;
  }
  weft::BuildOptions options;
  options.batch = 1;
  options.seq = seqArg;
  return weft::buildModel(context, config.config, options, error);
}

int calibrate() {
  if (outputArg.empty())
    return fail("--calibrate needs -o FILE");
  std::string log;
#ifdef WEFT_HAVE_BLAS_CORE
  // Restarted, it says so; else whether OpenBLAS runs slow kernels the
  // user kept (WEFT_KEEP_OPENBLAS_CORETYPE).
  std::string note = weft::cpu::blasRestartNote();
  if (note.empty())
    note = weft::cpu::blasKernelWarning();
  if (!note.empty())
    log += note + "\n";
#endif
  Hardware hw = calibrateLocal(log);
  std::cerr << log;
  std::ofstream out(outputArg);
  if (!out)
    return fail("cannot write '" + outputArg + "'");
  out << hardwareToJson(hw);
  return 0;
}
} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(planCategory);
  cl::ParseCommandLineOptions(argc, argv,
                              "weft-plan: layouts for a model on a cluster, "
                              "ranked by predicted step time\n");
  if (calibrateArg) {
#ifdef WEFT_HAVE_BLAS_CORE
    // The sgemm it times must be the one weft-run gets (BlasCore.h).
    weft::cpu::restartWithRightBlasKernels(argv);
#endif
    return calibrate();
  }
  if (modelArg.empty())
    return fail("no model: give a preset, a config.json, an .onnx or a "
                "forward .mlir file");
  if (clusterArg.empty())
    return fail("no --cluster: give a preset (a100-80g, h100-80g, h200-141g, "
                "local) or a JSON file");
  bool fromIr = llvm::StringRef(modelArg).ends_with(".mlir") ||
                llvm::StringRef(modelArg).ends_with(".onnx");
  // The ONNX import's flags, checked as weft-compile and weft-opt check
  // them (passes/TrainingFlags.h).
  weft::TrainingFlags lossFlags;
  lossFlags.loss = lossArg;
  lossFlags.classes = classesArg;
  lossFlags.onnxModel = llvm::StringRef(modelArg).ends_with(".onnx");
  lossFlags.model = modelArg;
  if (classesArg.getNumOccurrences())
    lossFlags.given.insert("classes");
  if (std::string problem = weft::checkLossFlags(lossFlags); !problem.empty())
    return fail(problem);
  if (seqArg <= 0 && !fromIr)
    return fail(std::string(seqArg.getNumOccurrences()
                                ? "--seq must be positive, got " +
                                      std::to_string(seqArg)
                                : "no --seq") +
                ": a preset or config.json is planned at the sequence length "
                "--seq gives (a .onnx or .mlir model has its own)");
  for (auto [flag, value] :
       {std::pair<const char *, int64_t>{"--gpus", gpusArg},
        {"--global-batch", batchArg},
        {"--seq", seqArg}})
    if (value < 0 || (value == 0 && std::string(flag) != "--seq"))
      return fail(std::string(flag) + " must be positive, got " +
                  std::to_string(value));
  HardwareResult hw = resolveHardware(clusterArg);
  if (!hw.ok())
    return fail(hw.error);
  SearchOptions options;
  options.gpus = gpusArg;
  options.globalBatch = batchArg;
  options.tokens = tokensArg;
  options.dpOverlap = !noDpOverlapArg;
  options.tpOverlap = !noTpOverlapArg;
  options.masterWeights = masterWeightsArg;
  options.zero1AllReduce = zero1AllReduceArg;
  options.memoryUnchecked = memoryUncheckedArg;
  std::string error;
  if (!parseConstraints(fixArg, options.fix, error))
    return fail(error);

  auto t0 = std::chrono::steady_clock::now();
  ModelCost model;
  {
    mlir::MLIRContext context;
    context.printOpOnDiagnostic(false);
    context.loadDialect<weft::WeftDialect, mlir::func::FuncDialect>();
    mlir::OwningOpRef<mlir::ModuleOp> module = loadModel(context, error);
    if (!module || !analyzeModule(*module, model, error))
      return fail(error);
  }
  if (seqArg > 0 && model.seq != seqArg)
    return fail("--seq " + std::to_string(seqArg) + " differs from the " +
                std::to_string(model.seq) + " tokens per sequence of '" +
                modelArg + "'");
  seqArg = model.seq;
  options.breakdownTop = size_t(std::max(topArg.getValue(), 1));
  SearchResult result = searchLayouts(model, hw.hardware, options);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  if (!result.ok())
    return fail(result.error);

  if (jsonArg) {
    nlohmann::json rows = nlohmann::json::array();
    for (size_t i = 0; i < result.ranked.size() && i < size_t(topArg); ++i)
      rows.push_back(toJson(result.ranked[i]));
    nlohmann::json doc = {{"model", model.dims.name},
                          {"cluster", hw.hardware.name},
                          // The dtype the layouts were costed in;
                          // weft-compile --plan compiles in it.
                          {"dtype", hw.hardware.computeDtype},
                          {"gpus", gpusArg.getValue()},
                          {"global_batch", batchArg.getValue()},
                          {"seq", seqArg.getValue()},
                          {"evaluated", result.evaluated},
                          {"fitting", result.fitting},
                          {"search_seconds", seconds},
                          {"layouts", rows}};
    std::cout << doc.dump(2) << "\n";
    return 0;
  }
  std::printf("weft-plan: %s on %lld x %s, global batch %lld x %lld tokens: "
              "%lld layouts evaluated, %lld fit, %.3f s\n",
              model.dims.name.c_str(), (long long)gpusArg,
              hw.hardware.name.c_str(), (long long)batchArg, (long long)seqArg,
              (long long)result.evaluated, (long long)result.fitting, seconds);
  printTable(result.ranked, size_t(topArg));
  if (explainArg)
    explain(result.ranked.front(), model, hw.hardware);
  return 0;
}
