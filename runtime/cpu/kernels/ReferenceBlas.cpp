//===- ReferenceBlas.cpp - GEMM as plain loops, for builds without BLAS ---===//
//
// Only in a runtime configured with WEFT_ALLOW_REFERENCE_BLAS where OpenBLAS
// is missing (a GPU machine, where the CPU backend only checks the CUDA
// backend on small programs). Correct and slow; weft-run warns at start.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/kernels/Blas.h"

namespace weft::cpu {

template <typename T>
void referenceGemm(bool TA, bool TB, int64_t M, int64_t N, int64_t K, T Alpha,
                   const T *A, int64_t Lda, const T *B, int64_t Ldb, T Beta,
                   T *C, int64_t Ldc) {
  for (int64_t I = 0; I < M; ++I) {
    T *Row = C + I * Ldc;
    for (int64_t J = 0; J < N; ++J)
      Row[J] = Beta == T(0) ? T(0) : Beta * Row[J];
    for (int64_t P = 0; P < K; ++P) {
      const T Aip = Alpha * (TA ? A[P * Lda + I] : A[I * Lda + P]);
      if (TB)
        for (int64_t J = 0; J < N; ++J)
          Row[J] += Aip * B[J * Ldb + P];
      else
        for (int64_t J = 0; J < N; ++J)
          Row[J] += Aip * B[P * Ldb + J];
    }
  }
}

template void referenceGemm<float>(bool, bool, int64_t, int64_t, int64_t, float,
                                   const float *, int64_t, const float *,
                                   int64_t, float, float *, int64_t);
template void referenceGemm<double>(bool, bool, int64_t, int64_t, int64_t,
                                    double, const double *, int64_t,
                                    const double *, int64_t, double, double *,
                                    int64_t);

} // namespace weft::cpu
