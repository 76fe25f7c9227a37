//===- TpRoles.h - tensor-parallel roles read from structure ----*- C++ -*-===//
//
// Which parameters Megatron-style tensor parallelism splits, and how, read
// from the graph alone (never from parameter names): weft-infer-tp-roles
// writes them as weft.tp_role, and the planner costs GEMMs by the same
// answer, so the layout and its price cannot disagree.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_PASSES_TPROLES_H
#define WEFT_PASSES_TPROLES_H

#include "dialect/WeftDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"

namespace weft {

/// The tensor-parallel role of every parameter of `fn` (a forward
/// function) that Megatron's layout splits; parameters absent from the map
/// stay whole. A parameter that already carries a weft.tp_role keeps it.
///
/// - A *region* starts at a column-parallel linear layer: a matmul of a
///   norm's output (layer_norm or rms_norm) by a parameter used once. Its
///   output features split; so does a bias added to it.
/// - Values of a region flow through ops that compute each feature (or
///   head) alone: activations, swiglu and products of two region values,
///   rope, attention (q, k and v all of the region) and a split of the
///   fused QKV into equal parts (whose count becomes the blocks of the
///   weight and bias before it).
/// - A region ends at row-parallel linear layers: a matmul of a region
///   value by a parameter used once, whose input features split (its
///   output is a partial sum, all-reduced).
/// - Any other use of a region value (a norm, a residual add, a reshape, a
///   return) means the region is not Megatron's: none of its parameters
///   split. A region with no row-parallel end does not split either.
/// - The vocabulary: a matmul of a norm's output by a [V, d] table straight
///   into a cross-entropy (or returned as logits), V the rows of a token
///   embedding's table, is the LM head; it and the token tables split over
///   the vocabulary (tied or untied).
llvm::DenseMap<mlir::Operation *, TpRoleAttr>
inferTpRoles(mlir::func::FuncOp fn);

} // namespace weft

#endif // WEFT_PASSES_TPROLES_H
