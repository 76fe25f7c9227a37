//===- SoftmaxAvx512.cpp - Softmax rows in AVX-512 intrinsics -------------===//
//
// Each function mirrors its FastMath.h original step for step (Avx512.h
// says why): vexp16 is vexp on 16 lanes (the same constants, multiplies and
// adds, no FMA), the lane sums keep laneSum's chunks of 256 and its 16
// float lanes, masked in the last partial vector, and tree16 is treeSum.
// The row maximum is taken in any order: a maximum is exact, and the sign of
// a zero maximum changes no exponential (x - 0 and x + 0 differ only for
// x = 0, and exp(+-0) = 1). It ignores NaNs where the generic row may keep
// one; a row with a NaN sums to NaN either way, so every output of it is NaN
// in both.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/kernels/Avx512.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include "runtime/cpu/kernels/Immintrin.h"

#include <algorithm>
#include <cmath>

namespace weft::cpu {

bool cpuHasAvx512() {
  static const bool Has = __builtin_cpu_supports("avx512f");
  return Has;
}

namespace {

constexpr int64_t SumChunk = 256; // laneSum's chunk

WEFT_AVX512 inline __mmask16 firstLanes(int64_t N) {
  return N >= 16 ? __mmask16(0xffff) : __mmask16((1u << N) - 1);
}

WEFT_AVX512 inline __m512 vexp16(__m512 In) {
  __m512 X = _mm512_max_ps(_mm512_set1_ps(-87.0f), In); // NaN stays
  X = _mm512_min_ps(_mm512_set1_ps(88.0f), X);
  const __m512 Magic = _mm512_set1_ps(12582912.0f);
  __m512 T = _mm512_add_ps(
      _mm512_mul_ps(X, _mm512_set1_ps(1.44269504088896341f)), Magic);
  __m512 N = _mm512_sub_ps(T, Magic);
  __m512i NI =
      _mm512_sub_epi32(_mm512_castps_si512(T), _mm512_set1_epi32(0x4b400000));
  __m512 R = _mm512_sub_ps(X, _mm512_mul_ps(N, _mm512_set1_ps(0.693359375f)));
  R = _mm512_sub_ps(R, _mm512_mul_ps(N, _mm512_set1_ps(-2.12194440e-4f)));
  __m512 P = _mm512_set1_ps(1.9875691500e-4f);
  for (float C : {1.3981999507e-3f, 8.3334519073e-3f, 4.1665795894e-2f,
                  1.6666665459e-1f, 5.0000001201e-1f})
    P = _mm512_add_ps(_mm512_mul_ps(P, R), _mm512_set1_ps(C));
  P = _mm512_add_ps(_mm512_add_ps(_mm512_mul_ps(_mm512_mul_ps(P, R), R), R),
                    _mm512_set1_ps(1.0f));
  __m512 Scale = _mm512_castsi512_ps(
      _mm512_slli_epi32(_mm512_add_epi32(NI, _mm512_set1_epi32(127)), 23));
  __m512 Y = _mm512_mul_ps(P, Scale);
  const __m512 Inf = _mm512_set1_ps(HUGE_VALF);
  Y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(In, Inf, _CMP_EQ_OQ), Y, Inf);
  return _mm512_mask_blend_ps(
      _mm512_cmp_ps_mask(In, _mm512_set1_ps(-HUGE_VALF), _CMP_EQ_OQ), Y,
      _mm512_setzero_ps());
}

/// treeSum: the lanes in double, lane L plus lane L + 8, then + 4, + 2, + 1.
WEFT_AVX512 inline double tree16(__m512 Acc) {
  __m512d Lo = _mm512_cvtps_pd(_mm512_castps512_ps256(Acc));
  __m512d Hi = _mm512_cvtps_pd(
      _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(Acc), 1)));
  __m512d S8 = _mm512_add_pd(Lo, Hi);
  __m256d S4 =
      _mm256_add_pd(_mm512_castpd512_pd256(S8), _mm512_extractf64x4_pd(S8, 1));
  __m128d S2 =
      _mm_add_pd(_mm256_castpd256_pd128(S4), _mm256_extractf128_pd(S4, 1));
  return _mm_cvtsd_f64(_mm_add_sd(S2, _mm_unpackhi_pd(S2, S2)));
}

/// laneSum over [0, N) of Term(16 elements at J, their mask).
template <typename TermFn>
WEFT_AVX512 inline double laneSum16(int64_t N, const TermFn &Term) {
  double Total = 0;
  for (int64_t I = 0; I < N; I += SumChunk) {
    const int64_t End = std::min(I + SumChunk, N);
    __m512 Acc = _mm512_setzero_ps();
    int64_t J = I;
    for (; J + 16 <= End; J += 16)
      Acc = _mm512_add_ps(Acc, Term(J, __mmask16(0xffff)));
    if (J < End) {
      const __mmask16 M = firstLanes(End - J);
      Acc = _mm512_mask_add_ps(Acc, M, Acc, Term(J, M));
    }
    Total += tree16(Acc);
  }
  return Total;
}

/// exp(X[J..] - Shift), stored in Y: rowSumExpStore's term.
struct ExpStore {
  const float *X;
  float *Y;
  __m512 Shift;
  WEFT_AVX512 __m512 operator()(int64_t J, __mmask16 M) const {
    __m512 E = vexp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(M, X + J), Shift));
    _mm512_mask_storeu_ps(Y + J, M, E);
    return E;
  }
};

/// A[J..] * B[J..]: rowDot's term.
struct Product {
  const float *A, *B;
  WEFT_AVX512 __m512 operator()(int64_t J, __mmask16 M) const {
    return _mm512_mul_ps(_mm512_maskz_loadu_ps(M, A + J),
                         _mm512_maskz_loadu_ps(M, B + J));
  }
};

/// Y[J, End) = 0.
WEFT_AVX512 inline void zeroRange(float *Y, int64_t J, int64_t End) {
  for (; J < End; J += 16)
    _mm512_mask_storeu_ps(Y + J, firstLanes(End - J), _mm512_setzero_ps());
}

} // namespace

WEFT_AVX512 void softmaxRowAvx512(const float *X, float *Y, int64_t N,
                                  int64_t KEnd) {
  if (N <= 0) {
    zeroRange(Y, 0, KEnd);
    return;
  }
  __m512 Max = _mm512_set1_ps(X[0]);
  for (int64_t J = 0; J < N; J += 16) {
    const __mmask16 M = firstLanes(N - J);
    Max = _mm512_mask_max_ps(Max, M, _mm512_maskz_loadu_ps(M, X + J), Max);
  }
  const __m512 Shift = _mm512_set1_ps(_mm512_reduce_max_ps(Max));
  const double Sum = laneSum16(N, ExpStore{X, Y, Shift});
  const __m512 Inv = _mm512_set1_ps(1.0f / float(Sum));
  for (int64_t J = 0; J < N; J += 16) {
    const __mmask16 M = firstLanes(N - J);
    _mm512_mask_storeu_ps(Y + J, M,
                          _mm512_mul_ps(_mm512_maskz_loadu_ps(M, Y + J), Inv));
  }
  zeroRange(Y, N, KEnd);
}

WEFT_AVX512 void softmaxGradRowAvx512(const float *P, const float *D,
                                      float *Out, int64_t N, int64_t KEnd) {
  const double Dot = laneSum16(N, Product{P, D});
  const __m512 DotV = _mm512_set1_ps(float(Dot));
  for (int64_t J = 0; J < KEnd; J += 16) {
    const __mmask16 M = firstLanes(KEnd - J);
    __m512 Pv = _mm512_maskz_loadu_ps(M, P + J);
    __m512 Dv = _mm512_maskz_loadu_ps(M, D + J);
    _mm512_mask_storeu_ps(Out + J, M,
                          _mm512_mul_ps(Pv, _mm512_sub_ps(Dv, DotV)));
  }
}

} // namespace weft::cpu

#else // not x86-64 GCC/Clang: never called (cpuHasAvx512 is false)

namespace weft::cpu {
bool cpuHasAvx512() { return false; }
void softmaxRowAvx512(const float *, float *, int64_t, int64_t) {}
void softmaxGradRowAvx512(const float *, const float *, float *, int64_t,
                          int64_t) {}
} // namespace weft::cpu

#endif
