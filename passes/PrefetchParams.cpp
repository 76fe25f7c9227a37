//===- PrefetchParams.cpp - weft-prefetch-params --------------------------===//
#include "dialect/WeftDialect.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace weft {
#define GEN_PASS_DEF_WEFTPREFETCHPARAMS
#include "passes/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {
struct PrefetchParams : weft::impl::WeftPrefetchParamsBase<PrefetchParams> {
  using WeftPrefetchParamsBase::WeftPrefetchParamsBase;

  void runOnOperation() override {
    if (distance <= 0)
      return;
    SmallVector<AllGatherOp> gathers;
    getOperation().walk([&](AllGatherOp op) {
      if (op.getX().getDefiningOp<ParamOp>())
        gathers.push_back(op);
    });
    OpBuilder b(&getContext());
    for (AllGatherOp gather : gathers) {
      Operation *param = gather.getX().getDefiningOp();
      Operation *to = gather;
      for (int64_t i = 0; i < distance; ++i) {
        Operation *prev = to->getPrevNode();
        if (!prev || prev == param)
          break;
        to = prev;
      }
      if (to != gather.getOperation())
        gather->moveBefore(to);
      gather->setAttr("async", b.getBoolAttr(true));
    }
  }
};
} // namespace
