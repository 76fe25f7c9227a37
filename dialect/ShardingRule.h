//===- ShardingRule.h - how an op's dims relate, for sharding ---*- C++ -*-===//
//
// An op's sharding rule names a factor for each dimension of each operand and
// result, einsum style (matmul is `mk,kn->mn`). Propagation and partitioning
// are generic over factors (docs/design.md decision 4; Shardy's
// OpShardingRule): a factor split over some mesh axes splits every dim that
// carries it; a factor that a result lacks (a contracting factor, for that
// result) leaves the result a partial sum over those axes.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_DIALECT_SHARDINGRULE_H
#define WEFT_DIALECT_SHARDINGRULE_H

#include "mlir/IR/Value.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <map>
#include <utility>

namespace weft {

/// How weft-partition split each factor of an op's rule: per factor the
/// mesh axes and the number of shards. Ops whose attributes describe the
/// local problem (head counts, split sizes, vocab and sequence offsets)
/// rewrite them from it (LocalizeOpInterface).
struct FactorSplit {
  llvm::SmallVector<llvm::SmallVector<llvm::StringRef>> axes;
  llvm::SmallVector<int64_t> shards;
};

/// Values that several ops' partition rewrites build alike, by a key of two
/// values (SplitReductionOpInterface).
using SharedValues =
    std::map<std::pair<const void *, const void *>, mlir::Value>;

/// The mesh axis of context parallelism: the only axis that may split a
/// factor marked `contextOnly` (attention's and rope's query sequence).
inline constexpr llvm::StringLiteral kContextAxis = "cp";

struct ShardingRule {
  static constexpr int64_t kNone = -1; // a dim no factor covers: replicated

  struct Factor {
    int64_t size = 1;
    /// The factor may not be split (a norm's feature dim, a causal sequence).
    bool pinned = false;
    /// A split must keep multiples of this many elements together (head_dim
    /// for attention features, so that whole heads land on one rank).
    int64_t granule = 1;
    /// The factor may be split over kContextAxis only: context parallelism
    /// splits attention's queries, and sequence parallelism over tp keeps
    /// gathering the sequence before attention, as Megatron does.
    bool contextOnly = false;
    /// For a pinned factor: results that carry it but not factor F, and so
    /// are partial sums over F's axes, are wanted reduce-scattered along it
    /// over F's axes (-1: none). Attention's keys: their gradients sum the
    /// queries of every context-parallel rank, and each rank keeps the
    /// block of keys it computed.
    int64_t scatteredLike = -1;
  };

  llvm::SmallVector<Factor> factors;
  /// Per operand / result, the factor of each dim (kNone: replicated).
  llvm::SmallVector<llvm::SmallVector<int64_t>> operands, results;
  /// Per operand, per dim: how many equal blocks the dim holds (split's input:
  /// the number of parts). Empty: all 1.
  llvm::SmallVector<llvm::SmallVector<int64_t>> operandBlocks;
  /// Per result, likewise (concat's output holds one block per input).
  llvm::SmallVector<llvm::SmallVector<int64_t>> resultBlocks;
  /// Groups of factors that must be split over the same axes (attention: the
  /// query-head and key/value-head features).
  llvm::SmallVector<llvm::SmallVector<int64_t>> tied;

  int64_t addFactor(int64_t size, bool pinned = false, int64_t granule = 1) {
    factors.push_back({size, pinned, granule});
    return factors.size() - 1;
  }
  int64_t blocksOf(unsigned operand, unsigned dim) const {
    return lookup(operandBlocks, operand, dim);
  }
  int64_t resultBlocksOf(unsigned result, unsigned dim) const {
    return lookup(resultBlocks, result, dim);
  }
  static int64_t
  lookup(const llvm::SmallVector<llvm::SmallVector<int64_t>> &blocks,
         unsigned i, unsigned dim) {
    if (i >= blocks.size() || dim >= blocks[i].size())
      return 1;
    return blocks[i][dim];
  }
};

} // namespace weft

#endif // WEFT_DIALECT_SHARDINGRULE_H
