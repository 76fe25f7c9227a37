//===- ModelCost.cpp - per-layer FLOPs and bytes of a weft module ---------===//
#include "planner/ModelCost.h"
#include "dialect/AttrNames.h"
#include "dialect/LayerMap.h"
#include "dialect/WeftDialect.h"
#include "passes/Passes.h"
#include "passes/pipeline/StageBalance.h"
#include "passes/sharding/TpRoles.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/DenseSet.h"

#include <algorithm>
#include <optional>

using namespace mlir;

namespace weft::cost {

struct TpSource {
  MLIRContext context;
  OwningOpRef<ModuleOp> module;
  std::map<std::pair<int64_t, bool>, TpCollectives> cache;
  std::map<std::pair<int64_t, bool>, std::string> errors;
  /// Whether weft partitions the model over cp (empty: yes), once known.
  std::optional<std::string> cpError;
};

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

// 2 * (result elements) * (contracted size), per batch index.
double batchMatmulFlops(BatchMatmulOp bm) {
  auto a = cast<RankedTensorType>(bm.getA().getType());
  int64_t r = a.getRank();
  int64_t contract = a.getShape()[bm.getTransposeA() ? r - 2 : r - 1];
  return 2.0 * numel(bm.getType()) * double(contract);
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

// The share of (query, key) pairs attention computes: all of them
// bidirectional; causal, query i reads i + 1 keys (at most the window's W).
double attendedFraction(AttentionOp at) {
  if (at.getBidirectional())
    return 1.0;
  auto t = cast<RankedTensorType>(at.getQ().getType());
  double s = double(t.getShape()[t.getRank() - 2]);
  double w = at.getWindow() ? std::min(double(*at.getWindow()), s) : s;
  // sum over i < s of min(i + 1, w)
  double pairs = w * (w + 1) / 2 + (s - w) * w;
  return pairs / (s * s);
}

// What one sequence reads and writes: an activation (perSequence) counts
// 1/batch of its elements, a parameter-sized value (a weight's gradient, a
// table) all of them, as in a module of batch 1.
struct Elems {
  int64_t batch = 1;
  llvm::DenseSet<Type> paramTypes;
  double of(Value v) const {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    if (!t || !isa<FloatType>(t.getElementType()) || !t.hasStaticShape())
      return 0.0;
    double n = double(t.getNumElements());
    if (perSequence(t, paramTypes))
      n /= double(batch);
    return n;
  }
  double io(Operation *op) const {
    double n = 0;
    for (Value v : op->getOperands())
      n += of(v);
    for (Value v : op->getResults())
      n += of(v);
    return n;
  }
};

// The forward walk: each op's costs go to its layer's PartCost (index
// layer + 1; 0 the embeddings, L + 1 the final norm, head and loss).
struct Walk {
  Elems elems;
  std::vector<PartCost> parts;
  llvm::DenseSet<Value> split; // values computed inside a TP region
  // The roles megatron splits by (weft-infer-tp-roles' rules), so a GEMM
  // is costed as the layout splits it.
  llvm::DenseMap<Operation *, TpRoleAttr> roles;
  PartCost &at(int64_t layer) {
    return parts[size_t(
        std::clamp<int64_t>(layer + 1, 0, int64_t(parts.size()) - 1))];
  }
};

void walkForward(Operation &op, PartCost &cost, Walk &w) {
  if (auto p = dyn_cast<ParamOp>(op)) {
    cost.params += p.getType().getNumElements();
    return;
  }
  // A constant is read, not computed (its reader counts the bytes).
  if (isa<func::ReturnOp, FillOp, ConstantOp>(op))
    return;
  bool anySplit = llvm::any_of(op.getOperands(),
                               [&](Value v) { return w.split.contains(v); });
  if (auto mm = dyn_cast<MatmulOp>(op)) {
    auto result = cast<RankedTensorType>(mm.getType());
    auto a = cast<RankedTensorType>(mm.getA().getType());
    Gemm g;
    g.n = result.getShape().back();
    g.k = a.getShape().back();
    g.rowsPerSeq = result.getNumElements() / g.n; // divided by batch later
    TpRoleAttr role = w.roles.lookup(mm.getB().getDefiningOp());
    g.split = !role || !role.splits()   ? TpSplit::None
              : role.getKind() == "row" ? TpSplit::Row
                                        : TpSplit::Column;
    if (g.split == TpSplit::Column)
      w.split.insert(mm.getResult());
    cost.gemms.push_back(g);
    cost.gemmFlops += matmulFlops(mm);
    return;
  }
  // The generic path's batched products run on whole operands (its
  // reshapes pin the dims a split would need).
  if (auto bm = dyn_cast<BatchMatmulOp>(op)) {
    auto result = cast<RankedTensorType>(bm.getType());
    auto a = cast<RankedTensorType>(bm.getA().getType());
    Gemm g;
    g.n = result.getShape().back();
    g.k = a.getShape()[a.getRank() - (bm.getTransposeA() ? 2 : 1)];
    g.rowsPerSeq = result.getNumElements() / g.n; // divided by batch later
    g.split = TpSplit::None;
    cost.gemms.push_back(g);
    cost.gemmFlops += batchMatmulFlops(bm);
    return;
  }
  if (auto at = dyn_cast<AttentionOp>(op)) {
    int64_t hd = 0;
    double flops = attentionFlops(at.getQ(), hd, at.getNumHeads());
    cost.attentionFlops += flops;
    cost.attentionRunFlops += flops * attendedFraction(at);
    cost.attentionHeadDim = hd;
    w.split.insert(at.getResult());
    return;
  }
  (anySplit ? cost.elemsTp : cost.elemsRep) += w.elems.io(&op);
  if (anySplit)
    for (Value r : op.getResults())
      w.split.insert(r);
}

void walkBackward(Operation &op, PartCost &cost, const Elems &elems) {
  if (isa<func::ReturnOp, FillOp, ParamGradOp, ConstantOp>(op))
    return;
  if (auto mm = dyn_cast<MatmulOp>(op))
    cost.backwardGemmFlops += matmulFlops(mm);
  else if (auto bm = dyn_cast<BatchMatmulOp>(op))
    cost.backwardGemmFlops += batchMatmulFlops(bm);
  else if (auto ag = dyn_cast<AttentionGradOp>(op)) {
    // Recomputes QK^T, then dV, dP, dQ, dK: five products of the forward's
    // two.
    int64_t hd = 0;
    cost.backwardAttentionFlops +=
        2.5 * attentionFlops(ag.getQ(), hd, ag.getNumHeads());
  } else
    cost.backwardElems += elems.io(&op);
}

// Every figure of `p` times `f` (the GEMM list is kept: shapes, not counts).
void scale(PartCost &p, double f, bool elems = true) {
  p.gemmFlops *= f;
  p.attentionFlops *= f;
  p.attentionRunFlops *= f;
  p.backwardGemmFlops *= f;
  p.backwardAttentionFlops *= f;
  if (!elems)
    return;
  p.elemsTp *= f;
  p.elemsRep *= f;
  p.backwardElems *= f;
}

// a + b (the GEMM lists concatenated).
void accumulate(PartCost &a, const PartCost &b) {
  a.gemms.insert(a.gemms.end(), b.gemms.begin(), b.gemms.end());
  a.gemmFlops += b.gemmFlops;
  a.attentionFlops += b.attentionFlops;
  a.attentionRunFlops += b.attentionRunFlops;
  a.attentionHeadDim =
      a.attentionHeadDim ? a.attentionHeadDim : b.attentionHeadDim;
  a.backwardGemmFlops += b.backwardGemmFlops;
  a.backwardAttentionFlops += b.backwardAttentionFlops;
  a.elemsTp += b.elemsTp;
  a.elemsRep += b.elemsRep;
  a.backwardElems += b.backwardElems;
  a.params += b.params;
}

int64_t lastDim(Value v) {
  auto t = cast<RankedTensorType>(v.getType());
  return t.getRank() ? t.getShape().back() : 0;
}

} // namespace

bool analyzeModule(ModuleOp source, ModelCost &cost, std::string &error) {
  auto fns = source.getOps<func::FuncOp>();
  if (std::distance(fns.begin(), fns.end()) != 1) {
    error = "the planner reads a module with one function (the forward "
            "model), found " +
            std::to_string(std::distance(fns.begin(), fns.end()));
    return false;
  }
  func::FuncOp sourceFn = *fns.begin();
  if (!sourceFn.getBody().hasOneBlock() || sourceFn.getNumArguments() == 0) {
    error = "@" + sourceFn.getSymName().str() +
            " must have one block and the token ids as its first argument";
    return false;
  }
  auto ids = dyn_cast<RankedTensorType>(sourceFn.getArgument(0).getType());
  if (!ids || ids.getRank() != 2 || !ids.hasStaticShape() ||
      ids.getShape()[0] <= 0 || ids.getShape()[1] <= 0) {
    error = "@" + sourceFn.getSymName().str() +
            "'s first argument must be the token ids [batch, seq] with static "
            "sizes";
    return false;
  }
  const int64_t batch = ids.getShape()[0], seq = ids.getShape()[1];

  // Mark every forward op with its layer on a clone, then differentiate it:
  // weft-autodiff carries each op's layer onto its gradient's ops.
  OwningOpRef<ModuleOp> module(source.clone());
  func::FuncOp fn = *module->getOps<func::FuncOp>().begin();
  Block &body = fn.getBody().front();
  LayerMap layers;
  int64_t numLayers = -1;
  ModelDims dims, generic;
  dims.name = fn.getSymName().str();
  if (auto name = fn->getAttrOfType<StringAttr>(attrname::kModel))
    dims.name = name.str();
  for (Operation &op : body.without_terminator()) {
    if (auto p = dyn_cast<ParamOp>(op)) {
      auto own = p->getAttrOfType<IntegerAttr>(attrname::kLayer);
      if (!own) {
        error = "weft.param \"" + p.getName().str() +
                "\" has no weft.layer: the planner costs the model layer by "
                "layer, as the frontend marks them";
        return false;
      }
      numLayers = std::max(numLayers, own.getInt());
    }
    int64_t layer = layers.visit(&op);
    op.setAttr(attrname::kLayer,
               IntegerAttr::get(IntegerType::get(op.getContext(), 64), layer));
    if (auto at = dyn_cast<AttentionOp>(op)) {
      dims.numHeads = at.getNumHeads();
      dims.numKvHeads = at.getNumKvHeads();
      if (!dims.hidden)
        dims.hidden = lastDim(at->getOperand(0));
    } else if (auto bm = dyn_cast<BatchMatmulOp>(op);
               bm && layer >= 0 && !generic.numHeads) {
      // Attention on the generic path (one no pattern raised): its scores
      // are a batched product [batch, heads, seq, seq].
      auto y = cast<RankedTensorType>(bm.getType());
      if (y.getRank() == 4 && y.getShape()[0] == batch &&
          y.getShape()[2] == seq && y.getShape()[3] == seq)
        generic.numHeads = y.getShape()[1];
    } else if (isa<EmbeddingOp>(op))
      dims.hidden = lastDim(op.getResult(0));
    else if (isa<CrossEntropyOp, MseLossOp>(op))
      dims.vocab = lastDim(op.getOperand(0)); // the loss's width
  }
  if (!dims.numHeads)
    dims.numHeads = generic.numHeads;
  if (!dims.numKvHeads)
    dims.numKvHeads = dims.numHeads;
  if (numLayers < 1 || !dims.numHeads || !dims.hidden || !dims.vocab) {
    error = "the planner reads transformer language models: weft.params "
            "marked with layers 0..L (found L = " +
            std::to_string(numLayers) +
            "), a weft.embedding, attention in the layers (weft.attention, "
            "or the generic path's scores [batch, heads, seq, seq]) and a "
            "weft.cross_entropy of the logits (or a regression's "
            "weft.mse_loss)";
    return false;
  }
  dims.numLayers = numLayers;

  // The marked forward module, for weft's tp passes later: copied into a
  // context of its own (a ModelCost outlives the caller's), cut to two
  // layers when the layers are alike.
  auto tp = std::make_shared<TpSource>();
  tp->context.loadDialect<WeftDialect, func::FuncDialect>();
  tp->context.disableMultithreading();
  {
    std::string text;
    llvm::raw_string_ostream os(text);
    module->print(os);
    tp->module = parseSourceString<ModuleOp>(text, &tp->context);
  }
  if (!tp->module) {
    error = "cannot copy the marked module (printing and parsing it failed)";
    return false;
  }
  cutToTwoLayers(*tp->module, numLayers);

  Walk w;
  w.roles = inferTpRoles(fn);
  w.parts.assign(size_t(numLayers + 2), PartCost{});
  w.elems.batch = batch;
  for (auto p : body.getOps<ParamOp>())
    w.elems.paramTypes.insert(p.getType());
  llvm::DenseSet<Operation *> forward;
  for (Operation &op : body.without_terminator()) {
    forward.insert(&op);
    walkForward(
        op, w.at(op.getAttrOfType<IntegerAttr>(attrname::kLayer).getInt()), w);
  }
  PassManager pm(module->getContext());
  pm.addNestedPass<func::FuncOp>(createWeftAutodiff());
  if (failed(pm.run(*module))) {
    error = "weft-autodiff failed on @" + fn.getSymName().str();
    return false;
  }
  for (Operation &op : body) {
    if (forward.contains(&op))
      continue;
    auto layer = op.getAttrOfType<IntegerAttr>(attrname::kLayer);
    walkBackward(op, w.at(layer ? layer.getInt() : numLayers), w.elems);
  }

  // Per sequence: FLOPs are linear in the batch (elements were counted per
  // sequence already).
  for (PartCost &p : w.parts) {
    scale(p, 1.0 / double(batch), /*elems=*/false);
    for (Gemm &g : p.gemms)
      g.rowsPerSeq /= batch;
  }
  cost = ModelCost{};
  cost.tpSource = std::move(tp);
  cost.dims = dims;
  cost.seq = seq;
  cost.layers.assign(w.parts.begin() + 1, w.parts.end() - 1);
  cost.first = w.parts.front();
  cost.last = w.parts.back();
  accumulate(cost.base, cost.first);
  accumulate(cost.base, cost.last);
  llvm::DenseSet<Operation *> tied;
  for (Operation *op : forward)
    if (op->getAttrOfType<IntegerAttr>(attrname::kLayer).getInt() == numLayers)
      for (Value v : op->getOperands())
        if (auto p = v.getDefiningOp<ParamOp>())
          if (p->getAttrOfType<IntegerAttr>(attrname::kLayer).getInt() !=
                  numLayers &&
              tied.insert(p).second)
            cost.lastTiedParams += p.getType().getNumElements();
  // The mean layer (the builtin models' layers are alike, so it is each).
  cost.layer = cost.layers.front();
  for (size_t i = 1; i < cost.layers.size(); ++i) {
    if (cost.layers[i].params != cost.layer.params ||
        !(cost.layers[i].gemms == cost.layers.front().gemms)) {
      PartCost sum;
      for (const PartCost &p : cost.layers)
        accumulate(sum, p);
      sum.gemms = cost.layers.front().gemms;
      scale(sum, 1.0 / double(cost.layers.size()));
      sum.params = (sum.params + int64_t(cost.layers.size()) / 2) /
                   int64_t(cost.layers.size());
      cost.layer = sum;
      break;
    }
  }
  return true;
}

const TpCollectives *ModelCost::tensorParallel(int64_t tp, bool sp,
                                               std::string &error) const {
  if (!tpSource) {
    error = "the model's IR is not kept (a ModelCost not made by "
            "analyzeModule)";
    return nullptr;
  }
  auto key = std::make_pair(tp, sp);
  if (auto it = tpSource->cache.find(key); it != tpSource->cache.end())
    return &it->second;
  if (auto it = tpSource->errors.find(key); it != tpSource->errors.end()) {
    error = it->second;
    return nullptr;
  }
  TpCollectives out;
  if (!tensorParallelCollectives(*tpSource->module, tp, sp, out, error)) {
    tpSource->errors[key] = error;
    return nullptr;
  }
  return &(tpSource->cache[key] = std::move(out));
}

bool ModelCost::contextParallel(std::string &error) const {
  if (!tpSource) {
    error = "the model's IR is not kept (a ModelCost not made by "
            "analyzeModule)";
    return false;
  }
  if (!tpSource->cpError) {
    std::string why;
    tpSource->cpError =
        contextParallelPartitions(*tpSource->module, why) ? "" : why;
  }
  error = *tpSource->cpError;
  return error.empty();
}

const std::vector<int64_t> &ModelCost::chunkLayers(int64_t chunks) const {
  auto it = chunkCache.find(chunks);
  if (it != chunkCache.end())
    return it->second;
  std::vector<double> flops;
  for (const PartCost &p : layers)
    flops.push_back(p.forwardFlops());
  std::vector<int64_t> stage =
      balanceStages(flops, first.forwardFlops(), last.forwardFlops(), chunks);
  std::vector<int64_t> counts(size_t(std::max<int64_t>(chunks, 1)), 0);
  for (int64_t s : stage)
    ++counts[size_t(s)];
  return chunkCache[chunks] = counts;
}

} // namespace weft::cost
