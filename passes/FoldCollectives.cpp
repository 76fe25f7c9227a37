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
// slice(all_reduce(x)) -> reduce_scatter(x): every rank only keeps its block.
struct SliceOfAllReduce : OpRewritePattern<SliceOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SliceOp slice,
                                PatternRewriter &rewriter) const override {
    auto reduce = slice.getX().getDefiningOp<AllReduceOp>();
    if (!reduce || !reduce->hasOneUse() || reduce.getAxes() != slice.getAxes())
      return failure();
    rewriter.replaceOpWithNewOp<ReduceScatterOp>(
        slice, slice.getType(), reduce.getX(), slice.getAxes(), slice.getDim(),
        reduce.getReasonAttr());
    rewriter.eraseOp(reduce);
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
    patterns.add<SliceOfAllReduce, AddOfAllReduces>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
