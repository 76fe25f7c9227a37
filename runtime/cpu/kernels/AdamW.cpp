//===- AdamW.cpp - torch.optim.AdamW, single-tensor formulation ----------===//
#include "runtime/cpu/kernels/Kernels.h"

#include <cmath>

namespace weft::cpu {

template <typename T>
void adamw(T *Param, const T *Grad, T *M, T *V, int64_t N,
           const AdamWParams &P) {
  const T Decay = T(P.Decay ? 1.0 - P.Lr * P.WeightDecay : 1.0);
  const T B1 = T(P.Beta1), B2 = T(P.Beta2);
  const T OneMinusB1 = T(1.0 - P.Beta1), OneMinusB2 = T(1.0 - P.Beta2);
  const double Bc1 = 1.0 - std::pow(P.Beta1, double(P.Step));
  const double Bc2 = 1.0 - std::pow(P.Beta2, double(P.Step));
  const T StepSize = T(P.Lr / Bc1), Bc2Sqrt = T(std::sqrt(Bc2)), Eps = T(P.Eps);
#pragma omp parallel for schedule(static) if (N > (1 << 15))
  for (int64_t I = 0; I < N; ++I) {
    T G = Grad[I];
    T Pi = Param[I] * Decay;
    T Mi = B1 * M[I] + OneMinusB1 * G;
    T Vi = B2 * V[I] + OneMinusB2 * G * G;
    M[I] = Mi;
    V[I] = Vi;
    Param[I] = Pi - StepSize * Mi / (std::sqrt(Vi) / Bc2Sqrt + Eps);
  }
}

template void adamw<float>(float *, const float *, float *, float *, int64_t,
                           const AdamWParams &);
template void adamw<double>(double *, const double *, double *, double *,
                            int64_t, const AdamWParams &);

} // namespace weft::cpu
