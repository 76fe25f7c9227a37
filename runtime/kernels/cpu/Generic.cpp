//===- Generic.cpp - CPU kernels of the generic path ----------------------===//
//
// Plain loops over full row-major shapes (docs/design.md decision 20): the
// generic path trains any graph exactly, not fast. Broadcast operands are
// read through strides that are 0 along stretched dims; reductions run in
// one fixed order, so a step is deterministic.
//
//===----------------------------------------------------------------------===//
#include "program/Broadcast.h"
#include "runtime/kernels/cpu/Kernels.h"
#include "runtime/kernels/cpu/Parallel.h"

namespace {
constexpr int64_t ParallelGrain = 1 << 15;
}

#include <algorithm>
#include <cmath>

namespace weft::cpu {

namespace {

int64_t numel(const Dims &S) {
  int64_t N = 1;
  for (int64_t D : S)
    N *= D;
  return N;
}

// Calls Body(i, offset of each strided operand) for every index i of Shape
// in row-major order, stepping the operands' offsets like an odometer.
template <size_t K, typename F>
void forEachIndex(const Dims &Shape, const Dims (&Strides)[K], F Body) {
  const size_t R = Shape.size();
  const int64_t N = numel(Shape);
  Dims Idx(R, 0);
  int64_t Off[K] = {};
  for (int64_t I = 0; I < N; ++I) {
    Body(I, Off);
    for (size_t D = R; D-- > 0;) {
      for (size_t J = 0; J < K; ++J)
        Off[J] += Strides[J][D];
      if (++Idx[D] < Shape[D])
        break;
      for (size_t J = 0; J < K; ++J)
        Off[J] -= Strides[J][D] * Shape[D];
      Idx[D] = 0;
    }
  }
}

} // namespace

template <typename T>
void pointwise(PointwiseFn Fn, double C, const T *X, T *Y, int64_t N) {
#pragma omp parallel for schedule(static) if (N > ParallelGrain)
  for (int64_t I = 0; I < N; ++I)
    Y[I] = weft::pointwise<T>(Fn, X[I], T(C));
}

template <typename T>
void pointwiseGrad(PointwiseFn Fn, double C, const T *X, const T *Dy, T *Dx,
                   int64_t N) {
#pragma omp parallel for schedule(static) if (N > ParallelGrain)
  for (int64_t I = 0; I < N; ++I)
    Dx[I] = weft::pointwiseGrad<T>(Fn, X[I], T(C), Dy[I]);
}

template <typename T>
void binary(BinaryFn Fn, const T *A, const Dims &AShape, const T *B,
            const Dims &BShape, T *Y, const Dims &YShape) {
  const Dims Strides[2] = {broadcastStrides(AShape, YShape),
                           broadcastStrides(BShape, YShape)};
  forEachIndex(YShape, Strides, [&](int64_t I, const int64_t *Off) {
    Y[I] = weft::binary<T>(Fn, A[Off[0]], B[Off[1]]);
  });
}

template <typename T>
void binaryGrad(BinaryFn Fn, int Operand, const T *A, const Dims &AShape,
                const T *B, const Dims &BShape, const T *Dy, const Dims &YShape,
                T *Out) {
  const Dims &OutShape = Operand == 0 ? AShape : BShape;
  std::fill(Out, Out + numel(OutShape), T(0));
  const Dims Strides[2] = {broadcastStrides(AShape, YShape),
                           broadcastStrides(BShape, YShape)};
  forEachIndex(YShape, Strides, [&](int64_t I, const int64_t *Off) {
    Out[Off[Operand]] +=
        weft::binaryGrad<T>(Fn, Operand, A[Off[0]], B[Off[1]], Dy[I]);
  });
}

template <typename T>
void broadcast(const T *X, const Dims &XShape, T *Y, const Dims &YShape) {
  const Dims Strides[1] = {broadcastStrides(XShape, YShape)};
  forEachIndex(YShape, Strides,
               [&](int64_t I, const int64_t *Off) { Y[I] = X[Off[0]]; });
}

template <typename T>
void reduce(const T *X, const Dims &XShape, T *Y, const Dims &YShape) {
  std::fill(Y, Y + numel(YShape), T(0));
  const Dims Strides[1] = {broadcastStrides(YShape, XShape)};
  forEachIndex(XShape, Strides,
               [&](int64_t I, const int64_t *Off) { Y[Off[0]] += X[I]; });
}

template <typename T>
void transpose(const T *X, const Dims &XShape, const Dims &Perm, T *Y) {
  const size_t R = XShape.size();
  Dims XStrides(R, 1), YShape(R), Strides(R);
  for (size_t D = R; D-- > 1;)
    XStrides[D - 1] = XStrides[D] * XShape[D];
  for (size_t D = 0; D < R; ++D) {
    YShape[D] = XShape[Perm[D]];
    Strides[D] = XStrides[Perm[D]];
  }
  const Dims S[1] = {Strides};
  forEachIndex(YShape, S,
               [&](int64_t I, const int64_t *Off) { Y[I] = X[Off[0]]; });
}

template <typename T> void softmax(const T *X, T *Y, int64_t Rows, int64_t N) {
#pragma omp parallel for schedule(static) if (Rows * N > ParallelGrain)
  for (int64_t R = 0; R < Rows; ++R) {
    const T *XR = X + R * N;
    T *YR = Y + R * N;
    T Max = XR[0];
    for (int64_t J = 1; J < N; ++J)
      Max = std::max(Max, XR[J]);
    T Sum = 0;
    for (int64_t J = 0; J < N; ++J) {
      YR[J] = std::exp(XR[J] - Max);
      Sum += YR[J];
    }
    for (int64_t J = 0; J < N; ++J)
      YR[J] /= Sum;
  }
}

template <typename T>
void softmaxGrad(const T *Y, const T *Dy, T *Dx, int64_t Rows, int64_t N) {
#pragma omp parallel for schedule(static) if (Rows * N > ParallelGrain)
  for (int64_t R = 0; R < Rows; ++R) {
    const T *YR = Y + R * N, *DyR = Dy + R * N;
    T Dot = 0;
    for (int64_t J = 0; J < N; ++J)
      Dot += DyR[J] * YR[J];
    for (int64_t J = 0; J < N; ++J)
      Dx[R * N + J] = YR[J] * (DyR[J] - Dot);
  }
}

#define WEFT_INSTANTIATE(T)                                                    \
  template void pointwise<T>(PointwiseFn, double, const T *, T *, int64_t);    \
  template void pointwiseGrad<T>(PointwiseFn, double, const T *, const T *,    \
                                 T *, int64_t);                                \
  template void binary<T>(BinaryFn, const T *, const Dims &, const T *,        \
                          const Dims &, T *, const Dims &);                    \
  template void binaryGrad<T>(BinaryFn, int, const T *, const Dims &,          \
                              const T *, const Dims &, const T *,              \
                              const Dims &, T *);                              \
  template void broadcast<T>(const T *, const Dims &, T *, const Dims &);      \
  template void reduce<T>(const T *, const Dims &, T *, const Dims &);         \
  template void transpose<T>(const T *, const Dims &, const Dims &, T *);      \
  template void softmax<T>(const T *, T *, int64_t, int64_t);                  \
  template void softmaxGrad<T>(const T *, const T *, T *, int64_t, int64_t);
WEFT_INSTANTIATE(float)
WEFT_INSTANTIATE(double)

} // namespace weft::cpu
