//===- WeftSplitReduction.cpp - reductions over a split factor ------------===//
//
// SplitReductionOpInterface: Megatron's vocab-parallel cross-entropy. With
// the logits' vocab split, each rank computes its shard's softmax
// statistics (max, sum of exponentials, the target's logit), one all-gather
// shares them, and the loss and the logits' gradient are finished locally.
// The forward's gathered statistics serve the gradient of the same logits.
//
//===----------------------------------------------------------------------===//
#include "dialect/WeftDialect.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace weft;

namespace {
// A cross-entropy's global row count (its targets' elements): the mean's
// denominator on every rank.
int64_t globalRows(const ShardingRule &rule) {
  int64_t rows = 1;
  for (int64_t f : rule.operands[1])
    rows *= rule.factors[f].size;
  return rows;
}

Value gatheredStats(OpBuilder &b, Location loc, Value logits, Value targets,
                    ArrayAttr vocab, UnitAttr masked, IntegerAttr classes,
                    int64_t shards, SharedValues &shared) {
  auto key =
      std::make_pair(logits.getAsOpaquePointer(), targets.getAsOpaquePointer());
  if (Value known = shared[key])
    return known;
  Value local = CrossEntropyStatsOp::create(b, loc, logits, targets, vocab,
                                            masked, classes);
  auto type = cast<RankedTensorType>(local.getType());
  SmallVector<int64_t> shape(type.getShape());
  shape[0] = shards;
  Value stats = AllGatherOp::create(
      b, loc, RankedTensorType::get(shape, type.getElementType()), local, vocab,
      0,
      b.getStringAttr("vocab-parallel cross-entropy: every vocab shard's "
                      "softmax statistics"));
  shared[key] = stats;
  return stats;
}
} // namespace

int64_t CrossEntropyOp::splitReductionFactor(const ShardingRule &rule) {
  return rule.operands[0].back();
}

FailureOr<Value> CrossEntropyOp::buildSplitReduction(OpBuilder &b,
                                                     const ShardingRule &rule,
                                                     ArrayRef<StringRef> axes,
                                                     int64_t shards,
                                                     SharedValues &shared) {
  Value stats = gatheredStats(b, getLoc(), getLogits(), getTargets(),
                              b.getStrArrayAttr(axes), getMaskedAttr(),
                              getClassesAttr(), shards, shared);
  return CrossEntropyFromStatsOp::create(b, getLoc(), stats,
                                         b.getI64IntegerAttr(globalRows(rule)),
                                         getMaskedAttr())
      .getResult();
}

int64_t CrossEntropyGradOp::splitReductionFactor(const ShardingRule &rule) {
  return rule.operands[0].back();
}

FailureOr<Value>
CrossEntropyGradOp::buildSplitReduction(OpBuilder &b, const ShardingRule &rule,
                                        ArrayRef<StringRef> axes,
                                        int64_t shards, SharedValues &shared) {
  ArrayAttr vocab = b.getStrArrayAttr(axes);
  Value stats =
      gatheredStats(b, getLoc(), getLogits(), getTargets(), vocab,
                    getMaskedAttr(), getClassesAttr(), shards, shared);
  return CrossEntropyStatsGradOp::create(b, getLoc(), getLogits(), getTargets(),
                                         stats, getDloss(), vocab,
                                         b.getI64IntegerAttr(globalRows(rule)),
                                         getMaskedAttr(), getClassesAttr())
      .getResult();
}
