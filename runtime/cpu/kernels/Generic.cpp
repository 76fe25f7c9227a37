//===- Generic.cpp - CPU kernels of the generic path ----------------------===//
//
// Loops over full row-major shapes (docs/design.md decision 20). A
// broadcast operand that is the whole shape, its trailing dims or its
// leading dims is indexed directly (accessOf); any other is read through
// strides that are 0 along stretched dims (forEachIndex). Reductions sum in
// row-major order either way, so both paths give the same bits and a step
// is deterministic.
//
//===----------------------------------------------------------------------===//
#include "program/Broadcast.h"
#include "runtime/cpu/kernels/Avx512.h"
#include "runtime/cpu/kernels/FastMath.h"
#include "runtime/cpu/kernels/Kernels.h"
#include "runtime/cpu/kernels/Parallel.h"

#include <algorithm>
#include <cmath>

namespace weft::cpu {

namespace {

constexpr int64_t ParallelGrain = 1 << 15;

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

// How an operand of shape S, broadcast to Y, is read at Y's flat index i:
// Full (S is Y): i; Suffix (S is Y's trailing dims, 1s before): i % Inner;
// Prefix (S is Y's leading dims, 1s after: rows of Inner): i / Inner;
// Strided: none of these (the odometer).
struct Access {
  enum Kind { Full, Suffix, Prefix, Strided } K = Strided;
  int64_t Inner = 1;
  int64_t at(int64_t I) const {
    return K == Full ? I : K == Suffix ? I % Inner : I / Inner;
  }
};

Access accessOf(const Dims &S, const Dims &Y) {
  const size_t R = Y.size();
  Dims P(R, 1);
  std::copy(S.begin(), S.end(), P.begin() + (R - S.size()));
  if (P == Y)
    return {Access::Full, 1};
  // Suffix: P equals Y from dim K on, and is 1 before.
  size_t K = R;
  while (K > 0 && P[K - 1] == Y[K - 1])
    --K;
  if (std::all_of(P.begin(), P.begin() + K, [](int64_t D) { return D == 1; }))
    return {Access::Suffix, numel(Dims(Y.begin() + K, Y.end()))};
  // Prefix: P equals Y before dim K, and is 1 from it on.
  K = 0;
  while (K < R && P[K] == Y[K])
    ++K;
  if (std::all_of(P.begin() + K, P.end(), [](int64_t D) { return D == 1; }))
    return {Access::Prefix, numel(Dims(Y.begin() + K, Y.end()))};
  return {};
}

// Out (of shape OutShape, broadcast to YShape) = the sum over the stretched
// dims of G(i) for every index i of YShape, in row-major order of i per
// element of Out (the odometer's order: results do not depend on the path).
template <typename T, typename G>
void sumInto(T *Out, const Dims &OutShape, const Dims &YShape, const Access &O,
             G Term) {
  const int64_t N = numel(YShape), M = numel(OutShape);
  if (O.K == Access::Full) {
#pragma omp parallel for schedule(static) if (N > ParallelGrain)
    for (int64_t I = 0; I < N; ++I)
      Out[I] = Term(I);
  } else if (O.K == Access::Prefix) {
#pragma omp parallel for schedule(static) if (N > ParallelGrain)
    for (int64_t R = 0; R < M; ++R) {
      T Acc = 0;
      for (int64_t J = 0; J < O.Inner; ++J)
        Acc += Term(R * O.Inner + J);
      Out[R] = Acc;
    }
  } else { // Suffix: rows of M summed in order, columns in parallel.
    std::fill(Out, Out + M, T(0));
    const int64_t Rows = N / M;
#pragma omp parallel for schedule(static) if (N > ParallelGrain)
    for (int64_t J = 0; J < M; ++J)
      for (int64_t R = 0; R < Rows; ++R)
        Out[J] += Term(R * M + J);
  }
}

} // namespace

// One loop per function, so that the function is a constant in it (no
// switch per element) and the cheap ones vectorize.
template <PointwiseFn F, typename T>
void pointwiseLoop(const T *X, T *Y, int64_t N, T C) {
#pragma omp parallel for schedule(static) if (N > ParallelGrain)
  for (int64_t I = 0; I < N; ++I)
    Y[I] = weft::pointwise<T>(F, X[I], C);
}

template <PointwiseFn F, typename T>
void pointwiseGradLoop(const T *X, const T *Dy, T *Dx, int64_t N, T C) {
#pragma omp parallel for schedule(static) if (N > ParallelGrain)
  for (int64_t I = 0; I < N; ++I)
    Dx[I] = weft::pointwiseGrad<T>(F, X[I], C, Dy[I]);
}

// Every PointwiseFn (clang-format 14 reflows this list on every run).
// clang-format off
#define WEFT_EACH_POINTWISE_FN(CASE)                                           \
  CASE(Neg) CASE(Exp) CASE(Log) CASE(Sqrt) CASE(Reciprocal) CASE(Tanh)         \
  CASE(Sigmoid) CASE(Relu) CASE(Erf) CASE(Sin) CASE(Cos) CASE(Abs)             \
  CASE(Not) CASE(IsNan)                                                        \
  CASE(AddScalar) CASE(SubScalar)                                              \
  CASE(RsubScalar) CASE(MulScalar) CASE(DivScalar) CASE(RdivScalar)            \
  CASE(PowScalar) CASE(ClampMin) CASE(ClampMax)
// clang-format on

template <typename T>
void pointwise(PointwiseFn Fn, double C, const T *X, T *Y, int64_t N) {
  switch (Fn) {
#define CASE(F)                                                                \
  case PointwiseFn::F:                                                         \
    return pointwiseLoop<PointwiseFn::F>(X, Y, N, T(C));
    WEFT_EACH_POINTWISE_FN(CASE)
#undef CASE
  }
}

template <typename T>
void pointwiseGrad(PointwiseFn Fn, double C, const T *X, const T *Dy, T *Dx,
                   int64_t N) {
  switch (Fn) {
#define CASE(F)                                                                \
  case PointwiseFn::F:                                                         \
    return pointwiseGradLoop<PointwiseFn::F>(X, Dy, Dx, N, T(C));
    WEFT_EACH_POINTWISE_FN(CASE)
#undef CASE
  }
}
#undef WEFT_EACH_POINTWISE_FN

template <typename T>
void binary(BinaryFn Fn, const T *A, const Dims &AShape, const T *B,
            const Dims &BShape, T *Y, const Dims &YShape) {
  const Access AA = accessOf(AShape, YShape), AB = accessOf(BShape, YShape);
  if (AA.K != Access::Strided && AB.K != Access::Strided) {
    const int64_t N = numel(YShape);
#pragma omp parallel for schedule(static) if (N > ParallelGrain)
    for (int64_t I = 0; I < N; ++I)
      Y[I] = weft::binary<T>(Fn, A[AA.at(I)], B[AB.at(I)]);
    return;
  }
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
  const Access AA = accessOf(AShape, YShape), AB = accessOf(BShape, YShape);
  if (AA.K != Access::Strided && AB.K != Access::Strided) {
    sumInto(Out, OutShape, YShape, Operand == 0 ? AA : AB, [&](int64_t I) {
      return weft::binaryGrad<T>(Fn, Operand, A[AA.at(I)], B[AB.at(I)], Dy[I]);
    });
    return;
  }
  std::fill(Out, Out + numel(OutShape), T(0));
  const Dims Strides[2] = {broadcastStrides(AShape, YShape),
                           broadcastStrides(BShape, YShape)};
  forEachIndex(YShape, Strides, [&](int64_t I, const int64_t *Off) {
    Out[Off[Operand]] +=
        weft::binaryGrad<T>(Fn, Operand, A[Off[0]], B[Off[1]], Dy[I]);
  });
}

// Only the picked operand is read: an infinity or NaN in the other one
// never reaches y (a mask's -inf is exact).
template <typename T>
void select(const T *C, const Dims &CShape, const T *A, const Dims &AShape,
            const T *B, const Dims &BShape, T *Y, const Dims &YShape) {
  const Access AC = accessOf(CShape, YShape), AA = accessOf(AShape, YShape),
               AB = accessOf(BShape, YShape);
  if (AC.K != Access::Strided && AA.K != Access::Strided &&
      AB.K != Access::Strided) {
    const int64_t N = numel(YShape);
#pragma omp parallel for schedule(static) if (N > ParallelGrain)
    for (int64_t I = 0; I < N; ++I)
      Y[I] = C[AC.at(I)] != T(0) ? A[AA.at(I)] : B[AB.at(I)];
    return;
  }
  const Dims Strides[3] = {broadcastStrides(CShape, YShape),
                           broadcastStrides(AShape, YShape),
                           broadcastStrides(BShape, YShape)};
  forEachIndex(YShape, Strides, [&](int64_t I, const int64_t *Off) {
    Y[I] = C[Off[0]] != T(0) ? A[Off[1]] : B[Off[2]];
  });
}

template <typename T>
void selectGrad(int Operand, const T *C, const Dims &CShape, const T *Dy,
                const Dims &YShape, T *Out, const Dims &OutShape) {
  const bool WhenTrue = Operand == 0;
  const Access AC = accessOf(CShape, YShape), AO = accessOf(OutShape, YShape);
  if (AC.K != Access::Strided && AO.K != Access::Strided) {
    sumInto(Out, OutShape, YShape, AO, [&](int64_t I) {
      return (C[AC.at(I)] != T(0)) == WhenTrue ? Dy[I] : T(0);
    });
    return;
  }
  std::fill(Out, Out + numel(OutShape), T(0));
  const Dims Strides[2] = {broadcastStrides(CShape, YShape),
                           broadcastStrides(OutShape, YShape)};
  forEachIndex(YShape, Strides, [&](int64_t I, const int64_t *Off) {
    if ((C[Off[0]] != T(0)) == WhenTrue)
      Out[Off[1]] += Dy[I];
  });
}

template <typename T>
void broadcast(const T *X, const Dims &XShape, T *Y, const Dims &YShape) {
  const Access AX = accessOf(XShape, YShape);
  if (AX.K != Access::Strided) {
    const int64_t N = numel(YShape);
#pragma omp parallel for schedule(static) if (N > ParallelGrain)
    for (int64_t I = 0; I < N; ++I)
      Y[I] = X[AX.at(I)];
    return;
  }
  const Dims Strides[1] = {broadcastStrides(XShape, YShape)};
  forEachIndex(YShape, Strides,
               [&](int64_t I, const int64_t *Off) { Y[I] = X[Off[0]]; });
}

template <typename T>
void reduce(const T *X, const Dims &XShape, T *Y, const Dims &YShape) {
  const Access AY = accessOf(YShape, XShape);
  if (AY.K != Access::Strided) {
    sumInto(Y, YShape, XShape, AY, [&](int64_t I) { return X[I]; });
    return;
  }
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

namespace {
// FastMath's softmax rows in a SIMD clone (a plain template's loop is
// compiled for baseline x86-64, and std::exp is a scalar call). A row of
// -inf (every key masked) gives NaN, as exp(-inf - -inf) did.
WEFT_SIMD_CLONES void softmaxRowF(const float *XR, float *YR, int64_t N) {
  softmaxRow(XR, YR, N);
}

WEFT_SIMD_CLONES void softmaxGradRowF(const float *YR, const float *DyR,
                                      float *DxR, int64_t N) {
  softmaxGradRow(YR, DyR, DxR, N, N);
}

template <typename T>
void softmaxGradRowT(const T *YR, const T *DyR, T *DxR, int64_t N) {
  softmaxGradRow(YR, DyR, DxR, N, N);
}
} // namespace

template <typename T> void softmax(const T *X, T *Y, int64_t Rows, int64_t N) {
  if (N == 0)
    return;
#pragma omp parallel for schedule(static) if (Rows * N > ParallelGrain)
  for (int64_t R = 0; R < Rows; ++R) {
    if constexpr (std::is_same_v<T, float>)
      if (cpuHasAvx512()) {
        softmaxRowAvx512(X + R * N, Y + R * N, N, N);
        continue;
      }
    byType<T>(softmaxRowF, softmaxRow<T>, X + R * N, Y + R * N, N);
  }
}

template <typename T>
void softmaxGrad(const T *Y, const T *Dy, T *Dx, int64_t Rows, int64_t N) {
#pragma omp parallel for schedule(static) if (Rows * N > ParallelGrain)
  for (int64_t R = 0; R < Rows; ++R) {
    if constexpr (std::is_same_v<T, float>)
      if (cpuHasAvx512()) {
        softmaxGradRowAvx512(Y + R * N, Dy + R * N, Dx + R * N, N, N);
        continue;
      }
    byType<T>(softmaxGradRowF, softmaxGradRowT<T>, Y + R * N, Dy + R * N,
              Dx + R * N, N);
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
  template void select<T>(const T *, const Dims &, const T *, const Dims &,    \
                          const T *, const Dims &, T *, const Dims &);         \
  template void selectGrad<T>(int, const T *, const Dims &, const T *,         \
                              const Dims &, T *, const Dims &);                \
  template void broadcast<T>(const T *, const Dims &, T *, const Dims &);      \
  template void reduce<T>(const T *, const Dims &, T *, const Dims &);         \
  template void transpose<T>(const T *, const Dims &, const Dims &, T *);      \
  template void softmax<T>(const T *, T *, int64_t, int64_t);                  \
  template void softmaxGrad<T>(const T *, const T *, T *, int64_t, int64_t);
WEFT_INSTANTIATE(float)
WEFT_INSTANTIATE(double)

} // namespace weft::cpu
