//===- NamedTensors.h - a forward function's named inputs and outputs ----===//
//
// A forward-only function a frontend builds from a graph of float inputs
// names every argument (weft.input) and result (weft.output); the program
// file holds them by those names (format version 8). weft-return-logits
// keeps such a function and weft-emit-program writes it; both ask here.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_PASSES_NAMEDTENSORS_H
#define WEFT_PASSES_NAMEDTENSORS_H

#include "dialect/AttrNames.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringSet.h"

namespace weft {

/// Whether any argument or result of fn is named.
inline bool namesTensors(mlir::func::FuncOp fn) {
  for (unsigned i = 0; i < fn.getNumArguments(); ++i)
    if (fn.getArgAttr(i, attrname::kInput))
      return true;
  for (unsigned i = 0; i < fn.getNumResults(); ++i)
    if (fn.getResultAttr(i, attrname::kOutput))
      return true;
  return false;
}

/// A function that names its tensors names all of them, each once, and no
/// input `tokens` or `targets` (the token ids' names); else an error on fn
/// naming the argument or result.
inline mlir::LogicalResult checkNamedTensors(mlir::func::FuncOp fn) {
  llvm::StringSet<> inputs, outputs;
  for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
    auto name = fn.getArgAttrOfType<mlir::StringAttr>(i, attrname::kInput);
    if (!name)
      return fn.emitError("argument ")
             << i << " has no weft.input name, but the function names its "
             << "other tensors";
    if (name.getValue() == "tokens" || name.getValue() == "targets")
      return fn.emitError("argument ")
             << i << " is named '" << name.getValue()
             << "', the name of token ids; a tensor input needs another";
    if (!inputs.insert(name.getValue()).second)
      return fn.emitError("argument ")
             << i << " repeats the input name '" << name.getValue() << "'";
  }
  for (unsigned i = 0; i < fn.getNumResults(); ++i) {
    auto name = fn.getResultAttrOfType<mlir::StringAttr>(i, attrname::kOutput);
    if (!name)
      return fn.emitError("result ")
             << i << " has no weft.output name, but the function names its "
             << "other tensors";
    if (!outputs.insert(name.getValue()).second)
      return fn.emitError("result ")
             << i << " repeats the output name '" << name.getValue() << "'";
  }
  return mlir::success();
}

} // namespace weft

#endif // WEFT_PASSES_NAMEDTENSORS_H
