//===- RegatherActivations.cpp - weft-regather-activations ----------------===//
#include "dialect/AttrNames.h"
#include "dialect/WeftDialect.h"
#include "passes/Passes.h"
#include "passes/model/ReturnedLoss.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace weft {
#define GEN_PASS_DEF_WEFTREGATHERACTIVATIONS
#include "passes/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {
struct RegatherActivations
    : weft::impl::WeftRegatherActivationsBase<RegatherActivations> {
  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    if (fn.isExternal())
      return;
    Block &body = fn.getBody().front();
    // The forward ends with the loss; a forward-only function has no
    // backward.
    Operation *lossOp = weft::lossOp(body);
    if (!lossOp)
      return;
    SmallVector<AllGatherOp> gathers;
    for (Operation &op : body) {
      if (&op == lossOp)
        break;
      if (auto g = dyn_cast<AllGatherOp>(op))
        gathers.push_back(g);
    }
    for (AllGatherOp g : gathers) {
      // An activation's: not a parameter's (or its bf16 copy's, ZeRO-3),
      // nor one made once per step.
      Value src = g.getX();
      while (auto c = src.getDefiningOp<CastOp>())
        src = c->getOperand(0);
      if (g->hasAttr(weft::attrname::kAsync) ||
          g->hasAttr(weft::attrname::kFragment) || src.getDefiningOp<ParamOp>())
        continue;
      // Read by the forward, and in the backward by matmuls alone (another
      // backward reader would keep the gathered copy anyway).
      SmallVector<OpOperand *> backward;
      bool forward = false, other = false;
      for (OpOperand &use : g->getUses()) {
        Operation *user = use.getOwner();
        if (!lossOp->isBeforeInBlock(user))
          forward = true;
        else if (isa<MatmulOp>(user))
          backward.push_back(&use);
        else
          other = true;
      }
      if (backward.empty() || !forward || other)
        continue;
      Operation *first = backward.front()->getOwner();
      for (OpOperand *use : backward)
        if (use->getOwner()->isBeforeInBlock(first))
          first = use->getOwner();
      OpBuilder b(first);
      auto again = cast<AllGatherOp>(b.clone(*g));
      again->setAttr(weft::attrname::kRegather, b.getUnitAttr());
      for (OpOperand *use : backward)
        use->set(again.getResult());
    }
  }
};
} // namespace
