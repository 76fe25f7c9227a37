//===- AdamW.cpp - torch.optim.AdamW, single-tensor formulation ----------===//
//
// One pass over the tensor, in one contiguous range per thread. The float
// range is compiled per instruction set (WEFT_SIMD_CLONES): sqrt and the two
// divisions are correctly rounded at every width, so every clone gives the
// same bits; the baseline's 4 lanes made this loop bound by the divisions,
// not by memory.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/kernels/Kernels.h"
#include "runtime/cpu/kernels/Parallel.h"

#include <cmath>
#include <type_traits>

namespace weft::cpu {

namespace {

template <typename T> struct AdamWConstants {
  T Decay, B1, B2, OneMinusB1, OneMinusB2, StepSize, Bc2Sqrt, Eps;
};

template <typename T>
WEFT_CLONE_BODY void adamwRange(T *Param, const T *Grad, T *M, T *V, int64_t N,
                                const AdamWConstants<T> &K) {
  for (int64_t I = 0; I < N; ++I) {
    T G = Grad[I];
    T Pi = Param[I] * K.Decay;
    T Mi = K.B1 * M[I] + K.OneMinusB1 * G;
    T Vi = K.B2 * V[I] + K.OneMinusB2 * G * G;
    M[I] = Mi;
    V[I] = Vi;
    Param[I] = Pi - K.StepSize * Mi / (std::sqrt(Vi) / K.Bc2Sqrt + K.Eps);
  }
}

WEFT_SIMD_CLONES void adamwRangeF(float *Param, const float *Grad, float *M,
                                  float *V, int64_t N,
                                  const AdamWConstants<float> &K) {
  adamwRange(Param, Grad, M, V, N, K);
}

} // namespace

template <typename T>
void adamw(T *Param, const T *Grad, T *M, T *V, int64_t N,
           const AdamWParams &P) {
  const double Bc1 = 1.0 - std::pow(P.Beta1, double(P.Step));
  const double Bc2 = 1.0 - std::pow(P.Beta2, double(P.Step));
  const AdamWConstants<T> K{T(P.Decay ? 1.0 - P.Lr * P.WeightDecay : 1.0),
                            T(P.Beta1),
                            T(P.Beta2),
                            T(1.0 - P.Beta1),
                            T(1.0 - P.Beta2),
                            T(P.Lr / Bc1),
                            T(std::sqrt(Bc2)),
                            T(P.Eps)};
  forChunks(N, int64_t(1) << 15, [&](int64_t Begin, int64_t End) {
    byType<T>(adamwRangeF, adamwRange<T>, Param + Begin, Grad + Begin,
              M + Begin, V + Begin, End - Begin, K);
  });
}

template void adamw<float>(float *, const float *, float *, float *, int64_t,
                           const AdamWParams &);
template void adamw<double>(double *, const double *, double *, double *,
                            int64_t, const AdamWParams &);

} // namespace weft::cpu
