//===- ImportOnnx.h - an ONNX model as weft IR ------------------*- C++ -*-===//
//
// `weft-compile model.onnx` (issue 13): an ONNX ModelProto (as
// torch.onnx.export writes it) becomes a weft forward module like the
// builtin frontend's: `func @forward(ids, targets) -> loss`, the float
// initializers as `weft.param`s under their own names, the graph's output
// (logits [batch, seq, vocab]) fed to next-token cross-entropy.
//
// Every value that depends on no input and no parameter is folded here
// (HostTensor.h); every other node becomes a `weft.onnx_node` with static
// result shapes, for weft-raise-onnx to rewrite into weft's ops.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_FRONTENDS_ONNX_IMPORTONNX_H
#define WEFT_FRONTENDS_ONNX_IMPORTONNX_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <string>
#include <vector>

namespace weft {

struct OnnxImportOptions {
  /// Binds the input's first (batch) and second (sequence) dims; 0: take
  /// the model's own (refused where the model leaves the dim symbolic).
  int64_t batch = 0, seq = 0;
  /// Binds the batch dim only where the model leaves it symbolic (weft-plan:
  /// its costs are per sequence); 0: refused there unless `batch` is set.
  int64_t symbolicBatch = 0;
  /// Computes in f64 (weights and activations), whatever the model's type.
  bool f64 = false;
  /// `@forward(tokens) -> output` (any [batch, seq, N] output, an encoder's
  /// hidden states too), for a forward-only program; else `@forward(tokens,
  /// targets) -> loss` with next-token cross-entropy on logits.
  bool forwardOnly = false;
  /// Training on given targets (weft-compile --loss cross-entropy): the
  /// output may also be a classifier's, [batch, classes] (one target per
  /// sample) or [batch, seq, classes] of classes other than the
  /// vocabulary (a token classifier's).
  bool givenTargets = false;
  /// With givenTargets: the classes of a classifier's output, which must be
  /// its last dim (weft-compile --classes). An output that is not logits
  /// over the vocabulary trains only so: stated, not guessed (a model
  /// without its LM head would otherwise train as a classifier).
  int64_t classes = 0;
  /// A regression (weft-compile --loss mse): the output, [batch, ...] of any
  /// shape, trains by its mean squared error against float targets of its
  /// shape (`@forward(tokens, targets: like the output) -> mse_loss`).
  bool regression = false;
  /// Only for messages: the cross-entropy trained is a masked-LM one
  /// (weft-compile --loss masked-lm), not next-token.
  bool maskedLm = false;
  /// The graph output the program computes (the logits to train on, or
  /// the forward-only output); empty: the only one (forward-only: the
  /// first).
  std::string output;
  /// What an initializer holding the token embedding's values again (a
  /// TorchScript export writes a tied head as such a copy, often
  /// transposed) means: Ask refuses the model until one of the others is
  /// given; Tie trains the two as one tensor (tie_word_embeddings), Untie as
  /// two, each starting from the same values (weft-compile
  /// --tie-embeddings / --untie-embeddings).
  enum class TwinTables { Ask, Tie, Untie };
  TwinTables twinTables = TwinTables::Ask;
  /// Float constants shaped and used like weights (a table added to the
  /// hidden states, a matrix entering a MatMul or Gemm, a table gathered by
  /// the token ids: what torch.onnx's optimize=True folds a parameter
  /// into) are refused unless this says they stay fixed on purpose
  /// (weft-compile --freeze-constants).
  bool freezeConstants = false;
  /// Where the import says what it chose that the user should know (a
  /// forward-only import of a graph with several outputs computes the
  /// first); may be null.
  std::vector<std::string> *notes = nullptr;
};

/// The forward module of the ONNX model at `path`, or nullptr with `error`
/// naming the file and the node, op type and opset (or initializer) that
/// weft does not import.
mlir::OwningOpRef<mlir::ModuleOp> importOnnx(mlir::MLIRContext &context,
                                             const std::string &path,
                                             const OnnxImportOptions &options,
                                             std::string &error);

} // namespace weft

#endif // WEFT_FRONTENDS_ONNX_IMPORTONNX_H
