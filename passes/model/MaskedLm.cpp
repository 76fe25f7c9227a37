//===- MaskedLm.cpp - weft-masked-lm: BERT's masked-language-model loss ---===//
//
// `@forward(tokens, targets) -> cross_entropy(logits, targets)` keeps its
// shape; the cross-entropy becomes `masked` (targets of -100 count for
// nothing, the mean is over the step's counted targets) and the function
// records how the runtime hides tokens (weft.masked_lm), unless the
// targets are given (given-targets: no recipe). The data, not the
// graph, is what differs from next-token training: the runtime samples
// each position's input and target from the dictionary's recipe
// (runtime/data/Data.h, docs/program-format.md "Masked-LM batches").
//
//===----------------------------------------------------------------------===//
#include "dialect/AttrNames.h"
#include "dialect/WeftDialect.h"
#include "passes/Passes.h"
#include "passes/model/ReturnedLoss.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace weft {
#define GEN_PASS_DEF_WEFTMASKEDLM
#include "passes/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {
struct MaskedLm : weft::impl::WeftMaskedLmBase<MaskedLm> {
  using WeftMaskedLmBase::WeftMaskedLmBase;

  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    if (fn.isExternal())
      return;
    auto ret = cast<func::ReturnOp>(fn.getBody().front().getTerminator());
    CrossEntropyOp loss = returnedCrossEntropy(fn);
    if (!loss) {
      fn.emitError("a masked-language-model loss needs @")
          << fn.getSymName()
          << "(tokens, targets) returning the cross-entropy of logits over "
             "the vocabulary against the targets; this function returns "
          << ret.getNumOperands() << " value(s)"
          << (ret.getNumOperands() == 1 ? " not so computed" : "")
          << " (a model whose output is not logits has no masked-LM loss)";
      return signalPassFailure();
    }
    if (givenTargets) {
      loss.setMasked(true);
      return;
    }
    // Ids go into the embedding (inputs) and are predicted (targets): the
    // mask id must be a row of both.
    int64_t vocab = loss.getLogits().getType().getShape().back();
    for (Operation *user : fn.getArgument(0).getUsers())
      if (auto e = dyn_cast<EmbeddingOp>(user))
        vocab = std::min(
            vocab,
            cast<RankedTensorType>(e.getTable().getType()).getShape()[0]);
    const int64_t token = maskToken;
    const double prob = maskProb;
    if (token < 0 || token >= vocab) {
      fn.emitError("--mask-token=")
          << token << " is not a token id of the model's vocabulary [0, "
          << vocab << ")"
          << (token < 0 ? ": a masked-LM loss needs the id that hides a "
                          "token (BERT's [MASK], 103 in bert-base-uncased)"
                        : "");
      return signalPassFailure();
    }
    if (!(prob > 0 && prob <= 1)) {
      fn.emitError("--mask-prob=") << prob << " is not a probability in (0, 1]";
      return signalPassFailure();
    }
    if (seed < 0) {
      fn.emitError("--mask-seed=") << int64_t(seed) << " is negative";
      return signalPassFailure();
    }
    Builder b(fn.getContext());
    loss.setMasked(true);
    fn->setAttr(attrname::kMaskedLm,
                b.getDictionaryAttr(
                    {b.getNamedAttr("mask_token", b.getI64IntegerAttr(token)),
                     b.getNamedAttr("mask_prob", b.getF64FloatAttr(prob)),
                     b.getNamedAttr("seed", b.getI64IntegerAttr(seed))}));
  }
};
} // namespace
