//===- FuseTableGrad.cpp - weft-fuse-table-grad: a tied table's gradient --===//
//
// A tied embedding's gradient is the head's weight gradient plus the
// table's scatter: `add(head, embedding_grad(dy, ids))`. The scatter's
// kernel zeroed a whole [V, D] table for the few rows the batch touches,
// and the add read both tables again. `embedding_grad(dy, ids, head)`
// writes the sum in one pass over the table, bit for bit the add's.
//
//===----------------------------------------------------------------------===//
#include "dialect/WeftDialect.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace weft {
#define GEN_PASS_DEF_WEFTFUSETABLEGRAD
#include "passes/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {
struct FuseTableGrad : weft::impl::WeftFuseTableGradBase<FuseTableGrad> {
  void runOnOperation() override {
    SmallVector<std::pair<AddOp, EmbeddingGradOp>> adds;
    getOperation().walk([&](AddOp add) {
      if (EmbeddingGradOp grad = fusable(add))
        adds.push_back({add, grad});
    });
    OpBuilder b(&getContext());
    for (auto [add, grad] : adds) {
      Value base =
          add.getLhs() == grad.getResult() ? add.getRhs() : add.getLhs();
      // At the add: the base may be made after the scatter's operands.
      b.setInsertionPoint(add);
      auto fused =
          EmbeddingGradOp::create(b, grad.getLoc(), grad.getDy(), grad.getIds(),
                                  base, grad.getVocabAttr());
      fused->setDiscardableAttrs(grad->getDiscardableAttrDictionary());
      add.getResult().replaceAllUsesWith(fused.getResult());
      add.erase();
      grad.erase();
    }
  }

  // One operand of the add is an embedding_grad's only use, the other is not
  // the same value, the two ops in one fragment and stage (equal marks), in
  // f32 or f64 (bf16 rounds where the add rounds).
  static EmbeddingGradOp fusable(AddOp add) {
    for (Value v : {add.getLhs(), add.getRhs()}) {
      auto grad = v.getDefiningOp<EmbeddingGradOp>();
      if (!grad || grad.getBase() || !v.hasOneUse() ||
          add.getLhs() == add.getRhs() || grad->getBlock() != add->getBlock())
        continue;
      Type element = cast<RankedTensorType>(add.getType()).getElementType();
      if (!element.isF32() && !element.isF64())
        continue;
      if (grad->getDiscardableAttrDictionary() ==
          add->getDiscardableAttrDictionary())
        return grad;
    }
    return nullptr;
  }
};
} // namespace
