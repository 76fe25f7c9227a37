//===- Elementwise.cpp - add, mul, bias_add, reduce_rows, fill, copy, split
//-===//
#include "runtime/cpu/kernels/Kernels.h"

#include <cstring>

namespace weft::cpu {

// Below this many elements a parallel region costs more than it saves.
constexpr int64_t ParallelGrain = 1 << 15;

template <typename T> void add(const T *A, const T *B, T *Y, int64_t N) {
#pragma omp parallel for schedule(static) if (N > ParallelGrain)
  for (int64_t I = 0; I < N; ++I)
    Y[I] = A[I] + B[I];
}

template <typename T> void mul(const T *A, const T *B, T *Y, int64_t N) {
#pragma omp parallel for schedule(static) if (N > ParallelGrain)
  for (int64_t I = 0; I < N; ++I)
    Y[I] = A[I] * B[I];
}

template <typename T> void fill(T *Y, int64_t N, double Value) {
  T V = T(Value);
#pragma omp parallel for schedule(static) if (N > ParallelGrain)
  for (int64_t I = 0; I < N; ++I)
    Y[I] = V;
}

void copyBytes(const void *X, void *Y, size_t Bytes) {
  if (X != Y && Bytes)
    std::memmove(Y, X, Bytes);
}

template <typename T>
void biasAdd(const T *X, const T *Bias, T *Y, int64_t Rows, int64_t N) {
#pragma omp parallel for schedule(static) if (Rows * N > ParallelGrain)
  for (int64_t R = 0; R < Rows; ++R) {
    const T *XR = X + R * N;
    T *YR = Y + R * N;
    for (int64_t C = 0; C < N; ++C)
      YR[C] = XR[C] + Bias[C];
  }
}

// Parallel over column blocks, so the sum order (and the result) does not
// depend on the thread count.
template <typename T>
void reduceRows(const T *X, T *Y, int64_t Rows, int64_t N) {
  constexpr int64_t Block = 64;
  int64_t NumBlocks = (N + Block - 1) / Block;
#pragma omp parallel for schedule(static) if (Rows * N > ParallelGrain)
  for (int64_t Blk = 0; Blk < NumBlocks; ++Blk) {
    int64_t C0 = Blk * Block, C1 = std::min(N, C0 + Block);
    double Acc[Block] = {};
    for (int64_t R = 0; R < Rows; ++R) {
      const T *XR = X + R * N;
      for (int64_t C = C0; C < C1; ++C)
        Acc[C - C0] += XR[C];
    }
    for (int64_t C = C0; C < C1; ++C)
      Y[C] = T(Acc[C - C0]);
  }
}

template <typename T>
void split(const T *X, int64_t Rows, int64_t N, T *const *Parts,
           const int64_t *Sizes, int64_t NumParts) {
#pragma omp parallel for schedule(static) if (Rows * N > ParallelGrain)
  for (int64_t R = 0; R < Rows; ++R) {
    const T *XR = X + R * N;
    for (int64_t P = 0; P < NumParts; ++P) {
      std::memcpy(Parts[P] + R * Sizes[P], XR, Sizes[P] * sizeof(T));
      XR += Sizes[P];
    }
  }
}

template <typename T>
void concat(const T *const *Parts, const int64_t *Sizes, int64_t NumParts,
            int64_t Rows, int64_t N, T *Y) {
#pragma omp parallel for schedule(static) if (Rows * N > ParallelGrain)
  for (int64_t R = 0; R < Rows; ++R) {
    T *YR = Y + R * N;
    for (int64_t P = 0; P < NumParts; ++P) {
      std::memcpy(YR, Parts[P] + R * Sizes[P], Sizes[P] * sizeof(T));
      YR += Sizes[P];
    }
  }
}

#define WEFT_INSTANTIATE(T)                                                    \
  template void add<T>(const T *, const T *, T *, int64_t);                    \
  template void mul<T>(const T *, const T *, T *, int64_t);                    \
  template void fill<T>(T *, int64_t, double);                                 \
  template void biasAdd<T>(const T *, const T *, T *, int64_t, int64_t);       \
  template void reduceRows<T>(const T *, T *, int64_t, int64_t);               \
  template void split<T>(const T *, int64_t, int64_t, T *const *,              \
                         const int64_t *, int64_t);                            \
  template void concat<T>(const T *const *, const int64_t *, int64_t, int64_t, \
                          int64_t, T *);
WEFT_INSTANTIATE(float)
WEFT_INSTANTIATE(double)
template void fill<int32_t>(int32_t *, int64_t, double);

} // namespace weft::cpu
