//===- Activations.cpp - gelu, silu, swiglu and their gradients -----------===//
#include "runtime/kernels/cpu/FastMath.h"
#include "runtime/kernels/cpu/Kernels.h"

namespace weft::cpu {

constexpr int64_t ParallelGrain = 1 << 14;
constexpr double SqrtTwoOverPi = 0.79788456080286535588;

template <typename T> void gelu(const T *X, T *Y, int64_t N) {
  const T C = T(SqrtTwoOverPi), A = T(0.044715);
#pragma omp parallel for schedule(static) if (N > ParallelGrain)
  for (int64_t I = 0; I < N; ++I) {
    T V = X[I];
    Y[I] = T(0.5) * V * (T(1) + vtanh(C * (V + A * V * V * V)));
  }
}

template <typename T> void geluGrad(const T *Dy, const T *X, T *Dx, int64_t N) {
  const T C = T(SqrtTwoOverPi), A = T(0.044715);
#pragma omp parallel for schedule(static) if (N > ParallelGrain)
  for (int64_t I = 0; I < N; ++I) {
    T V = X[I];
    T Th = vtanh(C * (V + A * V * V * V));
    T D = T(0.5) * (T(1) + Th) +
          T(0.5) * V * (T(1) - Th * Th) * C * (T(1) + T(3) * A * V * V);
    Dx[I] = Dy[I] * D;
  }
}

template <typename T> void silu(const T *X, T *Y, int64_t N) {
#pragma omp parallel for schedule(static) if (N > ParallelGrain)
  for (int64_t I = 0; I < N; ++I)
    Y[I] = X[I] * vsigmoid(X[I]);
}

template <typename T> void siluGrad(const T *Dy, const T *X, T *Dx, int64_t N) {
#pragma omp parallel for schedule(static) if (N > ParallelGrain)
  for (int64_t I = 0; I < N; ++I) {
    T S = vsigmoid(X[I]);
    Dx[I] = Dy[I] * S * (T(1) + X[I] * (T(1) - S));
  }
}

template <typename T> void swiglu(const T *Gate, const T *Up, T *Y, int64_t N) {
#pragma omp parallel for schedule(static) if (N > ParallelGrain)
  for (int64_t I = 0; I < N; ++I)
    Y[I] = Gate[I] * vsigmoid(Gate[I]) * Up[I];
}

template <typename T>
void swigluGrad(const T *Dy, const T *Gate, const T *Up, T *DGate, T *DUp,
                int64_t N) {
#pragma omp parallel for schedule(static) if (N > ParallelGrain)
  for (int64_t I = 0; I < N; ++I) {
    T G = Gate[I], S = vsigmoid(G);
    T Dyi = Dy[I];
    // Read everything before writing: outputs may alias inputs.
    T U = Up[I];
    DUp[I] = Dyi * G * S;
    DGate[I] = Dyi * U * S * (T(1) + G * (T(1) - S));
  }
}

#define WEFT_INSTANTIATE(T)                                                    \
  template void gelu<T>(const T *, T *, int64_t);                              \
  template void geluGrad<T>(const T *, const T *, T *, int64_t);               \
  template void silu<T>(const T *, T *, int64_t);                              \
  template void siluGrad<T>(const T *, const T *, T *, int64_t);               \
  template void swiglu<T>(const T *, const T *, T *, int64_t);                 \
  template void swigluGrad<T>(const T *, const T *, const T *, T *, T *,       \
                              int64_t);
WEFT_INSTANTIATE(float)
WEFT_INSTANTIATE(double)

} // namespace weft::cpu
