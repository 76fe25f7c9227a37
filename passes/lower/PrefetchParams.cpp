//===- PrefetchParams.cpp - weft-prefetch-params --------------------------===//
#include "dialect/AttrNames.h"
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
    // A parameter's gather, or a layer's (weft-bucket-gradients: the
    // parameters packed, then gathered): the pack moves with it.
    auto packOfParams = [](AllGatherOp op) -> PackOp {
      auto pack = op.getX().getDefiningOp<PackOp>();
      if (!pack || !pack->hasOneUse() ||
          !llvm::all_of(pack.getInputs(), [](Value v) {
            return static_cast<bool>(v.getDefiningOp<ParamOp>());
          }))
        return nullptr;
      return pack;
    };
    SmallVector<AllGatherOp> gathers;
    getOperation().walk([&](AllGatherOp op) {
      if (op.getX().getDefiningOp<ParamOp>() || packOfParams(op))
        gathers.push_back(op);
    });
    OpBuilder b(&getContext());
    for (AllGatherOp gather : gathers) {
      PackOp pack = packOfParams(gather);
      Operation *first = pack ? pack.getOperation() : gather.getOperation();
      // Not above what it reads.
      SmallPtrSet<Operation *, 8> sources;
      for (Value v : first->getOperands())
        sources.insert(v.getDefiningOp());
      // Nor out of its fragment: a pipeline stage's ops (and the prologue's
      // fills) are marked, and fragments run in order (weft-emit-program).
      auto sameFragment = [&](Operation *op) {
        return op->getAttr(attrname::kFragment) ==
                   first->getAttr(attrname::kFragment) &&
               op->getAttr(attrname::kChunk) ==
                   first->getAttr(attrname::kChunk);
      };
      Operation *to = first;
      for (int64_t i = 0; i < distance; ++i) {
        Operation *prev = to->getPrevNode();
        if (!prev || sources.contains(prev) || !sameFragment(prev))
          break;
        to = prev;
      }
      if (to != first) {
        first->moveBefore(to);
        if (pack)
          gather->moveAfter(pack);
      }
      gather->setAttr(weft::attrname::kAsync, b.getUnitAttr());
    }
  }
};
} // namespace
