//===- PadVocab.cpp - weft-pad-vocab: a vocabulary tp divides -------------===//
//
// Megatron-LM's make-vocab-size-divisible-by, kept exact: the padding rows
// are zeros no lookup reads, the cross-entropy's `classes` keeps their
// logits outside the softmax, and `weft.logical_rows` keeps them out of
// initialisation and checkpoints (Passes.td has the whole contract).
//
//===----------------------------------------------------------------------===//
#include "dialect/AttrNames.h"
#include "dialect/WeftDialect.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace weft {
#define GEN_PASS_DEF_WEFTPADVOCAB
#include "passes/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {

RankedTensorType withLast(RankedTensorType t, int64_t dim, int64_t size) {
  SmallVector<int64_t> shape(t.getShape());
  shape[dim] = size;
  return RankedTensorType::get(shape, t.getElementType());
}

// The vocabulary's parameters of fn, their heads and the cross-entropies
// of their logits; empty when any use is one the padding cannot keep exact.
struct VocabUses {
  SmallVector<ParamOp> params;
  SmallVector<MatmulOp> heads;
  SmallVector<CrossEntropyOp> losses;
  int64_t rows = 0;
};

FailureOr<VocabUses> collect(func::FuncOp fn) {
  VocabUses u;
  fn.walk([&](ParamOp p) {
    auto role = p->getAttrOfType<TpRoleAttr>(attrname::kTpRole);
    if (role && role.getKind() == "vocab")
      u.params.push_back(p);
  });
  for (ParamOp p : u.params) {
    auto role = p->getAttrOfType<TpRoleAttr>(attrname::kTpRole);
    int64_t rows = p.getType().getShape()[0];
    if (role.getDim() != 0 || p.getType().getRank() != 2 ||
        (u.rows != 0 && u.rows != rows) || p->hasAttr(attrname::kLogicalRows))
      return failure();
    u.rows = rows;
    for (OpOperand &use : p->getUses()) {
      Operation *user = use.getOwner();
      if (isa<EmbeddingOp>(user) && use.getOperandNumber() == 0)
        continue;
      auto head = dyn_cast<MatmulOp>(user);
      // x [..., d] times the [V, d] table transposed: logits [..., V].
      if (!head || use.getOperandNumber() != 1 || !head.getTransposeB() ||
          head.getTransposeA())
        return failure();
      for (OpOperand &logits : head->getUses()) {
        auto ce = dyn_cast<CrossEntropyOp>(logits.getOwner());
        if (!ce || logits.getOperandNumber() != 0)
          return failure(); // returned logits keep their width
        u.losses.push_back(ce);
      }
      u.heads.push_back(head);
    }
  }
  return u;
}

struct PadVocab : weft::impl::WeftPadVocabBase<PadVocab> {
  using Base::Base;
  void runOnOperation() override {
    if (multiple < 1) {
      getOperation().emitError("weft-pad-vocab: multiple must be >= 1, got ")
          << multiple;
      return signalPassFailure();
    }
    for (auto fn : getOperation().getOps<func::FuncOp>()) {
      FailureOr<VocabUses> u = collect(fn);
      if (failed(u) || u->params.empty() || u->rows % multiple == 0)
        continue;
      int64_t padded = (u->rows + multiple - 1) / multiple * multiple;
      // Every shard keeps a real row: the vocab-parallel statistics of a
      // shard of padding alone would read as a masked row's.
      if (padded - u->rows >= padded / multiple)
        continue;
      Builder b(fn.getContext());
      for (ParamOp p : u->params) {
        p.getResult().setType(withLast(p.getType(), 0, padded));
        p->setAttr(attrname::kLogicalRows, b.getI64IntegerAttr(u->rows));
      }
      for (MatmulOp head : u->heads) {
        auto type = cast<RankedTensorType>(head.getType());
        head.getResult().setType(withLast(type, type.getRank() - 1, padded));
      }
      for (CrossEntropyOp ce : u->losses)
        ce.setClassesAttr(b.getI64IntegerAttr(u->rows));
    }
  }
};

} // namespace
