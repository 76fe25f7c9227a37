//===- Recompute.cpp - weft-recompute: activation recomputation -----------===//
//
// See the pass description in Passes.td. The forward is every op up to the
// one that computes the returned loss; weft-autodiff appended the backward
// after it.
//
//===----------------------------------------------------------------------===//
#include "dialect/AttrNames.h"
#include "dialect/LayerMap.h"
#include "dialect/WeftDialect.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

namespace weft {
#define GEN_PASS_DEF_WEFTRECOMPUTE
#include "passes/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {
namespace an = weft::attrname;

struct Recompute : weft::impl::WeftRecomputeBase<Recompute> {
  using WeftRecomputeBase::WeftRecomputeBase;

  void runOnOperation() override {
    if (mode == "none")
      return;
    if (mode != "selective" && mode != "full") {
      getOperation().emitError("weft-recompute: unknown mode '")
          << mode << "' (expected none, selective or full)";
      return signalPassFailure();
    }
    func::FuncOp fn = getOperation();
    if (fn.isExternal())
      return;
    Block &body = fn.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    Operation *lossOp =
        ret.getNumOperands() ? ret.getOperand(0).getDefiningOp() : nullptr;
    if (!lossOp) {
      fn.emitError("weft-recompute expects the function to return its loss");
      return signalPassFailure();
    }
    // Forward ops and their layers.
    SmallVector<Operation *> forward;
    LayerMap layers; // inputs (tokens, targets) belong to no layer
    auto layerOf = [&](Value v) { return layers.of(v); };
    int64_t numLayers = 0;
    for (Operation &op : body) {
      if (auto p = dyn_cast<ParamOp>(op)) {
        auto layer = p->getAttrOfType<IntegerAttr>(an::kLayer);
        if (!layer) {
          p.emitOpError("has no weft.layer: recomputation works layer by "
                        "layer, as the frontend marks them");
          return signalPassFailure();
        }
        layers.visit(p);
        numLayers = std::max(numLayers, layer.getInt());
        continue;
      }
      forward.push_back(&op);
      layers.visit(&op);
      if (&op == lossOp)
        break;
    }
    DenseSet<Operation *> isForward(forward.begin(), forward.end());
    // A value is kept when a forward op of a later layer reads it (a layer's
    // output), and so is everything outside the transformer layers.
    auto layerOfOp = [&](Operation *op) {
      return op->getNumResults() ? layerOf(op->getResult(0)) : -1;
    };
    auto kept = [&](Value v) {
      Operation *d = v.getDefiningOp();
      if (!d || !isForward.contains(d))
        return true;
      int64_t l = layerOf(v);
      if (l < 0 || l >= numLayers)
        return true;
      for (Operation *u : v.getUsers())
        if (isForward.contains(u) && layerOfOp(u) > l)
          return true;
      return false;
    };
    // Which forward values to recompute: those the backward reads (full),
    // or the attention's output (selective).
    auto wanted = [&](Value v) {
      if (kept(v))
        return false;
      if (mode == "selective")
        return isa<AttentionOp>(v.getDefiningOp());
      return true;
    };
    for (int64_t layer = 0; layer < numLayers; ++layer) {
      // The backward's reads of this layer's recomputed values, and the
      // first backward op that reads one.
      SetVector<Value> needed;
      Operation *first = nullptr;
      for (Operation &op : body) {
        if (isForward.contains(&op) || isa<ParamOp>(op))
          continue;
        for (Value v : op.getOperands())
          if (layers.contains(v) && layerOf(v) == layer && wanted(v)) {
            needed.insert(v);
            if (!first || op.isBeforeInBlock(first))
              first = &op;
          }
      }
      if (needed.empty())
        continue;
      // Their producers within the layer, transitively (down to kept values
      // and params), in forward order.
      DenseSet<Operation *> clone;
      SmallVector<Value> work(needed.begin(), needed.end());
      while (!work.empty()) {
        Value v = work.pop_back_val();
        Operation *d = v.getDefiningOp();
        if (!d || kept(v) || !clone.insert(d).second)
          continue;
        // Selective recomputes the attention from its kept inputs.
        if (mode == "full")
          for (Value o : d->getOperands())
            work.push_back(o);
      }
      OpBuilder b(first);
      IRMapping map;
      for (Operation *op : forward)
        if (clone.contains(op))
          b.clone(*op, map);
      for (Value v : needed) {
        Value c = map.lookupOrNull(v);
        v.replaceUsesWithIf(c, [&](OpOperand &use) {
          return !isForward.contains(use.getOwner()) &&
                 !clone.contains(use.getOwner()) &&
                 use.getOwner()->getBlock() == &body &&
                 !use.getOwner()->isBeforeInBlock(first);
        });
      }
    }
  }
};
} // namespace
