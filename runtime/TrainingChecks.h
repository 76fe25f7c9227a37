//===- TrainingChecks.h - Catch silent errors while training ----*- C++ -*-===//
//
// Two failures that do not crash: a NaN or infinity that spreads through the
// parameters (an overflow, a bad batch, a kernel bug), and data-parallel
// replicas that drift apart (a bit flip, a non-deterministic kernel on one
// rank). Both checks are collective on a mesh, so every rank takes the same
// decision.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_RUNTIME_TRAININGCHECKS_H
#define WEFT_RUNTIME_TRAININGCHECKS_H

#include "runtime/Executor.h"

#include <string>

namespace weft {

/// Empty when the loss and every gradient are finite on every rank; else
/// what went bad first: the loss, or the first parameter (in program order)
/// whose gradient holds a NaN or an infinity, with the rank and element.
/// Call it between the backward pass and the optimizer, where the gradients
/// are complete (program.optimizer_begin).
Expected<std::string> firstNonFinite(const Executor &E);

/// Empty when every parameter's shard is bit-identical on the ranks that
/// hold it (its replicas: the mesh axes it is not split over); else names
/// the first parameter that differs and the ranks whose copy disagrees with
/// the majority (with two replicas: the one that is not rank-lowest).
Expected<std::string> checkReplicas(const Executor &E);

/// A rank slower than the others this step: its busy time (BusySeconds, the
/// step's wall time less what it waited in communication) against the
/// median of every rank's, gathered over the world. Rank is -1 when no rank
/// is busier than the median by more than 50 ms and 20%. Node: the rank's
/// node as the communicator placed it (CommGroup::NodeOf), else its
/// WEFT_NODE_ID (-1 unset).
struct StragglerReport {
  int64_t Rank = -1, Node = -1;
  double OverMedianSeconds = 0;
};
Expected<StragglerReport> findStraggler(const Executor &E, double BusySeconds);

/// Where the tensor-parallel groups run: a note naming the first tp group
/// whose ranks are on different nodes (CommGroup::NodeOf, else the host
/// name and WEFT_NODE_ID gathered over the world), or "" when every tp
/// group shares a node. tp
/// all-reduces inside every layer; across nodes that is the slow link.
Expected<std::string> tpPlacementNote(const Executor &E);

} // namespace weft

#endif // WEFT_RUNTIME_TRAININGCHECKS_H
