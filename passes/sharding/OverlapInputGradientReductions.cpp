//===- OverlapInputGradientReductions.cpp ---------------------------------===//
//
// weft-overlap-input-gradient-reductions (Passes.td).
//
//===----------------------------------------------------------------------===//
#include "dialect/AttrNames.h"
#include "dialect/WeftDialect.h"
#include "passes/Passes.h"
#include "passes/model/ReturnedLoss.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace weft {
#define GEN_PASS_DEF_WEFTOVERLAPINPUTGRADIENTREDUCTIONS
#include "passes/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {
// The input gradient a reduction sums: the backward matmuls that make it
// and the adds that join them (Llama's q, k and v projections give three
// matmuls and two adds), into `tree`; false where the reduced value is
// something else.
bool inputGradientTree(Value v, Operation *lossOp,
                       SmallPtrSetImpl<Operation *> &tree) {
  Operation *def = v.getDefiningOp();
  if (!def || !isa<MatmulOp, AddOp>(def) || !lossOp->isBeforeInBlock(def))
    return false;
  tree.insert(def);
  if (isa<AddOp>(def))
    for (Value operand : def->getOperands())
      if (!inputGradientTree(operand, lossOp, tree))
        return false;
  return true;
}

// The weight gradients' matmuls among `tree`'s ops, before `reduce`: read by
// nothing before it, so they can run after it.
SmallVector<Operation *>
weightGradients(Operation *reduce, const SmallPtrSetImpl<Operation *> &tree) {
  Operation *first = reduce;
  for (Operation *op : tree)
    if (op->isBeforeInBlock(first))
      first = op;
  SmallVector<Operation *> later;
  for (Operation *op = first->getNextNode(); op && op != reduce;
       op = op->getNextNode())
    if (isa<MatmulOp>(op) && !tree.contains(op) &&
        llvm::all_of(op->getUsers(),
                     [&](Operation *u) { return reduce->isBeforeInBlock(u); }))
      later.push_back(op);
  return later;
}

struct OverlapInputGradientReductions
    : weft::impl::WeftOverlapInputGradientReductionsBase<
          OverlapInputGradientReductions> {
  void runOnOperation() override {
    Operation *lossOp = weft::lossOp(getOperation());
    if (!lossOp)
      return;
    // An all-reduce, or sequence parallelism's reduce-scatter.
    SmallVector<Operation *> reductions;
    for (Operation &op : *lossOp->getBlock())
      if (isa<AllReduceOp, ReduceScatterOp>(op) &&
          lossOp->isBeforeInBlock(&op) && !op.hasAttr(attrname::kAsync) &&
          !op.hasAttr(attrname::kFragment) &&
          llvm::none_of(op.getUsers(),
                        [](Operation *u) { return isa<ParamGradOp>(u); }))
        reductions.push_back(&op);
    OpBuilder b(&getContext());
    for (Operation *reduce : reductions) {
      Value reduced = reduce->getOperand(0);
      SmallPtrSet<Operation *, 8> tree;
      if (!inputGradientTree(reduced, lossOp, tree))
        continue;
      SmallVector<Operation *> later = weightGradients(reduce, tree);
      if (later.empty())
        continue; // nothing to run under it
      // The weight gradients made after the input gradient follow the
      // reduction where they are (they may read what was made after it: a
      // gathered input); those made before it, between the tree's ops, move
      // after the reduction.
      Operation *def = reduced.getDefiningOp();
      reduce->moveAfter(def);
      Operation *after = reduce;
      for (Operation *op : later)
        if (op->isBeforeInBlock(def)) {
          op->moveAfter(after);
          after = op;
        }
      reduce->setAttr(attrname::kAsync, b.getUnitAttr());
    }
  }
};
} // namespace
