//===- Act.cpp - transformers' ACT2FN activations by name -----------------===//
//
// The activations a model uses by default have fused, vectorized kernels
// (gelu, swiglu); these serve the others, one scalar formula per element in
// double precision (program/Activation.h).
//
//===----------------------------------------------------------------------===//
#include "runtime/kernels/cpu/Kernels.h"

namespace weft::cpu {

template <typename T> void act(Activation K, const T *X, T *Y, int64_t N) {
#pragma omp parallel for schedule(static) if (N > (1 << 14))
  for (int64_t I = 0; I < N; ++I)
    Y[I] = T(activate(K, double(X[I])));
}

template <typename T>
void actGrad(Activation K, const T *Dy, const T *X, T *Dx, int64_t N) {
#pragma omp parallel for schedule(static) if (N > (1 << 14))
  for (int64_t I = 0; I < N; ++I)
    Dx[I] = T(double(Dy[I]) * activateGrad(K, double(X[I])));
}

template void act<float>(Activation, const float *, float *, int64_t);
template void act<double>(Activation, const double *, double *, int64_t);
template void actGrad<float>(Activation, const float *, const float *, float *,
                             int64_t);
template void actGrad<double>(Activation, const double *, const double *,
                              double *, int64_t);

} // namespace weft::cpu
