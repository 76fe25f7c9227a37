//===- RaiseOnnx.cpp - weft-raise-onnx: imported graphs to weft's ops -----===//
//
// An imported ONNX graph (frontends/onnx) is weft.onnx_node ops with static
// shapes and the constants the import folded. This pass recognises the
// subgraphs torch.onnx.export writes for a transformer and rewrites each
// into the weft op that computes the same function:
//
//   Gemm / MatMul by a matrix          -> weft.matmul (+ weft.bias_add)
//   Reshape [.., K] -> [M, K] around it -> dropped (weft.matmul keeps rows)
//   LayerNormalization (last axis)     -> weft.layer_norm
//   0.5 x (1 + tanh(c (x + 0.044715 x^3))) -> weft.gelu
//   Gather(table, ids)                 -> weft.embedding
//   x + Gather(table, arange(S))       -> weft.position_embedding
//   Split of the last dim              -> weft.split
//   softmax(q k^T * s + mask) v, the mask causal (with or without a
//   sliding window) or none, with its head reshapes and
//   transposes                         -> weft.attention
//   Add / Mul of equal shapes          -> weft.add / weft.mul
//
// A pattern fires only where the subgraph computes exactly that function
// (the mask is causal, the constants are GELU's, the views move the
// dims as the fused op reads them). A node no pattern consumes is left for
// weft-lower-onnx-generic (the generic path), which refuses what it cannot
// lower by name, op type and opset.
//
//===----------------------------------------------------------------------===//
#include "dialect/AttrNames.h"
#include "dialect/WeftDialect.h"
#include "passes/Passes.h"
#include "passes/onnx/OnnxMatch.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <array>
#include <cmath>

namespace weft {
#define GEN_PASS_DEF_WEFTRAISEONNX
#include "passes/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;
using namespace weft::onnxmatch;

namespace {

//===----------------------------------------------------------------------===//
// Patterns
//===----------------------------------------------------------------------===//

// A pattern for onnx_node ops of one type.
struct NodePattern : OpRewritePattern<OnnxNodeOp> {
  NodePattern(MLIRContext *ctx, StringRef type, PatternBenefit benefit = 1)
      : OpRewritePattern(ctx, benefit), type(type.str()) {}
  LogicalResult matchAndRewrite(OnnxNodeOp op,
                                PatternRewriter &rw) const final {
    if (op.getOpType() != type || !wellFormed(op))
      return failure();
    return raise(op, rw);
  }
  virtual LogicalResult raise(OnnxNodeOp op, PatternRewriter &rw) const = 0;
  std::string type;
};

// Identity, and Reshape / Transpose / Cast that change nothing.
struct NoOp : NodePattern {
  using NodePattern::NodePattern;
  LogicalResult raise(OnnxNodeOp op, PatternRewriter &rw) const override {
    Value x = op.getInputs().empty() ? nullptr : op.getInputs()[0];
    if (!x || op.getNumResults() != 1 ||
        x.getType() != op.getResult(0).getType())
      return failure();
    if (type == "Transpose") {
      SmallVector<int64_t> perm = permOf(op);
      if (perm.empty() && !shapeOf(x).empty())
        return failure();
      for (size_t i = 0; i < perm.size(); ++i)
        if (perm[i] != int64_t(i))
          return failure();
    }
    rw.replaceOp(op, x);
    return success();
  }
};

// Gemm(a, W, bias) with alpha = beta = 1: a linear layer.
struct Gemm : NodePattern {
  Gemm(MLIRContext *ctx) : NodePattern(ctx, "Gemm") {}
  LogicalResult raise(OnnxNodeOp op, PatternRewriter &rw) const override {
    auto in = op.getInputs();
    if (intAttr(op, "transA", 0) || floatAttr(op, "alpha", 1.0) != 1.0 ||
        floatAttr(op, "beta", 1.0) != 1.0 || !sameFloat(in))
      return failure();
    Shape out = shapeOf(op.getResult(0));
    if (out.size() != 2 || (in.size() == 3 && shapeOf(in[2]) != Shape{out[1]}))
      return failure(); // a bias of another shape
    Value y = MatmulOp::create(rw, op.getLoc(), in[0], in[1], false,
                               intAttr(op, "transB", 0) != 0);
    if (in.size() == 3)
      y = BiasAddOp::create(rw, op.getLoc(), y, in[2]);
    rw.replaceOp(op, y);
    return success();
  }
};

// MatMul(x [.., K], W [K, N]) or MatMul(x, Transpose(W [N, K])).
struct Linear : NodePattern {
  Linear(MLIRContext *ctx) : NodePattern(ctx, "MatMul") {}
  LogicalResult raise(OnnxNodeOp op, PatternRewriter &rw) const override {
    Value x = op.getInputs()[0], w = op.getInputs()[1];
    if (shapeOf(w).size() != 2 || !sameFloat({x, w}))
      return failure();
    bool transposed = false;
    if (OnnxNodeOp t = nodeOf(w, "Transpose")) {
      if (permOf(t) != SmallVector<int64_t>{1, 0})
        return failure();
      w = t.getInputs()[0];
      transposed = true;
    }
    rw.replaceOp(
        op,
        MatmulOp::create(rw, op.getLoc(), x, w, false, transposed).getResult());
    return success();
  }
};

// Reshape(rows(Reshape(y))): the flattening of y's leading dims to [M, K]
// around row-wise ops (a linear layer), undone after: the ops take y.
struct RowReshapes : NodePattern {
  RowReshapes(MLIRContext *ctx) : NodePattern(ctx, "Reshape", 2) {}
  LogicalResult raise(OnnxNodeOp op, PatternRewriter &rw) const override {
    SmallVector<Operation *> chain; // outermost first
    Value at = op.getInputs()[0];
    OnnxNodeOp inner;
    while (true) {
      Operation *def = at.getDefiningOp();
      if (!def || !at.hasOneUse())
        return failure();
      if ((inner = nodeOf(at, "Reshape")))
        break;
      if (auto m = dyn_cast<MatmulOp>(def); m && !m.getTransposeA())
        at = m.getA();
      else if (auto b = dyn_cast<BiasAddOp>(def))
        at = b.getX();
      else if (isa<GeluOp, SiluOp, ActOp>(def))
        at = def->getOperand(0);
      else
        return failure();
      chain.push_back(def);
    }
    if (chain.empty())
      return failure();
    Value y = inner.getInputs()[0];
    Shape ys = shapeOf(y), flat = shapeOf(inner.getResult(0)),
          out = shapeOf(op.getResult(0)),
          rows = shapeOf(chain.front()->getResult(0));
    if (ys.size() < 2 || flat.size() != 2 || flat.back() != ys.back() ||
        out.size() != ys.size() || out.back() != rows.back() ||
        !std::equal(ys.begin(), ys.end() - 1, out.begin()))
      return failure();
    Value v = y;
    for (Operation *def : llvm::reverse(chain)) {
      Location loc = def->getLoc();
      if (auto m = dyn_cast<MatmulOp>(def))
        v = MatmulOp::create(rw, loc, v, m.getB(), false, m.getTransposeB());
      else if (auto b = dyn_cast<BiasAddOp>(def))
        v = BiasAddOp::create(rw, loc, v, b.getBias());
      else if (isa<GeluOp>(def))
        v = GeluOp::create(rw, loc, v);
      else if (isa<SiluOp>(def))
        v = SiluOp::create(rw, loc, v);
      else
        v = ActOp::create(rw, loc, v, cast<ActOp>(def).getKindAttr());
    }
    rw.replaceOp(op, v);
    return success();
  }
};

// x [.., N] + b [N] (a linear layer's bias after a MatMul: Qwen2's QKV).
struct BiasAdd : NodePattern {
  BiasAdd(MLIRContext *ctx) : NodePattern(ctx, "Add", 2) {}
  LogicalResult raise(OnnxNodeOp op, PatternRewriter &rw) const override {
    for (int side = 0; side < 2; ++side) {
      Value x = op.getInputs()[side], b = op.getInputs()[1 - side];
      Shape xs = shapeOf(x);
      if (xs.empty() || !b.getDefiningOp<ParamOp>() ||
          shapeOf(b) != Shape{xs.back()} || !isFloat(x) ||
          x.getType() != op.getResult(0).getType())
        continue;
      rw.replaceOp(op, BiasAddOp::create(rw, op.getLoc(), x, b).getResult());
      return success();
    }
    return failure();
  }
};

// LayerNormalization over the last axis, with scale and bias.
struct LayerNorm : NodePattern {
  LayerNorm(MLIRContext *ctx) : NodePattern(ctx, "LayerNormalization") {}
  LogicalResult raise(OnnxNodeOp op, PatternRewriter &rw) const override {
    auto in = op.getInputs();
    int64_t rank = shapeOf(in[0]).size(), axis = intAttr(op, "axis", -1);
    if (in.size() != 3 || (axis != -1 && axis != rank - 1) || rank == 0 ||
        shapeOf(in[1]) != Shape{shapeOf(in[0]).back()} ||
        shapeOf(in[2]) != shapeOf(in[1]))
      return failure();
    double eps = floatAttr(op, "epsilon", 1e-5);
    if (!(eps >= 0 && std::isfinite(eps))) // NaN or inf: no norm at all
      return failure();
    // Its Mean and InvStdDev, if read, need the generic path.
    for (unsigned i = 1; i < op.getNumResults(); ++i)
      if (!op.getResult(i).use_empty())
        return failure();
    rw.replaceAllUsesWith(op.getResult(0),
                          LayerNormOp::create(rw, op.getLoc(), in[0], in[1],
                                              in[2], rw.getF64FloatAttr(eps))
                              .getResult());
    rw.eraseOp(op);
    return success();
  }
};

// GPT-2's gelu_new: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
struct GeluTanh : NodePattern {
  GeluTanh(MLIRContext *ctx) : NodePattern(ctx, "Mul", 3) {}
  LogicalResult raise(OnnxNodeOp op, PatternRewriter &rw) const override {
    // One factor is 0.5 x (as Mul(x, 0.5), or x times Mul(.., 0.5) below),
    // the other 1 + tanh(..).
    for (int half = 0; half < 2; ++half) {
      OnnxNodeOp halfX = nodeOf(op.getInputs()[half], "Mul");
      OnnxNodeOp onePlus = nodeOf(op.getInputs()[1 - half], "Add");
      if (!halfX || !onePlus)
        continue;
      Value x = otherOperand(halfX, [](Value c) { return isConstant(c, 0.5); });
      Value tanhV =
          otherOperand(onePlus, [](Value c) { return isConstant(c, 1.0); });
      // x must have the product's type (a constant of a larger shape
      // would broadcast it).
      if (!x || !tanhV || x.getType() != op.getResult(0).getType() ||
          !matchesInner(tanhV, x))
        continue;
      rw.replaceOp(op, GeluOp::create(rw, op.getLoc(), x).getResult());
      return success();
    }
    return failure();
  }
  // tanh(c (x + 0.044715 x^3)), c = sqrt(2/pi).
  static bool matchesInner(Value t, Value x) {
    OnnxNodeOp tanhOp = nodeOf(t, "Tanh");
    if (!tanhOp)
      return false;
    OnnxNodeOp scaled = nodeOf(tanhOp.getInputs()[0], "Mul");
    Value sum = otherOperand(
        scaled, [](Value c) { return isConstant(c, std::sqrt(2.0 / M_PI)); });
    OnnxNodeOp add = nodeOf(sum, "Add");
    Value cube = otherOperand(add, [&](Value v) { return v == x; });
    OnnxNodeOp mul = nodeOf(cube, "Mul");
    Value pow =
        otherOperand(mul, [](Value c) { return isConstant(c, 0.044715); });
    OnnxNodeOp powOp = nodeOf(pow, "Pow");
    return powOp && powOp.getInputs()[0] == x &&
           isConstant(powOp.getInputs()[1], 3.0);
  }
};

// Gather(table [V, d], ids) along axis 0: a token embedding.
struct Embedding : NodePattern {
  Embedding(MLIRContext *ctx) : NodePattern(ctx, "Gather") {}
  LogicalResult raise(OnnxNodeOp op, PatternRewriter &rw) const override {
    Value table = op.getInputs()[0], ids = op.getInputs()[1];
    auto idType = cast<RankedTensorType>(ids.getType());
    if (intAttr(op, "axis", 0) != 0 || shapeOf(table).size() != 2 ||
        !isFloat(table) || !idType.getElementType().isInteger(32) ||
        ids.getDefiningOp<ConstantOp>())
      return failure();
    rw.replaceOp(op,
                 EmbeddingOp::create(rw, op.getLoc(), table, ids).getResult());
    return success();
  }
};

// x [B, S, d] + Gather(table, [0, 1, .., S-1]): learned positions.
struct PositionEmbedding : NodePattern {
  PositionEmbedding(MLIRContext *ctx) : NodePattern(ctx, "Add", 2) {}
  LogicalResult raise(OnnxNodeOp op, PatternRewriter &rw) const override {
    Value table;
    Value x = otherOperand(op, [&](Value g) {
      OnnxNodeOp gather = nodeOf(g, "Gather");
      if (!gather || intAttr(gather, "axis", 0) != 0)
        return false;
      table = gather.getInputs()[0];
      return shapeOf(table).size() == 2 && isArange(gather.getInputs()[1]);
    });
    if (!x)
      return failure();
    Shape xs = shapeOf(x);
    if (xs.size() != 3 || xs != shapeOf(op.getResult(0)) ||
        shapeOf(table)[1] != xs[2] || shapeOf(table)[0] < xs[1] ||
        positions(op, x) != xs[1])
      return failure();
    rw.replaceOp(
        op, PositionEmbeddingOp::create(rw, op.getLoc(), x, table).getResult());
    return success();
  }
  // Whether v is the constant [0, 1, .., n-1] (as [n] or [1, n]).
  static bool isArange(Value v) {
    auto c = v.getDefiningOp<ConstantOp>();
    auto dense = c ? dyn_cast<DenseIntElementsAttr>(c.getValue()) : nullptr;
    Shape s = shapeOf(v);
    if (!dense || s.empty() || s.size() > 2 || (s.size() == 2 && s[0] != 1))
      return false;
    int64_t i = 0;
    for (const APInt &x : dense.getValues<APInt>())
      if (x.getSExtValue() != i++)
        return false;
    return true;
  }
  static int64_t positions(OnnxNodeOp add, Value x) {
    Value g = add.getInputs()[0] == x ? add.getInputs()[1] : add.getInputs()[0];
    return shapeOf(nodeOf(g, "Gather").getInputs()[1]).back();
  }
};

// x + Gather(table, ids) with constant ids that are all one row r (BERT's
// token-type embedding of the all-zero token_type_ids it buffers):
// weft.add_row. Ids that differ are refused with the node.
// x + Gather(table, token_type_ids), the ids the graph's input (a constant
// the import marked weft.token_types): BERT's segment embedding, read by
// each position's type.
struct TokenTypeEmbedding : NodePattern {
  TokenTypeEmbedding(MLIRContext *ctx) : NodePattern(ctx, "Add", 2) {}
  LogicalResult raise(OnnxNodeOp op, PatternRewriter &rw) const override {
    Value table;
    Value x = otherOperand(op, [&](Value g) {
      OnnxNodeOp gather = nodeOf(g, "Gather");
      auto ids =
          gather ? gather.getInputs()[1].getDefiningOp<ConstantOp>() : nullptr;
      if (!ids || !ids->hasAttr(attrname::kTokenTypes) ||
          intAttr(gather, "axis", 0) != 0 ||
          !gather.getInputs()[0].getDefiningOp<ParamOp>())
        return false;
      table = gather.getInputs()[0];
      return shapeOf(table).size() == 2 &&
             shapeOf(g) == shapeOf(op.getResult(0));
    });
    Shape xs = x ? shapeOf(x) : Shape();
    if (!x || xs.size() != 3 || xs != shapeOf(op.getResult(0)) ||
        shapeOf(table)[1] != xs[2])
      return failure();
    rw.replaceOp(op, PositionEmbeddingOp::create(rw, op.getLoc(), x, table,
                                                 rw.getUnitAttr())
                         .getResult());
    return success();
  }
};

struct AddRow : NodePattern {
  AddRow(MLIRContext *ctx) : NodePattern(ctx, "Add", 2) {}
  LogicalResult raise(OnnxNodeOp op, PatternRewriter &rw) const override {
    Value table;
    int64_t row = -1;
    Value x = otherOperand(op, [&](Value g) {
      OnnxNodeOp gather = nodeOf(g, "Gather");
      if (!gather || intAttr(gather, "axis", 0) != 0 ||
          shapeOf(gather.getInputs()[0]).size() != 2 ||
          !gather.getInputs()[0].getDefiningOp<ParamOp>())
        return false;
      table = gather.getInputs()[0];
      std::optional<int64_t> r = sameId(gather.getInputs()[1]);
      row = r.value_or(-1);
      return r.has_value() && shapeOf(g) == shapeOf(op.getResult(0));
    });
    if (!x || shapeOf(x) != shapeOf(op.getResult(0)) || row < 0 ||
        row >= shapeOf(table)[0] || shapeOf(table)[1] != shapeOf(x).back())
      return failure();
    rw.replaceOp(op, AddRowOp::create(rw, op.getLoc(), x, table,
                                      rw.getI64IntegerAttr(row))
                         .getResult());
    return success();
  }
  // The one id a constant index tensor holds everywhere (not the graph's
  // token_type_ids, which the import marks and are the step's).
  static std::optional<int64_t> sameId(Value v) {
    auto c = v.getDefiningOp<ConstantOp>();
    auto dense = c && !c->hasAttr(attrname::kTokenTypes)
                     ? dyn_cast<DenseIntElementsAttr>(c.getValue())
                     : nullptr;
    if (!dense || dense.getNumElements() == 0)
      return std::nullopt;
    if (dense.isSplat())
      return dense.getSplatValue<APInt>().getSExtValue();
    std::optional<int64_t> id;
    for (const APInt &x : dense.getValues<APInt>())
      if (id && *id != x.getSExtValue())
        return std::nullopt;
      else
        id = x.getSExtValue();
    return id;
  }
};

// Split of the last dim (SplitToSequence is imported as Split).
struct Split : NodePattern {
  Split(MLIRContext *ctx) : NodePattern(ctx, "Split") {}
  LogicalResult raise(OnnxNodeOp op, PatternRewriter &rw) const override {
    Value x = op.getInputs()[0];
    auto sizes = op.getAttrs().getAs<DenseI64ArrayAttr>("split");
    if (!sizes || !isFloat(x) ||
        intAttr(op, "axis", -1) != int64_t(shapeOf(x).size()) - 1)
      return failure();
    rw.replaceOp(op, SplitOp::create(rw, op.getLoc(), x, sizes)->getResults());
    return success();
  }
};

// The mask an attention's softmax reads: causal (else every key is
// visible), and a sliding window W (0: none) of the keys q - W < k <= q.
struct MaskKind {
  bool causal = true;
  int64_t window = 0;
  /// Each row's padding is no key (the graph's attention_mask input).
  bool keyPadding = false;
};

// Causal self-attention as torch exports scaled_dot_product_attention:
//   O = softmax(Q' K' + M) V', Q' = Q s1, K' = K^T s2 (or the scores
//   scaled), M a constant: 0 where key <= query, -inf or below -1e30
//   elsewhere; an IsNaN guard after the softmax; Q, K, V heads views of
//   [B, S, H*D] values; the result O viewed back as [B, S, H*D].
struct Attention : NodePattern {
  Attention(MLIRContext *ctx) : NodePattern(ctx, "Reshape", 3) {}
  LogicalResult raise(OnnxNodeOp op, PatternRewriter &rw) const override {
    Shape out = shapeOf(op.getResult(0));
    std::optional<View> root = traceView(op.getResult(0));
    if (out.size() != 3 || !root)
      return failure();
    if (OnnxNodeOp native = nodeOf(root->base, "Attention"))
      return raiseNative(op, native, out, *root, rw);
    OnnxNodeOp pv = nodeOf(root->base, "MatMul");
    if (!pv || shapeOf(pv.getResult(0)).size() != 4)
      return failure();
    Shape o = shapeOf(pv.getResult(0)); // [B, H, S, D]
    const int64_t heads = o[1], seq = o[2], headDim = o[3];
    if (heads < 1 || seq < 1 || headDim < 1)
      return failure();
    View want = View::of(pv.getResult(0));
    want.transpose({0, 2, 1, 3});
    if (!want.reshape(out) || !(want == *root) ||
        out != Shape{o[0], seq, heads * headDim})
      return failure();
    // P: softmax, behind an optional Where(IsNaN(P), 0, P).
    Value p = pv.getInputs()[0];
    if (OnnxNodeOp guard = nodeOf(p, "Where")) {
      OnnxNodeOp isNan = nodeOf(guard.getInputs()[0], "IsNaN");
      if (!isNan || !isConstant(guard.getInputs()[1], 0.0) ||
          isNan.getInputs()[0] != guard.getInputs()[2])
        return failure();
      p = guard.getInputs()[2];
    }
    // The last axis; before opset 13 the default axis is 1 (and softmax
    // normalizes the dims from it on, flattened: the last alone from 3).
    OnnxNodeOp softmax = nodeOf(p, "Softmax");
    const int64_t axis =
        softmax ? intAttr(softmax, "axis", softmax.getOpset() >= 13 ? -1 : 1)
                : 0;
    if (!softmax || (axis != -1 && axis != 3))
      return failure();
    double scale = 1.0;
    // The mask is what the softmax reads: a factor after it would scale
    // the mask too (and could unmask), so none is taken there.
    Value scores = softmax.getInputs()[0];
    // The mask: added (0 / -inf), or selected (Where(keep, s, -inf) or
    // Where(drop, -inf, s)); causal, or letting every query see every key
    // (an encoder's, bidirectional), or absent (bidirectional).
    MaskKind mask;
    Value qk = unmasked(scores, seq, mask);
    qk = qk ? stripScale(qk, scale) : nullptr;
    OnnxNodeOp qkOp = nodeOf(qk, "MatMul");
    if (!qkOp)
      return failure();
    Value qv = stripScale(qkOp.getInputs()[0], scale);
    Value kv = stripScale(qkOp.getInputs()[1], scale);
    return replaceWithAttention(op, rw, out, {qv, kv, pv.getInputs()[1]}, heads,
                                headDim, heads, /*keysLast=*/true, mask, scale);
  }
  // Replaces op with weft.attention of q, k, v: `views` the heads they are
  // read as ([B, H, S, D]; K's with kHeads heads, [B, H, D, S] where
  // keysLast), each a view of a [B, S, heads*D] value of the batch and
  // sequence of `out`; or fails.
  LogicalResult replaceWithAttention(OnnxNodeOp op, PatternRewriter &rw,
                                     const Shape &out,
                                     std::array<Value, 3> views, int64_t heads,
                                     int64_t headDim, int64_t kHeads,
                                     bool keysLast, const MaskKind &mask,
                                     double scale) const {
    std::optional<View> qView = traceView(views[0]),
                        kView = traceView(views[1]),
                        vView = traceView(views[2]);
    if (!qView || !kView || !vView)
      return failure();
    Value q = qView->base, k = kView->base, v = vView->base;
    // k and v of q's batch and sequence, and one element type (their
    // projections could broadcast a batch of 1).
    if (shapeOf(q) != out || shapeOf(k).size() != 3 ||
        shapeOf(k) != shapeOf(v) || shapeOf(k)[0] != out[0] ||
        shapeOf(k)[1] != out[1] || !sameFloat({q, k, v}))
      return failure();
    const int64_t kvWidth = shapeOf(k)[2];
    if (kvWidth % headDim || heads % (kvWidth / headDim))
      return failure();
    const int64_t kvHeads = kvWidth / headDim;
    if (kHeads % kvHeads || heads % kHeads)
      return failure();
    if (!(*qView == headsView(q, heads, headDim, false)) ||
        !(*kView == headsView(k, kHeads, headDim, keysLast)) ||
        !(*vView == headsView(v, kHeads, headDim, false)))
      return failure();
    // weft's default scale is 1/sqrt(D); torch's sqrt(1/sqrt(D)) on both
    // sides rounds to it within f32 rounding.
    if (!std::isfinite(scale))
      return failure();
    double standard = 1.0 / std::sqrt(double(headDim));
    FloatAttr scaleAttr = std::fabs(scale - standard) <= 1e-6 * standard
                              ? nullptr
                              : rw.getF64FloatAttr(scale);
    rw.replaceOp(
        op, AttentionOp::create(
                rw, op.getLoc(), q, k, v, rw.getI64IntegerAttr(heads),
                rw.getI64IntegerAttr(kvHeads), scaleAttr,
                mask.causal ? UnitAttr() : rw.getUnitAttr(), FloatAttr(),
                IntegerAttr(), ArrayAttr(),
                mask.window ? rw.getI64IntegerAttr(mask.window) : IntegerAttr(),
                mask.keyPadding ? rw.getUnitAttr() : UnitAttr())
                .getResult());
    return success();
  }
  // Opset 23's Attention op (torch's SDPA exported at 23): Q, K, V heads
  // views of [B, S, H*D] values as above, K not transposed; its mask an
  // input (bool: true keeps a key; float: added), is_causal a flag that
  // adds the causal triangle; Y [B, H, S, D] viewed back as [B, S, H*D].
  LogicalResult raiseNative(OnnxNodeOp op, OnnxNodeOp att, const Shape &out,
                            const View &root, PatternRewriter &rw) const {
    Shape o = shapeOf(att.getResult(0)); // [B, H, S, D]
    if (o.size() != 4 || att.getInputs().size() < 3)
      return failure();
    const int64_t heads = o[1], seq = o[2], headDim = o[3];
    View want = View::of(att.getResult(0));
    want.transpose({0, 2, 1, 3});
    if (!want.reshape(out) || !(want == root) ||
        out != Shape{o[0], seq, heads * headDim})
      return failure();
    MaskKind mask{false, 0};
    if (att.getInputs().size() > 3) {
      Value m = att.getInputs()[3];
      const bool bits = getElementTypeOrSelf(m.getType()).isInteger(1);
      const bool padded = isPadded(m);
      std::optional<MaskKind> kind =
          bits ? selectMask(m, seq, /*keepTrue=*/true, padded)
               : additiveMask(m, seq, padded);
      if (!kind)
        return failure();
      mask = *kind;
      mask.keyPadding = padded;
    }
    // is_causal adds the triangle to the mask: a window stays one.
    if (intAttr(att, "is_causal", 0))
      mask.causal = true;
    const double scale =
        floatAttr(att, "scale", 1.0 / std::sqrt(double(headDim)));
    // K and V's heads as the op takes them: repeated to H (torch's
    // repeat_kv), or fewer, which the op repeats (query head h reads key
    // head h / (H / Hkv), as weft's grouping does).
    return replaceWithAttention(
        op, rw, out,
        {att.getInputs()[0], att.getInputs()[1], att.getInputs()[2]}, heads,
        headDim, shapeOf(att.getInputs()[1])[1], /*keysLast=*/false, mask,
        scale);
  }
  // The scores before the mask the softmax reads, and which mask that is;
  // null for any other mask. A mask computed from the graph's
  // attention_mask input (a constant marked weft.if_padding) is key
  // padding over the mask it is when every key is a token, and may wrap
  // another (GPT-2's eager attention adds it to the causal Where).
  static Value unmasked(Value scores, int64_t seq, MaskKind &mask) {
    if (OnnxNodeOp add = nodeOf(scores, "Add"))
      for (int side = 0; side < 2; ++side) {
        Value m = add.getInputs()[side], rest = add.getInputs()[1 - side];
        if (isPadded(m))
          return paddedOver(additiveMask(m, seq, /*ifPadding=*/true), rest, seq,
                            mask);
        if (std::optional<MaskKind> c = additiveMask(m, seq)) {
          mask = *c;
          return rest;
        }
      }
    if (OnnxNodeOp select = nodeOf(scores, "Where"))
      for (bool keepFirst : {true, false}) {
        Value cond = select.getInputs()[0];
        Value kept = select.getInputs()[keepFirst ? 1 : 2];
        if (!isHuge(select.getInputs()[keepFirst ? 2 : 1]))
          continue;
        if (isPadded(cond))
          return paddedOver(selectMask(cond, seq, keepFirst, true), kept, seq,
                            mask);
        if (std::optional<MaskKind> c = selectMask(cond, seq, keepFirst)) {
          mask = *c;
          return kept;
        }
      }
    // No mask at all: a scaled q k^T straight into the softmax.
    if (nodeOf(stripConstScale(scores), "MatMul")) {
      mask = MaskKind{false, 0};
      return scores;
    }
    return nullptr;
  }
  static bool isPadded(Value m) {
    auto c = m.getDefiningOp<ConstantOp>();
    return c && c->hasAttr(attrname::kIfPadding);
  }
  // Key padding (`padded`: the mask when every key is a token, if every
  // key dropped when all are padding) over the mask of `rest`.
  static Value paddedOver(std::optional<MaskKind> padded, Value rest,
                          int64_t seq, MaskKind &mask) {
    MaskKind inner;
    Value scores = padded ? unmasked(rest, seq, inner) : nullptr;
    if (!scores)
      return nullptr;
    const bool visible = !padded->causal && !padded->window,
               innerVisible = !inner.causal && !inner.window;
    if (!visible && !innerVisible &&
        (padded->causal != inner.causal || padded->window != inner.window))
      return nullptr;
    mask = visible ? inner : *padded;
    mask.keyPadding = true;
    return scores;
  }
  static Value stripConstScale(Value v) {
    double ignored = 1.0;
    return stripScale(v, ignored);
  }
  // v, with a Mul or Div by a one-element constant taken off into `scale`
  // (a [1] constant too, where it leaves the other operand's shape as is:
  // torch 2.15's SDPA export scales q and k by one).
  static bool oneElement(Value c, Value result) {
    int64_t n = 1;
    for (int64_t d : shapeOf(c))
      n *= d;
    return n == 1 && shapeOf(c).size() <= shapeOf(result).size();
  }
  static Value stripScale(Value v, double &scale) {
    if (OnnxNodeOp mul = nodeOf(v, "Mul")) {
      double s = 0;
      Value x = otherOperand(mul, [&](Value c) {
        std::optional<double> k = splat(c);
        if (!k || !oneElement(c, mul.getResult(0)))
          return false;
        s = *k;
        return true;
      });
      if (x && shapeOf(x) == shapeOf(mul.getResult(0))) {
        scale *= s;
        return x;
      }
    }
    if (OnnxNodeOp div = nodeOf(v, "Div")) {
      Value c = div.getInputs()[1], x = div.getInputs()[0];
      std::optional<double> k = splat(c);
      if (k && oneElement(c, div.getResult(0)) && *k != 0 &&
          shapeOf(x) == shapeOf(div.getResult(0))) {
        scale /= *k;
        return x;
      }
    }
    return v;
  }
  // A constant bool [.., S, S] condition of Where: true exactly where a
  // key is kept (keepTrue) or dropped (!keepTrue). Causal: kept exactly on
  // and below the diagonal (GPT-2's eager attention), or within a sliding
  // window of it (Mistral's); visible: kept everywhere (an encoder's
  // all-ones attention mask).
  static std::optional<MaskKind> selectMask(Value m, int64_t seq, bool keepTrue,
                                            bool ifPadding = false) {
    return constantMask(
        m, seq, /*additive=*/false,
        [&](double x) -> std::optional<bool> { return (x != 0) == keepTrue; },
        ifPadding);
  }
  // A constant [.., S, S] added mask: 0 where a key is kept, and where it
  // is not a value whose exp is 0 (-inf, or finfo.min as transformers
  // writes); causal (with or without a window) or visible, as selectMask.
  static std::optional<MaskKind> additiveMask(Value m, int64_t seq,
                                              bool ifPadding = false) {
    return constantMask(
        m, seq, /*additive=*/true,
        [](double x) -> std::optional<bool> {
          if (x == 0.0)
            return true;
          if (x <= -1e30)
            return false;
          return std::nullopt;
        },
        ifPadding);
  }
  // A constant's elements as doubles (bools as 0 and 1).
  static std::vector<double> elementsOf(DenseElementsAttr d) {
    std::vector<double> v;
    if (auto fp = dyn_cast_or_null<DenseFPElementsAttr>(d)) {
      v.resize(fp.getNumElements());
      allReals(fp, [&](int64_t i, double x) {
        v[i] = x;
        return true;
      });
    } else if (auto bits = dyn_cast_or_null<DenseIntElementsAttr>(d)) {
      if (bits.getElementType().isInteger(1))
        for (bool bit : bits.getValues<bool>())
          v.push_back(bit);
    }
    return v;
  }
  // Which mask the constant m [.., R, S] is (R = S, or 1: one row for every
  // query), each element kept or dropped as keepOf reads it (nullopt:
  // neither). With ifPadding, m is computed from the attention_mask input,
  // and its value when every key is padding must drop every key.
  static std::optional<MaskKind>
  constantMask(Value m, int64_t seq, bool additive,
               llvm::function_ref<std::optional<bool>(double)> keepOf,
               bool ifPadding) {
    auto c = m.getDefiningOp<ConstantOp>();
    auto dense = c ? dyn_cast<DenseElementsAttr>(c.getValue()) : nullptr;
    Shape s = shapeOf(m);
    if (!dense || s.size() < 2 || s.back() != seq ||
        (s[s.size() - 2] != seq && s[s.size() - 2] != 1) ||
        additive != isa<DenseFPElementsAttr>(dense))
      return std::nullopt;
    std::vector<double> v = elementsOf(dense);
    if (int64_t(v.size()) != dense.getNumElements())
      return std::nullopt;
    if (ifPadding) {
      std::vector<double> padded =
          elementsOf(c->getAttrOfType<DenseElementsAttr>(attrname::kIfPadding));
      if (padded.size() != v.size())
        return std::nullopt;
      for (double x : padded)
        if (keepOf(x) != std::optional<bool>(false))
          return std::nullopt;
    }
    const int64_t rows = s[s.size() - 2],
                  blocks = int64_t(v.size()) / (rows * seq);
    return maskKind(
        seq, blocks * seq * seq, [&](int64_t i) -> std::optional<bool> {
          int64_t b = i / (seq * seq), row = (i / seq) % seq;
          return keepOf(
              v[size_t((b * rows + (rows == 1 ? 0 : row)) * seq + i % seq)]);
        });
  }
  // Which mask `keep` (element i: whether key i % S is kept for query
  // (i / S) % S; nullopt where neither kept nor dropped) is, if any: the
  // same band in every [S, S] block, keys (q - W, q] (causal; W = 0: no
  // window), or every key (visible).
  static std::optional<MaskKind>
  maskKind(int64_t seq, int64_t n,
           llvm::function_ref<std::optional<bool>(int64_t)> keep) {
    // The band's width from the last query's row of the first block.
    int64_t window = 0;
    for (int64_t col = 0; col < seq; ++col) {
      std::optional<bool> k = keep((seq - 1) * seq + col);
      if (!k)
        return std::nullopt;
      if (*k) {
        window = seq - col;
        break;
      }
    }
    bool causal = true, visible = true;
    for (int64_t i = 0; i < n && (causal || visible); ++i) {
      std::optional<bool> k = keep(i);
      int64_t col = i % seq, row = (i / seq) % seq;
      causal &= k && *k == (col <= row && col > row - window);
      visible &= k && *k;
    }
    if (causal)
      return MaskKind{true, window < seq ? window : 0};
    if (visible)
      return MaskKind{false, 0};
    return std::nullopt;
  }
  // A scalar whose exp is 0 beside any score (-inf, or finfo.min).
  static bool isHuge(Value v) {
    std::optional<double> x = splat(v);
    return x && shapeOf(v).empty() && *x <= -1e30;
  }
};

// A ReduceMean of x over its last axis alone, the dim kept as 1 (the
// import's shape says which axes it reduced; the axes, an input or an
// attribute by opset, say it was the last).
bool isRowMean(OnnxNodeOp mean, Value x) {
  Shape perRow = shapeOf(x);
  if (!mean || mean.getInputs()[0] != x || perRow.empty())
    return false;
  perRow.back() = 1;
  if (shapeOf(mean.getResult(0)) != perRow)
    return false;
  const int64_t rank = shapeOf(x).size();
  std::optional<SmallVector<int64_t>> axes =
      mean.getInputs().size() > 1 ? constInts(mean.getInputs()[1])
                                  : std::nullopt;
  if (!axes)
    if (auto a = mean.getAttrs().getAs<DenseI64ArrayAttr>("axes"))
      axes = SmallVector<int64_t>(a.asArrayRef());
  return axes && axes->size() == 1 &&
         ((*axes)[0] == -1 || (*axes)[0] == rank - 1);
}

// RMSNorm as transformers writes it: w * (x * 1/sqrt(mean(x^2) + eps)).
struct RmsNorm : NodePattern {
  RmsNorm(MLIRContext *ctx) : NodePattern(ctx, "Mul", 2) {}
  LogicalResult raise(OnnxNodeOp op, PatternRewriter &rw) const override {
    for (int side = 0; side < 2; ++side) {
      Value w = op.getInputs()[side];
      OnnxNodeOp normed = nodeOf(op.getInputs()[1 - side], "Mul");
      if (!normed || shapeOf(w).size() != 1 || !isFloat(w))
        continue;
      double eps = 0;
      // 1/s as Reciprocal(s) (the dynamo exporter's) or Div(1, s) (the
      // TorchScript exporter's).
      Value x = otherOperand(normed, [&](Value r) {
        if (OnnxNodeOp recip = nodeOf(r, "Reciprocal"))
          return isRms(recip.getInputs()[0], normed, eps);
        OnnxNodeOp div = nodeOf(r, "Div");
        return div && isConstant(div.getInputs()[0], 1.0) &&
               isRms(div.getInputs()[1], normed, eps);
      });
      if (!x || shapeOf(x).empty() || shapeOf(x).back() != shapeOf(w)[0] ||
          shapeOf(x) != shapeOf(op.getResult(0)))
        continue;
      rw.replaceOp(
          op, RmsNormOp::create(rw, op.getLoc(), x, w, rw.getF64FloatAttr(eps))
                  .getResult());
      return success();
    }
    return failure();
  }
  // sqrt(ReduceMean(Pow(x, 2), last axis, keepdims) + eps), x being the
  // other operand of `normed`.
  static bool isRms(Value v, OnnxNodeOp normed, double &eps) {
    OnnxNodeOp sqrt = nodeOf(v, "Sqrt");
    OnnxNodeOp add = sqrt ? nodeOf(sqrt.getInputs()[0], "Add") : nullptr;
    OnnxNodeOp mean;
    Value epsV = otherOperand(
        add, [&](Value m) { return bool(mean = nodeOf(m, "ReduceMean")); });
    std::optional<double> e = splat(epsV);
    if (!mean || !e || shapeOf(epsV).size() > 0 ||
        intAttr(mean, "keepdims", 1) != 1)
      return false;
    OnnxNodeOp pow = nodeOf(mean.getInputs()[0], "Pow");
    if (!pow || !isConstant(pow.getInputs()[1], 2.0))
      return false;
    Value x = pow.getInputs()[0];
    if (normed.getInputs()[0] != x && normed.getInputs()[1] != x)
      return false;
    if (!isRowMean(mean, pow.getResult(0)) || !(*e >= 0 && std::isfinite(*e)))
      return false;
    eps = *e;
    return true;
  }
};

// LayerNorm written out, as exporters write it before LayerNormalization
// (opset 17): (x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps) * gamma +
// beta, over the last axis. Before BiasAdd, which would take beta's Add.
struct LayerNormWritten : NodePattern {
  LayerNormWritten(MLIRContext *ctx) : NodePattern(ctx, "Add", 3) {}
  LogicalResult raise(OnnxNodeOp op, PatternRewriter &rw) const override {
    for (int side = 0; side < 2; ++side) {
      Value beta = op.getInputs()[1 - side];
      OnnxNodeOp scaled = nodeOf(op.getInputs()[side], "Mul");
      if (!scaled)
        continue;
      for (int g = 0; g < 2; ++g) {
        Value gamma = scaled.getInputs()[g];
        OnnxNodeOp div = nodeOf(scaled.getInputs()[1 - g], "Div");
        double eps;
        Value x = div ? normalized(div, eps) : Value();
        if (!x || !isVector(gamma, x) || !isVector(beta, x) ||
            x.getType() != op.getResult(0).getType())
          continue;
        rw.replaceOp(op, LayerNormOp::create(rw, op.getLoc(), x, gamma, beta,
                                             rw.getF64FloatAttr(eps))
                             .getResult());
        return success();
      }
    }
    return failure();
  }
  // [x.back()] of x's float type.
  static bool isVector(Value v, Value x) {
    return isFloat(v) && shapeOf(v) == Shape{shapeOf(x).back()} &&
           cast<RankedTensorType>(v.getType()).getElementType() ==
               cast<RankedTensorType>(x.getType()).getElementType();
  }
  // x, where div = (x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps).
  static Value normalized(OnnxNodeOp div, double &eps) {
    OnnxNodeOp sub = nodeOf(div.getInputs()[0], "Sub");
    OnnxNodeOp sqrt = nodeOf(div.getInputs()[1], "Sqrt");
    if (!sub || !sqrt)
      return nullptr;
    Value x = sub.getInputs()[0];
    if (shapeOf(x).empty() ||
        !isRowMean(nodeOf(sub.getInputs()[1], "ReduceMean"), x))
      return nullptr;
    OnnxNodeOp add = nodeOf(sqrt.getInputs()[0], "Add");
    OnnxNodeOp var;
    Value epsV = otherOperand(
        add, [&](Value m) { return bool(var = nodeOf(m, "ReduceMean")); });
    std::optional<double> e = splat(epsV);
    if (!var || !e || !shapeOf(epsV).empty() || !(*e >= 0 && std::isfinite(*e)))
      return nullptr;
    OnnxNodeOp pow = nodeOf(var.getInputs()[0], "Pow");
    if (!pow || pow.getInputs()[0] != sub.getResult(0) ||
        !isConstant(pow.getInputs()[1], 2.0) ||
        !isRowMean(var, pow.getResult(0)))
      return nullptr;
    eps = *e;
    return x;
  }
};

// The factors of `op`, a Mul: its operands, and theirs where they are Muls
// themselves (one level), so 0.5 * (x * y) and (0.5 * x) * y read alike.
SmallVector<Value> factorsOf(OnnxNodeOp op) {
  SmallVector<Value> out;
  for (Value v : op.getInputs()) {
    if (OnnxNodeOp m = nodeOf(v, "Mul"))
      out.append(m.getInputs().begin(), m.getInputs().end());
    else
      out.push_back(v);
  }
  return out;
}

// The exact (erf) GELU: 0.5 x (1 + erf(x / sqrt(2))), the factors in any
// order and grouping; erf's argument x / sqrt(2) or x * (1 / sqrt(2)).
struct GeluErf : NodePattern {
  GeluErf(MLIRContext *ctx) : NodePattern(ctx, "Mul", 3) {}
  LogicalResult raise(OnnxNodeOp op, PatternRewriter &rw) const override {
    SmallVector<Value> f = factorsOf(op);
    if (f.size() != 3)
      return failure();
    for (int h = 0; h < 3; ++h)
      for (int e = 0; e < 3; ++e) {
        if (h == e || !isConstant(f[h], 0.5) || !shapeOf(f[h]).empty())
          continue;
        Value x = f[3 - h - e];
        Value erf = otherOperand(nodeOf(f[e], "Add"),
                                 [](Value c) { return isConstant(c, 1.0); });
        OnnxNodeOp erfOp = nodeOf(erf, "Erf");
        if (!erfOp || x.getType() != op.getResult(0).getType() ||
            !isScaledBySqrtHalf(erfOp.getInputs()[0], x))
          continue;
        rw.replaceOp(op,
                     ActOp::create(rw, op.getLoc(), x, rw.getStringAttr("gelu"))
                         .getResult());
        return success();
      }
    return failure();
  }
  static bool isScaledBySqrtHalf(Value v, Value x) {
    if (OnnxNodeOp div = nodeOf(v, "Div"))
      return div.getInputs()[0] == x &&
             isConstant(div.getInputs()[1], std::sqrt(2.0));
    return bool(otherOperand(
               nodeOf(v, "Mul"),
               [&](Value c) { return isConstant(c, std::sqrt(0.5)); })) &&
           (nodeOf(v, "Mul").getInputs()[0] == x ||
            nodeOf(v, "Mul").getInputs()[1] == x);
  }
};

// ONNX's own Gelu (opset 20): exact, or the tanh form.
struct GeluOpset20 : NodePattern {
  GeluOpset20(MLIRContext *ctx) : NodePattern(ctx, "Gelu") {}
  LogicalResult raise(OnnxNodeOp op, PatternRewriter &rw) const override {
    Value x = op.getInputs()[0];
    auto approximate = op.getAttrs().getAs<StringAttr>("approximate");
    StringRef kind = approximate ? approximate.getValue() : "none";
    if (!isFloat(x) || (kind != "none" && kind != "tanh"))
      return failure();
    Value y = kind == "tanh" ? Value(GeluOp::create(rw, op.getLoc(), x))
                             : Value(ActOp::create(rw, op.getLoc(), x,
                                                   rw.getStringAttr("gelu")));
    rw.replaceOp(op, y);
    return success();
  }
};

// quick_gelu: x * sigmoid(1.702 x).
struct QuickGelu : NodePattern {
  QuickGelu(MLIRContext *ctx) : NodePattern(ctx, "Mul", 3) {}
  LogicalResult raise(OnnxNodeOp op, PatternRewriter &rw) const override {
    for (int side = 0; side < 2; ++side) {
      Value x = op.getInputs()[side];
      OnnxNodeOp sig = nodeOf(op.getInputs()[1 - side], "Sigmoid");
      OnnxNodeOp scaled = sig ? nodeOf(sig.getInputs()[0], "Mul") : nullptr;
      Value inner =
          otherOperand(scaled, [](Value c) { return isConstant(c, 1.702); });
      if (!inner || inner != x || x.getType() != op.getResult(0).getType())
        continue;
      rw.replaceOp(
          op, ActOp::create(rw, op.getLoc(), x, rw.getStringAttr("quick_gelu"))
                  .getResult());
      return success();
    }
    return failure();
  }
};

// A lone activation node (after the subgraph patterns, which read Tanh and
// Sigmoid inside GELU and SiLU): transformers' ACT2FN kind of that name.
struct UnaryAct : NodePattern {
  UnaryAct(MLIRContext *ctx, StringRef type, StringRef kind)
      : NodePattern(ctx, type), kind(kind.str()) {}
  LogicalResult raise(OnnxNodeOp op, PatternRewriter &rw) const override {
    Value x = op.getInputs()[0];
    if (!isFloat(x) || x.getType() != op.getResult(0).getType())
      return failure();
    rw.replaceOp(
        op,
        ActOp::create(rw, op.getLoc(), x, rw.getStringAttr(kind)).getResult());
    return success();
  }
  std::string kind;
};

// x * sigmoid(x).
struct Silu : NodePattern {
  Silu(MLIRContext *ctx) : NodePattern(ctx, "Mul", 2) {}
  LogicalResult raise(OnnxNodeOp op, PatternRewriter &rw) const override {
    Value x = otherOperand(op, [&](Value s) {
      OnnxNodeOp sig = nodeOf(s, "Sigmoid");
      return sig && (sig.getInputs()[0] == op.getInputs()[0] ||
                     sig.getInputs()[0] == op.getInputs()[1]);
    });
    if (!x || nodeOf(x, "Sigmoid") ||
        nodeOf(op.getInputs()[0] == x ? op.getInputs()[1] : op.getInputs()[0],
               "Sigmoid")
                .getInputs()[0] != x)
      return failure();
    if (x.getType() != op.getResult(0).getType())
      return failure();
    rw.replaceOp(op, SiluOp::create(rw, op.getLoc(), x).getResult());
    return success();
  }
};

// silu(gate) * up: Llama's MLP.
struct Swiglu : NodePattern {
  Swiglu(MLIRContext *ctx) : NodePattern(ctx, "Mul", 2) {}
  LogicalResult raise(OnnxNodeOp op, PatternRewriter &rw) const override {
    Value gate;
    Value up = otherOperand(op, [&](Value s) {
      auto silu = s.getDefiningOp<SiluOp>();
      if (silu)
        gate = silu.getX();
      return bool(silu);
    });
    if (!up || up.getType() != gate.getType() ||
        up.getType() != op.getResult(0).getType())
      return failure();
    rw.replaceOp(op, SwigluOp::create(rw, op.getLoc(), gate, up).getResult());
    return success();
  }
};

// Rotary embedding as transformers writes it on the heads view X
// [B, H, S, D] of x [B, S, H*D]:
//   X * cos + concat(-X[.., D/2:], X[.., :D/2]) * sin
// with cos and sin folded tables [.., S, D]. It becomes weft.rope of x,
// viewed as heads again for the attention that reads it; the tables must
// be weft's rope (theta^(-2i/D), or per-pair frequencies for RoPE scaling,
// at position s, times a scale) to within the f32 rounding torch computed
// them with.
struct Rope : NodePattern {
  Rope(MLIRContext *ctx) : NodePattern(ctx, "Add", 3) {}
  LogicalResult raise(OnnxNodeOp op, PatternRewriter &rw) const override {
    for (int side = 0; side < 2; ++side) {
      OnnxNodeOp direct = nodeOf(op.getInputs()[side], "Mul");
      OnnxNodeOp rotated = nodeOf(op.getInputs()[1 - side], "Mul");
      Value cosT, sinT;
      Value x4 = otherOperand(direct, [&](Value c) {
        return bool(c.getDefiningOp<ConstantOp>()) && (cosT = c);
      });
      Value cat = otherOperand(rotated, [&](Value c) {
        return bool(c.getDefiningOp<ConstantOp>()) && (sinT = c);
      });
      if (!x4 || !cat || !isRotateHalf(cat, x4))
        continue;
      Shape xs = shapeOf(x4); // [B, H, S, D]
      std::optional<View> view = traceView(x4);
      if (xs.size() != 4 || !view || shapeOf(view->base).size() != 3)
        continue;
      const int64_t heads = xs[1], seq = xs[2], dim = xs[3];
      Value x = view->base;
      if (heads < 1 || seq < 1 || dim < 2 || shapeOf(x)[2] != heads * dim)
        continue;
      if (!(*view == headsView(x, heads, dim, false)))
        continue;
      double theta = 0, scale = 0;
      std::vector<double> invFreq;
      if (!tables(cosT, sinT, seq, dim, theta, invFreq, scale))
        continue;
      Location loc = op.getLoc();
      Value y = RopeOp::create(
          rw, loc, x, rw.getI64IntegerAttr(heads), rw.getF64FloatAttr(theta),
          rw.getBoolAttr(false),
          invFreq.empty() ? nullptr : rw.getDenseF64ArrayAttr(invFreq),
          rw.getF64FloatAttr(scale));
      // The heads view again, as onnx_node ops the attention pattern reads.
      Shape s = shapeOf(x);
      Shape split = {s[0], s[1], heads, dim};
      auto shapeType = RankedTensorType::get({4}, rw.getI64Type());
      Value target = ConstantOp::create(
          rw, loc, DenseIntElementsAttr::get(shapeType, ArrayRef(split)));
      std::string name = (op.getNode() + ".rope").str();
      auto reshaped = OnnxNodeOp::create(
          rw, loc, TypeRange{RankedTensorType::get(split, elementOf(x))},
          ValueRange{y, target}, "Reshape", name, op.getOpset(),
          rw.getDictionaryAttr({}));
      auto viewed = OnnxNodeOp::create(
          rw, loc, TypeRange{op.getResult(0).getType()},
          ValueRange{reshaped.getResult(0)}, "Transpose", name + ".heads",
          op.getOpset(),
          rw.getDictionaryAttr(
              rw.getNamedAttr("perm", rw.getDenseI64ArrayAttr({0, 2, 1, 3}))));
      rw.replaceOp(op, viewed.getResult(0));
      return success();
    }
    return failure();
  }
  static Type elementOf(Value v) {
    return cast<RankedTensorType>(v.getType()).getElementType();
  }
  // concat(-x[.., D/2:], x[.., :D/2]) along the last axis.
  static bool isRotateHalf(Value v, Value x) {
    OnnxNodeOp cat = nodeOf(v, "Concat");
    if (shapeOf(x).empty())
      return false;
    const int64_t rank = shapeOf(x).size(), half = shapeOf(x).back() / 2;
    if (!cat || cat.getInputs().size() != 2 ||
        (intAttr(cat, "axis", 0) != -1 && intAttr(cat, "axis", 0) != rank - 1))
      return false;
    OnnxNodeOp neg = nodeOf(cat.getInputs()[0], "Neg");
    return neg && isHalf(neg.getInputs()[0], x, half, false) &&
           isHalf(cat.getInputs()[1], x, half, true);
  }
  // x[.., :half] (`first`) or x[.., half:], as a Slice of the last axis.
  static bool isHalf(Value v, Value x, int64_t half, bool first) {
    OnnxNodeOp slice = nodeOf(v, "Slice");
    if (!slice || slice.getInputs()[0] != x || slice.getInputs().size() < 3)
      return false; // (before opset 10 the bounds are attributes)
    auto in = slice.getInputs();
    if (shapeOf(x).empty())
      return false;
    const int64_t rank = shapeOf(x).size(), dim = shapeOf(x).back();
    auto starts = constInts(in[1]), ends = constInts(in[2]);
    std::optional<SmallVector<int64_t>> axes =
        in.size() > 3 ? constInts(in[3]) : SmallVector<int64_t>{rank - 1};
    std::optional<SmallVector<int64_t>> steps =
        in.size() > 4 ? constInts(in[4]) : SmallVector<int64_t>{1};
    if (!starts || !ends || !axes || !steps || starts->size() != 1 ||
        ends->size() != 1 || axes->size() != 1 || steps->size() != 1 ||
        (*steps)[0] != 1 || ((*axes)[0] != -1 && (*axes)[0] != rank - 1))
      return false;
    int64_t s = (*starts)[0] < 0 ? (*starts)[0] + dim : (*starts)[0];
    int64_t e = std::min((*ends)[0] < 0 ? (*ends)[0] + dim : (*ends)[0], dim);
    return first ? s == 0 && e == half : s == half && e == dim;
  }
  // theta and scale such that the tables are scale * cos/sin(s f_i),
  // f_i = theta^(-2 (i mod D/2) / D), to torch's f32 rounding.
  static bool tables(Value cosV, Value sinV, int64_t seq, int64_t dim,
                     double &theta, std::vector<double> &invFreq,
                     double &scale) {
    auto read = [&](Value v, std::vector<double> &out) {
      auto dense = dyn_cast<DenseFPElementsAttr>(
          v.getDefiningOp<ConstantOp>().getValue());
      Shape s = shapeOf(v);
      if (!dense || s.size() < 2 || s[s.size() - 1] != dim ||
          s[s.size() - 2] != seq || dense.getNumElements() != seq * dim)
        return false; // one table, broadcast over batch and heads
      return allReals(dense, [&](int64_t, double x) {
        out.push_back(x);
        return true;
      });
    };
    std::vector<double> c, s;
    if (dim % 2 || seq < 2 || !read(cosV, c) || !read(sinV, s))
      return false;
    scale = c[0]; // cos(0) * scale
    if (!(scale > 0) || !std::isfinite(scale))
      return false;
    const int64_t half = dim / 2;
    // Each frequency from the tables: the angle at position 1, refined at
    // positions 2, 4, 8, .. (the angle there, unwrapped by the estimate so
    // far), so the estimate's error shrinks with the position.
    std::vector<double> freq(half);
    for (int64_t i = 0; i < half; ++i) {
      double f = std::atan2(s[dim + i], c[dim + i]);
      for (int64_t p = 2; p < seq; p *= 2) {
        double a = std::atan2(s[p * dim + i], c[p * dim + i]);
        double turns = std::round((double(p) * f - a) / (2 * M_PI));
        f = (a + 2 * M_PI * turns) / double(p);
      }
      if (!(f > 0))
        return false;
      freq[i] = f;
    }
    // theta^(-2i/D) when the frequencies are that (theta from f_1: published
    // thetas are integers); otherwise the table itself (RoPE scaling).
    theta = 10000.0; // any theta gives f_0 = 1; D = 2 has only f_0
    if (half >= 2) {
      theta = std::pow(freq[1], -double(dim) / 2.0);
      if (std::fabs(theta - std::round(theta)) <= 1e-3 * theta)
        theta = std::round(theta);
    }
    invFreq.clear();
    for (int64_t i = 0; i < half; ++i)
      if (std::fabs(freq[i] - std::pow(theta, -2.0 * double(i) / double(dim))) >
          1e-6 * freq[i])
        invFreq = freq;
    // Every entry, to torch's f32 rounding of the angle and of cos/sin.
    for (int64_t p = 0; p < seq; ++p)
      for (int64_t i = 0; i < dim; ++i) {
        double f = invFreq.empty()
                       ? std::pow(theta, -2.0 * double(i % half) / double(dim))
                       : invFreq[i % half];
        double a = double(p) * f, tol = 1e-6 * (1.0 + std::fabs(a)) * scale;
        if (std::fabs(c[p * dim + i] - scale * std::cos(a)) > tol ||
            std::fabs(s[p * dim + i] - scale * std::sin(a)) > tol)
          return false;
      }
    return true;
  }
};

// Add and Mul of equal shapes (residual connections, gating).
struct Elementwise : NodePattern {
  using NodePattern::NodePattern;
  LogicalResult raise(OnnxNodeOp op, PatternRewriter &rw) const override {
    Value a = op.getInputs()[0], b = op.getInputs()[1];
    if (a.getType() != b.getType() ||
        a.getType() != op.getResult(0).getType() || !isFloat(a) ||
        a.getDefiningOp<ConstantOp>() || b.getDefiningOp<ConstantOp>())
      return failure();
    Value y = type == "Add" ? Value(AddOp::create(rw, op.getLoc(), a, b))
                            : Value(MulOp::create(rw, op.getLoc(), a, b));
    rw.replaceOp(op, y);
    return success();
  }
};

// A tied embedding and LM head: the table read by the token embedding and
// by the logits' matmul (transposed).
bool isTie(ParamOp p, const SmallPtrSetImpl<Operation *> &users) {
  if (users.size() != 2)
    return false;
  bool embedding = false, head = false;
  for (Operation *u : users) {
    if (auto e = dyn_cast<EmbeddingOp>(u))
      embedding |= e.getTable() == p.getResult() && e.getIds() != p.getResult();
    if (auto m = dyn_cast<MatmulOp>(u))
      head |= m.getB() == p.getResult() && m.getA() != p.getResult() &&
              m.getTransposeB() && !m.getTransposeA();
  }
  return embedding && head;
}

struct RaiseOnnx : weft::impl::WeftRaiseOnnxBase<RaiseOnnx> {
  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    bool imported = false;
    fn.walk([&](OnnxNodeOp) { imported = true; });
    if (!imported)
      return;
    MLIRContext *ctx = &getContext();
    // First the subgraphs, then what is left of plain adds and products
    // (raising those first would hide GELU's and attention's parts).
    RewritePatternSet subgraphs(ctx);
    for (const char *noop : {"Identity", "Reshape", "Transpose", "Cast"})
      subgraphs.add<NoOp>(ctx, noop, 4);
    subgraphs.add<Gemm, Linear, RowReshapes, LayerNorm, LayerNormWritten,
                  GeluTanh, Embedding, PositionEmbedding, TokenTypeEmbedding,
                  AddRow, Split, Attention, RmsNorm, Silu, Rope, BiasAdd,
                  GeluErf, GeluOpset20, QuickGelu>(ctx);
    RewritePatternSet elementwise(ctx);
    elementwise.add<Elementwise>(ctx, "Add");
    elementwise.add<Elementwise>(ctx, "Mul");
    elementwise.add<Swiglu>(ctx);
    elementwise.add<UnaryAct>(ctx, "Relu", "relu");
    elementwise.add<UnaryAct>(ctx, "Sigmoid", "sigmoid");
    elementwise.add<UnaryAct>(ctx, "Tanh", "tanh");
    GreedyRewriteConfig config;
    if (failed(applyPatternsGreedily(fn, std::move(subgraphs), config)) ||
        failed(applyPatternsGreedily(fn, std::move(elementwise), config))) {
      fn.emitError("weft-raise-onnx: the rewrite did not converge");
      return signalPassFailure();
    }
    // One initializer read by several ops trains as one tensor. That is
    // the model only for a tied embedding and head; elsewhere it is an
    // exporter's merge of equal initializers.
    bool shared = false;
    fn.walk([&](ParamOp p) {
      SmallPtrSet<Operation *, 4> users(p->getUsers().begin(),
                                        p->getUsers().end());
      if (shared || users.size() <= 1 || isTie(p, users))
        return;
      shared = true;
      p.emitError() << "initializer '" << p.getName() << "' is read by "
                    << users.size()
                    << " ops, so weft would train them as one tensor; "
                       "torch.onnx.export's default optimize=True merges "
                       "initializers that are equal when exported (norm "
                       "weights of 1, biases of 0) into one: export with "
                       "optimize=False";
    });
    if (shared)
      return signalPassFailure();
    // A value of the attention_mask input that no attention took as its
    // key padding would be read as the mask of an all-token batch; the
    // token_type_ids, read other than by their table, as all 0.
    WalkResult padding = fn.walk([&](ConstantOp c) {
      const bool mask = c->hasAttr(attrname::kIfPadding);
      if ((!mask && !c->hasAttr(attrname::kTokenTypes)) || c->use_empty())
        return WalkResult::advance();
      Operation *user = *c->getUsers().begin();
      auto node = dyn_cast<OnnxNodeOp>(user);
      InFlightDiagnostic d = user->emitError();
      d << (node ? ("ONNX node '" + node.getNode() + "' (" + node.getOpType() +
                    ")")
                       .str()
                 : std::string("this op"));
      if (mask)
        d << " reads a value computed from the attention_mask input where "
             "weft raises no attention mask: weft reads attention_mask as "
             "the key padding of an attention it raises (scores masked by "
             "Add or Where before the softmax)";
      else
        d << " reads the token_type_ids input other than as the rows of a "
             "table added to the hidden states (BERT's segment embedding), "
             "the one way weft reads it";
      return WalkResult::interrupt();
    });
    if (padding.wasInterrupted())
      return signalPassFailure();
    // The import trains next-token cross-entropy; an encoder's attention
    // shows each position the token it would predict (the next one is in
    // its input), so that loss would train nothing a user wants.
    bool nextToken = false;
    fn.walk([&](CrossEntropyOp ce) { nextToken |= !ce.getMasked(); });
    fn.walk([&](AttentionOp a) {
      if (!nextToken || !a.getBidirectional())
        return WalkResult::advance();
      a.emitError("bidirectional attention (an encoder's) sees the next "
                  "token that next-token cross-entropy asks it to predict: "
                  "train it with --loss masked-lm --mask-token ID (BERT's "
                  "loss), or compile it with --forward-only");
      signalPassFailure();
      return WalkResult::interrupt();
    });
  }
};

} // namespace
