//===- GemmAvx512.cpp - Attention's small GEMMs in AVX-512 ----------------===//
//
// A micro-kernel holds an R x 64 tile of C in 4R registers (R <= 6: 24
// accumulators, 4 of B and 1 of A) and walks k, one row of B and a
// broadcast A element per tile row at each step. Tiles run column block by
// column block so a block of B stays in L1 across the rows. The last
// column block masks its loads and stores, so nothing past N is read or
// written. (Avx512.h says where and why these replace OpenBLAS.)
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/kernels/Avx512.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include "runtime/cpu/kernels/Immintrin.h"

#include <algorithm>
#include <utility>

namespace weft::cpu {

namespace {

constexpr int TileRows = 6;
constexpr int TileVectors = 4; // 64 columns

/// What every tile of one product shares: A's strides, B's and C's leading
/// dimensions, K, Alpha and whether C accumulates.
struct Operands {
  int64_t K;
  float Alpha;
  int64_t Ars, Acs, Ldb;
  bool Accumulate;
  int64_t Ldc;
};

/// Rows [0, R) of C's columns [J, J + 16 NV), the last vector masked by
/// Last; A, B and C already point at row 0 and column J.
template <int R, int NV>
WEFT_AVX512 void tile(const Operands &O, const float *A, const float *B,
                      float *C, __mmask16 Last) {
  // Every loop over the tile unrolled, so no accumulator is indexed at run
  // time: otherwise GCC kept the array in memory too and stored all 24
  // registers on every step of k (at half the speed).
  const int64_t K = O.K, Ars = O.Ars, Acs = O.Acs, Ldb = O.Ldb;
  __m512 Acc[R][NV];
#pragma GCC unroll 6
  for (int I = 0; I < R; ++I)
#pragma GCC unroll 4
    for (int V = 0; V < NV; ++V)
      Acc[I][V] = _mm512_setzero_ps();
  for (int64_t Kk = 0; Kk < K; ++Kk) {
    const float *Bk = B + Kk * Ldb;
    __m512 Bv[NV];
#pragma GCC unroll 4
    for (int V = 0; V < NV; ++V)
      Bv[V] = V + 1 < NV ? _mm512_loadu_ps(Bk + 16 * V)
                         : _mm512_maskz_loadu_ps(Last, Bk + 16 * V);
    const float *Ak = A + Kk * Acs;
#pragma GCC unroll 6
    for (int I = 0; I < R; ++I) {
      const __m512 Av = _mm512_set1_ps(Ak[I * Ars]);
#pragma GCC unroll 4
      for (int V = 0; V < NV; ++V)
        Acc[I][V] = _mm512_fmadd_ps(Av, Bv[V], Acc[I][V]);
    }
  }
  const __m512 Alpha = _mm512_set1_ps(O.Alpha);
#pragma GCC unroll 6
  for (int I = 0; I < R; ++I)
#pragma GCC unroll 4
    for (int V = 0; V < NV; ++V) {
      float *Cv = C + I * O.Ldc + 16 * V;
      const __mmask16 M = V + 1 < NV ? __mmask16(0xffff) : Last;
      __m512 Out = _mm512_mul_ps(Acc[I][V], Alpha);
      if (O.Accumulate)
        Out = _mm512_add_ps(_mm512_maskz_loadu_ps(M, Cv), Out);
      _mm512_mask_storeu_ps(Cv, M, Out);
    }
}

using TileFn = void (*)(const Operands &, const float *, const float *, float *,
                        __mmask16);

template <int R, int... NV>
constexpr void fillRow(TileFn (&Row)[TileVectors],
                       std::integer_sequence<int, NV...>) {
  ((Row[NV] = &tile<R, NV + 1>), ...);
}

template <int... R> constexpr auto makeTiles(std::integer_sequence<int, R...>) {
  struct Table {
    TileFn Fn[TileRows][TileVectors] = {};
  } T;
  (fillRow<R + 1>(T.Fn[R], std::make_integer_sequence<int, TileVectors>()),
   ...);
  return T;
}

/// Tiles[R - 1][NV - 1] is tile<R, NV>.
const auto Tiles = makeTiles(std::make_integer_sequence<int, TileRows>());

/// The 16 x 16 block at B (leading dimension Ldb), transposed into Bt.
WEFT_AVX512 void transpose16(const float *B, int64_t Ldb, float *Bt,
                             int64_t Ldt) {
  __m512 R[16], T[16];
  for (int I = 0; I < 16; ++I)
    R[I] = _mm512_loadu_ps(B + I * Ldb);
  for (int I = 0; I < 16; I += 2) {
    T[I] = _mm512_unpacklo_ps(R[I], R[I + 1]);
    T[I + 1] = _mm512_unpackhi_ps(R[I], R[I + 1]);
  }
  for (int I = 0; I < 16; I += 4) {
    R[I] = _mm512_shuffle_ps(T[I], T[I + 2], 0x44);
    R[I + 1] = _mm512_shuffle_ps(T[I], T[I + 2], 0xEE);
    R[I + 2] = _mm512_shuffle_ps(T[I + 1], T[I + 3], 0x44);
    R[I + 3] = _mm512_shuffle_ps(T[I + 1], T[I + 3], 0xEE);
  }
  for (int H = 0; H < 16; H += 8)
    for (int I = 0; I < 4; ++I) {
      T[H + I] = _mm512_shuffle_f32x4(R[H + I], R[H + I + 4], 0x88);
      T[H + I + 4] = _mm512_shuffle_f32x4(R[H + I], R[H + I + 4], 0xDD);
    }
  for (int I = 0; I < 8; ++I) {
    R[I] = _mm512_shuffle_f32x4(T[I], T[I + 8], 0x88);
    R[I + 8] = _mm512_shuffle_f32x4(T[I], T[I + 8], 0xDD);
  }
  for (int I = 0; I < 16; ++I)
    _mm512_storeu_ps(Bt + I * Ldt, R[I]);
}

} // namespace

void smallGemmAvx512(int64_t M, int64_t N, int64_t K, float Alpha,
                     const float *A, int64_t Ars, int64_t Acs, const float *B,
                     int64_t Ldb, bool Accumulate, float *C, int64_t Ldc) {
  const Operands O{K, Alpha, Ars, Acs, Ldb, Accumulate, Ldc};
  for (int64_t J = 0; J < N; J += 16 * TileVectors) {
    const int64_t Cols = std::min<int64_t>(N - J, 16 * TileVectors);
    const int NV = int((Cols + 15) / 16);
    const int64_t LastCols = Cols - 16 * (NV - 1);
    const __mmask16 Last =
        LastCols == 16 ? __mmask16(0xffff) : __mmask16((1u << LastCols) - 1);
    for (int64_t I = 0; I < M; I += TileRows) {
      const int R = int(std::min<int64_t>(M - I, TileRows));
      Tiles.Fn[R - 1][NV - 1](O, A + I * Ars, B + J, C + I * Ldc + J, Last);
    }
  }
}

WEFT_AVX512 void transposeAvx512(const float *B, int64_t Ldb, int64_t Rows,
                                 int64_t Cols, float *Bt, int64_t Ldt) {
  const int64_t R16 = Rows / 16 * 16, C16 = Cols / 16 * 16;
  for (int64_t R = 0; R < R16; R += 16)
    for (int64_t C = 0; C < C16; C += 16)
      transpose16(B + R * Ldb + C, Ldb, Bt + C * Ldt + R, Ldt);
  // The edges past the 16 x 16 blocks.
  for (int64_t R = 0; R < Rows; ++R)
    for (int64_t C = R < R16 ? C16 : 0; C < Cols; ++C)
      Bt[C * Ldt + R] = B[R * Ldb + C];
}

} // namespace weft::cpu

#else // not x86-64 GCC/Clang: never called (cpuHasAvx512 is false)

namespace weft::cpu {
void smallGemmAvx512(int64_t, int64_t, int64_t, float, const float *, int64_t,
                     int64_t, const float *, int64_t, bool, float *, int64_t) {}
void transposeAvx512(const float *, int64_t, int64_t, int64_t, float *,
                     int64_t) {}
} // namespace weft::cpu

#endif
