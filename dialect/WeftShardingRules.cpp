//===- WeftShardingRules.cpp - factors of every compute op ----------------===//
//
// Notation in the comments: einsum-like, one letter per factor; a capital P
// marks a pinned factor (never split), `!` a factor absent from a result (a
// result lacking a split factor is a partial sum over its axes).
//
//===----------------------------------------------------------------------===//
#include "dialect/WeftDialect.h"

using namespace mlir;
using namespace weft;

namespace {
using Dims = SmallVector<int64_t>;

ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

// A fresh factor for each dim of `shape`.
Dims fresh(ShardingRule &r, ArrayRef<int64_t> shape, bool pinned = false) {
  Dims dims;
  for (int64_t size : shape)
    dims.push_back(r.addFactor(size, pinned));
  return dims;
}

Dims concat(ArrayRef<int64_t> a, ArrayRef<int64_t> b) {
  Dims out(a);
  out.append(b.begin(), b.end());
  return out;
}

// Every operand and result share one factor per dim.
ShardingRule elementwise(Operation *op) {
  ShardingRule r;
  Dims dims = fresh(r, shapeOf(op->getResult(0)));
  for (unsigned i = 0; i < op->getNumOperands(); ++i)
    r.operands.push_back(dims);
  for (unsigned i = 0; i < op->getNumResults(); ++i)
    r.results.push_back(dims);
  return r;
}

// Row-wise ops over [L..., D] with vectors [D] (norms): L free, D pinned.
// The vectors' gradients lack L, so they are partial sums over L's axes.
struct RowWise {
  ShardingRule r;
  Dims x, vec;
  RowWise(Value xValue) {
    ArrayRef<int64_t> shape = shapeOf(xValue);
    x = fresh(r, shape.drop_back());
    int64_t d = r.addFactor(shape.back(), /*pinned=*/true);
    x.push_back(d);
    vec = {d};
  }
};
} // namespace

#define ELEMENTWISE_RULE(OP)                                                   \
  ShardingRule OP::getShardingRule() { return elementwise(*this); }
ELEMENTWISE_RULE(CastOp)
ELEMENTWISE_RULE(AddOp)
ELEMENTWISE_RULE(MulOp)
ELEMENTWISE_RULE(GeluOp)
ELEMENTWISE_RULE(DropoutOp)
ELEMENTWISE_RULE(ActOp)
ELEMENTWISE_RULE(ActGradOp)
ELEMENTWISE_RULE(SiluOp)
ELEMENTWISE_RULE(SwigluOp)
ELEMENTWISE_RULE(GeluGradOp)
ELEMENTWISE_RULE(SiluGradOp)
ELEMENTWISE_RULE(SwigluGradOp)
#undef ELEMENTWISE_RULE

// table[V, d], ids[l...] -> [l..., d]  (V!: a vocab-parallel table leaves a
// partial sum; each rank looks up the ids in its shard, zeros elsewhere)
ShardingRule EmbeddingOp::getShardingRule() {
  ShardingRule r;
  Dims ids = fresh(r, shapeOf(getIds()));
  int64_t v = r.addFactor(shapeOf(getTable())[0]);
  int64_t d = r.addFactor(shapeOf(getTable())[1]);
  r.operands = {{v, d}, ids};
  r.results = {concat(ids, {d})};
  return r;
}

// dy[l..., d], ids[l...] -> dtable[V, d] (l!: partial over l's axes)
// With a base[V, d] (weft-fuse-table-grad) l is pinned: a partial sum
// would add the base once per shard.
ShardingRule EmbeddingGradOp::getShardingRule() {
  ShardingRule r;
  Dims ids = fresh(r, shapeOf(getIds()), /*pinned=*/bool(getBase()));
  int64_t d = r.addFactor(shapeOf(getDy()).back());
  int64_t v = r.addFactor(getVocab());
  r.operands = {concat(ids, {d}), ids};
  if (getBase())
    r.operands.push_back({v, d});
  r.results = {{v, d}};
  return r;
}

// x[b, s, d], table[P, d] -> [b, s, d]  (s may be split: seq_axes offset)
ShardingRule PositionEmbeddingOp::getShardingRule() {
  ShardingRule r;
  Dims x = fresh(r, shapeOf(getX()));
  int64_t p = r.addFactor(shapeOf(getTable())[0], /*pinned=*/true);
  r.operands = {x, {p, x[2]}};
  r.results = {x};
  return r;
}

// dy[b, s, d] -> dtable[P, d]  (b!, s!: partial)
ShardingRule PositionEmbeddingGradOp::getShardingRule() {
  ShardingRule r;
  Dims dy = fresh(r, shapeOf(getDy()));
  int64_t p = r.addFactor(getPositions(), /*pinned=*/true);
  r.operands = {dy};
  r.results = {{p, dy[2]}};
  return r;
}

// a's dims split into an M side and a K side, b's into K and N sides:
//   !transpose_a: a[m..., k]      transpose_a: a[k..., m]
//   !transpose_b: b[k..., n]      transpose_b: b[n..., k]
// result [m..., n...]. The K sides must have equal shapes to share factors;
// otherwise (a flattening mismatch) they stay replicated.
ShardingRule MatmulOp::getShardingRule() {
  ShardingRule r;
  ArrayRef<int64_t> a = shapeOf(getA()), b = shapeOf(getB());
  bool ta = getTransposeA(), tb = getTransposeB();
  ArrayRef<int64_t> aK = ta ? a.drop_back() : a.take_back();
  ArrayRef<int64_t> aM = ta ? a.take_back() : a.drop_back();
  ArrayRef<int64_t> bK = tb ? b.take_back() : b.drop_back();
  ArrayRef<int64_t> bN = tb ? b.drop_back() : b.take_back();
  Dims m = fresh(r, aM), n = fresh(r, bN);
  Dims ka, kb;
  // With a fused bias K is pinned: a partial product would get the bias
  // once per shard.
  if (aK == bK) {
    ka = kb = fresh(r, aK, /*pinned=*/bool(getBias()));
  } else {
    ka = fresh(r, aK, /*pinned=*/true);
    kb = fresh(r, bK, /*pinned=*/true);
  }
  r.operands = {ta ? concat(ka, m) : concat(m, ka),
                tb ? concat(n, kb) : concat(kb, n)};
  // A fused bias (weft-fuse-bias) is split as the output's columns.
  if (Value bias = getBias())
    r.operands.push_back(n.size() == 1 ? n : fresh(r, shapeOf(bias), true));
  r.results = {concat(m, n)};
  return r;
}

// x[l..., n], bias[n] -> [l..., n]
ShardingRule BiasAddOp::getShardingRule() {
  ShardingRule r;
  Dims x = fresh(r, shapeOf(getX()));
  r.operands = {x, {x.back()}};
  r.results = {x};
  return r;
}

// x[l..., n], table[t, n] -> [l..., n]  (t pinned: the row is global)
ShardingRule AddRowOp::getShardingRule() {
  ShardingRule r;
  Dims x = fresh(r, shapeOf(getX()));
  int64_t t = r.addFactor(shapeOf(getTable())[0], /*pinned=*/true);
  r.operands = {x, {t, x.back()}};
  r.results = {x};
  return r;
}

// v[n] -> dtable[t, n]  (t pinned)
ShardingRule RowGradOp::getShardingRule() {
  ShardingRule r;
  Dims v = fresh(r, shapeOf(getV()));
  int64_t t = r.addFactor(getRows(), /*pinned=*/true);
  r.operands = {v};
  r.results = {{t, v[0]}};
  return r;
}

// x[l..., n] -> [n]  (l!: partial)
ShardingRule ReduceRowsOp::getShardingRule() {
  ShardingRule r;
  Dims x = fresh(r, shapeOf(getX()));
  r.operands = {x};
  r.results = {{x.back()}};
  return r;
}

// x[l..., k*n] -> k x [l..., n]: the input's last dim holds k blocks, so a
// split of n over some axes is a blocked split of the input.
ShardingRule SplitOp::getShardingRule() {
  ShardingRule r;
  ArrayRef<int64_t> x = shapeOf(getX());
  Dims lead = fresh(r, x.drop_back());
  ArrayRef<int64_t> sizes = getSizes();
  bool equal = llvm::all_equal(sizes);
  int64_t n = r.addFactor(sizes.front(), /*pinned=*/!equal);
  r.operands = {concat(lead, {n})};
  r.operandBlocks = {Dims(x.size(), 1)};
  r.operandBlocks[0].back() = sizes.size();
  for (size_t i = 0; i < sizes.size(); ++i)
    r.results.push_back(concat(lead, {n}));
  return r;
}

// k x [l..., n] -> [l..., k*n]: the inverse of split; a split of n over some
// axes is a blocked split (k blocks) of the result.
ShardingRule ConcatOp::getShardingRule() {
  ShardingRule r;
  ArrayRef<int64_t> x = shapeOf(getInputs().front());
  Dims lead = fresh(r, x.drop_back());
  bool equal = llvm::all_of(
      getInputs(), [&](Value v) { return shapeOf(v).back() == x.back(); });
  int64_t n = r.addFactor(x.back(), /*pinned=*/!equal);
  for (size_t i = 0; i < getInputs().size(); ++i)
    r.operands.push_back(concat(lead, {n}));
  r.results = {concat(lead, {n})};
  r.resultBlocks = {Dims(x.size(), 1)};
  r.resultBlocks[0].back() = getInputs().size();
  return r;
}

ShardingRule LayerNormOp::getShardingRule() {
  RowWise w(getX());
  w.r.operands = {w.x, w.vec, w.vec};
  w.r.results = {w.x};
  return w.r;
}

ShardingRule LayerNormGradOp::getShardingRule() {
  RowWise w(getX());
  w.r.operands = {w.x, w.x, w.vec};
  w.r.results = {w.x, w.vec, w.vec};
  return w.r;
}

ShardingRule RmsNormOp::getShardingRule() {
  RowWise w(getX());
  w.r.operands = {w.x, w.vec};
  w.r.results = {w.x};
  return w.r;
}

ShardingRule RmsNormGradOp::getShardingRule() {
  RowWise w(getX());
  w.r.operands = {w.x, w.x, w.vec};
  w.r.results = {w.x, w.vec};
  return w.r;
}

// x[b, S, h*hd] -> same; features split by whole heads. S splits over the
// context-parallel axis only (each rank rotates its block's global
// positions, seq_axes); under sequence parallelism it is whole.
ShardingRule RopeOp::getShardingRule() {
  ShardingRule r;
  ArrayRef<int64_t> x = shapeOf(getX());
  int64_t b = r.addFactor(x[0]);
  int64_t s = r.addFactor(x[1]);
  r.factors[s].contextOnly = true;
  int64_t f = r.addFactor(x[2], false, x[2] / getNumHeads());
  r.operands = {{b, s, f}};
  r.results = {{b, s, f}};
  return r;
}

namespace {
// q[b, Sq, h*hd], k/v[b, Sk, hkv*hd]: the query and key/value features split
// together, by whole heads. The queries' sequence splits over the
// context-parallel axis only (each rank's block of queries, seq_axes); the
// keys' is pinned, so a split K and V are all-gathered and their gradients,
// summed over every rank's queries, come out partial over that axis.
struct AttentionFactors {
  ShardingRule r;
  Dims q, kv;
  AttentionFactors(Value qv, Value kvv, int64_t heads) {
    ArrayRef<int64_t> qs = shapeOf(qv), ks = shapeOf(kvv);
    int64_t headDim = qs[2] / heads;
    int64_t b = r.addFactor(qs[0]);
    int64_t sq = r.addFactor(qs[1]);
    r.factors[sq].contextOnly = true;
    int64_t sk = r.addFactor(ks[1], /*pinned=*/true);
    r.factors[sk].scatteredLike = sq;
    int64_t fq = r.addFactor(qs[2], false, headDim);
    int64_t fk = r.addFactor(ks[2], false, headDim);
    q = {b, sq, fq};
    kv = {b, sk, fk};
    r.tied.push_back({fq, fk});
  }
};
} // namespace

ShardingRule AttentionOp::getShardingRule() {
  AttentionFactors f(getQ(), getK(), getNumHeads());
  f.r.operands = {f.q, f.kv, f.kv};
  f.r.results = {f.q};
  return f.r;
}

ShardingRule AttentionGradOp::getShardingRule() {
  AttentionFactors f(getQ(), getK(), getNumHeads());
  f.r.operands = {f.q, f.q, f.kv, f.kv};
  f.r.results = {f.q, f.kv, f.kv};
  return f.r;
}

// logits[l..., V], targets[l...] -> [] (l!: a partial sum). V is not a sum
// factor: weft-partition rewrites a split V into the vocab-parallel ops
// (cross_entropy_stats, all_gather, cross_entropy_from_stats).
ShardingRule CrossEntropyOp::getShardingRule() {
  ShardingRule r;
  Dims l = fresh(r, shapeOf(getTargets()));
  int64_t v = r.addFactor(shapeOf(getLogits()).back());
  r.operands = {concat(l, {v}), l};
  r.results = {{}};
  return r;
}

// pred[l...], target[l...] -> [] (l!: a partial sum).
ShardingRule MseLossOp::getShardingRule() {
  ShardingRule r;
  Dims l = fresh(r, shapeOf(getPred()));
  r.operands = {l, l};
  r.results = {{}};
  return r;
}

// pred[l...], target[l...], dloss[] -> [l...].
ShardingRule MseLossGradOp::getShardingRule() {
  ShardingRule r;
  Dims l = fresh(r, shapeOf(getPred()));
  r.operands = {l, l, {}};
  r.results = {l};
  return r;
}

// logits[l..., V], targets[l...], dloss[] -> [l..., V]  (a split V: see
// cross_entropy)
ShardingRule CrossEntropyGradOp::getShardingRule() {
  ShardingRule r;
  Dims l = fresh(r, shapeOf(getTargets()));
  int64_t v = r.addFactor(shapeOf(getLogits()).back());
  r.operands = {concat(l, {v}), l, {}};
  r.results = {concat(l, {v})};
  return r;
}
