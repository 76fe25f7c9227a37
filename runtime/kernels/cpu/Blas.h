//===- Blas.h - Typed cblas GEMM and thread-pool helpers -------*- C++ -*-===//
#ifndef WEFT_RUNTIME_KERNELS_CPU_BLAS_H
#define WEFT_RUNTIME_KERNELS_CPU_BLAS_H

#include <cblas.h>
#include <cstdint>

namespace weft::cpu {

/// Row-major C = Alpha op(A) op(B) + Beta C.
inline void gemm(bool TA, bool TB, int64_t M, int64_t N, int64_t K,
                 float Alpha, const float *A, int64_t Lda, const float *B,
                 int64_t Ldb, float Beta, float *C, int64_t Ldc) {
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

/// While alive, OpenBLAS runs single-threaded, so that GEMMs can be called
/// from inside an OpenMP parallel region without oversubscribing the cores.
class SerialBlasScope {
public:
  SerialBlasScope();
  ~SerialBlasScope();
  SerialBlasScope(const SerialBlasScope &) = delete;
  SerialBlasScope &operator=(const SerialBlasScope &) = delete;

private:
  int Saved;
};

} // namespace weft::cpu

#endif // WEFT_RUNTIME_KERNELS_CPU_BLAS_H
