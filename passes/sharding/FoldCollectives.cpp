//===- FoldCollectives.cpp - weft-fold-collectives ------------------------===//
#include "dialect/WeftDialect.h"
#include "passes/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace weft {
#define GEN_PASS_DEF_WEFTFOLDCOLLECTIVES
#include "passes/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {
// slice(all_reduce(x)) -> reduce_scatter(x) over the same axes: every rank
// only keeps its block. slice_B(all_reduce_A(x)) -> all_reduce_A(slice_B(x))
// for disjoint A and B: the ranks of an A group share their B index, so each
// can keep its block first and the group sums only that block (Llama's
// vocab-parallel embedding gradient over dp: half the bytes under tp=2).
// Same elements, same sums.
struct SliceOfAllReduce : OpRewritePattern<SliceOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SliceOp slice,
                                PatternRewriter &rewriter) const override {
    auto reduce = slice.getX().getDefiningOp<AllReduceOp>();
    if (!reduce || !reduce->hasOneUse())
      return failure();
    if (reduce.getAxes() == slice.getAxes()) {
      rewriter.replaceOpWithNewOp<ReduceScatterOp>(
          slice, slice.getType(), reduce.getX(), slice.getAxes(),
          slice.getDim(), reduce.getReasonAttr());
      rewriter.eraseOp(reduce);
      return success();
    }
    for (Attribute a : reduce.getAxes())
      if (llvm::is_contained(slice.getAxes(), a))
        return failure();
    rewriter.setInsertionPoint(reduce);
    Value kept = SliceOp::create(rewriter, slice.getLoc(), slice.getType(),
                                 reduce.getX(), slice.getAxes(), slice.getDim(),
                                 slice.getReasonAttr());
    rewriter.replaceOpWithNewOp<AllReduceOp>(
        slice, slice.getType(), kept, reduce.getAxes(), reduce.getReasonAttr());
    rewriter.eraseOp(reduce);
    return success();
  }
};

// slice(bias_add(x, b)) -> bias_add(slice(x), b) when the slice leaves the
// bias dim whole: under sequence parallelism GPT-2's row-parallel output is
// then reduce-scattered (the slice meets the all-reduce) instead of
// all-reduced and sliced, as Megatron does.
struct SliceOfBiasAdd : OpRewritePattern<SliceOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SliceOp slice,
                                PatternRewriter &rewriter) const override {
    auto biasAdd = slice.getX().getDefiningOp<BiasAddOp>();
    int64_t rank = cast<RankedTensorType>(slice.getType()).getRank();
    if (!biasAdd || !biasAdd->hasOneUse() || slice.getDim() == rank - 1)
      return failure();
    auto inner = cast<RankedTensorType>(biasAdd.getX().getType());
    auto sliced = RankedTensorType::get(
        cast<RankedTensorType>(slice.getType()).getShape(),
        inner.getElementType());
    rewriter.setInsertionPoint(biasAdd);
    Value kept =
        SliceOp::create(rewriter, slice.getLoc(), sliced, biasAdd.getX(),
                        slice.getAxes(), slice.getDim(), slice.getReasonAttr());
    auto moved =
        BiasAddOp::create(rewriter, biasAdd.getLoc(), kept, biasAdd.getBias());
    moved->setDiscardableAttrs(biasAdd->getDiscardableAttrDictionary());
    rewriter.replaceOp(slice, moved.getResult());
    rewriter.eraseOp(biasAdd);
    return success();
  }
};

// add(all_reduce(a), all_reduce(b)) -> all_reduce(add(a, b)): the sum is
// linear, one collective instead of two.
struct AddOfAllReduces : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AddOp add,
                                PatternRewriter &rewriter) const override {
    auto lhs = add.getLhs().getDefiningOp<AllReduceOp>();
    auto rhs = add.getRhs().getDefiningOp<AllReduceOp>();
    if (!lhs || !rhs || lhs == rhs || !lhs->hasOneUse() || !rhs->hasOneUse() ||
        lhs.getAxes() != rhs.getAxes())
      return failure();
    Value sum = AddOp::create(rewriter, add.getLoc(), lhs.getX(), rhs.getX());
    rewriter.replaceOpWithNewOp<AllReduceOp>(
        add, add.getType(), sum, lhs.getAxes(),
        rewriter.getStringAttr("sum of two all-reduces, reduced once"));
    rewriter.eraseOp(lhs);
    rewriter.eraseOp(rhs);
    return success();
  }
};

struct FoldCollectives : weft::impl::WeftFoldCollectivesBase<FoldCollectives> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<SliceOfAllReduce, SliceOfBiasAdd, AddOfAllReduces>(
        &getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
