//===- Elementwise.cpp - add, mul, bias_add, reduce_rows, copies ---------===//
#include "runtime/cpu/kernels/Kernels.h"
#include "runtime/cpu/kernels/Parallel.h"

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

namespace weft::cpu {

// Below this many elements a parallel region costs more than it saves.
constexpr int64_t ParallelGrain = 1 << 15;

namespace {

// Float bodies compiled per instruction set (WEFT_SIMD_CLONES): each element
// is one correctly rounded operation, so every clone gives the same bits.
template <typename T>
WEFT_CLONE_BODY void addRange(const T *A, const T *B, T *Y, int64_t N) {
  for (int64_t I = 0; I < N; ++I)
    Y[I] = A[I] + B[I];
}

WEFT_SIMD_CLONES void addRangeF(const float *A, const float *B, float *Y,
                                int64_t N) {
  addRange(A, B, Y, N);
}

template <typename T>
WEFT_CLONE_BODY void biasAddRows(const T *X, const T *Bias, T *Y, int64_t Rows,
                                 int64_t N) {
  for (int64_t R = 0; R < Rows; ++R) {
    const T *XR = X + R * N;
    T *YR = Y + R * N;
    for (int64_t C = 0; C < N; ++C)
      YR[C] = XR[C] + Bias[C];
  }
}

WEFT_SIMD_CLONES void biasAddRowsF(const float *X, const float *Bias, float *Y,
                                   int64_t Rows, int64_t N) {
  biasAddRows(X, Bias, Y, Rows, N);
}

// Column sums over [C0, C1), in double, each column summed over the rows in
// order: the order (and the result) is the same at every vector width,
// thread count and split of the columns. Row by row over the range (Acc
// holds its sums): summed a block of 64 columns at a time down all the
// rows, the reads jumped a row's length each (12 KiB for GPT-2's 3072
// columns) and ran at half the rate of a row-ordered pass.
template <typename T>
WEFT_CLONE_BODY void sumColumns(const T *X, T *Y, int64_t Rows, int64_t N,
                                int64_t C0, int64_t C1, double *Acc) {
  const int64_t W = C1 - C0;
  for (int64_t C = 0; C < W; ++C)
    Acc[C] = 0;
  for (int64_t R = 0; R < Rows; ++R) {
    const T *XR = X + R * N + C0;
    for (int64_t C = 0; C < W; ++C)
      Acc[C] += double(XR[C]);
  }
  for (int64_t C = 0; C < W; ++C)
    Y[C0 + C] = T(Acc[C]);
}

WEFT_SIMD_CLONES void sumColumnsF(const float *X, float *Y, int64_t Rows,
                                  int64_t N, int64_t C0, int64_t C1,
                                  double *Acc) {
  sumColumns(X, Y, Rows, N, C0, C1, Acc);
}

} // namespace

template <typename T> void add(const T *A, const T *B, T *Y, int64_t N) {
  forChunks(N, ParallelGrain, [&](int64_t Begin, int64_t End) {
    byType<T>(addRangeF, addRange<T>, A + Begin, B + Begin, Y + Begin,
              End - Begin);
  });
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
  forChunks(Rows, N > 0 ? ParallelGrain / N : Rows,
            [&](int64_t Begin, int64_t End) {
              byType<T>(biasAddRowsF, biasAddRows<T>, X + Begin * N, Bias,
                        Y + Begin * N, End - Begin, N);
            });
}

// One range of columns per thread (any split gives the same sums).
template <typename T>
void reduceRows(const T *X, T *Y, int64_t Rows, int64_t N) {
  forChunks(N, Rows > 0 ? ParallelGrain / Rows : N,
            [&](int64_t C0, int64_t C1) {
              std::vector<double> Acc(size_t(C1 - C0));
              byType<T>(sumColumnsF, sumColumns<T>, X, Y, Rows, N, C0, C1,
                        Acc.data());
            });
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
