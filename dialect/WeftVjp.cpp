//===- WeftVjp.cpp - vector-Jacobian products of the forward ops ----------===//
//
// The autodiff pass calls these in reverse program order. Each appends one
// gradient per operand (null where an operand has none, e.g. integer ids).
// Single-result ops are only asked when their result reaches the loss, so their
// `resultGrads[0]` is never null.
//
//===----------------------------------------------------------------------===//
#include "dialect/WeftDialect.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace weft;

LogicalResult EmbeddingOp::buildVjp(OpBuilder &b, ArrayRef<Value> dys,
                                    SmallVectorImpl<Value> &grads) {
  int64_t vocab = getTable().getType().getDimSize(0);
  grads.push_back(
      EmbeddingGradOp::create(b, getLoc(), dys[0], getIds(), vocab));
  grads.push_back(nullptr);
  return success();
}

LogicalResult PositionEmbeddingOp::buildVjp(OpBuilder &b, ArrayRef<Value> dys,
                                            SmallVectorImpl<Value> &grads) {
  int64_t positions = getTable().getType().getDimSize(0);
  grads.push_back(dys[0]);
  grads.push_back(PositionEmbeddingGradOp::create(b, getLoc(), dys[0],
                                                  positions, getTokenTypes()));
  return success();
}

// c = op(a) op(b) on the 2-D views. With dc the gradient of c:
//   da = dc op(b)^T            (a not transposed: keeps a's batch dims)
//   da = op(b) dc^T            (a transposed)
//   db = op(a)^T dc            (b not transposed)
//   db = dc^T op(a)            (b transposed)
LogicalResult MatmulOp::buildVjp(OpBuilder &b, ArrayRef<Value> dys,
                                 SmallVectorImpl<Value> &grads) {
  if (getBias())
    return emitOpError("has a fused bias (weft-fuse-bias), which runs after "
                       "autodiff: differentiate the matmul and its bias_add");
  Value dc = dys[0];
  bool ta = getTransposeA(), tb = getTransposeB();
  Location loc = getLoc();
  Value da = ta ? MatmulOp::create(b, loc, getB(), dc, tb, true).getResult()
                : MatmulOp::create(b, loc, dc, getB(), false, !tb).getResult();
  Value db = tb ? MatmulOp::create(b, loc, dc, getA(), true, ta).getResult()
                : MatmulOp::create(b, loc, getA(), dc, !ta, false).getResult();
  grads.append({da, db});
  return success();
}

LogicalResult BiasAddOp::buildVjp(OpBuilder &b, ArrayRef<Value> dys,
                                  SmallVectorImpl<Value> &grads) {
  grads.push_back(dys[0]);
  grads.push_back(ReduceRowsOp::create(b, getLoc(), dys[0]));
  return success();
}

LogicalResult AddRowOp::buildVjp(OpBuilder &b, ArrayRef<Value> dys,
                                 SmallVectorImpl<Value> &grads) {
  grads.push_back(dys[0]);
  Value sum = ReduceRowsOp::create(b, getLoc(), dys[0]);
  int64_t rows = cast<RankedTensorType>(getTable().getType()).getShape()[0];
  grads.push_back(RowGradOp::create(b, getLoc(), sum, getRowAttr(),
                                    b.getI64IntegerAttr(rows)));
  return success();
}

LogicalResult AddOp::buildVjp(OpBuilder &, ArrayRef<Value> dys,
                              SmallVectorImpl<Value> &grads) {
  grads.append({dys[0], dys[0]});
  return success();
}

LogicalResult MulOp::buildVjp(OpBuilder &b, ArrayRef<Value> dys,
                              SmallVectorImpl<Value> &grads) {
  grads.push_back(MulOp::create(b, getLoc(), dys[0], getRhs()));
  grads.push_back(MulOp::create(b, getLoc(), dys[0], getLhs()));
  return success();
}

LogicalResult SplitOp::buildVjp(OpBuilder &b, ArrayRef<Value> dys,
                                SmallVectorImpl<Value> &grads) {
  SmallVector<Value> parts;
  for (auto [dy, result] : llvm::zip(dys, getResults()))
    parts.push_back(dy ? dy
                       : FillOp::create(b, getLoc(), result.getType(),
                                        b.getF64FloatAttr(0.0))
                             .getResult());
  grads.push_back(ConcatOp::create(b, getLoc(), parts));
  return success();
}

LogicalResult ConcatOp::buildVjp(OpBuilder &b, ArrayRef<Value> dys,
                                 SmallVectorImpl<Value> &grads) {
  SmallVector<int64_t> sizes;
  for (Value in : getInputs())
    sizes.push_back(cast<RankedTensorType>(in.getType()).getShape().back());
  auto split = SplitOp::create(b, getLoc(), dys[0], sizes);
  grads.append(split.getResults().begin(), split.getResults().end());
  return success();
}

LogicalResult LayerNormOp::buildVjp(OpBuilder &b, ArrayRef<Value> dys,
                                    SmallVectorImpl<Value> &grads) {
  auto g = LayerNormGradOp::create(b, getLoc(), dys[0], getX(), getGamma(),
                                   getEpsAttr());
  grads.append({g.getDx(), g.getDgamma(), g.getDbeta()});
  return success();
}

LogicalResult RmsNormOp::buildVjp(OpBuilder &b, ArrayRef<Value> dys,
                                  SmallVectorImpl<Value> &grads) {
  auto g = RmsNormGradOp::create(b, getLoc(), dys[0], getX(), getGamma(),
                                 getEpsAttr());
  grads.append({g.getDx(), g.getDgamma()});
  return success();
}

LogicalResult ActOp::buildVjp(OpBuilder &b, ArrayRef<Value> dys,
                              SmallVectorImpl<Value> &grads) {
  grads.push_back(
      ActGradOp::create(b, getLoc(), dys[0], getX(), getKindAttr()));
  return success();
}

// The gradient of a cast is the cast back: a bf16 copy's gradient reaches
// its f32 parameter as f32.
LogicalResult CastOp::buildVjp(OpBuilder &b, ArrayRef<Value> dys,
                               SmallVectorImpl<Value> &grads) {
  grads.push_back(
      CastOp::create(b, getLoc(), getX().getType(), dys[0]).getResult());
  return success();
}

LogicalResult GeluOp::buildVjp(OpBuilder &b, ArrayRef<Value> dys,
                               SmallVectorImpl<Value> &grads) {
  grads.push_back(GeluGradOp::create(b, getLoc(), dys[0], getX()));
  return success();
}

// The same mask, scaled the same: the op itself on dy.
LogicalResult DropoutOp::buildVjp(OpBuilder &b, ArrayRef<Value> dys,
                                  SmallVectorImpl<Value> &grads) {
  grads.push_back(DropoutOp::create(b, getLoc(), dys[0], getPAttr(),
                                    getSiteAttr(), ArrayAttr()));
  return success();
}

LogicalResult SiluOp::buildVjp(OpBuilder &b, ArrayRef<Value> dys,
                               SmallVectorImpl<Value> &grads) {
  grads.push_back(SiluGradOp::create(b, getLoc(), dys[0], getX()));
  return success();
}

LogicalResult SwigluOp::buildVjp(OpBuilder &b, ArrayRef<Value> dys,
                                 SmallVectorImpl<Value> &grads) {
  auto g = SwigluGradOp::create(b, getLoc(), dys[0], getGate(), getUp());
  grads.append({g.getDgate(), g.getDup()});
  return success();
}

LogicalResult RopeOp::buildVjp(OpBuilder &b, ArrayRef<Value> dys,
                               SmallVectorImpl<Value> &grads) {
  // scale * R^T: the inverse rotation, scaled the same way.
  grads.push_back(RopeOp::create(b, getLoc(), dys[0], getNumHeadsAttr(),
                                 getThetaAttr(), b.getBoolAttr(!getInverse()),
                                 getInvFreqAttr(), getScaleAttr()));
  return success();
}

LogicalResult AttentionOp::buildVjp(OpBuilder &b, ArrayRef<Value> dys,
                                    SmallVectorImpl<Value> &grads) {
  auto g = AttentionGradOp::create(
      b, getLoc(), dys[0], getQ(), getK(), getV(), getNumHeadsAttr(),
      getNumKvHeadsAttr(), getScaleAttr(), getBidirectionalAttr(),
      getDropoutAttr(), getDropoutSiteAttr(), ArrayAttr(), getWindowAttr(),
      getKeyPaddingAttr());
  grads.append({g.getDq(), g.getDk(), g.getDv()});
  return success();
}

LogicalResult CrossEntropyOp::buildVjp(OpBuilder &b, ArrayRef<Value> dys,
                                       SmallVectorImpl<Value> &grads) {
  grads.push_back(
      CrossEntropyGradOp::create(b, getLoc(), getLogits(), getTargets(), dys[0],
                                 getMaskedAttr(), getClassesAttr()));
  grads.push_back(nullptr);
  return success();
}

LogicalResult MseLossOp::buildVjp(OpBuilder &b, ArrayRef<Value> dys,
                                  SmallVectorImpl<Value> &grads) {
  grads.push_back(
      MseLossGradOp::create(b, getLoc(), getPred(), getTarget(), dys[0]));
  grads.push_back(nullptr); // the targets are data
  return success();
}

LogicalResult ShardOp::buildVjp(OpBuilder &b, ArrayRef<Value> dys,
                                SmallVectorImpl<Value> &grads) {
  grads.push_back(ShardOp::create(b, getLoc(), dys[0], getShardingAttr()));
  return success();
}
