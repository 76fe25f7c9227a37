//===- Act.cpp - transformers' ACT2FN activations by name -----------------===//
//
// The activations a model uses by default have fused, vectorized kernels
// (gelu, swiglu); these serve the others. ReLU, sigmoid and tanh (the ones
// ONNX graphs raise to most) run as vectorizable loops (FastMath.h's vexp
// for float, libm for double, as GELU's kernel does); every other kind is
// one scalar formula per element in double precision (program/Activation.h).
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/kernels/FastMath.h"
#include "runtime/cpu/kernels/Kernels.h"

namespace weft::cpu {

namespace {

constexpr int64_t Grain = 1 << 14;

template <typename T, typename F> void map(const T *X, T *Y, int64_t N, F Fn) {
#pragma omp parallel for schedule(static) if (N > Grain)
  for (int64_t I = 0; I < N; ++I)
    Y[I] = Fn(X[I]);
}

template <typename T, typename F>
void mapGrad(const T *Dy, const T *X, T *Dx, int64_t N, F Fn) {
#pragma omp parallel for schedule(static) if (N > Grain)
  for (int64_t I = 0; I < N; ++I)
    Dx[I] = Fn(Dy[I], X[I]);
}

} // namespace

template <typename T> void act(Activation K, const T *X, T *Y, int64_t N) {
  switch (K) {
  case Activation::Relu:
    return map(X, Y, N, [](T V) { return V > T(0) ? V : T(0); });
  case Activation::Sigmoid:
    return map(X, Y, N, [](T V) { return vsigmoid(V); });
  case Activation::Tanh:
    return map(X, Y, N, [](T V) { return vtanh(V); });
  default:
    return map(X, Y, N, [K](T V) { return T(activate(K, double(V))); });
  }
}

// torch's derivatives: relu'(0) = 0, sigmoid' = s (1 - s), tanh' = 1 - t^2,
// grouped as activateGrad groups them (f64 programs: the same bits).
template <typename T>
void actGrad(Activation K, const T *Dy, const T *X, T *Dx, int64_t N) {
  switch (K) {
  case Activation::Relu:
    return mapGrad(Dy, X, Dx, N, [](T G, T V) { return V > T(0) ? G : T(0); });
  case Activation::Sigmoid:
    return mapGrad(Dy, X, Dx, N, [](T G, T V) {
      T S = vsigmoid(V);
      return G * (S * (T(1) - S));
    });
  case Activation::Tanh:
    return mapGrad(Dy, X, Dx, N, [](T G, T V) {
      T Th = vtanh(V);
      return G * (T(1) - Th * Th); // as Activation.h, times dy
    });
  default:
    return mapGrad(Dy, X, Dx, N, [K](T G, T V) {
      return T(double(G) * activateGrad(K, double(V)));
    });
  }
}

template void act<float>(Activation, const float *, float *, int64_t);
template void act<double>(Activation, const double *, double *, int64_t);
template void actGrad<float>(Activation, const float *, const float *, float *,
                             int64_t);
template void actGrad<double>(Activation, const double *, const double *,
                              double *, int64_t);

} // namespace weft::cpu
