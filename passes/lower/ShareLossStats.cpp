//===- ShareLossStats.cpp - weft-share-loss-stats: one softmax pass -------===//
//
// A cross-entropy and its gradient over the same logits both find each
// row's max and sum of exponentials: the gradient's kernel took three passes
// over a row (max, exp and sum, scale) for the forward's two. Rewritten as
// the vocab-parallel trio over one shard (no vocab_axes), the forward keeps
// its statistics and the gradient is one pass, exp(x - M) / S.
//
//===----------------------------------------------------------------------===//
#include "dialect/WeftDialect.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"

namespace weft {
#define GEN_PASS_DEF_WEFTSHARELOSSSTATS
#include "passes/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {
// The marks an op carries (fragment, stage), less the loss's denominator,
// which the new ops hold as their own attribute.
void copyMarks(Operation *from, Operation *to) {
  for (NamedAttribute a : from->getDiscardableAttrs())
    if (a.getName() != "denominator")
      to->setAttr(a.getName(), a.getValue());
}

// weft-partition's denominator (the step's rows) where it set one, else
// the local rows: the targets' elements.
int64_t denominatorOf(Operation *op) {
  if (auto d = op->getAttrOfType<IntegerAttr>("denominator"))
    return d.getInt();
  return cast<RankedTensorType>(op->getOperand(1).getType()).getNumElements();
}

struct ShareLossStats : weft::impl::WeftShareLossStatsBase<ShareLossStats> {
  void runOnOperation() override {
    SmallVector<std::pair<CrossEntropyOp, CrossEntropyGradOp>> pairs;
    DenseSet<Operation *> paired; // a loss shares with one gradient
    getOperation().walk([&](CrossEntropyGradOp grad) {
      CrossEntropyOp loss = forwardOf(grad);
      if (loss && paired.insert(loss).second)
        pairs.push_back({loss, grad});
    });
    OpBuilder b(&getContext());
    for (auto [loss, grad] : pairs) {
      b.setInsertionPoint(loss);
      ArrayAttr noAxes = b.getStrArrayAttr({});
      auto stats = CrossEntropyStatsOp::create(
          b, loss.getLoc(), loss.getLogits(), loss.getTargets(), noAxes,
          loss.getMaskedAttr(), loss.getClassesAttr());
      copyMarks(loss, stats);
      auto fromStats = CrossEntropyFromStatsOp::create(
          b, loss.getLoc(), stats.getResult(),
          b.getI64IntegerAttr(denominatorOf(loss)), loss.getMaskedAttr());
      copyMarks(loss, fromStats);
      loss.getResult().replaceAllUsesWith(fromStats.getResult());

      b.setInsertionPoint(grad);
      auto statsGrad = CrossEntropyStatsGradOp::create(
          b, grad.getLoc(), grad.getLogits(), grad.getTargets(),
          stats.getResult(), grad.getDloss(), noAxes,
          b.getI64IntegerAttr(denominatorOf(grad)), grad.getMaskedAttr(),
          grad.getClassesAttr());
      copyMarks(grad, statsGrad);
      grad.getResult().replaceAllUsesWith(statsGrad.getResult());
      grad.erase();
      loss.erase();
    }
  }

  // The cross-entropy of the same logits and targets, before the gradient
  // in its block, counting the same rows and classes.
  static CrossEntropyOp forwardOf(CrossEntropyGradOp grad) {
    for (Operation *user : grad.getLogits().getUsers()) {
      auto loss = dyn_cast<CrossEntropyOp>(user);
      if (loss && loss.getTargets() == grad.getTargets() &&
          loss->getBlock() == grad->getBlock() && loss->isBeforeInBlock(grad) &&
          loss.getMasked() == grad.getMasked() &&
          loss.getClassesAttr() == grad.getClassesAttr() &&
          denominatorOf(loss) == denominatorOf(grad))
        return loss;
    }
    return nullptr;
  }
};
} // namespace
