//===- WeftGenericOps.cpp - the generic path's shape rules, factors, VJPs -===//
//
// The ops of WeftGenericOps.td in one place: how their shapes relate (the
// verifier or inferred type), how their dims shard (factors, as in
// WeftShardingRules.cpp) and their vector-Jacobian products.
//
//===----------------------------------------------------------------------===//
#include "dialect/WeftDialect.h"
#include "program/Broadcast.h"
#include "program/Pointwise.h"
#include "program/ShapeString.h"

#include "mlir/IR/Builders.h"

#include <cmath>
#include <optional>
#include <string>

using namespace mlir;
using namespace weft;

namespace {
using Dims = SmallVector<int64_t>;

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }
ArrayRef<int64_t> shapeOf(Value v) { return typeOf(v).getShape(); }

std::string shapeStr(ArrayRef<int64_t> shape) {
  return weft::shapeString(shape.data(), shape.size(), /*Spaced=*/true);
}

// NumPy's broadcast of two shapes (program/Broadcast.h).
std::optional<Dims> broadcastShape(ArrayRef<int64_t> a, ArrayRef<int64_t> b) {
  std::vector<int64_t> out;
  if (!broadcastShapes({a.begin(), a.end()}, {b.begin(), b.end()}, out))
    return std::nullopt;
  return Dims(out.begin(), out.end());
}

// Whether `from` broadcasts to exactly `to`.
bool broadcastsTo(ArrayRef<int64_t> from, ArrayRef<int64_t> to) {
  return weft::broadcastsTo({from.begin(), from.end()}, {to.begin(), to.end()});
}

// The factors of a shape that broadcasts to one with factors `full`: a
// stretched dim (1 against more) has none.
Dims broadcastFactors(ArrayRef<int64_t> shape, ArrayRef<int64_t> fullShape,
                      ArrayRef<int64_t> full) {
  Dims dims;
  size_t lead = fullShape.size() - shape.size();
  for (size_t i = 0; i < shape.size(); ++i)
    dims.push_back(shape[i] == fullShape[lead + i] ? full[lead + i]
                                                   : ShardingRule::kNone);
  return dims;
}

Dims fresh(ShardingRule &r, ArrayRef<int64_t> shape, bool pinned = false) {
  Dims dims;
  for (int64_t size : shape)
    dims.push_back(r.addFactor(size, pinned));
  return dims;
}

LogicalResult checkPointwise(Operation *op, StringRef fnName,
                             FloatAttr scalarAttr) {
  std::optional<double> scalar;
  if (scalarAttr)
    scalar = scalarAttr.getValueAsDouble();
  PointwiseFn fn;
  if (!parsePointwiseFn(fnName.str(), fn))
    return op->emitOpError("fn '")
           << fnName << "' is not one of " << pointwiseList();
  if (takesScalar(fn) != scalar.has_value())
    return op->emitOpError("fn '")
           << fnName << "' " << (takesScalar(fn) ? "needs" : "takes no")
           << " scalar";
  if (scalar && !std::isfinite(*scalar))
    return op->emitOpError("scalar ") << *scalar << " must be finite";
  return success();
}

LogicalResult checkBinaryFn(std::optional<Location> loc, StringRef fnName) {
  BinaryFn fn;
  if (!parseBinaryFn(fnName.str(), fn))
    return emitOptionalError(loc, "fn '", fnName, "' is not one of ",
                             binaryList());
  return success();
}

LogicalResult inferBroadcast(std::optional<Location> loc, Value lhs, Value rhs,
                             Dims &shape) {
  if (typeOf(lhs).getElementType() != typeOf(rhs).getElementType())
    return emitOptionalError(loc, "operands mix element types ",
                             typeOf(lhs).getElementType(), " and ",
                             typeOf(rhs).getElementType());
  auto b = broadcastShape(shapeOf(lhs), shapeOf(rhs));
  if (!b)
    return emitOptionalError(loc, "lhs ", shapeStr(shapeOf(lhs)), " and rhs ",
                             shapeStr(shapeOf(rhs)), " do not broadcast");
  shape = *b;
  return success();
}

LogicalResult checkSameElement(Operation *op, unsigned operand = 0) {
  if (typeOf(op->getOperand(operand)).getElementType() !=
      typeOf(op->getResult(0)).getElementType())
    return op->emitOpError("changes the element type from ")
           << typeOf(op->getOperand(operand)).getElementType() << " to "
           << typeOf(op->getResult(0)).getElementType();
  return success();
}
} // namespace

//===----------------------------------------------------------------------===//
// Shape rules
//===----------------------------------------------------------------------===//

LogicalResult PointwiseOp::verify() {
  return checkPointwise(*this, getFn(), getScalarAttr());
}

LogicalResult PointwiseGradOp::verify() {
  return checkPointwise(*this, getFn(), getScalarAttr());
}

LogicalResult BinaryOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  Dims shape;
  if (failed(inferBroadcast(loc, adaptor.getLhs(), adaptor.getRhs(), shape)))
    return failure();
  types.push_back(
      RankedTensorType::get(shape, typeOf(adaptor.getLhs()).getElementType()));
  return success();
}

LogicalResult BinaryOp::verify() { return checkBinaryFn(getLoc(), getFn()); }

LogicalResult BinaryGradOp::inferReturnTypes(MLIRContext *,
                                             std::optional<Location> loc,
                                             Adaptor adaptor,
                                             SmallVectorImpl<Type> &types) {
  Dims shape;
  if (failed(inferBroadcast(loc, adaptor.getLhs(), adaptor.getRhs(), shape)))
    return failure();
  if (shapeOf(adaptor.getDy()) != ArrayRef<int64_t>(shape))
    return emitOptionalError(loc, "dy is ", shapeStr(shapeOf(adaptor.getDy())),
                             ", expected the broadcast shape ",
                             shapeStr(shape));
  if (adaptor.getOperand() != 0 && adaptor.getOperand() != 1)
    return emitOptionalError(loc, "operand ", adaptor.getOperand(),
                             " must be 0 (lhs) or 1 (rhs)");
  types.push_back(adaptor.getOperand() == 0 ? adaptor.getLhs().getType()
                                            : adaptor.getRhs().getType());
  return success();
}

LogicalResult BinaryGradOp::verify() {
  return checkBinaryFn(getLoc(), getFn());
}

LogicalResult SelectOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  Dims shape;
  if (failed(inferBroadcast(loc, adaptor.getA(), adaptor.getB(), shape)))
    return failure();
  Type element = typeOf(adaptor.getA()).getElementType();
  if (typeOf(adaptor.getCond()).getElementType() != element)
    return emitOptionalError(loc, "cond is ",
                             typeOf(adaptor.getCond()).getElementType(),
                             ", the operands ", element);
  auto full = broadcastShape(shapeOf(adaptor.getCond()), shape);
  if (!full)
    return emitOptionalError(loc, "cond ", shapeStr(shapeOf(adaptor.getCond())),
                             " and the operands' ", shapeStr(shape),
                             " do not broadcast");
  types.push_back(RankedTensorType::get(*full, element));
  return success();
}

LogicalResult SelectGradOp::verify() {
  if (getOperand() != 0 && getOperand() != 1)
    return emitOpError("operand ") << getOperand() << " must be 0 (a) or 1 (b)";
  ArrayRef<int64_t> dy = shapeOf(getDy());
  for (auto [what, v] : {std::pair<const char *, Value>{"cond ", getCond()},
                         {"result ", getResult()}})
    if (!broadcastsTo(shapeOf(v), dy))
      return emitOpError(what) << shapeStr(shapeOf(v))
                               << " does not broadcast to dy " << shapeStr(dy);
  if (typeOf(getCond()).getElementType() != typeOf(getDy()).getElementType())
    return emitOpError("cond is ")
           << typeOf(getCond()).getElementType() << ", dy "
           << typeOf(getDy()).getElementType();
  return checkSameElement(*this, 1);
}

LogicalResult BroadcastOp::verify() {
  if (!broadcastsTo(shapeOf(getX()), shapeOf(getResult())))
    return emitOpError("x ")
           << shapeStr(shapeOf(getX())) << " does not broadcast to "
           << shapeStr(shapeOf(getResult()));
  return checkSameElement(*this);
}

LogicalResult ReduceOp::verify() {
  if (!broadcastsTo(shapeOf(getResult()), shapeOf(getX())))
    return emitOpError("result ")
           << shapeStr(shapeOf(getResult())) << " does not broadcast to x "
           << shapeStr(shapeOf(getX())) << " (reduce sums x into it)";
  return checkSameElement(*this);
}

LogicalResult ReshapeOp::verify() {
  auto x = typeOf(getX()), y = typeOf(getResult());
  if (x.getNumElements() != y.getNumElements())
    return emitOpError("x ")
           << shapeStr(x.getShape()) << " has " << x.getNumElements()
           << " elements, the result " << shapeStr(y.getShape()) << " has "
           << y.getNumElements();
  return checkSameElement(*this);
}

LogicalResult SoftmaxOp::verify() {
  if (typeOf(getX()).getRank() < 1)
    return emitOpError("needs rank >= 1: the softmax is over the last dim");
  return success();
}

LogicalResult SoftmaxGradOp::verify() {
  if (typeOf(getY()).getRank() < 1)
    return emitOpError("needs rank >= 1: the softmax is over the last dim");
  return success();
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  auto x = typeOf(adaptor.getX());
  ArrayRef<int64_t> perm = adaptor.getPerm();
  if (int64_t(perm.size()) != x.getRank())
    return emitOptionalError(loc, "perm has ", perm.size(),
                             " entries, x has rank ", x.getRank());
  SmallVector<bool> seen(perm.size(), false);
  Dims shape;
  for (auto [i, p] : llvm::enumerate(perm)) {
    if (p < 0 || p >= x.getRank() || seen[p])
      return emitOptionalError(loc, "perm[", i, "]=", p,
                               " is out of range or repeated");
    seen[p] = true;
    shape.push_back(x.getShape()[p]);
  }
  types.push_back(RankedTensorType::get(shape, x.getElementType()));
  return success();
}

LogicalResult BatchMatmulOp::inferReturnTypes(MLIRContext *,
                                              std::optional<Location> loc,
                                              Adaptor adaptor,
                                              SmallVectorImpl<Type> &types) {
  auto a = typeOf(adaptor.getA()), b = typeOf(adaptor.getB());
  if (a.getRank() < 2 || a.getRank() != b.getRank() ||
      a.getShape().drop_back(2) != b.getShape().drop_back(2))
    return emitOptionalError(loc, "a ", shapeStr(a.getShape()), " and b ",
                             shapeStr(b.getShape()),
                             " must have rank >= 2 and the same batch dims");
  if (a.getElementType() != b.getElementType())
    return emitOptionalError(loc, "operands mix element types ",
                             a.getElementType(), " and ", b.getElementType());
  int64_t r = a.getRank();
  bool ta = adaptor.getTransposeA(), tb = adaptor.getTransposeB();
  int64_t m = a.getShape()[ta ? r - 1 : r - 2];
  int64_t ka = a.getShape()[ta ? r - 2 : r - 1];
  int64_t kb = b.getShape()[tb ? r - 1 : r - 2];
  int64_t n = b.getShape()[tb ? r - 2 : r - 1];
  if (ka != kb)
    return emitOptionalError(loc, "contracting dims differ: a ",
                             shapeStr(a.getShape()), " gives K=", ka, ", b ",
                             shapeStr(b.getShape()), " gives K=", kb);
  Dims shape(a.getShape().drop_back(2));
  shape.append({m, n});
  types.push_back(RankedTensorType::get(shape, a.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Sharding rules
//===----------------------------------------------------------------------===//

ShardingRule PointwiseOp::getShardingRule() {
  ShardingRule r;
  Dims x = fresh(r, shapeOf(getX()));
  r.operands = {x};
  r.results = {x};
  return r;
}

ShardingRule PointwiseGradOp::getShardingRule() {
  ShardingRule r;
  Dims x = fresh(r, shapeOf(getX()));
  r.operands = {x, x};
  r.results = {x};
  return r;
}

// Operands and result broadcast to `full`'s shape: each dim carries full's
// factor unless it is stretched. A gradient's stretched dims are absent
// from its result: a split one leaves a partial sum.
static ShardingRule broadcastRule(ValueRange operands, Value full,
                                  Value result) {
  ShardingRule r;
  ArrayRef<int64_t> shape = shapeOf(full);
  Dims factors = fresh(r, shape);
  for (Value v : operands)
    r.operands.push_back(broadcastFactors(shapeOf(v), shape, factors));
  r.results = {broadcastFactors(shapeOf(result), shape, factors)};
  return r;
}

ShardingRule BinaryOp::getShardingRule() {
  return broadcastRule(getOperands(), getResult(), getResult());
}

ShardingRule BinaryGradOp::getShardingRule() {
  return broadcastRule(getOperands(), getDy(), getResult());
}

ShardingRule SelectOp::getShardingRule() {
  return broadcastRule(getOperands(), getResult(), getResult());
}

ShardingRule SelectGradOp::getShardingRule() {
  return broadcastRule(getOperands(), getDy(), getResult());
}

ShardingRule BroadcastOp::getShardingRule() {
  ShardingRule r;
  ArrayRef<int64_t> y = shapeOf(getResult());
  Dims full = fresh(r, y);
  r.operands = {broadcastFactors(shapeOf(getX()), y, full)};
  r.results = {full};
  return r;
}

ShardingRule ReduceOp::getShardingRule() {
  ShardingRule r;
  ArrayRef<int64_t> x = shapeOf(getX());
  Dims full = fresh(r, x);
  r.operands = {full};
  r.results = {broadcastFactors(shapeOf(getResult()), x, full)};
  return r;
}

// Equal dims at the front and at the back keep one factor; a split of either
// moves whole row-major blocks. The dims between merge or split: pinned.
ShardingRule ReshapeOp::getShardingRule() {
  ShardingRule r;
  ArrayRef<int64_t> x = shapeOf(getX()), y = shapeOf(getResult());
  size_t front = 0;
  while (front < x.size() && front < y.size() && x[front] == y[front])
    ++front;
  size_t back = 0;
  while (back < x.size() - front && back < y.size() - front &&
         x[x.size() - 1 - back] == y[y.size() - 1 - back])
    ++back;
  Dims lead = fresh(r, x.take_front(front));
  Dims midX = fresh(r, x.slice(front, x.size() - front - back), true);
  Dims midY = fresh(r, y.slice(front, y.size() - front - back), true);
  Dims tail = fresh(r, x.take_back(back));
  Dims xs(lead), ys(lead);
  xs.append(midX.begin(), midX.end());
  xs.append(tail.begin(), tail.end());
  ys.append(midY.begin(), midY.end());
  ys.append(tail.begin(), tail.end());
  r.operands = {xs};
  r.results = {ys};
  return r;
}

ShardingRule TransposeOp::getShardingRule() {
  ShardingRule r;
  Dims x = fresh(r, shapeOf(getX()));
  Dims y;
  for (int64_t p : getPerm())
    y.push_back(x[p]);
  r.operands = {x};
  r.results = {y};
  return r;
}

// [l..., N] with N pinned, for `operands` operands and one result: the
// softmax normalizes over all of N.
static ShardingRule lastDimPinned(ArrayRef<int64_t> shape, unsigned operands) {
  ShardingRule r;
  Dims dims = fresh(r, shape.drop_back());
  dims.push_back(r.addFactor(shape.back(), /*pinned=*/true));
  r.operands.assign(operands, dims);
  r.results = {dims};
  return r;
}

ShardingRule SoftmaxOp::getShardingRule() {
  return lastDimPinned(shapeOf(getX()), 1);
}

ShardingRule SoftmaxGradOp::getShardingRule() {
  return lastDimPinned(shapeOf(getY()), 2);
}

// [b..., m, k] x [b..., k, n] -> [b..., m, n]  (k!)
ShardingRule BatchMatmulOp::getShardingRule() {
  ShardingRule r;
  ArrayRef<int64_t> a = shapeOf(getA()), b = shapeOf(getB());
  size_t rank = a.size();
  bool ta = getTransposeA(), tb = getTransposeB();
  Dims batch = fresh(r, a.drop_back(2));
  int64_t m = r.addFactor(a[ta ? rank - 1 : rank - 2]);
  int64_t k = r.addFactor(a[ta ? rank - 2 : rank - 1]);
  int64_t n = r.addFactor(b[tb ? rank - 2 : rank - 1]);
  Dims da(batch), db(batch), dc(batch);
  da.append(ta ? Dims{k, m} : Dims{m, k});
  db.append(tb ? Dims{n, k} : Dims{k, n});
  dc.append({m, n});
  r.operands = {da, db};
  r.results = {dc};
  return r;
}

//===----------------------------------------------------------------------===//
// Vector-Jacobian products
//===----------------------------------------------------------------------===//

// A mask (not, isnan; eq ... or below) passes no gradient: torch's
// comparisons are not differentiated either.
LogicalResult PointwiseOp::buildVjp(OpBuilder &b, ArrayRef<Value> dys,
                                    SmallVectorImpl<Value> &grads) {
  PointwiseFn fn;
  if (parsePointwiseFn(getFn().str(), fn) && isMaskFn(fn)) {
    grads.push_back(Value());
    return success();
  }
  grads.push_back(PointwiseGradOp::create(b, getLoc(), getX(), dys[0],
                                          getFnAttr(), getScalarAttr()));
  return success();
}

LogicalResult BinaryOp::buildVjp(OpBuilder &b, ArrayRef<Value> dys,
                                 SmallVectorImpl<Value> &grads) {
  BinaryFn fn;
  if (parseBinaryFn(getFn().str(), fn) && isMaskFn(fn)) {
    grads.append(2, Value());
    return success();
  }
  for (int64_t operand : {0, 1})
    grads.push_back(BinaryGradOp::create(b, getLoc(), getLhs(), getRhs(),
                                         dys[0], getFnAttr(),
                                         b.getI64IntegerAttr(operand)));
  return success();
}

// The condition has no gradient; each operand gets dy where it was picked.
LogicalResult SelectOp::buildVjp(OpBuilder &b, ArrayRef<Value> dys,
                                 SmallVectorImpl<Value> &grads) {
  grads.push_back(Value());
  for (int64_t operand : {0, 1})
    grads.push_back(
        SelectGradOp::create(b, getLoc(), getOperand(1 + operand).getType(),
                             getCond(), dys[0], b.getI64IntegerAttr(operand)));
  return success();
}

LogicalResult BroadcastOp::buildVjp(OpBuilder &b, ArrayRef<Value> dys,
                                    SmallVectorImpl<Value> &grads) {
  grads.push_back(ReduceOp::create(b, getLoc(), getX().getType(), dys[0]));
  return success();
}

LogicalResult ReduceOp::buildVjp(OpBuilder &b, ArrayRef<Value> dys,
                                 SmallVectorImpl<Value> &grads) {
  grads.push_back(BroadcastOp::create(b, getLoc(), getX().getType(), dys[0]));
  return success();
}

LogicalResult ReshapeOp::buildVjp(OpBuilder &b, ArrayRef<Value> dys,
                                  SmallVectorImpl<Value> &grads) {
  grads.push_back(ReshapeOp::create(b, getLoc(), getX().getType(), dys[0]));
  return success();
}

LogicalResult TransposeOp::buildVjp(OpBuilder &b, ArrayRef<Value> dys,
                                    SmallVectorImpl<Value> &grads) {
  Dims inverse(getPerm().size());
  for (auto [i, p] : llvm::enumerate(getPerm()))
    inverse[p] = i;
  grads.push_back(TransposeOp::create(b, getLoc(), dys[0], inverse));
  return success();
}

LogicalResult SoftmaxOp::buildVjp(OpBuilder &b, ArrayRef<Value> dys,
                                  SmallVectorImpl<Value> &grads) {
  grads.push_back(SoftmaxGradOp::create(b, getLoc(), getResult(), dys[0]));
  return success();
}

// As MatmulOp's, per batch index.
LogicalResult BatchMatmulOp::buildVjp(OpBuilder &b, ArrayRef<Value> dys,
                                      SmallVectorImpl<Value> &grads) {
  Value dc = dys[0];
  bool ta = getTransposeA(), tb = getTransposeB();
  Location loc = getLoc();
  Value da =
      ta ? BatchMatmulOp::create(b, loc, getB(), dc, tb, true).getResult()
         : BatchMatmulOp::create(b, loc, dc, getB(), false, !tb).getResult();
  Value db =
      tb ? BatchMatmulOp::create(b, loc, dc, getA(), true, ta).getResult()
         : BatchMatmulOp::create(b, loc, getA(), dc, !ta, false).getResult();
  grads.append({da, db});
  return success();
}
