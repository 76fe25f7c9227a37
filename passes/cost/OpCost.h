//===- OpCost.h - FLOPs and bytes of one layer, read from weft IR -*- C++
//-*-===//
//
// The cost model reads the same IR weft-compile builds (docs/design.md decision
// 10). It builds the model with ONE and with TWO transformer layers (batch 1,
// the planned sequence length), differentiates both with weft-autodiff, and
// walks them: what the two-layer program has beyond the one-layer program is
// one layer; the rest of the one-layer program is the embeddings, final norm,
// head and loss, counted once. Every candidate layout then scales these
// per-sequence figures; none is compiled in full.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_PASSES_COST_OPCOST_H
#define WEFT_PASSES_COST_OPCOST_H

#include "frontends/builtin/ModelConfig.h"

#include <string>
#include <vector>

namespace weft::cost {

/// How Megatron tensor parallelism splits a GEMM: column-parallel splits N
/// (QKV, MLP up/gate, the vocab-parallel head), row-parallel splits K (the
/// attention output and MLP down projections). Read from the IR: a matmul
/// whose left operand is computed from a column-parallel result is
/// row-parallel.
enum class TpSplit { Column, Row };

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
  std::vector<Gemm> gemms;           // forward GEMMs
  double gemmFlops = 0;              // forward GEMMs
  double attentionFlops = 0;         // forward attention core (QK^T, AV)
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

struct ModelCost {
  ModelConfig config;
  int64_t seq = 0;
  PartCost layer; // one transformer layer
  PartCost base;  // embeddings, final norm, head and loss (counted once)

  int64_t numParams() const {
    return config.numLayers * layer.params + base.params;
  }
  /// Forward + backward FLOPs of one sequence (no recomputation).
  double trainingFlopsPerSequence() const {
    return config.numLayers * (layer.forwardFlops() + layer.backwardFlops()) +
           base.forwardFlops() + base.backwardFlops();
  }
};

/// Reads a model's costs from its weft IR; returns false and sets `error`
/// when the model cannot be built at this sequence length.
bool analyzeModel(const ModelConfig &config, int64_t seq, ModelCost &cost,
                  std::string &error);

} // namespace weft::cost

#endif // WEFT_PASSES_COST_OPCOST_H
