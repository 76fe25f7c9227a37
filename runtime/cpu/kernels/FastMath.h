//===- FastMath.h - Vectorisable exp and friends ---------------*- C++ -*-===//
//
// glibc's expf/tanhf are scalar calls that stop GCC from vectorising a loop;
// softmax, cross entropy and GELU spend most of their time in them. vexp is a
// Cephes-style expf (range reduction + degree-6 polynomial, ~2 ulp) written
// with plain arithmetic so loops calling it vectorise. Inputs are clamped to
// [-87, 88]: exp(-87) ~ 1.6e-38 stands in for 0; infinities and NaN map
// exactly (exp(-inf) = 0, exp(inf) = inf, NaN stays NaN). Double uses std::exp
// (f64 programs exist for exact checks, not speed).
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_RUNTIME_KERNELS_CPU_FASTMATH_H
#define WEFT_RUNTIME_KERNELS_CPU_FASTMATH_H

#include "runtime/cpu/kernels/Parallel.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace weft::cpu {

WEFT_CLONE_BODY float vexp(float X) {
  // exp(+inf) = inf, exp(-inf) = 0; NaN propagates through the polynomial.
  // Selects, not branches, so loops calling vexp still vectorise.
  const float In = X;
  X = X < -87.0f ? -87.0f : X;
  X = X > 88.0f ? 88.0f : X;
  // Round X*log2(e) to the nearest integer with the 1.5*2^23 trick.
  const float Magic = 12582912.0f;
  float T = X * 1.44269504088896341f + Magic;
  uint32_t TI;
  std::memcpy(&TI, &T, 4);
  float N = T - Magic;
  uint32_t NI = TI - 0x4b400000u;
  float R = X - N * 0.693359375f;
  R = R - N * -2.12194440e-4f;
  float P = 1.9875691500e-4f;
  P = P * R + 1.3981999507e-3f;
  P = P * R + 8.3334519073e-3f;
  P = P * R + 4.1665795894e-2f;
  P = P * R + 1.6666665459e-1f;
  P = P * R + 5.0000001201e-1f;
  P = P * R * R + R + 1.0f;
  // Unsigned: for NaN, NI is garbage (negative as int32, or past 2^8) and a
  // signed shift would be undefined; the result is NaN either way, via P.
  uint32_t ScaleBits = (NI + 127u) << 23;
  float Scale;
  std::memcpy(&Scale, &ScaleBits, 4);
  float Y = P * Scale;
  Y = In == HUGE_VALF ? HUGE_VALF : Y;
  return In == -HUGE_VALF ? 0.0f : Y;
}

WEFT_CLONE_BODY double vexp(double X) { return std::exp(X); }

/// tanh through exp; absolute error ~1e-7 for float.
WEFT_CLONE_BODY float vtanh(float X) {
  return 1.0f - 2.0f / (vexp(2.0f * X) + 1.0f);
}
WEFT_CLONE_BODY double vtanh(double X) { return std::tanh(X); }

template <typename T> WEFT_CLONE_BODY T vsigmoid(T X) {
  return T(1) / (T(1) + vexp(-X));
}

// Row reductions with 16 explicit lanes (one AVX-512 register of floats;
// with 8, the AVX-512 clones ran at AVX2 width): GCC does not vectorise a plain
// floating-point max/sum reduction without -ffast-math, but it does vectorise
// these lane loops.
constexpr int Lanes = 16;

/// The lanes as one GCC vector (one AVX-512 register of floats, two of
/// AVX2, four of SSE2): GCC vectorises no select loop that picks a maximum,
/// even over explicit lanes (each clone ran 16 scalar vmaxss a step), but
/// it compiles a select of whole vectors to compares and blends, lane by
/// lane the same select.
template <typename T> struct LaneVectorOf;
template <> struct LaneVectorOf<float> {
  typedef float Type __attribute__((vector_size(Lanes * sizeof(float))));
};
template <> struct LaneVectorOf<double> {
  typedef double Type __attribute__((vector_size(Lanes * sizeof(double))));
};
template <typename T> using LaneVector = typename LaneVectorOf<T>::Type;

template <typename T> WEFT_CLONE_BODY T rowMax(const T *X, int64_t N) {
  T M = X[0];
  int64_t I = 0;
  if (N >= Lanes) {
    LaneVector<T> Acc, Xv;
    std::memcpy(&Acc, X, sizeof(Acc));
    for (I = Lanes; I + Lanes <= N; I += Lanes) {
      std::memcpy(&Xv, X + I, sizeof(Xv));
      Acc = Xv > Acc ? Xv : Acc;
    }
    for (int L = 0; L < Lanes; ++L)
      M = Acc[L] > M ? Acc[L] : M;
  }
  for (; I < N; ++I)
    M = X[I] > M ? X[I] : M;
  return M;
}

/// The 16 lanes' sum in double, as a tree (lane L plus lane L + 8, then
/// + 4, + 2, + 1): four vector adds deep where adding the lanes one by one
/// was sixteen dependent scalar adds, the longest part of a short row.
template <typename T> WEFT_CLONE_BODY double treeSum(const T (&Acc)[Lanes]) {
  double S[Lanes];
  for (int L = 0; L < Lanes; ++L)
    S[L] = double(Acc[L]);
  for (int W = Lanes / 2; W >= 1; W /= 2)
    for (int L = 0; L < W; ++L)
      S[L] += S[L + W];
  return S[0];
}

/// Sum of Term(0..N-1) in float lanes over chunks of up to 256 elements,
/// each chunk's lanes added in double (treeSum) to bound the rounding. The
/// last chunk's final N mod Lanes terms go one to a lane (the lanes past N
/// add nothing), which the AVX clones compute as one masked vector: short
/// rows (a causal attention's first keys) vectorise as well as long ones.
template <typename T, typename TermFn>
WEFT_CLONE_BODY double laneSum(int64_t N, TermFn Term) {
  constexpr int64_t Chunk = 256; // a multiple of Lanes
  double Total = 0;
  for (int64_t I = 0; I < N; I += Chunk) {
    const int64_t End = std::min(I + Chunk, N);
    T Acc[Lanes] = {};
    int64_t J = I;
    for (; J + Lanes <= End; J += Lanes)
      for (int L = 0; L < Lanes; ++L)
        Acc[L] += Term(J + L);
    if (J < End)
      for (int L = 0; L < Lanes; ++L)
        if (J + L < End)
          Acc[L] += Term(J + L);
    Total += treeSum<T>(Acc);
  }
  return Total;
}

/// laneSum of TermA and of TermB in one pass: each sum's lanes, chunks and
/// tree as laneSum's, so each is laneSum's result bit for bit.
template <typename T, typename TermAFn, typename TermBFn>
WEFT_CLONE_BODY void laneSums(int64_t N, TermAFn TermA, TermBFn TermB,
                              double &SumA, double &SumB) {
  constexpr int64_t Chunk = 256;
  SumA = SumB = 0;
  for (int64_t I = 0; I < N; I += Chunk) {
    const int64_t End = std::min(I + Chunk, N);
    T AccA[Lanes] = {}, AccB[Lanes] = {};
    int64_t J = I;
    for (; J + Lanes <= End; J += Lanes)
      for (int L = 0; L < Lanes; ++L) {
        AccA[L] += TermA(J + L);
        AccB[L] += TermB(J + L);
      }
    if (J < End)
      for (int L = 0; L < Lanes; ++L)
        if (J + L < End) {
          AccA[L] += TermA(J + L);
          AccB[L] += TermB(J + L);
        }
    SumA += treeSum<T>(AccA);
    SumB += treeSum<T>(AccB);
  }
}

/// Sum of exp(X[i] - Shift).
template <typename T>
WEFT_CLONE_BODY double rowSumExp(const T *X, int64_t N, T Shift) {
  return laneSum<T>(N, [&](int64_t I) { return vexp(X[I] - Shift); });
}

/// rowSumExp that also stores each exp(X[i] - Shift) in Out[i], so a
/// softmax needs no second exp per element. Out is X (in place) or disjoint
/// from it.
template <typename T>
WEFT_CLONE_BODY double rowSumExpStore(const T *X, int64_t N, T Shift, T *Out) {
  return laneSum<T>(N, [&](int64_t I) {
    T E = vexp(X[I] - Shift);
    Out[I] = E;
    return E;
  });
}

/// Sum of A[i] * B[i].
template <typename T>
WEFT_CLONE_BODY double rowDot(const T *A, const T *B, int64_t N) {
  return laneSum<T>(N, [&](int64_t I) { return A[I] * B[I]; });
}

/// Softmax of X[0, N) into Y (Y may be X): the max, the exponentials stored
/// with their sum, then each times the sum's inverse (as PyTorch's
/// vectorized softmax).
template <typename T>
WEFT_CLONE_BODY void softmaxRow(const T *X, T *Y, int64_t N) {
  T M = rowMax(X, N);
  T Inv = T(1) / T(rowSumExpStore(X, N, M, Y));
  for (int64_t J = 0; J < N; ++J)
    Y[J] *= Inv;
}

/// Out = P (D - rowsum(P D)), the softmax's gradient (Out may be D): the
/// sum over the N columns the row reads, the product over all KEnd (P is 0
/// past N).
template <typename T>
WEFT_CLONE_BODY void softmaxGradRow(const T *P, const T *D, T *Out, int64_t N,
                                    int64_t KEnd) {
  T Dot = T(rowDot(P, D, N));
  for (int64_t J = 0; J < KEnd; ++J)
    Out[J] = P[J] * (D[J] - Dot);
}

} // namespace weft::cpu

#endif // WEFT_RUNTIME_KERNELS_CPU_FASTMATH_H
