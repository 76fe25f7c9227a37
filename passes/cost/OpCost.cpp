//===- OpCost.cpp - per-op FLOPs and bytes of the builtin models ----------===//
#include "passes/cost/OpCost.h"
#include "dialect/WeftDialect.h"
#include "frontends/builtin/BuildModel.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/DenseSet.h"

#include <algorithm>

using namespace mlir;

namespace weft::cost {
namespace {

double numel(Type t) {
  auto r = dyn_cast<RankedTensorType>(t);
  return r && r.hasStaticShape() ? double(r.getNumElements()) : 0.0;
}
bool isFloat(Type t) {
  auto r = dyn_cast<RankedTensorType>(t);
  return r && isa<FloatType>(r.getElementType());
}

// 2 * (result elements) * (contracted size).
double matmulFlops(MatmulOp mm) {
  auto a = cast<RankedTensorType>(mm.getA().getType());
  int64_t contract = mm.getTransposeA()
                         ? a.getNumElements() / a.getShape().back()
                         : a.getShape().back();
  return 2.0 * numel(mm.getType()) * double(contract);
}

// QK^T and AV over every head: 4 * B * S^2 * H * hd (the causal mask is not
// exploited by the kernels, so the full square is counted, as Megatron does).
double attentionFlops(Value q, int64_t &headDim, int64_t numHeads) {
  auto t = cast<RankedTensorType>(q.getType());
  int64_t width = t.getShape().back();
  int64_t seq = t.getShape()[t.getRank() - 2];
  int64_t batch = t.getNumElements() / (width * seq);
  headDim = width / numHeads;
  return 4.0 * batch * seq * seq * width;
}

double ioElems(Operation *op) {
  double n = 0;
  for (Value v : op->getOperands())
    if (isFloat(v.getType()))
      n += numel(v.getType());
  for (Value v : op->getResults())
    if (isFloat(v.getType()))
      n += numel(v.getType());
  return n;
}

struct Walk {
  PartCost cost;
  llvm::DenseSet<Value> split; // values computed inside a TP region
};

// The forward ops of `fn` (before autodiff).
void walkForward(func::FuncOp fn, Walk &w) {
  for (Operation &op : fn.getBody().front()) {
    if (auto p = dyn_cast<ParamOp>(op)) {
      w.cost.params += p.getType().getNumElements();
      continue;
    }
    if (isa<func::ReturnOp, FillOp>(op))
      continue;
    bool anySplit = llvm::any_of(op.getOperands(),
                                 [&](Value v) { return w.split.contains(v); });
    if (auto mm = dyn_cast<MatmulOp>(op)) {
      auto result = cast<RankedTensorType>(mm.getType());
      auto a = cast<RankedTensorType>(mm.getA().getType());
      Gemm g;
      g.n = result.getShape().back();
      g.k = a.getShape().back();
      g.rowsPerSeq = result.getNumElements() / g.n; // the IR has batch 1
      g.split = w.split.contains(mm.getA()) ? TpSplit::Row : TpSplit::Column;
      if (g.split == TpSplit::Column)
        w.split.insert(mm.getResult());
      w.cost.gemms.push_back(g);
      w.cost.gemmFlops += matmulFlops(mm);
      continue;
    }
    if (auto at = dyn_cast<AttentionOp>(op)) {
      int64_t hd = 0;
      w.cost.attentionFlops += attentionFlops(at.getQ(), hd, at.getNumHeads());
      w.cost.attentionHeadDim = hd;
      w.split.insert(at.getResult());
      continue;
    }
    (anySplit ? w.cost.elemsTp : w.cost.elemsRep) += ioElems(&op);
    if (anySplit)
      for (Value r : op.getResults())
        w.split.insert(r);
  }
}

// Every op of the differentiated function not counted by walkForward.
void walkBackward(func::FuncOp fn, const llvm::DenseSet<Operation *> &forward,
                  PartCost &cost) {
  for (Operation &op : fn.getBody().front()) {
    if (forward.contains(&op) || isa<func::ReturnOp, FillOp, ParamGradOp>(op))
      continue;
    if (auto mm = dyn_cast<MatmulOp>(op))
      cost.backwardGemmFlops += matmulFlops(mm);
    else if (auto ag = dyn_cast<AttentionGradOp>(op)) {
      // Recomputes QK^T, then dV, dP, dQ, dK: five products of the forward's
      // two.
      int64_t hd = 0;
      cost.backwardAttentionFlops +=
          2.5 * attentionFlops(ag.getQ(), hd, ag.getNumHeads());
    } else
      cost.backwardElems += ioElems(&op);
  }
}

bool analyzeDepth(MLIRContext &context, ModelConfig config, int64_t layers,
                  int64_t seq, PartCost &cost, std::string &error) {
  config.numLayers = layers;
  BuildOptions options;
  options.batch = 1;
  options.seq = seq;
  OwningOpRef<ModuleOp> module = buildModel(context, config, options, error);
  if (!module)
    return false;
  auto fn = *module->getOps<func::FuncOp>().begin();
  Walk w;
  walkForward(fn, w);
  llvm::DenseSet<Operation *> forward;
  for (Operation &op : fn.getBody().front())
    forward.insert(&op);
  PassManager pm(&context);
  pm.addNestedPass<func::FuncOp>(createWeftAutodiff());
  if (failed(pm.run(*module))) {
    error = "weft-autodiff failed on the one-layer model";
    return false;
  }
  walkBackward(fn, forward, w.cost);
  cost = std::move(w.cost);
  return true;
}

// a - b, GEMM lists as multisets.
PartCost subtract(const PartCost &a, const PartCost &b) {
  PartCost d;
  std::vector<Gemm> rest = b.gemms;
  for (const Gemm &g : a.gemms) {
    auto it = std::find(rest.begin(), rest.end(), g);
    if (it != rest.end())
      rest.erase(it);
    else
      d.gemms.push_back(g);
  }
  d.gemmFlops = a.gemmFlops - b.gemmFlops;
  d.attentionFlops = a.attentionFlops - b.attentionFlops;
  d.attentionHeadDim =
      a.attentionHeadDim ? a.attentionHeadDim : b.attentionHeadDim;
  d.backwardGemmFlops = a.backwardGemmFlops - b.backwardGemmFlops;
  d.backwardAttentionFlops =
      a.backwardAttentionFlops - b.backwardAttentionFlops;
  d.elemsTp = a.elemsTp - b.elemsTp;
  d.elemsRep = a.elemsRep - b.elemsRep;
  d.backwardElems = a.backwardElems - b.backwardElems;
  d.params = a.params - b.params;
  return d;
}

} // namespace

bool analyzeModel(const ModelConfig &config, int64_t seq, ModelCost &cost,
                  std::string &error) {
  MLIRContext context;
  context.loadDialect<WeftDialect, func::FuncDialect>();
  context.disableMultithreading();
  PartCost one, two;
  if (!analyzeDepth(context, config, 1, seq, one, error) ||
      !analyzeDepth(context, config, 2, seq, two, error))
    return false;
  cost.config = config;
  cost.seq = seq;
  cost.layer = subtract(two, one);
  cost.base = subtract(one, cost.layer);
  return true;
}

} // namespace weft::cost
