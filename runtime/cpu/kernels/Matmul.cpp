//===- Matmul.cpp - matmul through cblas ----------------------------------===//
#include "runtime/cpu/kernels/Blas.h"
#include "runtime/cpu/kernels/Kernels.h"

namespace weft::cpu {

template <typename T>
void matmul(const T *A, const T *B, T *C, int64_t M, int64_t N, int64_t K,
            bool TransA, bool TransB, const T *Bias) {
  if (M == 0 || N == 0)
    return;
  if (K == 0) {
    for (int64_t I = 0; I < M * N; ++I)
      C[I] = Bias ? Bias[I % N] : T(0);
    return;
  }
  parallelGemm(TransA, TransB, M, N, K, A, B, C, Bias);
}

template void matmul<float>(const float *, const float *, float *, int64_t,
                            int64_t, int64_t, bool, bool, const float *);
template void matmul<double>(const double *, const double *, double *, int64_t,
                             int64_t, int64_t, bool, bool, const double *);

} // namespace weft::cpu
