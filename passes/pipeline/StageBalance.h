//===- StageBalance.h - cutting layers into balanced stages -----*- C++ -*-===//
//
// One rule for where pipeline stages start, shared by the stage cut
// (weft-cut-stages) and the planner, so that a planned pipeline runs with
// the stages the planner costed.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_PASSES_STAGEBALANCE_H
#define WEFT_PASSES_STAGEBALANCE_H

#include <cstdint>
#include <vector>

namespace weft {

/// Contiguous runs of layers, one per stage (n >= 1, at most one stage per
/// layer), such that the most costly stage is as cheap as possible: stage 0
/// also carries `first` (the embeddings), stage n-1 `last` (the head and
/// loss). Among cuts within 0.1% of the best, each cut nearest an even
/// split. Returns each layer's stage.
std::vector<int64_t> balanceStages(const std::vector<double> &layerCost,
                                   double first, double last, int64_t n);

} // namespace weft

#endif // WEFT_PASSES_STAGEBALANCE_H
