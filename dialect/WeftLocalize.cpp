//===- WeftLocalize.cpp - ops' attributes for their local shards ----------===//
//
// LocalizeOpInterface: after weft-partition has given an op local types, it
// rewrites the attributes that describe the problem it computes, from how
// each factor of its sharding rule was split (WeftShardingRules.cpp names
// the factors).
//
//===----------------------------------------------------------------------===//
#include "dialect/AttrNames.h"
#include "dialect/WeftDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace weft;

namespace {
/// Shards and axes of factor F (a dim no factor covers: none).
int64_t shards(const FactorSplit &s, int64_t f) {
  return f < 0 ? 1 : s.shards[size_t(f)];
}
ArrayRef<StringRef> axesOf(const FactorSplit &s, int64_t f) {
  return f < 0 ? ArrayRef<StringRef>() : ArrayRef<StringRef>(s.axes[size_t(f)]);
}

/// A cross-entropy's rows over every rank: its targets' factors, whole.
int64_t globalRows(const ShardingRule &rule) {
  int64_t rows = 1;
  for (int64_t f : rule.operands[1])
    rows *= rule.factors[size_t(f)].size;
  return rows;
}

void setAxes(Operation *op, StringRef name, ArrayRef<StringRef> axes) {
  if (!axes.empty())
    op->setAttr(name, Builder(op->getContext()).getStrArrayAttr(axes));
}
} // namespace

/// Per dim of an operand, the mesh axes its factor is split over (the
/// runtime's global offsets of a dropout mask).
static ArrayAttr dimAxes(MLIRContext *ctx, ArrayRef<int64_t> factors,
                         const FactorSplit &s) {
  Builder b(ctx);
  SmallVector<Attribute> out;
  for (int64_t f : factors)
    out.push_back(b.getStrArrayAttr(axesOf(s, f)));
  return b.getArrayAttr(out);
}

/// Whether op's function trains packed documents: the runtime bounds its
/// attention and positions by each sample's documents, found by global row.
static bool packsDocuments(Operation *op) {
  auto fn = op->getParentOfType<func::FuncOp>();
  return fn && fn->hasAttr(attrname::kDocuments);
}

// Heads split over the features' factor: each rank runs its heads. Queries
// split over seq_axes (context parallelism): the kernel learns their first
// global position, and reads every key.
void AttentionOp::localize(const ShardingRule &rule, const FactorSplit &s) {
  int64_t c = shards(s, rule.operands[0][2]);
  setNumHeads(getNumHeads() / c);
  setNumKvHeads(getNumKvHeads() / c);
  setAxes(*this, "seq_axes", axesOf(s, rule.operands[0][1]));
  if (getDropoutAttr() || getKeyPadding() || packsDocuments(*this))
    setDimAxesAttr(dimAxes(getContext(), rule.operands[0], s));
}

void AttentionGradOp::localize(const ShardingRule &rule, const FactorSplit &s) {
  int64_t c = shards(s, rule.operands[1][2]);
  setNumHeads(getNumHeads() / c);
  setNumKvHeads(getNumKvHeads() / c);
  setAxes(*this, "seq_axes", axesOf(s, rule.operands[1][1]));
  if (getDropoutAttr() || getKeyPadding() || packsDocuments(*this))
    setDimAxesAttr(dimAxes(getContext(), rule.operands[1], s));
}

void DropoutOp::localize(const ShardingRule &rule, const FactorSplit &s) {
  setDimAxesAttr(dimAxes(getContext(), rule.operands[0], s));
}

void RopeOp::localize(const ShardingRule &rule, const FactorSplit &s) {
  setNumHeads(getNumHeads() / shards(s, rule.operands[0][2]));
  setAxes(*this, "seq_axes", axesOf(s, rule.operands[0][1]));
  if (packsDocuments(*this))
    (*this)->setAttr("dim_axes", dimAxes(getContext(), rule.operands[0], s));
}

// Each part of the split dim is split alike.
void SplitOp::localize(const ShardingRule &rule, const FactorSplit &s) {
  int64_t c = shards(s, rule.results[0].back());
  SmallVector<int64_t> sizes;
  for (int64_t size : getSizes())
    sizes.push_back(size / c);
  setSizes(sizes);
}

// A mean over every rank's rows: each rank divides its sum by all of them.
void CrossEntropyOp::localize(const ShardingRule &rule, const FactorSplit &) {
  (*this)->setAttr("denominator",
                   Builder(getContext()).getI64IntegerAttr(globalRows(rule)));
}

// A mean over every element of every rank: each divides by all of them.
void MseLossOp::localize(const ShardingRule &rule, const FactorSplit &) {
  (*this)->setAttr("denominator",
                   Builder(getContext()).getI64IntegerAttr(globalRows(rule)));
}

void MseLossGradOp::localize(const ShardingRule &rule, const FactorSplit &) {
  (*this)->setAttr("denominator",
                   Builder(getContext()).getI64IntegerAttr(globalRows(rule)));
}

void CrossEntropyGradOp::localize(const ShardingRule &rule,
                                  const FactorSplit &) {
  (*this)->setAttr("denominator",
                   Builder(getContext()).getI64IntegerAttr(globalRows(rule)));
}

// A vocab-split table holds this rank's ids: the kernel learns its range
// from vocab_axes.
void EmbeddingOp::localize(const ShardingRule &rule, const FactorSplit &s) {
  setAxes(*this, "vocab_axes", axesOf(s, rule.operands[0][0]));
}

void EmbeddingGradOp::localize(const ShardingRule &rule, const FactorSplit &s) {
  int64_t f = rule.results[0][0];
  if (axesOf(s, f).empty())
    return;
  setAxes(*this, "vocab_axes", axesOf(s, f));
  setVocab(getVocab() / shards(s, f));
}

// A sequence split over seq_axes: the kernel learns its first position.
void PositionEmbeddingOp::localize(const ShardingRule &rule,
                                   const FactorSplit &s) {
  setAxes(*this, "seq_axes", axesOf(s, rule.operands[0][1]));
  if (packsDocuments(*this) || getTokenTypes())
    (*this)->setAttr("dim_axes", dimAxes(getContext(), rule.operands[0], s));
}

void PositionEmbeddingGradOp::localize(const ShardingRule &rule,
                                       const FactorSplit &s) {
  setAxes(*this, "seq_axes", axesOf(s, rule.operands[0][1]));
  if (packsDocuments(*this) || getTokenTypes())
    (*this)->setAttr("dim_axes", dimAxes(getContext(), rule.operands[0], s));
}
