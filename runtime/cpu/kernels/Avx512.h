//===- Avx512.h - Kernels written in AVX-512 intrinsics --------*- C++ -*-===//
//
// Attention's inner work on rows and blocks too small for the SIMD clones
// and OpenBLAS to run near the core's rate; each is called only where
// cpuHasAvx512().
//
// - Softmax rows (SoftmaxAvx512.cpp): FastMath's softmaxRow and
//   softmaxGradRow written out. A causal block's rows average half a block
//   of keys, and GCC's clone of the generic row spent more on each row's
//   fixed work (a scalar max tail and reduction, a memset of the masked
//   keys, the lane sums through the stack) than on its exponentials. Same
//   operations in the same order, no fused multiply-add: the generic row's
//   result, bit for bit (Avx512Kernels.SoftmaxRowsMatchTheGenericRows).
// - Small GEMMs (GemmAvx512.cpp): attention's products of a block of 64
//   queries with up to the sequence's keys over a head of 64, where
//   OpenBLAS's single-threaded calls ran at 90-136 GFLOP/s against 155 for
//   a large GEMM on the same core. They sum each product in order over k
//   with FMA, as a BLAS micro-kernel does; the sums are not OpenBLAS's bit
//   for bit, but no result depends on the thread count or the layout.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_RUNTIME_KERNELS_CPU_AVX512_H
#define WEFT_RUNTIME_KERNELS_CPU_AVX512_H

#include <cstdint>

namespace weft::cpu {

/// The CPU runs AVX-512F (the test that picks the avx512f SIMD clones);
/// false on other architectures and compilers.
bool cpuHasAvx512();

/// softmaxRow(X, Y, N), then Y[N, KEnd) = 0. Y may be X.
void softmaxRowAvx512(const float *X, float *Y, int64_t N, int64_t KEnd);

/// softmaxGradRow(P, D, Out, N, KEnd). Out may be D.
void softmaxGradRowAvx512(const float *P, const float *D, float *Out, int64_t N,
                          int64_t KEnd);

/// C[M, N] = Alpha * sum over k < K of A(r, k) * B[k, n], plus C's old value
/// when Accumulate. A(r, k) is A[r * Ars + k * Acs] (A or its transpose); B
/// is row-major with leading dimension Ldb. Reads no element of A, B or C
/// outside those ranges.
void smallGemmAvx512(int64_t M, int64_t N, int64_t K, float Alpha,
                     const float *A, int64_t Ars, int64_t Acs, const float *B,
                     int64_t Ldb, bool Accumulate, float *C, int64_t Ldc);

/// Bt[c * Ldt + r] = B[r * Ldb + c] for r < Rows, c < Cols.
void transposeAvx512(const float *B, int64_t Ldb, int64_t Rows, int64_t Cols,
                     float *Bt, int64_t Ldt);

} // namespace weft::cpu

#endif // WEFT_RUNTIME_KERNELS_CPU_AVX512_H
