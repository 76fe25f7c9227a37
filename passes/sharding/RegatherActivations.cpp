//===- RegatherActivations.cpp - weft-regather-activations ----------------===//
#include "dialect/AttrNames.h"
#include "dialect/WeftDialect.h"
#include "passes/Passes.h"
#include "passes/model/ReturnedLoss.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

namespace weft {
#define GEN_PASS_DEF_WEFTREGATHERACTIVATIONS
#include "passes/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {
// Whether a matmul runs after the last reader of `held` before `first`.
bool matmulBetween(Operation *held, Operation *first) {
  Operation *last = held;
  for (Operation *user : held->getUsers())
    if (user->isBeforeInBlock(first) && last->isBeforeInBlock(user))
      last = user;
  for (Operation *op = last->getNextNode(); op && op != first;
       op = op->getNextNode())
    if (isa<MatmulOp>(op))
      return true;
  return false;
}

// An input gradient's matmul, or the add that sums two of them.
bool inputGradientWork(Operation *op) { return isa<MatmulOp, AddOp>(op); }

// The matmuls and adds between the regather's first reader and its last
// that read neither it nor anything made after it: under separate q, k and
// v projections (Llama's), the k and q input gradients (and their sum) that
// autodiff put between v's weight gradient and k's. Moved ahead of the
// regather, in order, so that it runs under all of them, as under
// Megatron's fused QKV GEMM; each still follows what it reads, the sums
// keep the partial results to one at a time as before, and the results are
// the same.
void hoistInputGradients(AllGatherOp again, Operation *first, Operation *last,
                         Value copy) {
  auto ready = [&](Operation *op) {
    return inputGradientWork(op) &&
           llvm::all_of(op->getOperands(), [&](Value v) {
             Operation *def = v.getDefiningOp();
             return v != copy && (!def || def->isBeforeInBlock(again));
           });
  };
  for (Operation *op = first->getNextNode(); op && op != last;) {
    Operation *next = op->getNextNode();
    if (ready(op))
      op->moveBefore(again);
    op = next;
  }
  // The adds right after the last reader that sum hoisted input gradients
  // come too: one partial sum is held through the weight gradients, not
  // one per projection.
  for (Operation *op = last->getNextNode(); op && isa<AddOp>(op);) {
    Operation *next = op->getNextNode();
    if (ready(op))
      op->moveBefore(again);
    op = next;
  }
}

// The first of the input gradients' matmuls (and sums) right before `again`
// (a regather placed right before its first reader), with only views and
// casts between them; null where no matmul is among them, or where another
// op kind, the loss or the gathered value's maker comes first. An
// activation's gather started there overlaps them (Megatron's input
// gradient GEMM) as its asynchronous collective.
Operation *overlapStart(AllGatherOp again, Operation *lossOp) {
  Operation *src = again.getX().getDefiningOp();
  Operation *start = nullptr;
  bool matmul = false;
  for (Operation *op = again->getPrevNode(); op && op != lossOp && op != src;
       op = op->getPrevNode()) {
    if (inputGradientWork(op)) {
      start = op;
      matmul |= isa<MatmulOp>(op);
    } else if (!isa<CastOp, ReshapeOp, TransposeOp>(op)) {
      break;
    }
  }
  return matmul ? start : nullptr;
}

struct RegatherActivations
    : weft::impl::WeftRegatherActivationsBase<RegatherActivations> {
  using WeftRegatherActivationsBase::WeftRegatherActivationsBase;

  void runOnOperation() override {
    // The forward ends with the loss; a forward-only function has no
    // backward.
    Operation *lossOp = weft::lossOp(getOperation());
    if (!lossOp)
      return;
    SmallVector<AllGatherOp> gathers;
    for (Operation &op : *lossOp->getBlock()) {
      if (&op == lossOp)
        break;
      if (auto g = dyn_cast<AllGatherOp>(op))
        gathers.push_back(g);
    }
    for (AllGatherOp g : gathers) {
      // What the readers read: the gathered copy, or its one cast (a bf16
      // program computes on a bf16 copy of a gathered parameter).
      Operation *held = g;
      if (g->hasOneUse())
        if (auto c = dyn_cast<CastOp>(*g->getUsers().begin()))
          held = c;
      Value src = g.getX();
      while (auto c = src.getDefiningOp<CastOp>())
        src = c->getOperand(0);
      // An activation's, or with `parameters` a parameter's (ZeRO-3,
      // gathered per micro-batch); not one made once per step.
      const bool param = bool(src.getDefiningOp<ParamOp>());
      if (g->hasAttr(weft::attrname::kFragment) ||
          (param ? !parameters : g->hasAttr(weft::attrname::kAsync)))
        continue;
      // Read by the forward, and in the backward by matmuls alone (another
      // backward reader would keep the gathered copy anyway).
      SmallVector<OpOperand *> backward;
      bool forward = false, other = false;
      for (OpOperand &use : held->getUses()) {
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
      // A parameter is gathered again only where its copy would be held
      // across other matmuls: the head's, read by the forward right before
      // the loss and by the backward right after, is kept.
      if (param && !matmulBetween(held, first))
        continue;
      OpBuilder b(first);
      auto again = cast<AllGatherOp>(b.clone(*g));
      again->setAttr(weft::attrname::kRegather, b.getUnitAttr());
      Value copy = again.getResult();
      if (held != g.getOperation()) {
        IRMapping map;
        map.map(g.getResult(), copy);
        copy = b.clone(*held, map)->getResult(0);
      }
      Operation *last = first;
      for (OpOperand *use : backward) {
        use->set(copy);
        if (last->isBeforeInBlock(use->getOwner()))
          last = use->getOwner();
      }
      // An activation's second gather starts before the input gradients'
      // matmuls ahead of its readers and completes at the first of them, as
      // Megatron overlaps it with the input gradient's GEMM. A parameter's
      // is weft-prefetch-params' to start early.
      if (param)
        continue;
      hoistInputGradients(again, first, last, copy);
      if (Operation *start = overlapStart(again, lossOp)) {
        again->moveBefore(start);
        again->setAttr(weft::attrname::kAsync, b.getUnitAttr());
      }
    }
  }
};
} // namespace
