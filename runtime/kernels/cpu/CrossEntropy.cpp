//===- CrossEntropy.cpp - mean cross entropy over rows, and its gradient --===//
#include "runtime/kernels/cpu/FastMath.h"
#include "runtime/kernels/cpu/Kernels.h"
#include "runtime/kernels/cpu/Parallel.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>

namespace weft::cpu {

namespace {
Status checkTargets(const int32_t *Targets, int64_t Rows, int64_t V,
                    const char *Op) {
  for (int64_t R = 0; R < Rows; ++R)
    if (Targets[R] < 0 || Targets[R] >= V)
      return Status::error(std::string(Op) + ": target " +
                           std::to_string(Targets[R]) + " at row " +
                           std::to_string(R) + " is outside [0, " +
                           std::to_string(V) + ")");
  return Status::success();
}
} // namespace

namespace {

template <typename T>
inline double rowLoss(const T *X, int64_t V, int32_t Target) {
  T M = rowMax(X, V);
  return double(M) + std::log(rowSumExp(X, V, M)) - double(X[Target]);
}

template <typename T>
inline void rowGrad(const T *X, int64_t V, int32_t Target, double Scale,
                    T *Dx) {
  T M = rowMax(X, V);
  T K = T(Scale / rowSumExp(X, V, M));
  T Xt = X[Target]; // read before writing: Dx may alias X
  for (int64_t J = 0; J < V; ++J)
    Dx[J] = vexp(X[J] - M) * K;
  Dx[Target] = T(double(vexp(Xt - M)) * double(K) - Scale);
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
                    int64_t V, T *Loss, int64_t Denominator) {
  WEFT_RETURN_IF_ERROR(checkTargets(Targets, Rows, V, "cross_entropy"));
  double Total = 0;
#pragma omp parallel for schedule(static) reduction(+ : Total) if (Rows * V > (1 << 14))
  for (int64_t R = 0; R < Rows; ++R) {
    if constexpr (std::is_same_v<T, float>)
      Total += rowLossF(Logits + R * V, V, Targets[R]);
    else
      Total += rowLoss(Logits + R * V, V, Targets[R]);
  }
  *Loss = T(Total / double(Denominator > 0 ? Denominator : Rows));
  return Status::success();
}

template <typename T>
Status crossEntropyGrad(const T *Logits, const int32_t *Targets, const T *DLoss,
                        T *DLogits, int64_t Rows, int64_t V,
                        int64_t Denominator) {
  WEFT_RETURN_IF_ERROR(checkTargets(Targets, Rows, V, "cross_entropy_grad"));
  const double Scale =
      double(*DLoss) / double(Denominator > 0 ? Denominator : Rows);
#pragma omp parallel for schedule(static) if (Rows * V > (1 << 14))
  for (int64_t R = 0; R < Rows; ++R) {
    if constexpr (std::is_same_v<T, float>)
      rowGradF(Logits + R * V, V, Targets[R], Scale, DLogits + R * V);
    else
      rowGrad(Logits + R * V, V, Targets[R], Scale, DLogits + R * V);
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
                         int64_t V, int64_t First, int64_t Total, T *Stats) {
  WEFT_RETURN_IF_ERROR(
      checkTargets(Targets, Rows, Total, "cross_entropy_stats"));
#pragma omp parallel for schedule(static) if (Rows * V > (1 << 14))
  for (int64_t R = 0; R < Rows; ++R) {
    const T *X = Logits + R * V;
    T M = rowMax(X, V);
    int64_t Local = int64_t(Targets[R]) - First;
    Stats[R * 3] = M;
    Stats[R * 3 + 1] = T(rowSumExp(X, V, M));
    Stats[R * 3 + 2] = Local >= 0 && Local < V ? X[Local] : T(0);
  }
  return Status::success();
}

template <typename T>
void crossEntropyFromStats(const T *Stats, int64_t K, int64_t Rows,
                           int64_t Denominator, T *Loss) {
  double Total = 0;
  for (int64_t R = 0; R < Rows; ++R) {
    double M, S, Target = 0;
    mergeStats(Stats, K, Rows, R, M, S);
    for (int64_t Q = 0; Q < K; ++Q)
      Target += double(Stats[(Q * Rows + R) * 3 + 2]);
    Total += M + std::log(S) - Target;
  }
  *Loss = T(Total / double(Denominator));
}

template <typename T>
Status crossEntropyStatsGrad(const T *Logits, const int32_t *Targets,
                             const T *Stats, int64_t K, const T *DLoss,
                             T *DLogits, int64_t Rows, int64_t V, int64_t First,
                             int64_t Total, int64_t Denominator) {
  WEFT_RETURN_IF_ERROR(
      checkTargets(Targets, Rows, Total, "cross_entropy_stats_grad"));
  const double Scale = double(*DLoss) / double(Denominator);
#pragma omp parallel for schedule(static) if (Rows * V > (1 << 14))
  for (int64_t R = 0; R < Rows; ++R) {
    double M, S;
    mergeStats(Stats, K, Rows, R, M, S);
    const T *X = Logits + R * V;
    T *Dx = DLogits + R * V;
    const T Shift = T(M), Mul = T(Scale / S);
    int64_t Local = int64_t(Targets[R]) - First;
    T Xt = Local >= 0 && Local < V ? X[Local] : T(0); // before Dx overwrites
    for (int64_t J = 0; J < V; ++J)
      Dx[J] = vexp(X[J] - Shift) * Mul;
    if (Local >= 0 && Local < V)
      Dx[Local] = T(double(vexp(Xt - Shift)) * double(Mul) - Scale);
  }
  return Status::success();
}

#define WEFT_INSTANTIATE_VOCAB_PARALLEL(T)                                     \
  template Status crossEntropyStats<T>(const T *, const int32_t *, int64_t,    \
                                       int64_t, int64_t, int64_t, T *);        \
  template void crossEntropyFromStats<T>(const T *, int64_t, int64_t, int64_t, \
                                         T *);                                 \
  template Status crossEntropyStatsGrad<T>(                                    \
      const T *, const int32_t *, const T *, int64_t, const T *, T *, int64_t, \
      int64_t, int64_t, int64_t, int64_t);
WEFT_INSTANTIATE_VOCAB_PARALLEL(float)
WEFT_INSTANTIATE_VOCAB_PARALLEL(double)

template Status crossEntropy<float>(const float *, const int32_t *, int64_t,
                                    int64_t, float *, int64_t);
template Status crossEntropy<double>(const double *, const int32_t *, int64_t,
                                     int64_t, double *, int64_t);
template Status crossEntropyGrad<float>(const float *, const int32_t *,
                                        const float *, float *, int64_t,
                                        int64_t, int64_t);
template Status crossEntropyGrad<double>(const double *, const int32_t *,
                                         const double *, double *, int64_t,
                                         int64_t, int64_t);

} // namespace weft::cpu
