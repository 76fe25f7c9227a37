//===- Explain.h - what a partitioned step communicates and holds -*- C++
//-*-===//
#ifndef WEFT_PASSES_EXPLAIN_H
#define WEFT_PASSES_EXPLAIN_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace weft {

/// Bytes each rank sends per step, keyed "<op>/<axes>" exactly as the runtime
/// counts them (docs/program-format.md, Communication accounting).
std::map<std::string, int64_t> predictCommBytes(mlir::ModuleOp module);

/// Bytes each rank holds (parameters, gradients, optimizer state and the
/// activation arena times its micro-batches in flight), as --explain counts
/// them: one entry, or one per pipeline stage, each named ("every rank",
/// "stage 1 (layers 9-11)").
std::vector<std::pair<std::string, int64_t>>
memoryPerRank(mlir::ModuleOp module);

/// Prints one training step's collectives (kind, axes, bytes per rank, count,
/// reason) and the per-rank memory of parameters, gradients, optimizer state
/// and activations. RanksPerNode > 0: also the bytes that cross between
/// nodes of that many ranks (world ranks placed node by node, as launchers
/// place them), counted as the runtime sends them: hierarchically where a
/// group has two or more ranks on each of two or more nodes
/// (runtime/comm/HierarchicalCollectives.h), else a ring in shard order.
void explainStep(mlir::ModuleOp module, llvm::raw_ostream &os,
                 int64_t RanksPerNode = 0);

} // namespace weft

#endif // WEFT_PASSES_EXPLAIN_H
