//===- CrossEntropy.cpp - mean cross entropy over rows, and its gradient --===//
#include "runtime/CrossEntropyRows.h"
#include "runtime/cpu/kernels/FastMath.h"
#include "runtime/cpu/kernels/Kernels.h"
#include "runtime/cpu/kernels/Parallel.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>

namespace weft::cpu {

namespace {
// Targets in [0, V); with Masked, also IgnoreTarget (a position not
// predicted). Counted = the rows that count. A masked loss divides by the
// step's counted targets (Denominator): this rank's rows are some of them.
Status checkTargets(const int32_t *Targets, int64_t Rows, int64_t V,
                    const char *Op, bool Masked = false,
                    int64_t Denominator = 0) {
  if (Masked && Denominator < 0)
    return Status::error(std::string(Op) +
                         ": the step's count of targets is unknown (inputs "
                         "set without it: Executor::setCountedTargets)");
  int64_t Counted = 0;
  for (int64_t R = 0; R < Rows; ++R) {
    if (Masked && Targets[R] == IgnoreTarget)
      continue;
    ++Counted;
    if (Targets[R] < 0 || Targets[R] >= V)
      return Status::error(std::string(Op) + ": target " +
                           std::to_string(Targets[R]) + " at row " +
                           std::to_string(R) + " is outside [0, " +
                           std::to_string(V) + ")" +
                           (Masked ? " and is not -100 (ignored)" : ""));
  }
  if (Masked && Counted > Denominator)
    return Status::error(std::string(Op) + ": " + std::to_string(Counted) +
                         " rows here have a target, more than the step's " +
                         std::to_string(Denominator) +
                         " counted targets: the batch and its count disagree");
  return Status::success();
}

template <typename T>
WEFT_CLONE_BODY double rowLoss(const T *X, int64_t V, int32_t Target) {
  T M = rowMax(X, V);
  return double(M) + std::log(rowSumExp(X, V, M)) - double(X[Target]);
}

// Dx is X (in place) or disjoint from it. One exp per logit: the sum's
// pass stores them, and the last pass scales.
template <typename T>
WEFT_CLONE_BODY void rowGrad(const T *X, int64_t V, int32_t Target,
                             double Scale, T *Dx) {
  T M = rowMax(X, V);
  T K = T(Scale / rowSumExpStore(X, V, M, Dx));
  T Et = Dx[Target];
  for (int64_t J = 0; J < V; ++J)
    Dx[J] *= K;
  Dx[Target] = T(double(Et) * double(K) - Scale);
}

// A vocabulary shard's row statistics: max, sum of exponentials relative
// to it, and the target's logit when the shard holds it (Local in [0, C)).
template <typename T>
WEFT_CLONE_BODY void rowStats(const T *X, int64_t C, int64_t Local, T *St) {
  T M = rowMax(X, C);
  St[0] = M;
  St[1] = T(rowSumExp(X, C, M));
  St[2] = Local >= 0 && Local < C ? X[Local] : T(0);
}

template <typename T>
WEFT_CLONE_BODY void rowScaledExp(const T *X, int64_t C, T Shift, T Mul,
                                  T *Dx) {
  for (int64_t J = 0; J < C; ++J)
    Dx[J] = vexp(X[J] - Shift) * Mul;
}

WEFT_SIMD_CLONES void rowStatsF(const float *X, int64_t C, int64_t Local,
                                float *St) {
  rowStats(X, C, Local, St);
}
WEFT_SIMD_CLONES void rowScaledExpF(const float *X, int64_t C, float Shift,
                                    float Mul, float *Dx) {
  rowScaledExp(X, C, Shift, Mul, Dx);
}

WEFT_SIMD_CLONES double rowLossF(const float *X, int64_t V, int32_t Target) {
  return rowLoss(X, V, Target);
}
WEFT_SIMD_CLONES void rowGradF(const float *X, int64_t V, int32_t Target,
                               double Scale, float *Dx) {
  rowGrad(X, V, Target, Scale, Dx);
}

} // namespace

template <typename T>
Status crossEntropy(const T *Logits, const int32_t *Targets, int64_t Rows,
                    int64_t V, T *Loss, int64_t Denominator, bool Masked,
                    int64_t Classes) {
  int64_t C;
  WEFT_RETURN_IF_ERROR(classColumns(V, 0, V, Classes, "cross_entropy", C));
  WEFT_RETURN_IF_ERROR(
      checkTargets(Targets, Rows, C, "cross_entropy", Masked, Denominator));
  double Total = 0;
#pragma omp parallel for schedule(static) reduction(+ : Total) if (Rows * V > (1 << 14))
  for (int64_t R = 0; R < Rows; ++R) {
    if (Masked && Targets[R] == IgnoreTarget)
      continue;
    Total += byType<T>(rowLossF, rowLoss<T>, Logits + R * V, C, Targets[R]);
  }
  *Loss = T(Total / lossDivisor(Denominator, Rows, Masked));
  return Status::success();
}

template <typename T>
Status crossEntropyGrad(const T *Logits, const int32_t *Targets, const T *DLoss,
                        T *DLogits, int64_t Rows, int64_t V,
                        int64_t Denominator, bool Masked, int64_t Classes) {
  int64_t C;
  WEFT_RETURN_IF_ERROR(classColumns(V, 0, V, Classes, "cross_entropy_grad", C));
  WEFT_RETURN_IF_ERROR(checkTargets(Targets, Rows, C, "cross_entropy_grad",
                                    Masked, Denominator));
  const double Scale = double(*DLoss) / lossDivisor(Denominator, Rows, Masked);
#pragma omp parallel for schedule(static) if (Rows * V > (1 << 14))
  for (int64_t R = 0; R < Rows; ++R) {
    if (Masked && Targets[R] == IgnoreTarget) {
      std::fill(DLogits + R * V, DLogits + (R + 1) * V, T(0));
      continue;
    }
    byType<T>(rowGradF, rowGrad<T>, Logits + R * V, C, Targets[R], Scale,
              DLogits + R * V);
    std::fill(DLogits + R * V + C, DLogits + (R + 1) * V, T(0)); // padding
  }
  return Status::success();
}

namespace {
// Row R's global max and sum of exponentials (relative to that max), merged
// from the K shards' statistics.
template <typename T>
void mergeStats(const T *Stats, int64_t K, int64_t Rows, int64_t R, double &M,
                double &S) {
  M = double(Stats[R * 3]);
  for (int64_t Q = 1; Q < K; ++Q)
    M = std::max(M, double(Stats[(Q * Rows + R) * 3]));
  S = 0;
  for (int64_t Q = 0; Q < K; ++Q) {
    const T *St = Stats + (Q * Rows + R) * 3;
    S += double(St[1]) * std::exp(double(St[0]) - M);
  }
}
} // namespace

template <typename T>
Status crossEntropyStats(const T *Logits, const int32_t *Targets, int64_t Rows,
                         int64_t V, int64_t First, int64_t Total, T *Stats,
                         bool Masked, int64_t Classes) {
  int64_t C;
  WEFT_RETURN_IF_ERROR(
      classColumns(V, First, Total, Classes, "cross_entropy_stats", C));
  // The count is checked where the loss divides by it.
  WEFT_RETURN_IF_ERROR(checkTargets(Targets, Rows,
                                    Classes > 0 ? Classes : Total,
                                    "cross_entropy_stats", Masked, INT64_MAX));
#pragma omp parallel for schedule(static) if (Rows * V > (1 << 14))
  for (int64_t R = 0; R < Rows; ++R) {
    if (Masked && Targets[R] == IgnoreTarget) {
      // A sum of exponentials of 0 marks the row: a counted one has >= 1.
      Stats[R * 3] = Stats[R * 3 + 1] = Stats[R * 3 + 2] = T(0);
      continue;
    }
    byType<T>(rowStatsF, rowStats<T>, Logits + R * V, C,
              int64_t(Targets[R]) - First, Stats + R * 3);
  }
  return Status::success();
}

template <typename T>
void crossEntropyFromStats(const T *Stats, int64_t K, int64_t Rows,
                           int64_t Denominator, T *Loss, bool Masked) {
  double Total = 0;
  for (int64_t R = 0; R < Rows; ++R) {
    double M, S, Target = 0;
    mergeStats(Stats, K, Rows, R, M, S);
    if (Masked && S == 0)
      continue; // an ignored row

    for (int64_t Q = 0; Q < K; ++Q)
      Target += double(Stats[(Q * Rows + R) * 3 + 2]);
    Total += M + std::log(S) - Target;
  }
  *Loss = T(Total / lossDivisor(Denominator, Rows, Masked));
}

template <typename T>
Status crossEntropyStatsGrad(const T *Logits, const int32_t *Targets,
                             const T *Stats, int64_t K, const T *DLoss,
                             T *DLogits, int64_t Rows, int64_t V, int64_t First,
                             int64_t Total, int64_t Denominator, bool Masked,
                             int64_t Classes) {
  int64_t C;
  WEFT_RETURN_IF_ERROR(
      classColumns(V, First, Total, Classes, "cross_entropy_stats_grad", C));
  WEFT_RETURN_IF_ERROR(
      checkTargets(Targets, Rows, Classes > 0 ? Classes : Total,
                   "cross_entropy_stats_grad", Masked, Denominator));
  const double Scale = double(*DLoss) / lossDivisor(Denominator, Rows, Masked);
#pragma omp parallel for schedule(static) if (Rows * V > (1 << 14))
  for (int64_t R = 0; R < Rows; ++R) {
    if (Masked && Targets[R] == IgnoreTarget) {
      std::fill(DLogits + R * V, DLogits + (R + 1) * V, T(0));
      continue;
    }
    double M, S;
    mergeStats(Stats, K, Rows, R, M, S);
    const T *X = Logits + R * V;
    T *Dx = DLogits + R * V;
    const T Shift = T(M), Mul = T(Scale / S);
    int64_t Local = int64_t(Targets[R]) - First;
    T Xt = Local >= 0 && Local < C ? X[Local] : T(0); // before Dx overwrites
    byType<T>(rowScaledExpF, rowScaledExp<T>, X, C, Shift, Mul, Dx);
    std::fill(Dx + C, Dx + V, T(0)); // a padded vocabulary's tail
    if (Local >= 0 && Local < C)
      Dx[Local] = T(double(vexp(Xt - Shift)) * double(Mul) - Scale);
  }
  return Status::success();
}

#define WEFT_INSTANTIATE_VOCAB_PARALLEL(T)                                     \
  template Status crossEntropyStats<T>(const T *, const int32_t *, int64_t,    \
                                       int64_t, int64_t, int64_t, T *, bool,   \
                                       int64_t);                               \
  template void crossEntropyFromStats<T>(const T *, int64_t, int64_t, int64_t, \
                                         T *, bool);                           \
  template Status crossEntropyStatsGrad<T>(                                    \
      const T *, const int32_t *, const T *, int64_t, const T *, T *, int64_t, \
      int64_t, int64_t, int64_t, int64_t, bool, int64_t);
WEFT_INSTANTIATE_VOCAB_PARALLEL(float)
WEFT_INSTANTIATE_VOCAB_PARALLEL(double)

template Status crossEntropy<float>(const float *, const int32_t *, int64_t,
                                    int64_t, float *, int64_t, bool, int64_t);
template Status crossEntropy<double>(const double *, const int32_t *, int64_t,
                                     int64_t, double *, int64_t, bool, int64_t);
template Status crossEntropyGrad<float>(const float *, const int32_t *,
                                        const float *, float *, int64_t,
                                        int64_t, int64_t, bool, int64_t);
template Status crossEntropyGrad<double>(const double *, const int32_t *,
                                         const double *, double *, int64_t,
                                         int64_t, int64_t, bool, int64_t);

} // namespace weft::cpu
