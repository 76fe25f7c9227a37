//===- DirectGradients.h - gradients written straight to their buffers ----===//
//
// A gradient computed only to be stored is written straight into its
// parameter's grad buffer (weft-emit-program), so it takes no arena bytes
// (weft-plan-memory). Both passes ask this one question.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_PASSES_LOWER_DIRECTGRADIENTS_H
#define WEFT_PASSES_LOWER_DIRECTGRADIENTS_H

#include "dialect/AttrNames.h"
#include "dialect/WeftDialect.h"

namespace weft {

/// Whether store's gradient is written into the grad buffer by the op that
/// makes it. Not when it is added to the stored one ({accumulate}), nor
/// when it is computed from the stored one (an all-reduce of it would run
/// in place), nor a received value (a transfer's arena buffer); a zero fill
/// only where it clears the gradient (in the prologue).
inline bool storedDirectly(ParamGradOp store) {
  mlir::Value v = store.getGrad();
  mlir::Operation *def = v.getDefiningOp();
  if (!def || !v.hasOneUse() || store.getAccumulate() ||
      mlir::isa<ParamOp, RecvOp>(def))
    return false;
  if (llvm::any_of(def->getOperands(), [](mlir::Value x) {
        return x.getDefiningOp<StoredGradOp>();
      }))
    return false;
  auto mark = store->getAttrOfType<mlir::StringAttr>(attrname::kFragment);
  return !mlir::isa<FillOp>(def) || (mark && mark.getValue() == "prologue");
}

} // namespace weft

#endif // WEFT_PASSES_LOWER_DIRECTGRADIENTS_H
