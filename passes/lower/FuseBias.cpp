//===- FuseBias.cpp - weft-fuse-bias: a linear layer's bias into its GEMM -===//
//
// `bias_add(matmul(a, b), bias)` becomes `matmul(a, b, bias)`: the kernel
// starts the product from the bias rows (BLAS's beta = 1, as PyTorch's
// addmm), so the bias costs no pass of its own over the output.
//
//===----------------------------------------------------------------------===//
#include "dialect/WeftDialect.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace weft {
#define GEN_PASS_DEF_WEFTFUSEBIAS
#include "passes/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {
struct FuseBias : weft::impl::WeftFuseBiasBase<FuseBias> {
  void runOnOperation() override {
    SmallVector<BiasAddOp> adds;
    getOperation().walk([&](BiasAddOp add) {
      if (fusable(add))
        adds.push_back(add);
    });
    OpBuilder b(&getContext());
    for (BiasAddOp add : adds) {
      auto mm = add.getX().getDefiningOp<MatmulOp>();
      // At the add: the bias may be made after the matmul (a ZeRO-3
      // gather at its use).
      b.setInsertionPoint(add);
      auto fused =
          MatmulOp::create(b, add.getLoc(), mm.getA(), mm.getB(), add.getBias(),
                           mm.getTransposeA(), mm.getTransposeB());
      fused->setDiscardableAttrs(mm->getDiscardableAttrDictionary());
      add.getResult().replaceAllUsesWith(fused.getResult());
      add.erase();
      mm.erase();
    }
  }

  // The add's input is a matmul's whole and only use, in the same fragment
  // and stage (equal marks), computing in f32 or f64: a bf16 program rounds
  // the product to bf16 before the add, which the fused kernel would not.
  static bool fusable(BiasAddOp add) {
    auto mm = add.getX().getDefiningOp<MatmulOp>();
    if (!mm || mm.getBias() || mm.getTransposeA() ||
        !mm.getResult().hasOneUse() || mm->getBlock() != add->getBlock())
      return false;
    Type element = cast<RankedTensorType>(add.getType()).getElementType();
    if (!element.isF32() && !element.isF64())
      return false;
    return mm->getDiscardableAttrDictionary() ==
           add->getDiscardableAttrDictionary();
  }
};
} // namespace
