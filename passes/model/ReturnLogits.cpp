//===- ReturnLogits.cpp - weft-return-logits: a forward-only function -----===//
//
// `@forward(tokens, targets) -> loss` becomes `@forward(tokens) -> logits`:
// the value the returned cross-entropy reads is returned instead, the
// cross-entropy is erased and the targets argument dropped. What a
// forward-only program (weft-compile --forward-only) computes is then the
// model's logits, and nothing reads targets it no longer has; it runs as
// in evaluation, without dropout. A function
// a frontend already built forward-only (named tensors, an encoder's
// hidden states) is kept.
//
//===----------------------------------------------------------------------===//
#include "dialect/AttrNames.h"
#include "dialect/WeftDialect.h"
#include "passes/NamedTensors.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace weft {
#define GEN_PASS_DEF_WEFTRETURNLOGITS
#include "passes/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {
struct ReturnLogits : weft::impl::WeftReturnLogitsBase<ReturnLogits> {
  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    if (fn.isExternal())
      return;
    Block &body = fn.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    // A frontend may build the forward-only function itself (the ONNX
    // import of an encoder's hidden states), vocabulary included.
    if (fn->hasAttr(attrname::kVocab) && fn.getNumArguments() == 1)
      return;
    // Or one of named tensors (a graph of float inputs): its results are
    // what the program computes. One that is an input itself (an Identity,
    // a no-op reduction) is returned through a copy: each output is a
    // buffer the forward writes.
    if (namesTensors(fn)) {
      if (failed(checkNamedTensors(fn)))
        return signalPassFailure();
      OpBuilder b(ret);
      for (OpOperand &out : ret->getOpOperands())
        if (isa<BlockArgument>(out.get()))
          out.set(ReshapeOp::create(b, ret.getLoc(), out.get().getType(),
                                    out.get()));
      return;
    }
    if (fn.getNumArguments() != 2 || ret.getNumOperands() != 1) {
      fn.emitError("expects @")
          << fn.getSymName() << "(tokens, targets) -> loss, got "
          << fn.getNumArguments() << " arguments and " << ret.getNumOperands()
          << " results";
      return signalPassFailure();
    }
    auto loss = ret.getOperand(0).getDefiningOp<CrossEntropyOp>();
    if (!loss) {
      ret.emitOpError("returns ")
          << ret.getOperand(0).getType()
          << " not computed by weft.cross_entropy: no logits to return";
      return signalPassFailure();
    }
    // A forward-only run is evaluation: no dropout (nn.Dropout in eval mode).
    fn.walk([](DropoutOp drop) {
      drop.getResult().replaceAllUsesWith(drop.getX());
      drop.erase();
    });
    fn.walk([](AttentionOp attention) {
      attention.removeDropoutAttr();
      attention.removeDropoutSiteAttr();
    });
    BlockArgument targets = fn.getArgument(1);
    if (loss.getTargets() != targets) {
      loss.emitOpError("compares the logits with a value other than the "
                       "targets argument");
      return signalPassFailure();
    }
    for (Operation *user : targets.getUsers())
      if (user != loss) {
        user->emitOpError("reads the targets, which a forward-only function "
                          "does not have");
        return signalPassFailure();
      }
    // Token ids stay bounded by the embedding table's rows.
    EmbeddingOp embedding;
    for (Operation *user : fn.getArgument(0).getUsers())
      if (auto e = dyn_cast<EmbeddingOp>(user))
        embedding = e;
    if (!embedding) {
      fn.emitError("no weft.embedding reads the tokens: the program's bound "
                   "on token ids comes from its table");
      return signalPassFailure();
    }
    fn->setAttr(
        attrname::kVocab,
        IntegerAttr::get(IntegerType::get(fn.getContext(), 64),
                         cast<RankedTensorType>(embedding.getTable().getType())
                             .getShape()[0]));
    Value logits = loss.getLogits();
    ret->setOperands(logits);
    loss.erase();
    if (failed(fn.eraseArgument(1)))
      return signalPassFailure();
    fn.setType(FunctionType::get(fn.getContext(), body.getArgumentTypes(),
                                 TypeRange{logits.getType()}));
  }
};
} // namespace
