//===- CrossEntropyRows.h - Which columns and rows a loss counts -*- C++
//-*-===//
//
// What the CPU and CUDA cross-entropy kernels agree on before they read a
// logit: the columns of a row that are classes (a vocabulary padded for tp
// by weft-pad-vocab holds padding after them), the target PyTorch ignores,
// and the divisor of the mean (a masked loss divides by the step's counted
// targets).
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_RUNTIME_CROSSENTROPYROWS_H
#define WEFT_RUNTIME_CROSSENTROPYROWS_H

#include "program/Status.h"

#include <algorithm>
#include <cstdint>
#include <string>

namespace weft {

/// A target the loss ignores (PyTorch's ignore_index): a position a
/// masked-LM batch does not predict, or a classifier's unlabelled sample.
constexpr int32_t IgnoreTarget = -100;

/// The columns of a row that are classes, for logits [.., V] holding the
/// vocab ids [First, First + V) of Total: with a padded vocabulary those
/// before Classes, else all V. Every shard holds a class (the pass leaves
/// the padding to the last shard's tail).
inline Status classColumns(int64_t V, int64_t First, int64_t Total,
                           int64_t Classes, const char *Op, int64_t &C) {
  if (Classes > Total)
    return Status::error(
        std::string(Op) + ": classes=" + std::to_string(Classes) +
        " exceeds the logits' " + std::to_string(Total) + " columns");
  C = Classes > 0 ? std::min(V, Classes - First) : V;
  if (C < 1)
    return Status::error(std::string(Op) + ": the vocab shard [" +
                         std::to_string(First) + ", " +
                         std::to_string(First + V) + ") holds no class of " +
                         std::to_string(Classes));
  return Status::success();
}

/// The mean's divisor: a masked loss's counted targets (none: every row is
/// ignored, the sum is 0), else Denominator or the rows.
inline double lossDivisor(int64_t Denominator, int64_t Rows, bool Masked) {
  if (Masked)
    return double(std::max<int64_t>(Denominator, 1));
  return double(Denominator > 0 ? Denominator : Rows);
}

} // namespace weft

#endif // WEFT_RUNTIME_CROSSENTROPYROWS_H
