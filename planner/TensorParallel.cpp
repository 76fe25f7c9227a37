//===- TensorParallel.cpp - TP collectives from weft's own passes ---------===//
#include "planner/TensorParallel.h"
#include "dialect/AttrNames.h"
#include "dialect/WeftDialect.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <algorithm>
#include <map>
#include <set>

using namespace mlir;

namespace weft::cost {
namespace {

// A unit attribute on the forward ops (not a weft.* one: no pass reads it,
// and weft-autodiff does not carry it onto the gradient's ops).
constexpr llvm::StringLiteral kForward = "planner.forward";

int64_t layerOf(Operation *op) {
  auto l = op->getAttrOfType<IntegerAttr>(attrname::kLayer);
  return l ? l.getInt() : INT64_MIN;
}

bool hasTp(ArrayAttr axes) {
  return llvm::any_of(
      axes, [](Attribute a) { return cast<StringAttr>(a).getValue() == "tp"; });
}

double numel(Value v) {
  return double(cast<RankedTensorType>(v.getType()).getNumElements());
}

// Two ops alike but for weft.layer (and their operands).
bool alike(Operation *a, Operation *b) {
  if (a->getName() != b->getName() ||
      a->getResultTypes() != b->getResultTypes() ||
      a->getNumOperands() != b->getNumOperands())
    return false;
  NamedAttrList x(a->getAttrDictionary()), y(b->getAttrDictionary());
  x.erase(attrname::kLayer);
  y.erase(attrname::kLayer);
  x.erase("name"); // a parameter's name differs by its layer
  y.erase("name");
  return x.getDictionary(a->getContext()) == y.getDictionary(b->getContext());
}

// The matmuls an asynchronous collective runs under: those between its
// start and its first reader (weft-regather-activations: the input
// gradients'; weft-overlap-input-gradient-reductions: the weight
// gradients'). Their shapes per sequence, into c.
void overlappedGemms(Operation *collective, int64_t batch, TpCollective &c) {
  Value result = collective->getResult(0);
  for (Operation *op = collective->getNextNode(); op; op = op->getNextNode()) {
    if (llvm::is_contained(op->getOperands(), result))
      return;
    auto m = dyn_cast<MatmulOp>(op);
    if (!m)
      continue;
    auto a = cast<RankedTensorType>(m.getA().getType());
    auto y = cast<RankedTensorType>(m.getResult().getType());
    if (a.getRank() < 2 || y.getRank() < 2)
      continue;
    // [rows, k] x [k, n], or with transpose_a the rows contracted: the
    // FLOPs either way are 2 rows k n, rows per sequence.
    TpCollective::Gemm g;
    g.k = double(a.getShape().back());
    g.n = double(y.getShape().back());
    g.rows = (m.getTransposeA() ? numel(m.getA()) / g.k
                                : numel(m.getResult()) / g.n) /
             double(batch);
    c.overlaps.push_back(g);
  }
}

} // namespace

bool cutToTwoLayers(ModuleOp forward, int64_t numLayers) {
  if (numLayers <= 2)
    return false;
  auto fn = *forward.getOps<func::FuncOp>().begin();
  std::vector<std::vector<Operation *>> ops(static_cast<size_t>(numLayers));
  for (Operation &op : fn.getBody().front().without_terminator()) {
    int64_t l = layerOf(&op);
    if (l >= 0 && l < numLayers)
      ops[size_t(l)].push_back(&op);
  }
  for (int64_t l = 2; l < numLayers; ++l) {
    if (ops[size_t(l)].size() != ops[1].size())
      return false;
    for (size_t j = 0; j < ops[1].size(); ++j)
      if (!alike(ops[size_t(l)][j], ops[1][j]))
        return false;
  }
  // Values of layers 2..L-1 stand for layer 1's same values.
  IRMapping map;
  for (int64_t l = 2; l < numLayers; ++l)
    for (size_t j = 0; j < ops[1].size(); ++j)
      for (auto [r, r1] :
           llvm::zip(ops[size_t(l)][j]->getResults(), ops[1][j]->getResults()))
        map.map(r, r1);
  for (Operation &op : fn.getBody().front()) {
    int64_t l = layerOf(&op);
    if (l >= 2 && l < numLayers)
      continue;
    for (OpOperand &use : op.getOpOperands())
      if (Value to = map.lookupOrNull(use.get()))
        use.set(to);
  }
  for (int64_t l = numLayers - 1; l >= 2; --l)
    for (Operation *op : llvm::reverse(ops[size_t(l)]))
      op->erase();
  return true;
}

namespace {
// weft-compile's stages through propagation, then its partition, folding,
// regathering and overlapping; not its gradient buckets, which would pack
// parameter-sized reductions of several layers into one. Errors become
// `diagnostics`; warnings (a vocab tp does not divide) are the compiler's to
// print.
LogicalResult runThroughPartition(ModuleOp module,
                                  const TrainingPipelineOptions &options,
                                  std::string &diagnostics) {
  PassManager pm(module->getContext());
  for (int stage = 1; stage < kNumTrainingStages; ++stage) {
    if (std::string(kTrainingStages[stage]) == "partition")
      break;
    addTrainingStage(pm, stage, options);
  }
  pm.addPass(createWeftPartition());
  pm.addNestedPass<func::FuncOp>(createWeftFoldCollectives());
  pm.addNestedPass<func::FuncOp>(createWeftRegatherActivations());
  pm.addNestedPass<func::FuncOp>(createWeftOverlapInputGradientReductions());
  ScopedDiagnosticHandler handler(module->getContext(), [&](Diagnostic &d) {
    if (d.getSeverity() == DiagnosticSeverity::Error)
      diagnostics += (diagnostics.empty() ? "" : "; ") + d.str();
    return success();
  });
  return pm.run(module);
}
} // namespace

bool contextParallelPartitions(ModuleOp forward, std::string &error) {
  OwningOpRef<ModuleOp> module(forward.clone());
  TrainingPipelineOptions options;
  options.layout.mesh = "cp=2";
  std::string diagnostics;
  if (failed(runThroughPartition(*module, options, diagnostics))) {
    error = "weft's passes cannot lay the model out over cp: " + diagnostics;
    return false;
  }
  return true;
}

bool tensorParallelCollectives(ModuleOp forward, int64_t tp, bool sp,
                               TpCollectives &out, std::string &error) {
  OwningOpRef<ModuleOp> module(forward.clone());
  auto fn = *module->getOps<func::FuncOp>().begin();
  Block &body = fn.getBody().front();
  const int64_t batch =
      cast<RankedTensorType>(fn.getArgument(0).getType()).getShape()[0];
  int64_t lastLayer = -1;
  llvm::DenseSet<Type> paramTypes;
  std::set<int64_t> layerIds;
  for (Operation &op : body.without_terminator()) {
    op.setAttr(kForward, UnitAttr::get(op.getContext()));
    lastLayer = std::max(lastLayer, layerOf(&op));
    layerIds.insert(layerOf(&op));
    if (auto p = dyn_cast<ParamOp>(op))
      paramTypes.insert(p.getType());
  }
  // The transformer layers present (two, when cut to two).
  const int64_t layers = llvm::count_if(
      layerIds, [&](int64_t l) { return l >= 0 && l < lastLayer; });

  TrainingPipelineOptions options;
  options.layout.mesh = "tp=" + std::to_string(tp);
  options.layout.layout = "megatron";
  options.layout.sequenceParallel = sp;
  std::string diagnostics;
  if (failed(runThroughPartition(*module, options, diagnostics))) {
    error =
        "weft's passes cannot lay the model out over tp=" + std::to_string(tp) +
        (sp ? " with sequence parallelism" : "") + ": " + diagnostics;
    return false;
  }

  // Parameters' local shapes too: a sharded parameter's gradient is.
  for (auto p : body.getOps<ParamOp>())
    paramTypes.insert(p.getType());

  // Each op's layer: its own, else its first operand's (a collective, a
  // slice or a pack the partition inserted serves the op that made it).
  llvm::DenseMap<Value, std::pair<int64_t, bool>> of; // layer, forward
  std::map<int64_t, std::vector<TpCollective>> byLayer;
  for (Operation &op : body) {
    int64_t layer = layerOf(&op);
    bool isForward = op.hasAttr(kForward);
    if (layer == INT64_MIN) {
      layer = -1;
      if (op.getNumOperands())
        if (auto it = of.find(op.getOperand(0)); it != of.end())
          std::tie(layer, isForward) = it->second;
    }
    // A gather again for the backward serves the backward, though it
    // reads a forward value (weft-regather-activations).
    if (op.hasAttr(weft::attrname::kRegather))
      isForward = false;
    for (Value r : op.getResults())
      of[r] = {layer, isForward};
    TpCollective c;
    Value full;
    if (auto ar = dyn_cast<AllReduceOp>(op); ar && hasTp(ar.getAxes()))
      c.kind = TpCollective::AllReduce, full = ar.getX();
    else if (auto rs = dyn_cast<ReduceScatterOp>(op); rs && hasTp(rs.getAxes()))
      c.kind = TpCollective::ReduceScatter, full = rs.getX();
    else if (auto ag = dyn_cast<AllGatherOp>(op); ag && hasTp(ag.getAxes()))
      c.kind = TpCollective::AllGather, full = ag.getResult();
    if (!full)
      continue;
    c.elems = numel(full);
    c.perSequence = perSequence(full.getType(), paramTypes);
    if (c.perSequence)
      c.elems /= double(batch);
    c.forward = isForward;
    c.regather = op.hasAttr(weft::attrname::kRegather);
    if (op.hasAttr(weft::attrname::kAsync) && !c.forward)
      overlappedGemms(&op, batch, c);
    byLayer[layer].push_back(c);
  }

  out = TpCollectives{};
  out.first = byLayer[-1];
  out.last = byLayer[lastLayer];
  // The layers' mean: each layer's list when alike (the builtin models').
  for (auto &[l, list] : byLayer)
    if (l >= 0 && l != lastLayer)
      out.layer.insert(out.layer.end(), list.begin(), list.end());
  if (layers > 1) {
    size_t per = out.layer.size() / size_t(layers);
    bool same = per * size_t(layers) == out.layer.size();
    for (size_t i = per; same && i < out.layer.size(); ++i)
      same = out.layer[i].kind == out.layer[i % per].kind &&
             out.layer[i].elems == out.layer[i % per].elems &&
             out.layer[i].forward == out.layer[i % per].forward;
    if (same)
      out.layer.resize(per);
    else // every entry, weighted 1/layers
      for (TpCollective &c : out.layer)
        c.elems /= double(layers);
  }
  return true;
}

} // namespace weft::cost
