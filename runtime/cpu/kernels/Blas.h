//===- Blas.h - Typed cblas GEMM and thread-pool helpers -------*- C++ -*-===//
#ifndef WEFT_RUNTIME_KERNELS_CPU_BLAS_H
#define WEFT_RUNTIME_KERNELS_CPU_BLAS_H

#include <cstdint>

#ifdef WEFT_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace weft::cpu {

#ifndef WEFT_HAVE_OPENBLAS
/// Plain loops (ReferenceBlas.cpp): the GEMM of a runtime built without
/// OpenBLAS (WEFT_ALLOW_REFERENCE_BLAS, for GPU machines that lack it, where
/// the CPU backend only checks the CUDA one on small programs).
template <typename T>
void referenceGemm(bool TA, bool TB, int64_t M, int64_t N, int64_t K, T Alpha,
                   const T *A, int64_t Lda, const T *B, int64_t Ldb, T Beta,
                   T *C, int64_t Ldc);
template <typename T>
inline void gemm(bool TA, bool TB, int64_t M, int64_t N, int64_t K, T Alpha,
                 const T *A, int64_t Lda, const T *B, int64_t Ldb, T Beta, T *C,
                 int64_t Ldc) {
  referenceGemm(TA, TB, M, N, K, Alpha, A, Lda, B, Ldb, Beta, C, Ldc);
}
#else
/// Row-major C = Alpha op(A) op(B) + Beta C.
inline void gemm(bool TA, bool TB, int64_t M, int64_t N, int64_t K, float Alpha,
                 const float *A, int64_t Lda, const float *B, int64_t Ldb,
                 float Beta, float *C, int64_t Ldc) {
  cblas_sgemm(CblasRowMajor, TA ? CblasTrans : CblasNoTrans,
              TB ? CblasTrans : CblasNoTrans, M, N, K, Alpha, A, Lda, B, Ldb,
              Beta, C, Ldc);
}
inline void gemm(bool TA, bool TB, int64_t M, int64_t N, int64_t K,
                 double Alpha, const double *A, int64_t Lda, const double *B,
                 int64_t Ldb, double Beta, double *C, int64_t Ldc) {
  cblas_dgemm(CblasRowMajor, TA ? CblasTrans : CblasNoTrans,
              TB ? CblasTrans : CblasNoTrans, M, N, K, Alpha, A, Lda, B, Ldb,
              Beta, C, Ldc);
}
#endif

/// C = op(A) op(B) (+ Bias[N] on every row) split over the OpenMP threads
/// by blocks of C's rows or columns, each block one single-threaded BLAS
/// call. OpenBLAS itself is kept at one thread (see setNumThreads): its own
/// pool would fight the OpenMP pool for the cores.
template <typename T>
void parallelGemm(bool TA, bool TB, int64_t M, int64_t N, int64_t K, const T *A,
                  const T *B, T *C, const T *Bias = nullptr);

} // namespace weft::cpu

#endif // WEFT_RUNTIME_KERNELS_CPU_BLAS_H
