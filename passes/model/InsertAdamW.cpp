//===- InsertAdamW.cpp - weft-insert-adamw --------------------------------===//
#include "dialect/AttrNames.h"
#include "dialect/WeftDialect.h"
#include "passes/Passes.h"
#include "program/Hyperparams.h"

#include "mlir/IR/Builders.h"

namespace weft {
#define GEN_PASS_DEF_WEFTINSERTADAMW
#include "passes/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {
struct InsertAdamW : weft::impl::WeftInsertAdamWBase<InsertAdamW> {
  using WeftInsertAdamWBase::WeftInsertAdamWBase;

  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    Hyperparams h;
    h.Lr = lr;
    h.Beta1 = beta1;
    h.Beta2 = beta2;
    h.Eps = eps;
    h.WeightDecay = weightDecay;
    h.Schedule = schedule;
    h.WarmupSteps = warmupSteps;
    h.TotalSteps = totalSteps;
    h.MinLr = minLr;
    std::string problem = checkHyperparams(h);
    if (!problem.empty()) {
      fn.emitError("bad AdamW hyper-parameters: ") << problem;
      return signalPassFailure();
    }
    llvm::StringMap<ParamOp> params;
    SmallVector<ParamGradOp> paramGrads;
    fn.walk([&](Operation *op) {
      if (auto p = dyn_cast<ParamOp>(op))
        params[p.getName()] = p;
      if (auto g = dyn_cast<ParamGradOp>(op))
        paramGrads.push_back(g);
    });
    if (paramGrads.empty()) {
      fn.emitError("no weft.param_grad in @")
          << fn.getSymName() << ": run weft-autodiff first";
      return signalPassFailure();
    }
    OpBuilder b(paramGrads.back());
    b.setInsertionPointAfter(paramGrads.back());
    for (ParamGradOp g : paramGrads) {
      ParamOp p = params.lookup(g.getName());
      if (!p) {
        g.emitOpError("names no weft.param: '") << g.getName() << "'";
        return signalPassFailure();
      }
      bool decay = p.getType().getRank() >= 2;
      AdamWOp::create(b, g.getLoc(), p.getResult(), decay);
    }
    SmallVector<NamedAttribute> cfg = {
        b.getNamedAttr("kind", b.getStringAttr("adamw")),
        b.getNamedAttr("lr", b.getF64FloatAttr(lr)),
        b.getNamedAttr("beta1", b.getF64FloatAttr(beta1)),
        b.getNamedAttr("beta2", b.getF64FloatAttr(beta2)),
        b.getNamedAttr("eps", b.getF64FloatAttr(eps)),
        b.getNamedAttr("weight_decay", b.getF64FloatAttr(weightDecay)),
        b.getNamedAttr("schedule", b.getStringAttr(schedule)),
        b.getNamedAttr("warmup_steps", b.getI64IntegerAttr(warmupSteps)),
        b.getNamedAttr("total_steps", b.getI64IntegerAttr(totalSteps)),
        b.getNamedAttr("min_lr", b.getF64FloatAttr(minLr)),
    };
    fn->setAttr(weft::attrname::kOptimizer, b.getDictionaryAttr(cfg));
  }
};
} // namespace
