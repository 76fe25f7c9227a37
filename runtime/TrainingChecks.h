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

} // namespace weft

#endif // WEFT_RUNTIME_TRAININGCHECKS_H
