//===- ShardingUtils.h - factor assignment and local types ------*- C++ -*-===//
//
// Shared by weft-propagate-sharding and weft-partition: both decide, per op,
// which mesh axes split which factor (dialect/ShardingRule.h), from the
// shardings known on its operands and results.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_PASSES_SHARDINGUTILS_H
#define WEFT_PASSES_SHARDINGUTILS_H

#include "dialect/WeftDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <optional>

namespace weft {

/// The module's mesh as plain data.
struct MeshInfo {
  llvm::SmallVector<std::string> axes;
  llvm::SmallVector<int64_t> sizes;

  /// Size of an axis; 0 when the mesh has no such axis.
  int64_t size(llvm::StringRef axis) const;
  /// Product of the sizes of `axes`.
  int64_t count(llvm::ArrayRef<llvm::StringRef> axes) const;
  /// The mesh of `op`'s module (a mesh of one rank when there is none).
  static MeshInfo of(mlir::Operation *op);
};

/// Axes per factor of a rule, and the blocks a split factor carries through
/// (GPT-2's fused QKV: the projection's output features hold 3 blocks).
struct FactorAxes {
  llvm::SmallVector<llvm::SmallVector<llvm::StringRef>> axes;
  llvm::SmallVector<int64_t> blocks;
  llvm::ArrayRef<llvm::StringRef> operator[](int64_t f) const {
    return axes[f];
  }
};

/// Decides the axes of every factor from known shardings (null: unknown).
/// Sources are read in priority order: parameters, then values with user
/// annotations (`fixed`), then the remaining operands, then results. A factor
/// takes the first non-empty axes offered that fit (not pinned, divisible by
/// its granule, axes not already taken by another factor of the op).
FactorAxes assignFactors(const ShardingRule &rule,
                         llvm::ArrayRef<ShardingAttr> operands,
                         llvm::ArrayRef<bool> operandIsParam,
                         llvm::ArrayRef<ShardingAttr> results,
                         const MeshInfo &mesh);

/// assignFactors for `op`, reading each operand's and result's sharding
/// through `shardingOf` (null: unknown); parameters count as parameters.
FactorAxes
assignOpFactors(mlir::Operation *op, const ShardingRule &rule,
                llvm::function_ref<ShardingAttr(mlir::Value)> shardingOf,
                const MeshInfo &mesh);

/// The rule's blocks of operand i (empty when none).
inline llvm::ArrayRef<int64_t> operandBlocksOf(const ShardingRule &rule,
                                               unsigned i) {
  return i < rule.operandBlocks.size()
             ? llvm::ArrayRef<int64_t>(rule.operandBlocks[i])
             : llvm::ArrayRef<int64_t>();
}

/// The sharding a value with the given dims' factors gets under `axes`.
/// With `partialFromMissing`, factors split but absent from `dims` make the
/// value a partial sum over their axes (a result of a contraction).
/// `ruleBlocks` are the rule's blocks for these dims (operandBlocks; empty
/// for results).
ShardingAttr shardingFromFactors(mlir::MLIRContext *ctx,
                                 const ShardingRule &rule,
                                 const FactorAxes &axes,
                                 llvm::ArrayRef<int64_t> dims,
                                 llvm::ArrayRef<int64_t> ruleBlocks,
                                 bool partialFromMissing);

/// The rule's blocks of result i (empty when none).
inline llvm::ArrayRef<int64_t> resultBlocksOf(const ShardingRule &rule,
                                              unsigned i) {
  return i < rule.resultBlocks.size()
             ? llvm::ArrayRef<int64_t>(rule.resultBlocks[i])
             : llvm::ArrayRef<int64_t>();
}

/// The per-rank type of a global tensor under a sharding. Fails (returns
/// null) when a split does not divide a dim.
mlir::RankedTensorType localType(mlir::RankedTensorType global,
                                 ShardingAttr sharding, const MeshInfo &mesh);

/// Renders axes as "dp,tp".
std::string joinAxes(llvm::ArrayRef<llvm::StringRef> axes);

} // namespace weft

#endif // WEFT_PASSES_SHARDINGUTILS_H
