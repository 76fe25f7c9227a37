//===- Autodiff.cpp - weft-autodiff: reverse-mode differentiation ---------===//
#include "dialect/AttrNames.h"
#include "dialect/WeftDialect.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace weft {
#define GEN_PASS_DEF_WEFTAUTODIFF
#include "passes/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {
// Marks every op the VJP of a forward op creates with that op's weft.layer,
// when it has one (the planner counts each layer's backward by it).
// It also records every op it sees created, for the sweep of unread ones.
struct CarryLayer : OpBuilder::Listener {
  Attribute layer;
  SmallVector<Operation *> created;
  void notifyOperationInserted(Operation *op, OpBuilder::InsertPoint) override {
    created.push_back(op);
    if (layer && !op->hasAttr(attrname::kLayer))
      op->setAttr(attrname::kLayer, layer);
  }
};

struct Autodiff : weft::impl::WeftAutodiffBase<Autodiff> {
  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    if (failed(differentiate(fn)))
      signalPassFailure();
  }

  static LogicalResult differentiate(func::FuncOp fn) {
    if (!fn.getBody().hasOneBlock())
      return fn.emitError("weft-autodiff expects a single-block function");
    auto ret = cast<func::ReturnOp>(fn.getBody().front().getTerminator());
    auto lossType =
        ret.getNumOperands() == 1
            ? dyn_cast<RankedTensorType>(ret.getOperand(0).getType())
            : RankedTensorType();
    if (!lossType || lossType.getRank() != 0)
      return fn.emitError("weft-autodiff expects @")
             << fn.getSymName()
             << " to return one scalar loss (tensor<f32>), it returns "
             << ret.getNumOperands() << " values";

    SmallVector<Operation *> forward;
    for (Operation &op : fn.getBody().front().without_terminator())
      forward.push_back(&op);

    OpBuilder b(ret);
    CarryLayer carry;
    b.setListener(&carry);
    DenseMap<Value, Value> grads;
    grads[ret.getOperand(0)] =
        FillOp::create(b, ret.getLoc(), lossType, b.getF64FloatAttr(1.0));

    for (Operation *op : llvm::reverse(forward)) {
      // A constant's gradient goes nowhere (the sweep below drops it).
      if (isa<ParamOp, ConstantOp>(op))
        continue;
      SmallVector<Value> resultGrads;
      bool any = false;
      for (Value r : op->getResults()) {
        resultGrads.push_back(grads.lookup(r));
        any |= static_cast<bool>(resultGrads.back());
      }
      if (!any)
        continue;
      carry.layer = op->getAttr(attrname::kLayer);
      auto vjp = dyn_cast<VjpOpInterface>(op);
      if (!vjp)
        return op->emitOpError("is on the path to the loss but has no VJP");
      SmallVector<Value> operandGrads;
      if (failed(vjp.buildVjp(b, resultGrads, operandGrads)))
        return failure();
      if (operandGrads.size() != op->getNumOperands())
        return op->emitOpError("VJP returned ")
               << operandGrads.size() << " gradients for "
               << op->getNumOperands() << " operands";
      for (auto [operand, g] : llvm::zip(op->getOperands(), operandGrads)) {
        if (!g)
          continue;
        Value &acc = grads[operand];
        acc = acc ? AddOp::create(b, op->getLoc(), acc, g).getResult() : g;
      }
    }

    carry.layer = nullptr;
    for (Operation *op : forward) {
      auto param = dyn_cast<ParamOp>(op);
      if (!param)
        continue;
      Value g = grads.lookup(param.getResult());
      if (!g)
        g = FillOp::create(b, param.getLoc(), param.getType(),
                           b.getF64FloatAttr(0.0));
      ParamGradOp::create(b, param.getLoc(), param.getName(), g);
    }
    // A VJP builds every operand's gradient; what reaches no parameter (a
    // constant's: a mask's, a select's unpicked -inf) is read by nothing.
    // Consumers were created after their operands: newest first.
    for (Operation *op : llvm::reverse(carry.created))
      if (op->getNumResults() > 0 && op->use_empty())
        op->erase();
    return success();
  }
};
} // namespace
