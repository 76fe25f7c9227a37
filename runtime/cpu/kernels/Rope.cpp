//===- Rope.cpp - rotary position embedding (HF rotate_half) --------------===//
#include "runtime/cpu/kernels/Kernels.h"

#include <cmath>

namespace weft::cpu {

// Parallel over positions: cos/sin are computed once per (s, i) and applied
// to every batch row and head. X and Y may be the same buffer. Row s holds
// global position First + s (a context-parallel rank's block).
template <typename T>
void rope(const T *X, T *Y, int64_t B, int64_t S, int64_t H, int64_t Hd,
          double Theta, bool Inverse, const double *InvFreq, double Scale,
          int64_t First) {
  int64_t Half = Hd / 2, Width = H * Hd;
#pragma omp parallel for schedule(static) if (B * S * Width > (1 << 14))
  for (int64_t Pos = 0; Pos < S; ++Pos) {
    for (int64_t I = 0; I < Half; ++I) {
      double F =
          InvFreq ? InvFreq[I] : std::pow(Theta, -2.0 * double(I) / double(Hd));
      double A = double(First + Pos) * F * (Inverse ? -1.0 : 1.0);
      T C = T(std::cos(A) * Scale), Sn = T(std::sin(A) * Scale);
      for (int64_t Bi = 0; Bi < B; ++Bi) {
        const T *XR = X + (Bi * S + Pos) * Width;
        T *YR = Y + (Bi * S + Pos) * Width;
        for (int64_t Hh = 0; Hh < H; ++Hh) {
          T X0 = XR[Hh * Hd + I], X1 = XR[Hh * Hd + I + Half];
          YR[Hh * Hd + I] = X0 * C - X1 * Sn;
          YR[Hh * Hd + I + Half] = X1 * C + X0 * Sn;
        }
      }
    }
  }
}

template <typename T>
void documentRope(const T *X, T *Y, int64_t B, int64_t S, int64_t H, int64_t Hd,
                  double Theta, bool Inverse, const double *InvFreq,
                  double Scale, const int32_t *Pos, int64_t Stride) {
  int64_t Half = Hd / 2, Width = H * Hd;
#pragma omp parallel for schedule(static) if (B * S * Width > (1 << 14))
  for (int64_t R = 0; R < B * S; ++R) {
    const double P = double(Pos[(R / S) * Stride + R % S]);
    const T *XR = X + R * Width;
    T *YR = Y + R * Width;
    for (int64_t I = 0; I < Half; ++I) {
      double F =
          InvFreq ? InvFreq[I] : std::pow(Theta, -2.0 * double(I) / double(Hd));
      double A = P * F * (Inverse ? -1.0 : 1.0);
      T C = T(std::cos(A) * Scale), Sn = T(std::sin(A) * Scale);
      for (int64_t Hh = 0; Hh < H; ++Hh) {
        T X0 = XR[Hh * Hd + I], X1 = XR[Hh * Hd + I + Half];
        YR[Hh * Hd + I] = X0 * C - X1 * Sn;
        YR[Hh * Hd + I + Half] = X1 * C + X0 * Sn;
      }
    }
  }
}

template void documentRope<float>(const float *, float *, int64_t, int64_t,
                                  int64_t, int64_t, double, bool,
                                  const double *, double, const int32_t *,
                                  int64_t);
template void documentRope<double>(const double *, double *, int64_t, int64_t,
                                   int64_t, int64_t, double, bool,
                                   const double *, double, const int32_t *,
                                   int64_t);
template void rope<float>(const float *, float *, int64_t, int64_t, int64_t,
                          int64_t, double, bool, const double *, double,
                          int64_t);
template void rope<double>(const double *, double *, int64_t, int64_t, int64_t,
                           int64_t, double, bool, const double *, double,
                           int64_t);

} // namespace weft::cpu
