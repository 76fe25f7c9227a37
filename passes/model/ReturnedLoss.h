//===- ReturnedLoss.h - The loss a training forward returns ------*- C++
//-*-===//
#ifndef WEFT_PASSES_MODEL_RETURNEDLOSS_H
#define WEFT_PASSES_MODEL_RETURNEDLOSS_H

#include "dialect/WeftDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace weft {

/// The cross-entropy `@fn(tokens, targets)` returns, of logits against its
/// targets argument; null for any other function (an encoder's hidden
/// states, a regression's loss).
inline CrossEntropyOp returnedCrossEntropy(mlir::func::FuncOp fn) {
  auto ret =
      mlir::cast<mlir::func::ReturnOp>(fn.getBody().front().getTerminator());
  auto loss = ret.getNumOperands() == 1
                  ? ret.getOperand(0).getDefiningOp<CrossEntropyOp>()
                  : CrossEntropyOp();
  if (!loss || fn.getNumArguments() != 2 ||
      loss.getTargets() != fn.getArgument(1))
    return {};
  return loss;
}

/// The op that makes the one value a block returns: a training step's
/// loss, which ends its forward (the ops after it are the backward). Null
/// when the block returns nothing or several values.
inline mlir::Operation *lossOp(mlir::Block &body) {
  auto ret = mlir::dyn_cast<mlir::func::ReturnOp>(body.getTerminator());
  return ret && ret.getNumOperands() == 1 ? ret.getOperand(0).getDefiningOp()
                                          : nullptr;
}

/// lossOp of a function's body; null for an external function.
inline mlir::Operation *lossOp(mlir::func::FuncOp fn) {
  return fn.isExternal() ? nullptr : lossOp(fn.getBody().front());
}

} // namespace weft

#endif // WEFT_PASSES_MODEL_RETURNEDLOSS_H
