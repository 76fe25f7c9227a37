//===- StoreGradientsEarly.cpp - weft-store-gradients-early ---------------===//
//
// Autodiff stores every gradient at the end of the backward, so each
// gradient a collective reduces stays whole in the arena until then: all
// of them at once (Llama 3 8B on dp=8 with ZeRO-3, bf16: 32 GB of f32
// gradients waiting for their reduce-scatters; Llama 3 405B on pp=16,
// tp=8, per micro-batch: 13.3 GiB on stage 0). Each store moves right
// after its gradient is made instead, with the reductions that only feed
// it (ZeRO's reduce-scatter, data parallelism's all-reduce, a
// sequence-parallel norm weight's all-reduce over tp): the same values
// into the same buffers, sooner. Bucketing, later, groups the reductions
// by when their gradients are made, wherever they stand.
//
//===----------------------------------------------------------------------===//
#include "dialect/AttrNames.h"
#include "dialect/WeftDialect.h"
#include "passes/Passes.h"
#include "passes/model/ReturnedLoss.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace weft {
#define GEN_PASS_DEF_WEFTSTOREGRADIENTSEARLY
#include "passes/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {
namespace an = weft::attrname;

struct StoreGradientsEarly
    : weft::impl::WeftStoreGradientsEarlyBase<StoreGradientsEarly> {
  void runOnOperation() override {
    Operation *lossOp = weft::lossOp(getOperation());
    if (!lossOp)
      return;
    SmallVector<ParamGradOp> stores;
    for (Operation &op : *lossOp->getBlock())
      if (auto store = dyn_cast<ParamGradOp>(op))
        stores.push_back(store);
    for (ParamGradOp store : stores)
      storeEarly(store, lossOp);
  }

  // Moves store, and the single-use reductions between it and the op that
  // makes its gradient, right after that op; not into the forward, nor
  // out of or into a fragment (a step's once-per-step reduction stays).
  static void storeEarly(ParamGradOp store, Operation *lossOp) {
    if (store->hasAttr(an::kFragment))
      return;
    SmallVector<Operation *> chain{store};
    Value v = store.getGrad();
    while (Operation *def = v.getDefiningOp()) {
      if (!isa<ReduceScatterOp, AllReduceOp>(def) || !def->hasOneUse() ||
          def->hasAttr(an::kFragment) || def->hasAttr(an::kAsync))
        break;
      chain.push_back(def);
      v = def->getOperand(0);
    }
    Operation *after = v.getDefiningOp();
    if (!after || after->hasAttr(an::kFragment) ||
        !lossOp->isBeforeInBlock(after))
      return;
    for (Operation *op : llvm::reverse(chain)) {
      op->moveAfter(after);
      after = op;
    }
  }
};
} // namespace
