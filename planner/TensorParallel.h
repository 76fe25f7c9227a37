//===- TensorParallel.h - TP collectives from weft's own passes -*- C++ -*-===//
//
// The planner does not define tensor parallelism a second time: it runs
// weft's Megatron layout, autodiff, optimizer, propagation and partition
// passes (the pipeline weft-compile runs) on the model at tp = T, with or
// without sequence parallelism, and reads every collective over tp that
// they emit, each in the layer of the op it serves. When the transformer
// layers are alike op for op, the module is first cut to two of them
// (the rest are the same), so a 126-layer model partitions as fast as a
// 2-layer one.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_PLANNER_TENSORPARALLEL_H
#define WEFT_PLANNER_TENSORPARALLEL_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseSet.h"

#include <string>
#include <vector>

namespace weft::cost {

/// One collective over tp per micro-batch (per step when not per sequence).
struct TpCollective {
  enum Kind { AllReduce, ReduceScatter, AllGather } kind = AllReduce;
  /// Elements of the whole tensor (an all-reduce's operand, a
  /// reduce-scatter's input, an all-gather's result): per sequence for an
  /// activation, else per micro-batch (a parameter's gradient).
  double elems = 0;
  bool perSequence = true;
  bool forward = true; // serves the forward (runs again under full recompute)
  /// Gathers a forward activation again for the backward's weight
  /// gradients (weft.regather): full recomputation gathers it anew instead.
  bool regather = false;
  /// A GEMM's rows per sequence, columns and inner dim (local, over tp).
  struct Gemm {
    double rows = 0, n = 0, k = 0;
  };
  /// An asynchronous backward collective (weft.async) runs under the
  /// matmuls between its start and its first reader: a regather under the
  /// input gradients' (one per projection), an input gradient's all-reduce
  /// under the weight gradients'. None for a blocking collective.
  std::vector<Gemm> overlaps;
};

/// The tp collectives of one transformer layer (the layers' mean: each
/// layer's list when they are alike), of the embeddings (on the first
/// pipeline stage) and of the final norm, head and loss (on the last).
struct TpCollectives {
  std::vector<TpCollective> layer, first, last;
};

/// Whether a value of type `t` scales with the batch (an activation or its
/// statistics) rather than being counted once per micro-batch (a parameter
/// or its gradient: a parameter's type, global or local; a scalar such as
/// the loss). The per-layer costs and the tp collectives both count by it.
inline bool perSequence(mlir::Type t,
                        const llvm::DenseSet<mlir::Type> &paramTypes) {
  auto r = mlir::dyn_cast<mlir::RankedTensorType>(t);
  return r && r.getRank() > 0 && !paramTypes.contains(t);
}

/// Runs weft's passes on a copy of `forward` (a module whose forward ops
/// carry weft.layer, as analyzeModule marks them) at tp = `tp`, sequence
/// parallel or not, and collects the tp collectives. False, with `error`
/// naming the pass's diagnostic, when weft cannot partition the model so.
bool tensorParallelCollectives(mlir::ModuleOp forward, int64_t tp, bool sp,
                               TpCollectives &out, std::string &error);

/// Runs weft's passes on a copy of `forward` at cp = 2 (context parallelism,
/// load-balanced) through partition. False, with `error` naming the pass's
/// diagnostic, when weft cannot lay the model out over cp (an op that reads
/// a sequence gathered whole, as a classifier's pooler does); whether it
/// can does not depend on cp's size.
bool contextParallelPartitions(mlir::ModuleOp forward, std::string &error);

/// Cuts a marked forward module to its first two transformer layers when
/// every layer is alike op for op (same ops, result types and attributes
/// but weft.layer); returns whether it did.
bool cutToTwoLayers(mlir::ModuleOp forward, int64_t numLayers);

} // namespace weft::cost

#endif // WEFT_PLANNER_TENSORPARALLEL_H
