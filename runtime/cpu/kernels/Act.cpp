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
#include "runtime/cpu/kernels/Parallel.h"

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

// Sigmoid and tanh on a span, vexp inlined into a SIMD clone (a plain
// template's loop is compiled for baseline x86-64). The derivatives are
// torch's, sigmoid' = s (1 - s) and tanh' = 1 - t^2, grouped as
// activateGrad groups them (f64 programs: the same bits).
template <typename T>
WEFT_CLONE_BODY void expSpan(bool Tanh, const T *X, T *Y, int64_t N) {
  if (Tanh)
    for (int64_t I = 0; I < N; ++I)
      Y[I] = vtanh(X[I]);
  else
    for (int64_t I = 0; I < N; ++I)
      Y[I] = vsigmoid(X[I]);
}

template <typename T>
WEFT_CLONE_BODY void expGradSpan(bool Tanh, const T *Dy, const T *X, T *Dx,
                                 int64_t N) {
  if (Tanh)
    for (int64_t I = 0; I < N; ++I) {
      T Th = vtanh(X[I]);
      Dx[I] = Dy[I] * (T(1) - Th * Th);
    }
  else
    for (int64_t I = 0; I < N; ++I) {
      T S = vsigmoid(X[I]);
      Dx[I] = Dy[I] * (S * (T(1) - S));
    }
}

WEFT_SIMD_CLONES void expSpanF(bool Tanh, const float *X, float *Y, int64_t N) {
  expSpan(Tanh, X, Y, N);
}

WEFT_SIMD_CLONES void expGradSpanF(bool Tanh, const float *Dy, const float *X,
                                   float *Dx, int64_t N) {
  expGradSpan(Tanh, Dy, X, Dx, N);
}

} // namespace

template <typename T> void act(Activation K, const T *X, T *Y, int64_t N) {
  switch (K) {
  case Activation::Relu:
    return map(X, Y, N, [](T V) { return V > T(0) ? V : T(0); });
  case Activation::Sigmoid:
  case Activation::Tanh:
    return forChunks(N, Grain, [&](int64_t B, int64_t E) {
      byType<T>(expSpanF, expSpan<T>, K == Activation::Tanh, X + B, Y + B,
                E - B);
    });
  default:
    return map(X, Y, N, [K](T V) { return T(activate(K, double(V))); });
  }
}

// relu'(0) = 0, as torch's.
template <typename T>
void actGrad(Activation K, const T *Dy, const T *X, T *Dx, int64_t N) {
  switch (K) {
  case Activation::Relu:
    return mapGrad(Dy, X, Dx, N, [](T G, T V) { return V > T(0) ? G : T(0); });
  case Activation::Sigmoid:
  case Activation::Tanh:
    return forChunks(N, Grain, [&](int64_t B, int64_t E) {
      byType<T>(expGradSpanF, expGradSpan<T>, K == Activation::Tanh, Dy + B,
                X + B, Dx + B, E - B);
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
