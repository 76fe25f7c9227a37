//===- PackDocuments.cpp - weft-pack-documents: rows of documents ---------===//
//
// The graph keeps its shape: what changes is what the runtime computes from
// each step's tokens (where documents start: the attention's and the
// positions' bounds, and the EOS targets it ignores). This pass checks the
// model can be trained so, marks the loss masked and records the id.
//
//===----------------------------------------------------------------------===//
#include "dialect/AttrNames.h"
#include "dialect/WeftDialect.h"
#include "passes/Passes.h"
#include "passes/model/ReturnedLoss.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace weft {
#define GEN_PASS_DEF_WEFTPACKDOCUMENTS
#include "passes/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {
struct PackDocuments : weft::impl::WeftPackDocumentsBase<PackDocuments> {
  using WeftPackDocumentsBase::WeftPackDocumentsBase;

  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    if (fn.isExternal())
      return;
    CrossEntropyOp loss = returnedCrossEntropy(fn);
    if (!loss) {
      fn.emitError("--documents trains @")
          << fn.getSymName()
          << "(tokens, targets) returning a cross-entropy; this function "
             "returns something else";
      return signalPassFailure();
    }
    int64_t vocab = loss.getLogits().getType().getShape().back();
    if (attentionMask && !loss.getMasked()) {
      fn.emitError("--attention-mask trains on given targets (-100 at the "
                   "padding): its loss must be a masked cross-entropy");
      return signalPassFailure();
    }
    if (!attentionMask && (eos < 0 || eos >= vocab)) {
      fn.emitError("--documents=") << int64_t(eos)
                                   << " is not a token id of the model's "
                                      "vocabulary [0, "
                                   << vocab << ")";
      return signalPassFailure();
    }
    int attentions = 0;
    WalkResult walk = fn.walk([&](Operation *op) {
      if (auto a = dyn_cast<AttentionOp>(op)) {
        ++attentions;
        if (a.getBidirectional()) {
          a.emitOpError("is bidirectional: --documents bounds causal "
                        "attention to each document (an encoder's would "
                        "need both directions bounded)");
          return WalkResult::interrupt();
        }
      }
      // An imported graph's attention on the generic path: its scores are
      // a batch_matmul and a softmax whose mask weft cannot bound.
      if (isa<SoftmaxOp, OnnxNodeOp>(op)) {
        op->emitOpError("computes attention on the generic path: --documents "
                        "needs the model's attention as weft.attention");
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return signalPassFailure();
    if (!attentions) {
      fn.emitError("has no weft.attention: --documents bounds attention to "
                   "each document");
      return signalPassFailure();
    }
    // Given targets (--loss cross-entropy) are the caller's; else the
    // runtime reads each document's next tokens from the token file.
    const bool given = loss.getMasked();
    loss.setMasked(true);
    Builder b(fn.getContext());
    fn->setAttr(
        attrname::kDocuments,
        attentionMask
            ? b.getDictionaryAttr(
                  {b.getNamedAttr("attention_mask", b.getBoolAttr(true)),
                   b.getNamedAttr("given_targets", b.getBoolAttr(true))})
            : b.getDictionaryAttr(
                  {b.getNamedAttr("eos", b.getI64IntegerAttr(eos)),
                   b.getNamedAttr("given_targets", b.getBoolAttr(given))}));
  }
};
} // namespace
