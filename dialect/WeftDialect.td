//===- WeftDialect.td - the weft dialect ------------------------*- tablegen -*-===//
//
// weft IR is a global (single-device) tensor program: a model's forward pass,
// and after the autodiff and optimizer passes, one whole training step.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_DIALECT_TD
#define WEFT_DIALECT_TD

include "mlir/IR/OpBase.td"

def Weft_Dialect : Dialect {
  let name = "weft";
  let cppNamespace = "::weft";
  let useDefaultAttributePrinterParser = 1;
  // `weft.sharding` and `weft.shardings`, which the sharding passes exchange
  // on ops and function arguments, are verified (WeftAttrVerify.cpp).
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let summary = "Tensor ops of GPT-2 and Llama training steps";
  let description = [{
    The weft dialect holds transformer training programs on builtin ranked
    tensors. Forward ops carry their vector-Jacobian product through
    `VjpOpInterface`; the `*_grad` ops are what those products build. Parameters
    are named (`weft.param`) by their Hugging Face checkpoint names.
  }];
}

class Weft_Op<string mnemonic, list<Trait> traits = []>
    : Op<Weft_Dialect, mnemonic, traits>;

#endif // WEFT_DIALECT_TD
