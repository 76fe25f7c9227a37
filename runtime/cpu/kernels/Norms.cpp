//===- Norms.cpp - layer_norm, rms_norm and their exact gradients ---------===//
//
// Forward and dx are parallel over rows. dgamma/dbeta are parallel over
// column blocks using per-row statistics saved in scratch, so no per-thread
// partial sums are needed and the result does not depend on the thread count.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/kernels/FastMath.h"
#include "runtime/cpu/kernels/Kernels.h"
#include "runtime/cpu/kernels/Parallel.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

namespace weft::cpu {

constexpr int64_t ParallelGrain = 1 << 14;
constexpr int64_t ColBlock = 64;

namespace {

// Row bodies, and the float ones compiled per instruction set
// (WEFT_SIMD_CLONES). Row sums run in double lanes (laneSum), column sums
// with the columns as lanes: the order of every sum is fixed by the source,
// so each clone gives the same bits.

template <typename T> WEFT_CLONE_BODY double rowMean(const T *X, int64_t D) {
  return laneSum<double>(D, [&](int64_t C) { return double(X[C]); }) / D;
}

template <typename T>
WEFT_CLONE_BODY double rowRstd(const T *X, int64_t D, double Mean, double Eps) {
  double Var = laneSum<double>(D, [&](int64_t C) {
    double Dv = X[C] - Mean;
    return Dv * Dv;
  });
  return 1.0 / std::sqrt(Var / D + Eps);
}

template <typename T>
WEFT_CLONE_BODY void layerNormRow(const T *XR, const T *Gamma, const T *Beta,
                                  T *YR, int64_t D, double Eps) {
  double Mean = rowMean(XR, D);
  T Rstd = T(rowRstd(XR, D, Mean, Eps)), M = T(Mean);
  for (int64_t C = 0; C < D; ++C)
    YR[C] = (XR[C] - M) * Rstd * Gamma[C] + Beta[C];
}

WEFT_SIMD_CLONES void layerNormRowF(const float *XR, const float *Gamma,
                                    const float *Beta, float *YR, int64_t D,
                                    double Eps) {
  layerNormRow(XR, Gamma, Beta, YR, D, Eps);
}

// dxhat = dy*gamma; dx = rstd*(dxhat - mean(dxhat) - xhat*mean(dxhat*xhat))
template <typename T>
WEFT_CLONE_BODY void layerNormGradRow(const T *DyR, const T *XR, const T *Gamma,
                                      T *DxR, int64_t D, double Eps,
                                      double *Stats) {
  double Mean = rowMean(XR, D), Rstd = rowRstd(XR, D, Mean, Eps);
  Stats[0] = Mean;
  Stats[1] = Rstd;
  double SumG, SumGX;
  laneSums<double>(
      D, [&](int64_t C) { return double(DyR[C]) * Gamma[C]; },
      [&](int64_t C) {
        return double(DyR[C]) * Gamma[C] * (XR[C] - Mean) * Rstd;
      },
      SumG, SumGX);
  T MG = T(SumG / D), MGX = T(SumGX / D), M = T(Mean), Rs = T(Rstd);
  for (int64_t C = 0; C < D; ++C) {
    T XHat = (XR[C] - M) * Rs;
    DxR[C] = Rs * (DyR[C] * Gamma[C] - MG - XHat * MGX);
  }
}

WEFT_SIMD_CLONES void layerNormGradRowF(const float *DyR, const float *XR,
                                        const float *Gamma, float *DxR,
                                        int64_t D, double Eps, double *Stats) {
  layerNormGradRow(DyR, XR, Gamma, DxR, D, Eps, Stats);
}

// dgamma and dbeta of columns [C0, C1), from the rows' mean and rstd.
template <typename T>
WEFT_CLONE_BODY void
layerNormParamGrads(const T *Dy, const T *X, const double *Stats, T *DGamma,
                    T *DBeta, int64_t Rows, int64_t D, int64_t C0, int64_t C1) {
  double AccG[ColBlock] = {}, AccB[ColBlock] = {};
  for (int64_t R = 0; R < Rows; ++R) {
    const T *XR = X + R * D + C0, *DyR = Dy + R * D + C0;
    double Mean = Stats[2 * R], Rstd = Stats[2 * R + 1];
    for (int64_t C = 0; C < C1 - C0; ++C) {
      AccG[C] += double(DyR[C]) * (XR[C] - Mean) * Rstd;
      AccB[C] += DyR[C];
    }
  }
  for (int64_t C = C0; C < C1; ++C) {
    DGamma[C] = T(AccG[C - C0]);
    DBeta[C] = T(AccB[C - C0]);
  }
}

WEFT_SIMD_CLONES void layerNormParamGradsF(const float *Dy, const float *X,
                                           const double *Stats, float *DGamma,
                                           float *DBeta, int64_t Rows,
                                           int64_t D, int64_t C0, int64_t C1) {
  layerNormParamGrads(Dy, X, Stats, DGamma, DBeta, Rows, D, C0, C1);
}

template <typename T>
WEFT_CLONE_BODY double rowMeanSquare(const T *X, int64_t D) {
  return laneSum<double>(D, [&](int64_t C) { return double(X[C]) * X[C]; }) / D;
}

template <typename T>
WEFT_CLONE_BODY void rmsNormRow(const T *XR, const T *Gamma, T *YR, int64_t D,
                                double Eps) {
  T Rstd = T(1.0 / std::sqrt(rowMeanSquare(XR, D) + Eps));
  for (int64_t C = 0; C < D; ++C)
    YR[C] = XR[C] * Rstd * Gamma[C];
}

WEFT_SIMD_CLONES void rmsNormRowF(const float *XR, const float *Gamma,
                                  float *YR, int64_t D, double Eps) {
  rmsNormRow(XR, Gamma, YR, D, Eps);
}

// y = x*r*g, r = (mean(x^2)+eps)^-1/2: dx = r*g*dy - x * r^3 * dot / D
template <typename T>
WEFT_CLONE_BODY void rmsNormGradRow(const T *DyR, const T *XR, const T *Gamma,
                                    T *DxR, int64_t D, double Eps,
                                    double *Rstd) {
  double Dot = laneSum<double>(
      D, [&](int64_t C) { return double(DyR[C]) * Gamma[C] * XR[C]; });
  double R = 1.0 / std::sqrt(rowMeanSquare(XR, D) + Eps);
  *Rstd = R;
  T Rs = T(R), K = T(R * R * R * Dot / D);
  for (int64_t C = 0; C < D; ++C)
    DxR[C] = Rs * DyR[C] * Gamma[C] - XR[C] * K;
}

WEFT_SIMD_CLONES void rmsNormGradRowF(const float *DyR, const float *XR,
                                      const float *Gamma, float *DxR, int64_t D,
                                      double Eps, double *Rstd) {
  rmsNormGradRow(DyR, XR, Gamma, DxR, D, Eps, Rstd);
}

template <typename T>
WEFT_CLONE_BODY void
rmsNormParamGrads(const T *Dy, const T *X, const double *Stats, T *DGamma,
                  int64_t Rows, int64_t D, int64_t C0, int64_t C1) {
  double Acc[ColBlock] = {};
  for (int64_t R = 0; R < Rows; ++R) {
    const T *XR = X + R * D + C0, *DyR = Dy + R * D + C0;
    double Rstd = Stats[R];
    for (int64_t C = 0; C < C1 - C0; ++C)
      Acc[C] += double(DyR[C]) * XR[C] * Rstd;
  }
  for (int64_t C = C0; C < C1; ++C)
    DGamma[C] = T(Acc[C - C0]);
}

WEFT_SIMD_CLONES void rmsNormParamGradsF(const float *Dy, const float *X,
                                         const double *Stats, float *DGamma,
                                         int64_t Rows, int64_t D, int64_t C0,
                                         int64_t C1) {
  rmsNormParamGrads(Dy, X, Stats, DGamma, Rows, D, C0, C1);
}

} // namespace

template <typename T>
void layerNorm(const T *X, const T *Gamma, const T *Beta, T *Y, int64_t Rows,
               int64_t D, double Eps) {
#pragma omp parallel for schedule(static) if (Rows * D > ParallelGrain)
  for (int64_t R = 0; R < Rows; ++R) {
    byType<T>(layerNormRowF, layerNormRow<T>, X + R * D, Gamma, Beta, Y + R * D,
              D, Eps);
  }
}

template <typename T>
void layerNormGrad(const T *Dy, const T *X, const T *Gamma, T *Dx, T *DGamma,
                   T *DBeta, int64_t Rows, int64_t D, double Eps,
                   void *Scratch) {
  double *Stats = static_cast<double *>(Scratch); // mean, rstd per row
#pragma omp parallel for schedule(static) if (Rows * D > ParallelGrain)
  for (int64_t R = 0; R < Rows; ++R) {
    byType<T>(layerNormGradRowF, layerNormGradRow<T>, Dy + R * D, X + R * D,
              Gamma, Dx + R * D, D, Eps, Stats + 2 * R);
  }
  int64_t NumBlocks = (D + ColBlock - 1) / ColBlock;
#pragma omp parallel for schedule(static) if (Rows * D > ParallelGrain)
  for (int64_t Blk = 0; Blk < NumBlocks; ++Blk) {
    int64_t C0 = Blk * ColBlock, C1 = std::min(D, C0 + ColBlock);
    byType<T>(layerNormParamGradsF, layerNormParamGrads<T>, Dy, X, Stats,
              DGamma, DBeta, Rows, D, C0, C1);
  }
}

template <typename T>
void rmsNorm(const T *X, const T *Gamma, T *Y, int64_t Rows, int64_t D,
             double Eps) {
#pragma omp parallel for schedule(static) if (Rows * D > ParallelGrain)
  for (int64_t R = 0; R < Rows; ++R) {
    byType<T>(rmsNormRowF, rmsNormRow<T>, X + R * D, Gamma, Y + R * D, D, Eps);
  }
}

template <typename T>
void rmsNormGrad(const T *Dy, const T *X, const T *Gamma, T *Dx, T *DGamma,
                 int64_t Rows, int64_t D, double Eps, void *Scratch) {
  double *Stats = static_cast<double *>(Scratch); // rstd per row
#pragma omp parallel for schedule(static) if (Rows * D > ParallelGrain)
  for (int64_t R = 0; R < Rows; ++R) {
    byType<T>(rmsNormGradRowF, rmsNormGradRow<T>, Dy + R * D, X + R * D, Gamma,
              Dx + R * D, D, Eps, Stats + R);
  }
  int64_t NumBlocks = (D + ColBlock - 1) / ColBlock;
#pragma omp parallel for schedule(static) if (Rows * D > ParallelGrain)
  for (int64_t Blk = 0; Blk < NumBlocks; ++Blk) {
    int64_t C0 = Blk * ColBlock, C1 = std::min(D, C0 + ColBlock);
    byType<T>(rmsNormParamGradsF, rmsNormParamGrads<T>, Dy, X, Stats, DGamma,
              Rows, D, C0, C1);
  }
}

#define WEFT_INSTANTIATE(T)                                                    \
  template void layerNorm<T>(const T *, const T *, const T *, T *, int64_t,    \
                             int64_t, double);                                 \
  template void layerNormGrad<T>(const T *, const T *, const T *, T *, T *,    \
                                 T *, int64_t, int64_t, double, void *);       \
  template void rmsNorm<T>(const T *, const T *, T *, int64_t, int64_t,        \
                           double);                                            \
  template void rmsNormGrad<T>(const T *, const T *, const T *, T *, T *,      \
                               int64_t, int64_t, double, void *);
WEFT_INSTANTIATE(float)
WEFT_INSTANTIATE(double)

} // namespace weft::cpu
