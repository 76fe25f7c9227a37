//===- Search.h - enumerate layouts, prune, rank ----------------*- C++ -*-===//
#ifndef WEFT_PLANNER_SEARCH_H
#define WEFT_PLANNER_SEARCH_H

#include "planner/CostModel.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace weft::cost {

/// `--fix tp=8,pp=4,...`: axes and choices the search may not change. Keys:
/// dp tp pp cp mb (micro-batch) v (virtual stages) schedule
/// (1f1b|interleaved) zero (0-3) sp (0|1) recompute (none|selective|full)
/// context (all-gather|ring|all-to-all: how attention sees a cp split).
struct Constraints {
  std::optional<int64_t> dp, tp, pp, cp, microBatch, virtualStages;
  std::optional<Schedule> schedule;
  std::optional<int> zero;
  std::optional<bool> sequenceParallel;
  std::optional<Recompute> recompute;
  std::optional<ContextComm> context;
};

/// Parses `--fix`; false with `error` naming the key and value on a bad or
/// contradictory entry (a key given twice with two values, interleaved with
/// v=1, ...).
bool parseConstraints(const std::string &text, Constraints &out,
                      std::string &error);

struct SearchOptions {
  int64_t gpus = 1, globalBatch = 1;
  double tokens = 0;
  Constraints fix;
  int64_t maxMicroBatch = 32;
  bool dpOverlap = true;       // Layout::dpOverlap of every candidate
  bool tpOverlap = true;       // Layout::tpOverlap of every candidate
  bool masterWeights = false;  // Layout::masterWeights of every candidate
  bool zero1AllReduce = false; // Layout::zero1AllReduce of every candidate
  /// Rank layouts that do not fit too (a published run's layout, which fit
  /// its cluster however its framework held its activations).
  bool memoryUnchecked = false;
  /// How many of the fastest layouts get their breakdown (terms and
  /// collectives); the rest keep only their figures.
  size_t breakdownTop = SIZE_MAX;
};

struct SearchResult {
  std::vector<Estimate> ranked; // fitting layouts (all with memoryUnchecked),
                                // fastest first
  int64_t fitting = 0;          // layouts that fit in memory
  std::optional<Estimate> leastMemory; // over all valid layouts
  int64_t evaluated = 0, valid = 0;
  std::string error; // no valid layout, or none fits
  bool ok() const { return error.empty(); }
};

SearchResult searchLayouts(const ModelCost &model, const Hardware &hw,
                           const SearchOptions &options);

} // namespace weft::cost

#endif // WEFT_PLANNER_SEARCH_H
