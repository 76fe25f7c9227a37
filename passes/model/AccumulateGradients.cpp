//===- AccumulateGradients.cpp - weft-accumulate-gradients ----------------===//
//
// Gradient accumulation: the function computes one micro-batch, and the
// runtime's schedule runs its forward and backward once per micro-batch
// (docs/program-format.md). This pass makes one micro-batch's program
// accumulate:
//  - every cross-entropy divides by the whole step's rows (M times the
//    micro-batch's), so the micro-batches' losses and gradients add up to
//    the step's mean;
//  - every weft.param_grad adds to the stored gradient ({accumulate}); a
//    prologue fragment clears the gradients once per step, before the
//    first micro-batch;
//  - a gradient's all-reduce that only feeds its store (data parallelism,
//    replicated parameters under tensor parallelism) moves out of the
//    micro-batch: the stored partial sums accumulate locally and are reduced
//    once per step, in the optimizer fragment, as DDP's no_sync does.
//    Reduce-scatters (ZeRO-2 and -3) stay per micro-batch: deferring them
//    would keep a whole unreduced gradient per rank;
//  - ZeRO-3's parameter gathers run once per step (one per parameter), in
//    the prologue, unless gather-once=false (then once per micro-batch and
//    use: less memory, more gather traffic).
//  - under mixed precision, a parameter's bf16 copy (weft.cast) that the
//    backward reads runs once per step, in the prologue: every micro-batch
//    reads the same copy, and a pipeline stage holds it once rather than
//    once per micro-batch in flight.
//
//===----------------------------------------------------------------------===//
#include "dialect/AttrNames.h"
#include "dialect/WeftDialect.h"
#include "passes/Passes.h"
#include "passes/model/ReturnedLoss.h"

#include "mlir/IR/Builders.h"

namespace weft {
#define GEN_PASS_DEF_WEFTACCUMULATEGRADIENTS
#include "passes/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {
namespace an = weft::attrname;

struct AccumulateGradients
    : weft::impl::WeftAccumulateGradientsBase<AccumulateGradients> {
  using WeftAccumulateGradientsBase::WeftAccumulateGradientsBase;

  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    if (microbatches < 1 || microbatches > (int64_t(1) << 20)) {
      fn.emitError("microbatches must be 1 to 2^20, got ")
          << int64_t(microbatches);
      return signalPassFailure();
    }
    if (microbatches == 1 || fn.isExternal())
      return;
    OpBuilder b(&getContext());
    fn->setAttr(an::kMicrobatches, b.getI64IntegerAttr(microbatches));
    if (failed(scaleDenominators(fn, b)))
      return signalPassFailure();

    Block &body = fn.getBody().front();
    if (gatherOnce)
      hoistParameterGathers(body);
    hoistParameterCasts(body);
    Operation *firstUpdate = nullptr;
    SmallVector<ParamGradOp> stores;
    for (Operation &op : body) {
      if (auto g = dyn_cast<ParamGradOp>(op))
        stores.push_back(g);
      if (isa<AdamWOp>(op) && !firstUpdate)
        firstUpdate = &op;
    }
    if (!firstUpdate)
      firstUpdate = body.getTerminator();
    auto optimizer = b.getStringAttr("optimizer");

    // ZeRO-1 stores a gradient partial over dp, which only a reduction
    // over exactly those axes may read (docs/program-format.md): a
    // reduction over other axes (tp, for a sequence-parallel norm weight)
    // stays per micro-batch.
    llvm::StringMap<SmallVector<StringRef>> partialAxes;
    for (Operation &op : body)
      if (auto p = dyn_cast<ParamOp>(op))
        if (auto s = p->getAttrOfType<ShardingAttr>(an::kGradStorageSharding))
          partialAxes[p.getName()] = s.partialAxes();
    for (ParamGradOp store : stores) {
      auto type = cast<RankedTensorType>(store.getGrad().getType());
      // Cleared once per step, before the first micro-batch.
      b.setInsertionPointToStart(&body);
      auto zero =
          FillOp::create(b, store.getLoc(), type, b.getF64FloatAttr(0.0));
      auto clear = ParamGradOp::create(b, store.getLoc(), store.getName(),
                                       zero.getResult());
      zero->setAttr(an::kFragment, b.getStringAttr("prologue"));
      clear->setAttr(an::kFragment, b.getStringAttr("prologue"));

      store.setAccumulate(true);
      auto reduce = store.getGrad().getDefiningOp<AllReduceOp>();
      if (!reduce || !reduce->hasOneUse())
        continue;
      SmallVector<StringRef> partial = partialAxes.lookup(store.getName());
      SmallVector<StringRef> axes;
      for (Attribute a : reduce.getAxes())
        axes.push_back(cast<StringAttr>(a).getValue());
      if (!partial.empty() && axes != partial)
        continue;
      // Accumulate the partial sum; reduce the total once per step.
      store.getGradMutable().assign(reduce.getX());
      b.setInsertionPoint(firstUpdate);
      auto stored = StoredGradOp::create(
          b, reduce.getLoc(), reduce.getX().getType(), store.getName());
      reduce->moveBefore(firstUpdate);
      reduce.getXMutable().assign(stored.getResult());
      auto total = ParamGradOp::create(b, store.getLoc(), store.getName(),
                                       reduce.getResult());
      for (Operation *op :
           {stored.getOperation(), reduce.getOperation(), total.getOperation()})
        op->setAttr(an::kFragment, optimizer);
    }
  }

  // ZeRO-3: each use site's parameter gather runs once per step, in the
  // prologue, rather than once per micro-batch; the gathered copies live
  // through the micro-batches (weft-plan-memory keeps them). Parameters move
  // first to the top so that they dominate.
  void hoistParameterGathers(Block &body) {
    SmallVector<Operation *> gathers;
    for (Operation &op : body) {
      if (auto g = dyn_cast<AllGatherOp>(op))
        if (g.getX().getDefiningOp<ParamOp>())
          gathers.push_back(&op);
    }
    if (gathers.empty())
      return;
    Operation *after = leadWithParams(body);
    auto prologue = StringAttr::get(&getContext(), "prologue");
    // Once per step means once per parameter: a use site's gather that
    // repeats an earlier one (forward and backward both read a matrix; a
    // tied embedding is read three times) reads the earlier one's copy.
    DenseMap<std::tuple<Value, Attribute, int64_t, Type>, Value> first;
    for (Operation *&g : gathers) {
      auto gather = cast<AllGatherOp>(g);
      auto [it, inserted] = first.try_emplace(
          std::make_tuple(gather.getX(), Attribute(gather.getAxesAttr()),
                          gather.getDim(), gather.getType()),
          gather.getResult());
      if (inserted)
        continue;
      gather.getResult().replaceAllUsesWith(it->second);
      gather->erase();
      g = nullptr;
    }
    llvm::erase(gathers, nullptr);
    for (Operation *g : gathers) {
      if (after)
        g->moveAfter(after);
      else
        g->moveBefore(&body.front());
      g->setAttr(an::kFragment, prologue);
      after = g;
    }
  }

  // A cast of a parameter (or of a copy the prologue gathered) that the
  // backward reads moves to the prologue: it is the same every micro-batch,
  // and each micro-batch would otherwise keep its own copy from its forward
  // to its backward (Llama 3 405B on pp=16, tp=8: 6.0 GiB per micro-batch
  // in flight on stage 0). A cast only the forward reads (an embedding
  // table's) stays there: held for the step it would outlive its use.
  void hoistParameterCasts(Block &body) {
    Operation *lossOp = weft::lossOp(body);
    if (!lossOp)
      return;
    auto prologue = StringAttr::get(&getContext(), "prologue");
    auto inPrologue = [&](Operation *op) {
      auto mark = op ? op->getAttrOfType<StringAttr>(an::kFragment) : nullptr;
      return mark == prologue;
    };
    SmallVector<CastOp> casts;
    for (Operation &op : body)
      if (auto c = dyn_cast<CastOp>(op)) {
        Operation *src = c->getOperand(0).getDefiningOp();
        if (src && (isa<ParamOp>(src) || inPrologue(src)) &&
            llvm::any_of(c->getUsers(), [&](Operation *u) {
              return lossOp->isBeforeInBlock(u);
            }))
          casts.push_back(c);
      }
    if (casts.empty())
      return;
    // After the parameters and the prologue's gathers, which lead.
    Operation *after = leadWithParams(body);
    while (after->getNextNode() && inPrologue(after->getNextNode()))
      after = after->getNextNode();
    for (CastOp c : casts) {
      if (c != after)
        c->moveAfter(after);
      c->setAttr(an::kFragment, prologue);
      after = c;
    }
  }

  // Moves the parameters to the top of the block, in their order, so that
  // they dominate what the prologue makes of them; returns the last.
  static Operation *leadWithParams(Block &body) {
    SmallVector<Operation *> params;
    for (Operation &op : body)
      if (isa<ParamOp>(op))
        params.push_back(&op);
    Operation *after = nullptr;
    for (Operation *p : params) {
      if (after)
        p->moveAfter(after);
      else if (p != &body.front())
        p->moveBefore(&body.front());
      after = p;
    }
    return after;
  }

  // The mean over the step's rows, not the micro-batch's: a denominator
  // (set by weft-partition on a mesh; the local rows otherwise) times M.
  LogicalResult scaleDenominators(func::FuncOp fn, OpBuilder &b) {
    auto result = fn.walk([&](Operation *op) -> WalkResult {
      if (!isa<CrossEntropyOp, CrossEntropyGradOp, CrossEntropyFromStatsOp,
               CrossEntropyStatsGradOp, MseLossOp, MseLossGradOp>(op))
        return WalkResult::advance();
      int64_t rows;
      if (auto d = op->getAttrOfType<IntegerAttr>("denominator")) {
        rows = d.getInt();
      } else {
        auto targets = cast<RankedTensorType>(op->getOperand(1).getType());
        rows = targets.getNumElements();
      }
      int64_t total;
      if (__builtin_mul_overflow(rows, int64_t(microbatches), &total)) {
        op->emitOpError("has ") << rows << " rows per micro-batch; times "
                                << int64_t(microbatches) << " overflows";
        return WalkResult::interrupt();
      }
      op->setAttr("denominator", b.getI64IntegerAttr(total));
      return WalkResult::advance();
    });
    return failure(result.wasInterrupted());
  }
};
} // namespace
