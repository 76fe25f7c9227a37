//===- WeftOps.cpp - shape rules and verifiers of weft ops ----------------===//
//
// Each compute op infers its result types here; a bad operand shape is reported
// with the op's operand names, the dims involved and expected versus actual.
//
//===----------------------------------------------------------------------===//
#include "dialect/WeftDialect.h"
#include "program/Activation.h"
#include "program/ShapeString.h"

#include <cmath>

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"

#include <numeric>
#include <string>

using namespace mlir;
using namespace weft;

namespace {
RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

std::string shapeStr(ArrayRef<int64_t> shape) {
  return weft::shapeString(shape.data(), shape.size(), /*Spaced=*/true);
}

int64_t rowsOf(ArrayRef<int64_t> shape) {
  return std::accumulate(shape.begin(), shape.end() - 1, int64_t{1},
                         std::multiplies<int64_t>());
}

RankedTensorType withShape(RankedTensorType like, ArrayRef<int64_t> shape) {
  return RankedTensorType::get(shape, like.getElementType());
}

// `name` must have rank 1 and `size` elements (norm scales, biases).
LogicalResult checkVector(std::optional<Location> loc, StringRef name, Value v,
                          int64_t size) {
  auto t = typeOf(v);
  if (t.getRank() != 1 || t.getDimSize(0) != size)
    return emitOptionalError(loc, name, " must have shape [", size,
                             "] to match the last dim of x, got ",
                             shapeStr(t.getShape()));
  return success();
}

// x [..., D] with a [D] vector (a bias or a norm scale): the result has x's
// type.
LogicalResult inferWithRowVector(std::optional<Location> loc, Value x,
                                 StringRef name, Value vector,
                                 SmallVectorImpl<Type> &types) {
  auto t = typeOf(x);
  if (failed(checkVector(loc, name, vector, t.getShape().back())))
    return failure();
  types.push_back(t);
  return success();
}

LogicalResult checkSameElementType(std::optional<Location> loc, Value a,
                                   Value b) {
  if (typeOf(a).getElementType() != typeOf(b).getElementType())
    return emitOptionalError(loc, "operands mix element types ",
                             typeOf(a).getElementType(), " and ",
                             typeOf(b).getElementType());
  return success();
}

// Shared by attention and attention_grad: q [B,Sq,H*hd], k/v [B,S,Hkv*hd].
// Sq = S but on a context-parallel rank, whose queries are a block of the
// keys' sequence (Sq divides S).
LogicalResult checkAttention(std::optional<Location> loc, Value q, Value k,
                             Value v, int64_t heads, int64_t kvHeads) {
  auto qt = typeOf(q), kt = typeOf(k), vt = typeOf(v);
  if (qt.getRank() != 3 || kt.getRank() != 3 || vt.getRank() != 3)
    return emitOptionalError(loc, "q, k and v must be [batch, seq, features]");
  if (heads <= 0 || kvHeads <= 0)
    return emitOptionalError(loc, "num_heads=", heads,
                             " and num_kv_heads=", kvHeads,
                             " must be positive");
  if (heads % kvHeads != 0)
    return emitOptionalError(loc, "num_heads=", heads,
                             " is not divisible by num_kv_heads=", kvHeads);
  int64_t features = qt.getDimSize(2);
  if (features % heads != 0)
    return emitOptionalError(loc, "num_heads=", heads,
                             " does not divide q's features=", features);
  int64_t headDim = features / heads;
  for (auto [name, t] : {std::pair{"k", kt}, std::pair{"v", vt}}) {
    if (t.getDimSize(0) != qt.getDimSize(0) ||
        t.getDimSize(1) != kt.getDimSize(1) ||
        t.getDimSize(1) % qt.getDimSize(1) != 0)
      return emitOptionalError(loc, name, " has shape ", shapeStr(t.getShape()),
                               " but q has ", shapeStr(qt.getShape()),
                               ": batch must agree, and q's seq divide k's "
                               "and v's");
    if (t.getDimSize(2) != kvHeads * headDim)
      return emitOptionalError(
          loc, name, " must have num_kv_heads*head_dim=", kvHeads, "*", headDim,
          "=", kvHeads * headDim, " features, got ", t.getDimSize(2));
  }
  return success();
}
// logits [l..., Vs] against targets [l...].
LogicalResult checkLogits(std::optional<Location> loc, Value logits,
                          Value targets) {
  auto l = typeOf(logits), t = typeOf(targets);
  if (l.getRank() != t.getRank() + 1 ||
      !llvm::equal(l.getShape().drop_back(), t.getShape()))
    return emitOptionalError(loc, "logits ", shapeStr(l.getShape()),
                             " must be targets ", shapeStr(t.getShape()),
                             " plus a vocab dim");
  return success();
}

// stats [K, l..., 3] for targets [l...].
// The loss and the softmax statistics of bf16 logits are f32 (mixed
// precision: the kernels read bf16 logits and reduce in f32); otherwise the
// logits' type.
Type lossElementType(Value logits) {
  Type e = typeOf(logits).getElementType();
  return e.isBF16() ? Float32Type::get(e.getContext()) : e;
}

LogicalResult checkStats(std::optional<Location> loc, Value stats,
                         ArrayRef<int64_t> rows) {
  auto s = typeOf(stats).getShape();
  if (s.size() != rows.size() + 2 ||
      !llvm::equal(s.slice(1, rows.size()), rows) || s.back() != 3)
    return emitOptionalError(loc, "stats ", shapeStr(s),
                             " must be [K] + the targets' shape ",
                             shapeStr(rows), " + [3]");
  return success();
}
} // namespace

//===----------------------------------------------------------------------===//
// Parameters
//===----------------------------------------------------------------------===//

LogicalResult ParamOp::verify() {
  StringRef init = getInit();
  if (init != "normal" && init != "zeros" && init != "ones" && init != "loaded")
    return emitOpError("init must be normal, zeros, ones or loaded, got '")
           << init << "'";
  if (init == "normal" && !(getStd().convertToDouble() > 0))
    return emitOpError("init normal needs std > 0, got ")
           << getStd().convertToDouble();
  if (!getResult().getType().hasStaticShape())
    return emitOpError("parameter '") << getName() << "' needs a static shape";
  return success();
}

LogicalResult AdamWOp::verify() {
  if (!getParam().getDefiningOp<ParamOp>())
    return emitOpError("updates a parameter: operand 0 must be a weft.param");
  return success();
}

LogicalResult AccumulateOp::verify() {
  // The sum starts from zero once per step; an accumulator made any other
  // way would carry what it held into the next step.
  auto fill = getAcc().getDefiningOp<FillOp>();
  if (!fill || fill.getValue().convertToDouble() != 0.0)
    return emitOpError("accumulates into a value that is not a zero "
                       "weft.fill");
  return success();
}

//===----------------------------------------------------------------------===//
// Forward ops
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  auto table = typeOf(adaptor.getTable());
  if (table.getRank() != 2)
    return emitOptionalError(loc, "table must be [vocab, dim], got ",
                             shapeStr(table.getShape()));
  SmallVector<int64_t> shape(typeOf(adaptor.getIds()).getShape());
  shape.push_back(table.getDimSize(1));
  types.push_back(withShape(table, shape));
  return success();
}

LogicalResult PositionEmbeddingOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &types) {
  auto x = typeOf(adaptor.getX()), table = typeOf(adaptor.getTable());
  if (x.getRank() != 3 || table.getRank() != 2)
    return emitOptionalError(loc, "expects x [batch, seq, dim] and table "
                                  "[positions, dim]");
  if (table.getDimSize(1) != x.getDimSize(2))
    return emitOptionalError(loc, "table dim ", table.getDimSize(1),
                             " differs from x dim ", x.getDimSize(2));
  // Positions read rows [0, seq); token types any row.
  if (!adaptor.getTokenTypes() && table.getDimSize(0) < x.getDimSize(1))
    return emitOptionalError(
        loc, "seq=", x.getDimSize(1),
        " exceeds the table's positions=", table.getDimSize(0));
  if (failed(checkSameElementType(loc, adaptor.getX(), adaptor.getTable())))
    return failure();
  types.push_back(x);
  return success();
}

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  auto a = typeOf(adaptor.getA()), b = typeOf(adaptor.getB());
  if (a.getRank() < 2 || b.getRank() < 2)
    return emitOptionalError(loc, "operands must have rank >= 2, got ",
                             shapeStr(a.getShape()), " and ",
                             shapeStr(b.getShape()));
  if (failed(checkSameElementType(loc, adaptor.getA(), adaptor.getB())))
    return failure();
  bool ta = adaptor.getTransposeA(), tb = adaptor.getTransposeB();
  int64_t aRows = rowsOf(a.getShape()), aLast = a.getShape().back();
  int64_t bRows = rowsOf(b.getShape()), bLast = b.getShape().back();
  int64_t kA = ta ? aRows : aLast, kB = tb ? bLast : bRows;
  if (kA != kB)
    return emitOptionalError(
        loc, "contracting dims differ: a ", shapeStr(a.getShape()),
        " (transpose_a=", ta ? "true" : "false", ") gives K=", kA, ", b ",
        shapeStr(b.getShape()), " (transpose_b=", tb ? "true" : "false",
        ") gives K=", kB);
  SmallVector<int64_t> shape;
  if (ta)
    shape.push_back(aLast);
  else
    shape.append(a.getShape().begin(), a.getShape().end() - 1);
  shape.push_back(tb ? bRows : bLast);
  if (Value bias = adaptor.getBias()) {
    // A linear layer's bias (weft-fuse-bias), one per output column.
    auto t = typeOf(bias);
    if (ta)
      return emitOptionalError(loc, "a bias needs transpose_a=false (a "
                                    "weight gradient has none)");
    if (t.getRank() != 1 || t.getDimSize(0) != shape.back())
      return emitOptionalError(loc, "bias is ", shapeStr(t.getShape()),
                               ", expected [", shape.back(), "]");
    if (failed(checkSameElementType(loc, adaptor.getA(), bias)))
      return failure();
    // bf16 rounds the product before the bias is added: two ops.
    if (t.getElementType().isBF16())
      return emitOptionalError(loc, "a bias needs f32 or f64, got bf16 (a "
                                    "bf16 product is rounded before its "
                                    "bias_add)");
  }
  types.push_back(withShape(a, shape));
  return success();
}

LogicalResult BiasAddOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &types) {
  return inferWithRowVector(loc, adaptor.getX(), "bias", adaptor.getBias(),
                            types);
}

LogicalResult SplitOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &types) {
  auto x = typeOf(adaptor.getX());
  int64_t total = 0;
  for (auto [i, size] : llvm::enumerate(adaptor.getSizes())) {
    if (size <= 0)
      return emitOptionalError(loc, "sizes[", i, "]=", size,
                               " must be positive");
    SmallVector<int64_t> shape(x.getShape());
    shape.back() = size;
    types.push_back(withShape(x, shape));
    total += size;
  }
  if (total != x.getShape().back())
    return emitOptionalError(loc, "sizes sum to ", total,
                             " but the last dim of x is ", x.getShape().back());
  return success();
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  if (adaptor.getInputs().empty())
    return emitOptionalError(loc, "needs at least one input");
  auto first = typeOf(adaptor.getInputs().front());
  SmallVector<int64_t> shape(first.getShape());
  shape.back() = 0;
  for (auto [i, v] : llvm::enumerate(adaptor.getInputs())) {
    auto t = typeOf(v);
    if (t.getRank() != first.getRank() ||
        !llvm::equal(t.getShape().drop_back(), first.getShape().drop_back()) ||
        t.getElementType() != first.getElementType())
      return emitOptionalError(loc, "input ", i, " has type ", t,
                               ", leading dims must match input 0's ", first);
    shape.back() += t.getShape().back();
  }
  types.push_back(withShape(first, shape));
  return success();
}

LogicalResult LayerNormOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  auto x = typeOf(adaptor.getX());
  int64_t d = x.getShape().back();
  if (failed(checkVector(loc, "gamma", adaptor.getGamma(), d)) ||
      failed(checkVector(loc, "beta", adaptor.getBeta(), d)))
    return failure();
  types.push_back(x);
  return success();
}

LogicalResult RmsNormOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &types) {
  return inferWithRowVector(loc, adaptor.getX(), "gamma", adaptor.getGamma(),
                            types);
}

LogicalResult RopeOp::inferReturnTypes(MLIRContext *,
                                       std::optional<Location> loc,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &types) {
  auto x = typeOf(adaptor.getX());
  int64_t heads = adaptor.getNumHeads();
  if (x.getRank() != 3)
    return emitOptionalError(loc,
                             "x must be [batch, seq, heads*head_dim], got ",
                             shapeStr(x.getShape()));
  if (heads <= 0 || x.getDimSize(2) % heads != 0)
    return emitOptionalError(loc, "num_heads=", heads,
                             " does not divide x's features=", x.getDimSize(2));
  if ((x.getDimSize(2) / heads) % 2 != 0)
    return emitOptionalError(loc, "head_dim=", x.getDimSize(2) / heads,
                             " must be even to rotate pairs");
  if (auto freq = adaptor.getInvFreqAttr()) {
    int64_t half = x.getDimSize(2) / heads / 2;
    if (int64_t(freq.size()) != half)
      return emitOptionalError(loc, "inv_freq has ", freq.size(),
                               " entries, expected head_dim/2=", half);
    for (auto [i, f] : llvm::enumerate(freq.asArrayRef()))
      if (!std::isfinite(f) || !(f > 0))
        return emitOptionalError(loc, "inv_freq[", i, "]=", f,
                                 " must be finite and positive");
  }
  double scale = adaptor.getScale().convertToDouble();
  if (!std::isfinite(scale) || !(scale > 0))
    return emitOptionalError(loc, "scale=", scale,
                             " must be finite and positive");
  types.push_back(x);
  return success();
}

LogicalResult AttentionOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  if (failed(checkAttention(loc, adaptor.getQ(), adaptor.getK(), adaptor.getV(),
                            adaptor.getNumHeads(), adaptor.getNumKvHeads())))
    return failure();
  types.push_back(adaptor.getQ().getType());
  return success();
}

// `classes` (weft-pad-vocab): the columns that are classes; whole logits
// hold at least that many (a shard's are checked by the runtime).
static LogicalResult checkClasses(std::optional<Location> loc,
                                  std::optional<uint64_t> classes, Value logits,
                                  bool whole) {
  if (!classes)
    return success();
  int64_t n = int64_t(*classes), cols = typeOf(logits).getShape().back();
  if (n < 1)
    return emitOptionalError(loc, "classes must be >= 1, got ", n);
  if (whole && n > cols)
    return emitOptionalError(loc, "classes=", n, " exceeds the logits' ", cols,
                             " columns");
  return success();
}

LogicalResult CrossEntropyOp::inferReturnTypes(MLIRContext *,
                                               std::optional<Location> loc,
                                               Adaptor adaptor,
                                               SmallVectorImpl<Type> &types) {
  if (failed(checkLogits(loc, adaptor.getLogits(), adaptor.getTargets())) ||
      failed(checkClasses(loc, adaptor.getClasses(), adaptor.getLogits(),
                          /*whole=*/true)))
    return failure();
  types.push_back(
      RankedTensorType::get({}, lossElementType(adaptor.getLogits())));
  return success();
}

// pred and target: one shape, one float type.
static LogicalResult checkMse(std::optional<Location> loc, Value pred,
                              Value target) {
  auto p = typeOf(pred), t = typeOf(target);
  if (p != t)
    return emitOptionalError(loc, "pred ", shapeStr(p.getShape()), " of ",
                             p.getElementType(), " and target ",
                             shapeStr(t.getShape()), " of ", t.getElementType(),
                             " must have one shape and float type");
  return success();
}

LogicalResult MseLossOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &types) {
  if (failed(checkMse(loc, adaptor.getPred(), adaptor.getTarget())))
    return failure();
  types.push_back(
      RankedTensorType::get({}, typeOf(adaptor.getPred()).getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Backward ops
//===----------------------------------------------------------------------===//

LogicalResult MseLossGradOp::inferReturnTypes(MLIRContext *,
                                              std::optional<Location> loc,
                                              Adaptor adaptor,
                                              SmallVectorImpl<Type> &types) {
  if (failed(checkMse(loc, adaptor.getPred(), adaptor.getTarget())))
    return failure();
  types.push_back(adaptor.getPred().getType());
  return success();
}

LogicalResult EmbeddingGradOp::inferReturnTypes(MLIRContext *,
                                                std::optional<Location> loc,
                                                Adaptor adaptor,
                                                SmallVectorImpl<Type> &types) {
  auto dy = typeOf(adaptor.getDy());
  auto ids = typeOf(adaptor.getIds());
  if (!llvm::equal(dy.getShape().drop_back(), ids.getShape()))
    return emitOptionalError(loc, "dy ", shapeStr(dy.getShape()),
                             " must be ids ", shapeStr(ids.getShape()),
                             " plus a dim");
  auto table = withShape(dy, {adaptor.getVocab(), dy.getShape().back()});
  // The gradient it is added to (weft-fuse-table-grad): the table's type,
  // and f32 or f64 (bf16 would round the sum where a bf16 add rounds).
  if (Value base = adaptor.getBase()) {
    if (base.getType() != table)
      return emitOptionalError(loc, "base is ", base.getType(), ", expected ",
                               Type(table));
    if (table.getElementType().isBF16())
      return emitOptionalError(loc, "a base needs f32 or f64, got bf16");
  }
  types.push_back(table);
  return success();
}

LogicalResult PositionEmbeddingGradOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &types) {
  auto dy = typeOf(adaptor.getDy());
  if (dy.getRank() != 3 || adaptor.getPositions() < 1 ||
      (!adaptor.getTokenTypes() && adaptor.getPositions() < dy.getDimSize(1)))
    return emitOptionalError(loc,
                             "dy must be [batch, seq, dim] with seq <= "
                             "positions=",
                             adaptor.getPositions());
  types.push_back(withShape(dy, {adaptor.getPositions(), dy.getDimSize(2)}));
  return success();
}

LogicalResult AddRowOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  types.push_back(adaptor.getX().getType());
  return success();
}

LogicalResult AddRowOp::verify() {
  auto x = cast<RankedTensorType>(getX().getType());
  auto t = cast<RankedTensorType>(getTable().getType());
  if (t.getRank() != 2 || x.getRank() < 1 ||
      t.getShape()[1] != x.getShape().back() ||
      t.getElementType() != x.getElementType())
    return emitOpError("table ")
           << t << " must be [rows, " << x.getShape().back() << "] of " << x
           << "'s element type";
  if (int64_t(getRow()) < 0 || int64_t(getRow()) >= t.getShape()[0])
    return emitOpError("row ")
           << int64_t(getRow()) << " is outside the table's " << t.getShape()[0]
           << " rows";
  return success();
}

LogicalResult RowGradOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location>,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &types) {
  auto v = cast<RankedTensorType>(adaptor.getV().getType());
  types.push_back(withShape(v, {adaptor.getRows(), v.getShape().back()}));
  return success();
}

LogicalResult RowGradOp::verify() {
  if (cast<RankedTensorType>(getV().getType()).getRank() != 1 ||
      int64_t(getRow()) < 0 || int64_t(getRow()) >= int64_t(getRows()))
    return emitOpError("places a vector at row ")
           << int64_t(getRow()) << " of " << int64_t(getRows()) << " rows";
  return success();
}

LogicalResult ReduceRowsOp::inferReturnTypes(MLIRContext *,
                                             std::optional<Location>,
                                             Adaptor adaptor,
                                             SmallVectorImpl<Type> &types) {
  auto x = typeOf(adaptor.getX());
  types.push_back(withShape(x, {x.getShape().back()}));
  return success();
}

LogicalResult LayerNormGradOp::inferReturnTypes(MLIRContext *,
                                                std::optional<Location> loc,
                                                Adaptor adaptor,
                                                SmallVectorImpl<Type> &types) {
  auto x = typeOf(adaptor.getX());
  if (failed(
          checkVector(loc, "gamma", adaptor.getGamma(), x.getShape().back())))
    return failure();
  types.append({x, adaptor.getGamma().getType(), adaptor.getGamma().getType()});
  return success();
}

LogicalResult RmsNormGradOp::inferReturnTypes(MLIRContext *,
                                              std::optional<Location> loc,
                                              Adaptor adaptor,
                                              SmallVectorImpl<Type> &types) {
  auto x = typeOf(adaptor.getX());
  if (failed(
          checkVector(loc, "gamma", adaptor.getGamma(), x.getShape().back())))
    return failure();
  types.append({x, adaptor.getGamma().getType()});
  return success();
}

LogicalResult SwigluGradOp::inferReturnTypes(MLIRContext *,
                                             std::optional<Location> loc,
                                             Adaptor adaptor,
                                             SmallVectorImpl<Type> &types) {
  Type t = adaptor.getDy().getType();
  if (adaptor.getGate().getType() != t || adaptor.getUp().getType() != t)
    return emitOptionalError(loc, "dy, gate and up must have one type");
  types.append({t, t});
  return success();
}

LogicalResult AttentionGradOp::inferReturnTypes(MLIRContext *,
                                                std::optional<Location> loc,
                                                Adaptor adaptor,
                                                SmallVectorImpl<Type> &types) {
  if (failed(checkAttention(loc, adaptor.getQ(), adaptor.getK(), adaptor.getV(),
                            adaptor.getNumHeads(), adaptor.getNumKvHeads())))
    return failure();
  if (adaptor.getDy().getType() != adaptor.getQ().getType())
    return emitOptionalError(loc, "dy must have q's type");
  types.append({adaptor.getQ().getType(), adaptor.getK().getType(),
                adaptor.getV().getType()});
  return success();
}

LogicalResult
CrossEntropyGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                     Adaptor adaptor,
                                     SmallVectorImpl<Type> &types) {
  if (failed(checkClasses(loc, adaptor.getClasses(), adaptor.getLogits(),
                          /*whole=*/true)))
    return failure();
  types.push_back(adaptor.getLogits().getType());
  return success();
}

//===----------------------------------------------------------------------===//
// Vocab-parallel cross-entropy
//===----------------------------------------------------------------------===//

LogicalResult CrossEntropyStatsOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &types) {
  if (failed(checkLogits(loc, adaptor.getLogits(), adaptor.getTargets())) ||
      failed(checkClasses(loc, adaptor.getClasses(), adaptor.getLogits(),
                          /*whole=*/false)))
    return failure();
  SmallVector<int64_t> shape = {1};
  llvm::append_range(shape, typeOf(adaptor.getTargets()).getShape());
  shape.push_back(3);
  types.push_back(
      RankedTensorType::get(shape, lossElementType(adaptor.getLogits())));
  return success();
}

LogicalResult CrossEntropyFromStatsOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &types) {
  auto stats = typeOf(adaptor.getStats());
  if (stats.getRank() < 2 || stats.getShape().back() != 3)
    return emitOptionalError(loc, "stats ", shapeStr(stats.getShape()),
                             " must be [K, rows..., 3]");
  // I64Attr's getter is unsigned: -1 would read as 2^64-1.
  if (int64_t(adaptor.getDenominator()) < 1)
    return emitOptionalError(loc, "denominator must be positive, got ",
                             int64_t(adaptor.getDenominator()));
  types.push_back(RankedTensorType::get({}, stats.getElementType()));
  return success();
}

LogicalResult CrossEntropyStatsGradOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &types) {
  if (failed(checkLogits(loc, adaptor.getLogits(), adaptor.getTargets())) ||
      failed(checkStats(loc, adaptor.getStats(),
                        typeOf(adaptor.getTargets()).getShape())) ||
      failed(checkClasses(loc, adaptor.getClasses(), adaptor.getLogits(),
                          /*whole=*/false)))
    return failure();
  // I64Attr's getter is unsigned: -1 would read as 2^64-1.
  if (int64_t(adaptor.getDenominator()) < 1)
    return emitOptionalError(loc, "denominator must be positive, got ",
                             int64_t(adaptor.getDenominator()));
  types.push_back(adaptor.getLogits().getType());
  return success();
}

#define GET_OP_CLASSES
namespace {
LogicalResult verifyActivation(Operation *op, StringRef kind) {
  Activation act;
  if (!parseActivation(kind.str(), act))
    return op->emitOpError("unknown activation '")
           << kind << "' (expected one of " << activationList() << ")";
  return success();
}
} // namespace

LogicalResult ActOp::verify() { return verifyActivation(*this, getKind()); }

// A drop probability in (0, 1): 0 is no dropout (no op), 1 would drop all.
static LogicalResult verifyDropout(Operation *op, double p, StringRef what) {
  if (!(p > 0.0 && p < 1.0))
    return op->emitOpError() << what << " = " << p << ", expected 0 < p < 1";
  return success();
}

// dim_axes: one list of mesh axis names per dim of `x`.
static LogicalResult verifyDimAxes(Operation *op, ArrayAttr dimAxes, Value x) {
  if (!dimAxes)
    return success();
  int64_t rank = cast<RankedTensorType>(x.getType()).getRank();
  if (int64_t(dimAxes.size()) != rank)
    return op->emitOpError("dim_axes has ")
           << dimAxes.size() << " entries, expected " << rank
           << " (one per dim of " << x.getType() << ")";
  for (auto [i, axes] : llvm::enumerate(dimAxes)) {
    auto list = dyn_cast<ArrayAttr>(axes);
    if (!list ||
        !llvm::all_of(list, [](Attribute a) { return isa<StringAttr>(a); }))
      return op->emitOpError("dim_axes[")
             << i << "] = " << axes << ", expected a list of axis names";
  }
  return success();
}

LogicalResult DropoutOp::verify() {
  if (failed(verifyDropout(*this, getP().convertToDouble(), "p")))
    return failure();
  return verifyDimAxes(*this, getDimAxesAttr(), getX());
}

template <typename AttnOp>
static LogicalResult verifyAttentionDropout(AttnOp op) {
  if (auto w = op.getWindowAttr()) {
    if (w.getInt() < 1)
      return op.emitOpError("window = ") << w.getInt() << ", expected >= 1";
    if (op.getBidirectional())
      return op.emitOpError("has a window but is bidirectional: a sliding "
                            "window bounds causal attention");
  }
  if (!op.getDropoutAttr()) {
    if (op.getDropoutSiteAttr())
      return op.emitOpError("has dropout_site without dropout");
    return verifyDimAxes(op, op.getDimAxesAttr(), op.getQ());
  }
  if (failed(
          verifyDropout(op, op.getDropoutAttr().getValueAsDouble(), "dropout")))
    return failure();
  if (!op.getDropoutSiteAttr())
    return op.emitOpError("has dropout but no dropout_site");
  return verifyDimAxes(op, op.getDimAxesAttr(), op.getQ());
}

LogicalResult AttentionOp::verify() { return verifyAttentionDropout(*this); }
LogicalResult AttentionGradOp::verify() {
  return verifyAttentionDropout(*this);
}
LogicalResult ActGradOp::verify() { return verifyActivation(*this, getKind()); }

#include "dialect/WeftOps.cpp.inc"

// Only the element type changes, and it must: same shape, f32 <-> bf16 (or
// f64), never a no-op.
LogicalResult CastOp::verify() {
  auto x = cast<RankedTensorType>(getX().getType());
  auto y = cast<RankedTensorType>(getType());
  if (x.getShape() != y.getShape())
    return emitOpError("changes the shape ")
           << x << " to " << y << "; a cast only changes the element type";
  if (x.getElementType() == y.getElementType())
    return emitOpError("casts ") << x.getElementType() << " to itself";
  return success();
}

//===----------------------------------------------------------------------===//
// Imported graphs
//===----------------------------------------------------------------------===//

LogicalResult ConstantOp::inferReturnTypes(MLIRContext *,
                                           std::optional<Location>,
                                           Adaptor adaptor,
                                           SmallVectorImpl<Type> &types) {
  auto value = dyn_cast_or_null<TypedAttr>(adaptor.getValue());
  if (!value)
    return failure();
  types.push_back(value.getType());
  return success();
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

//===----------------------------------------------------------------------===//
// Norms
//===----------------------------------------------------------------------===//

namespace {
// A norm's epsilon: finite and not negative (NaN would poison every row).
template <typename Op> LogicalResult verifyEps(Op op) {
  double eps = op.getEps().convertToDouble();
  if (!(eps >= 0 && std::isfinite(eps)))
    return op.emitOpError("eps must be finite and >= 0, got ") << eps;
  return success();
}
} // namespace

LogicalResult LayerNormOp::verify() { return verifyEps(*this); }
LogicalResult RmsNormOp::verify() { return verifyEps(*this); }
