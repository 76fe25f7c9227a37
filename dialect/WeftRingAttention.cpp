//===- WeftRingAttention.cpp - ring attention's verifiers -----------------===//
//
// The ops weft-partition makes for ring attention (docs/design.md decision
// 30): a block of queries against one block of keys, the merge of two
// blocks' softmaxes, and a block's gradient. Their shapes tie together as
// attention's do, plus the log-sum-exp [B, H, Sq].
//
//===----------------------------------------------------------------------===//
#include "dialect/WeftDialect.h"

using namespace mlir;
using namespace weft;

namespace {
ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

// q [B, Sq, H*hd], k and v [B, Sk, Hkv*hd], lse [B, H, Sq].
LogicalResult verifyBlock(Operation *op, Value q, Value k, Value v, Value lse,
                          int64_t heads, int64_t kvHeads) {
  ArrayRef<int64_t> qs = shapeOf(q), ks = shapeOf(k);
  if (qs.size() != 3 || ks.size() != 3 || shapeOf(v) != ks)
    return op->emitOpError("needs q [B, Sq, H*hd] and k, v of one shape "
                           "[B, Sk, Hkv*hd]");
  if (heads < 1 || kvHeads < 1 || heads % kvHeads != 0 || qs[2] % heads != 0)
    return op->emitOpError("num_heads=")
           << heads << " and num_kv_heads=" << kvHeads
           << " must be positive, the second dividing the first, and "
              "num_heads must divide q's "
           << qs[2] << " features";
  int64_t headDim = qs[2] / heads;
  if (ks[0] != qs[0] || ks[2] != kvHeads * headDim)
    return op->emitOpError("k is [")
           << ks[0] << ", " << ks[1] << ", " << ks[2] << "], expected ["
           << qs[0] << ", Sk, " << kvHeads * headDim << "]";
  SmallVector<int64_t> want = {qs[0], heads, qs[1]};
  if (shapeOf(lse) != ArrayRef<int64_t>(want))
    return op->emitOpError("lse must be [B, H, Sq] = [")
           << want[0] << ", " << want[1] << ", " << want[2] << "]";
  return success();
}
} // namespace

LogicalResult AttentionBlockOp::verify() {
  if (getO().getType() != getQ().getType())
    return emitOpError("o must have q's type");
  return verifyBlock(*this, getQ(), getK(), getV(), getLse(), getNumHeads(),
                     getNumKvHeads());
}

LogicalResult AttentionBlockGradOp::verify() {
  if (getDy().getType() != getQ().getType() ||
      getO().getType() != getQ().getType() ||
      getDq().getType() != getQ().getType() ||
      getDk().getType() != getK().getType() ||
      getDv().getType() != getV().getType())
    return emitOpError("dy, o and dq must have q's type, dk and dv k's");
  return verifyBlock(*this, getQ(), getK(), getV(), getLse(), getNumHeads(),
                     getNumKvHeads());
}

LogicalResult SoftmaxMergeOp::verify() {
  if (getO1().getType() != getO2().getType() ||
      getO().getType() != getO1().getType() ||
      getLse1().getType() != getLse2().getType() ||
      getLse().getType() != getLse1().getType())
    return emitOpError("both blocks and the result must have one o type and "
                       "one lse type");
  ArrayRef<int64_t> os = shapeOf(getO1()), ls = shapeOf(getLse1());
  int64_t heads = getNumHeads();
  if (os.size() != 3 || ls.size() != 3 || heads < 1 || os[2] % heads != 0 ||
      ls[0] != os[0] || ls[1] != heads || ls[2] != os[1])
    return emitOpError("needs o [B, S, H*hd] and lse [B, H, S] with H = "
                       "num_heads=")
           << heads;
  return success();
}
