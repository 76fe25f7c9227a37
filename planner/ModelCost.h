//===- ModelCost.h - FLOPs and bytes per layer, read from weft IR -*- C++
//-*-===//
//
// The planner reads the IR weft-compile builds (docs/design.md decision 10),
// from any frontend: it is given a forward module (a function returning the
// scalar loss, its parameters marked with `weft.layer`), differentiates it
// with weft-autodiff and walks every op, each counted in its layer. An op's
// layer is the latest of its operands' (parameters carry theirs; the
// function's inputs come before every layer), so a layer's norms, GEMMs,
// attention, rope and residual adds are its own, and weft-autodiff carries
// each forward op's layer onto the ops of its gradient. Layers 0..L-1 are
// the transformer layers; -1 (embeddings) and L (final norm, head, loss)
// are counted once. Every candidate layout then scales these per-sequence
// figures; none is compiled in full. This library links no frontend.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_PLANNER_MODELCOST_H
#define WEFT_PLANNER_MODELCOST_H

#include "planner/TensorParallel.h"

#include "mlir/IR/BuiltinOps.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace weft::cost {

/// How Megatron tensor parallelism splits a GEMM: column-parallel splits N
/// (QKV, MLP up/gate, the vocab-parallel head), row-parallel splits K (the
/// attention output and MLP down projections), None leaves it whole (a
/// weight with no role, the generic path's batch_matmul). Read from the
/// weight's role (passes/sharding/TpRoles.h), the one definition the layout
/// uses.
enum class TpSplit { Column, Row, None };

/// One forward GEMM `[rowsPerSeq * batch, k] x [k, n]`.
struct Gemm {
  int64_t rowsPerSeq = 0, n = 0, k = 0;
  TpSplit split = TpSplit::Column;
  bool operator==(const Gemm &o) const {
    return rowsPerSeq == o.rowsPerSeq && n == o.n && k == o.k &&
           split == o.split;
  }
};

/// Costs per sequence (batch 1) of a part of the model.
struct PartCost {
  std::vector<Gemm> gemms;   // forward GEMMs
  double gemmFlops = 0;      // forward GEMMs
  double attentionFlops = 0; // forward attention core (QK^T, AV)
  /// What of it runs: a causal mask's kernel skips the masked blocks
  /// (about half), a sliding window all but W keys of each query. Time is
  /// this over the kernel's rate; model FLOPs (MFU) count the whole.
  double attentionRunFlops = 0;
  int64_t attentionHeadDim = 0;      // the batched GEMMs' small dimension
  double backwardGemmFlops = 0;      // matmuls the autodiff appended
  double backwardAttentionFlops = 0; // attention_grad (recomputes QK^T)
  /// Elements read + written by memory-bound ops (norms, elementwise, rope,
  /// embedding, loss): inside a TP region (split by tp) or outside it
  /// (replicated over tp unless sequence parallel).
  double elemsTp = 0, elemsRep = 0;
  double backwardElems = 0;
  int64_t params = 0;

  double forwardFlops() const { return gemmFlops + attentionFlops; }
  double backwardFlops() const {
    return backwardGemmFlops + backwardAttentionFlops;
  }
};

/// What the layout search needs of the model, read from its IR.
struct ModelDims {
  std::string name;       // the forward function's weft.model, else its name
  int64_t numLayers = 0;  // transformer layers (weft.layer 0..L-1)
  int64_t hidden = 0;     // the residual stream's width
  int64_t numHeads = 0;   // query heads of the layers' attention
  int64_t numKvHeads = 0; // their key/value heads (numHeads without GQA)
  int64_t vocab = 0;      // the logits' width
};

struct ModelCost {
  ModelDims dims;
  int64_t seq = 0;
  PartCost layer; // one transformer layer
  PartCost base;  // embeddings, final norm, head and loss (counted once)
  PartCost first; // of base: the embeddings (weft.layer -1), on stage 0
  PartCost last;  // of base: final norm, head and loss, on the last stage
  /// Parameters of other layers the last part reads (a tied embedding that
  /// is also the head): the last pipeline stage holds a copy.
  int64_t lastTiedParams = 0;

  int64_t numParams() const {
    return dims.numLayers * layer.params + base.params;
  }
  /// Forward + backward FLOPs of one sequence (no recomputation).
  double trainingFlopsPerSequence() const {
    return dims.numLayers * (layer.forwardFlops() + layer.backwardFlops()) +
           base.forwardFlops() + base.backwardFlops();
  }
  /// Each layer's cost; `layer` is their mean (equal to each for the
  /// builtin models, whose layers are alike).
  std::vector<PartCost> layers;

  /// Layers of each of `chunks` contiguous pipeline chunks, cut as
  /// weft-cut-stages cuts them (passes/pipeline/StageBalance.h: by forward
  /// FLOPs, the embeddings on the first chunk, the head on the last).
  const std::vector<int64_t> &chunkLayers(int64_t chunks) const;

  /// The collectives weft's passes emit over tp = `tp` (TensorParallel.h),
  /// run once per (tp, sp) and kept; null, with `error` set, when weft
  /// cannot lay the model out so.
  const TpCollectives *tensorParallel(int64_t tp, bool sp,
                                      std::string &error) const;

  /// Whether weft's passes lay the model out over cp (TensorParallel.h),
  /// found once; false with `error` naming why.
  bool contextParallel(std::string &error) const;

  /// The marked forward module the tp collectives are read from (in a
  /// context of its own, so a ModelCost outlives its source).
  std::shared_ptr<struct TpSource> tpSource;

private:
  mutable std::map<int64_t, std::vector<int64_t>> chunkCache;
};

/// Reads a model's costs from its forward module; returns false and sets
/// `error` (naming the op or value) when the module is not a model the
/// planner can read. The module is cloned, not changed.
bool analyzeModule(mlir::ModuleOp module, ModelCost &cost, std::string &error);

} // namespace weft::cost

#endif // WEFT_PLANNER_MODELCOST_H
