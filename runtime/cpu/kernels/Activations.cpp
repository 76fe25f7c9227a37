//===- Activations.cpp - gelu, silu, swiglu and their gradients -----------===//
//
// Each op is an inline span body, run on per-thread chunks; the float spans
// also have AVX2 clones (they are exp/tanh bound, so the wider vectors pay).
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/kernels/FastMath.h"
#include "runtime/cpu/kernels/Kernels.h"
#include "runtime/cpu/kernels/Parallel.h"

#include <type_traits>

namespace weft::cpu {

namespace {

constexpr int64_t ParallelGrain = 1 << 14;
constexpr double SqrtTwoOverPi = 0.79788456080286535588;

template <typename T>
WEFT_CLONE_BODY void geluSpan(const T *X, T *Y, int64_t N) {
  const T C = T(SqrtTwoOverPi), A = T(0.044715);
  for (int64_t I = 0; I < N; ++I) {
    T V = X[I];
    Y[I] = T(0.5) * V * (T(1) + vtanh(C * (V + A * V * V * V)));
  }
}

template <typename T>
WEFT_CLONE_BODY void geluGradSpan(const T *Dy, const T *X, T *Dx, int64_t N) {
  const T C = T(SqrtTwoOverPi), A = T(0.044715);
  for (int64_t I = 0; I < N; ++I) {
    T V = X[I];
    T Th = vtanh(C * (V + A * V * V * V));
    T D = T(0.5) * (T(1) + Th) +
          T(0.5) * V * (T(1) - Th * Th) * C * (T(1) + T(3) * A * V * V);
    Dx[I] = Dy[I] * D;
  }
}

template <typename T>
WEFT_CLONE_BODY void siluSpan(const T *X, T *Y, int64_t N) {
  for (int64_t I = 0; I < N; ++I)
    Y[I] = X[I] * vsigmoid(X[I]);
}

template <typename T>
WEFT_CLONE_BODY void siluGradSpan(const T *Dy, const T *X, T *Dx, int64_t N) {
  for (int64_t I = 0; I < N; ++I) {
    T S = vsigmoid(X[I]);
    Dx[I] = Dy[I] * S * (T(1) + X[I] * (T(1) - S));
  }
}

template <typename T>
WEFT_CLONE_BODY void swigluSpan(const T *Gate, const T *Up, T *Y, int64_t N) {
  for (int64_t I = 0; I < N; ++I)
    Y[I] = Gate[I] * vsigmoid(Gate[I]) * Up[I];
}

template <typename T>
WEFT_CLONE_BODY void swigluGradSpan(const T *Dy, const T *Gate, const T *Up,
                                    T *DGate, T *DUp, int64_t N) {
  for (int64_t I = 0; I < N; ++I) {
    T G = Gate[I], S = vsigmoid(G);
    T Dyi = Dy[I], U = Up[I];
    DUp[I] = Dyi * G * S;
    DGate[I] = Dyi * U * S * (T(1) + G * (T(1) - S));
  }
}

WEFT_SIMD_CLONES void geluF(const float *X, float *Y, int64_t N) {
  geluSpan(X, Y, N);
}
WEFT_SIMD_CLONES void geluGradF(const float *Dy, const float *X, float *Dx,
                                int64_t N) {
  geluGradSpan(Dy, X, Dx, N);
}
WEFT_SIMD_CLONES void siluF(const float *X, float *Y, int64_t N) {
  siluSpan(X, Y, N);
}
WEFT_SIMD_CLONES void siluGradF(const float *Dy, const float *X, float *Dx,
                                int64_t N) {
  siluGradSpan(Dy, X, Dx, N);
}
WEFT_SIMD_CLONES void swigluF(const float *G, const float *U, float *Y,
                              int64_t N) {
  swigluSpan(G, U, Y, N);
}
WEFT_SIMD_CLONES void swigluGradF(const float *Dy, const float *G,
                                  const float *U, float *DG, float *DU,
                                  int64_t N) {
  swigluGradSpan(Dy, G, U, DG, DU, N);
}

} // namespace

template <typename T> void gelu(const T *X, T *Y, int64_t N) {
  forChunks(N, ParallelGrain, [&](int64_t B, int64_t E) {
    byType<T>(geluF, geluSpan<T>, X + B, Y + B, E - B);
  });
}

template <typename T> void geluGrad(const T *Dy, const T *X, T *Dx, int64_t N) {
  forChunks(N, ParallelGrain, [&](int64_t B, int64_t E) {
    byType<T>(geluGradF, geluGradSpan<T>, Dy + B, X + B, Dx + B, E - B);
  });
}

template <typename T> void silu(const T *X, T *Y, int64_t N) {
  forChunks(N, ParallelGrain, [&](int64_t B, int64_t E) {
    byType<T>(siluF, siluSpan<T>, X + B, Y + B, E - B);
  });
}

template <typename T> void siluGrad(const T *Dy, const T *X, T *Dx, int64_t N) {
  forChunks(N, ParallelGrain, [&](int64_t B, int64_t E) {
    byType<T>(siluGradF, siluGradSpan<T>, Dy + B, X + B, Dx + B, E - B);
  });
}

template <typename T> void swiglu(const T *Gate, const T *Up, T *Y, int64_t N) {
  forChunks(N, ParallelGrain, [&](int64_t B, int64_t E) {
    byType<T>(swigluF, swigluSpan<T>, Gate + B, Up + B, Y + B, E - B);
  });
}

template <typename T>
void swigluGrad(const T *Dy, const T *Gate, const T *Up, T *DGate, T *DUp,
                int64_t N) {
  forChunks(N, ParallelGrain, [&](int64_t B, int64_t E) {
    byType<T>(swigluGradF, swigluGradSpan<T>, Dy + B, Gate + B, Up + B,
              DGate + B, DUp + B, E - B);
  });
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
