//===- Norms.cpp - layer_norm, rms_norm and their exact gradients ---------===//
//
// Forward and dx are parallel over rows. dgamma/dbeta are parallel over
// column blocks using per-row statistics saved in scratch, so no per-thread
// partial sums are needed and the result does not depend on the thread count.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/kernels/Kernels.h"

#include <algorithm>
#include <cmath>

namespace weft::cpu {

constexpr int64_t ParallelGrain = 1 << 14;
constexpr int64_t ColBlock = 64;

template <typename T>
void layerNorm(const T *X, const T *Gamma, const T *Beta, T *Y, int64_t Rows,
               int64_t D, double Eps) {
#pragma omp parallel for schedule(static) if (Rows * D > ParallelGrain)
  for (int64_t R = 0; R < Rows; ++R) {
    const T *XR = X + R * D;
    T *YR = Y + R * D;
    double Sum = 0;
    for (int64_t C = 0; C < D; ++C)
      Sum += XR[C];
    double Mean = Sum / D, Var = 0;
    for (int64_t C = 0; C < D; ++C) {
      double Dv = XR[C] - Mean;
      Var += Dv * Dv;
    }
    T Rstd = T(1.0 / std::sqrt(Var / D + Eps)), M = T(Mean);
    for (int64_t C = 0; C < D; ++C)
      YR[C] = (XR[C] - M) * Rstd * Gamma[C] + Beta[C];
  }
}

template <typename T>
void layerNormGrad(const T *Dy, const T *X, const T *Gamma, T *Dx, T *DGamma,
                   T *DBeta, int64_t Rows, int64_t D, double Eps,
                   void *Scratch) {
  double *Stats = static_cast<double *>(Scratch); // mean, rstd per row
#pragma omp parallel for schedule(static) if (Rows * D > ParallelGrain)
  for (int64_t R = 0; R < Rows; ++R) {
    const T *XR = X + R * D, *DyR = Dy + R * D;
    double Sum = 0;
    for (int64_t C = 0; C < D; ++C)
      Sum += XR[C];
    double Mean = Sum / D, Var = 0;
    for (int64_t C = 0; C < D; ++C) {
      double Dv = XR[C] - Mean;
      Var += Dv * Dv;
    }
    double Rstd = 1.0 / std::sqrt(Var / D + Eps);
    Stats[2 * R] = Mean;
    Stats[2 * R + 1] = Rstd;
    // dxhat = dy*gamma; dx = rstd*(dxhat - mean(dxhat) - xhat*mean(dxhat*xhat))
    double SumG = 0, SumGX = 0;
    for (int64_t C = 0; C < D; ++C) {
      double G = double(DyR[C]) * Gamma[C];
      SumG += G;
      SumGX += G * (XR[C] - Mean) * Rstd;
    }
    T MG = T(SumG / D), MGX = T(SumGX / D), M = T(Mean), Rs = T(Rstd);
    T *DxR = Dx + R * D;
    for (int64_t C = 0; C < D; ++C) {
      T XHat = (XR[C] - M) * Rs;
      DxR[C] = Rs * (DyR[C] * Gamma[C] - MG - XHat * MGX);
    }
  }
  int64_t NumBlocks = (D + ColBlock - 1) / ColBlock;
#pragma omp parallel for schedule(static) if (Rows * D > ParallelGrain)
  for (int64_t Blk = 0; Blk < NumBlocks; ++Blk) {
    int64_t C0 = Blk * ColBlock, C1 = std::min(D, C0 + ColBlock);
    double AccG[ColBlock] = {}, AccB[ColBlock] = {};
    for (int64_t R = 0; R < Rows; ++R) {
      const T *XR = X + R * D, *DyR = Dy + R * D;
      double Mean = Stats[2 * R], Rstd = Stats[2 * R + 1];
      for (int64_t C = C0; C < C1; ++C) {
        AccG[C - C0] += double(DyR[C]) * (XR[C] - Mean) * Rstd;
        AccB[C - C0] += DyR[C];
      }
    }
    for (int64_t C = C0; C < C1; ++C) {
      DGamma[C] = T(AccG[C - C0]);
      DBeta[C] = T(AccB[C - C0]);
    }
  }
}

template <typename T>
void rmsNorm(const T *X, const T *Gamma, T *Y, int64_t Rows, int64_t D,
             double Eps) {
#pragma omp parallel for schedule(static) if (Rows * D > ParallelGrain)
  for (int64_t R = 0; R < Rows; ++R) {
    const T *XR = X + R * D;
    T *YR = Y + R * D;
    double Sq = 0;
    for (int64_t C = 0; C < D; ++C)
      Sq += double(XR[C]) * XR[C];
    T Rstd = T(1.0 / std::sqrt(Sq / D + Eps));
    for (int64_t C = 0; C < D; ++C)
      YR[C] = XR[C] * Rstd * Gamma[C];
  }
}

template <typename T>
void rmsNormGrad(const T *Dy, const T *X, const T *Gamma, T *Dx, T *DGamma,
                 int64_t Rows, int64_t D, double Eps, void *Scratch) {
  double *Stats = static_cast<double *>(Scratch); // rstd per row
#pragma omp parallel for schedule(static) if (Rows * D > ParallelGrain)
  for (int64_t R = 0; R < Rows; ++R) {
    const T *XR = X + R * D, *DyR = Dy + R * D;
    double Sq = 0, Dot = 0;
    for (int64_t C = 0; C < D; ++C) {
      Sq += double(XR[C]) * XR[C];
      Dot += double(DyR[C]) * Gamma[C] * XR[C];
    }
    double Rstd = 1.0 / std::sqrt(Sq / D + Eps);
    Stats[R] = Rstd;
    // y = x*r*g, r = (mean(x^2)+eps)^-1/2: dx = r*g*dy - x * r^3 * dot / D
    T Rs = T(Rstd), K = T(Rstd * Rstd * Rstd * Dot / D);
    T *DxR = Dx + R * D;
    for (int64_t C = 0; C < D; ++C)
      DxR[C] = Rs * DyR[C] * Gamma[C] - XR[C] * K;
  }
  int64_t NumBlocks = (D + ColBlock - 1) / ColBlock;
#pragma omp parallel for schedule(static) if (Rows * D > ParallelGrain)
  for (int64_t Blk = 0; Blk < NumBlocks; ++Blk) {
    int64_t C0 = Blk * ColBlock, C1 = std::min(D, C0 + ColBlock);
    double Acc[ColBlock] = {};
    for (int64_t R = 0; R < Rows; ++R) {
      const T *XR = X + R * D, *DyR = Dy + R * D;
      double Rstd = Stats[R];
      for (int64_t C = C0; C < C1; ++C)
        Acc[C - C0] += double(DyR[C]) * XR[C] * Rstd;
    }
    for (int64_t C = C0; C < C1; ++C)
      DGamma[C] = T(Acc[C - C0]);
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
