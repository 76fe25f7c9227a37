//===- AttentionProducts.h - attention's GEMMs, AVX-512 or BLAS -*- C++ -*-===//
//
// Shared by attention (Attention.cpp) and ring attention's blocks
// (RingAttention.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_RUNTIME_KERNELS_CPU_ATTENTIONPRODUCTS_H
#define WEFT_RUNTIME_KERNELS_CPU_ATTENTIONPRODUCTS_H

#include "runtime/cpu/kernels/Avx512.h"
#include "runtime/cpu/kernels/Blas.h"
#include "runtime/cpu/kernels/Kernels.h"

#include <algorithm>
#include <type_traits>

namespace weft::cpu {

// The products, through the AVX-512 micro-kernels for f32 where the CPU has
// them and the head is wide enough (Avx512.h, attentionPacksHeads), else
// through BLAS. The micro-kernels read their B operand from a packed copy:
// a key or value head transposed (Xt, Hd x Ldt) for the score products, and
// rows copied to a leading dimension of Hd for the others: read in place,
// 64 rows of a [B, S, H * Hd] tensor fall into a few L1 sets (GPT-2's 3 KiB
// apart: 126-130 GFLOP/s, packed 149-155).
template <typename T> struct AttentionProducts {
  bool Fast = false;
  int64_t Hd, Ldt;

  AttentionProducts(int64_t Sk, int64_t Hd) : Hd(Hd), Ldt(attentionKeysLd(Sk)) {
    if constexpr (std::is_same_v<T, float>)
      Fast = attentionPacksHeads(Hd) && cpuHasAvx512();
  }

  /// The packed copies' places in At (attentionPackElems(Sk, Blk, Hd)
  /// elements of a thread's scratch), when Fast: keys and values
  /// transposed, one of them by rows (values in the forward, keys in the
  /// gradient), and a block of queries and one of their output gradients.
  struct Buffers {
    T *Kt = nullptr, *Vt = nullptr, *Rows = nullptr, *Qb = nullptr,
      *Dyb = nullptr;
  };
  Buffers buffers(T *At, int64_t Sk, int64_t Blk) const {
    Buffers B;
    if (!Fast)
      return B;
    B.Kt = At;
    B.Vt = B.Kt + Hd * Ldt;
    B.Rows = B.Vt + Hd * Ldt;
    B.Qb = B.Rows + Sk * Hd;
    B.Dyb = B.Qb + Blk * Hd;
    return B;
  }

  /// Xt = X^T for X [Rows, Hd] (leading dimension Ldx), when Fast.
  void transposed(const T *X, int64_t Ldx, int64_t Rows, T *Xt) const {
    if constexpr (std::is_same_v<T, float>)
      if (Fast)
        transposeAvx512(X, Ldx, Rows, Hd, Xt, Ldt);
  }

  /// Xr = X [Rows, Hd] at a leading dimension of Hd, when Fast.
  void packed(const T *X, int64_t Ldx, int64_t Rows, T *Xr) const {
    if (Fast)
      for (int64_t R = 0; R < Rows; ++R)
        std::copy_n(X + R * Ldx, Hd, Xr + R * Hd);
  }

  /// C[M, N] = Alpha A[M, Hd] X[N, Hd]^T (Xt when Fast).
  void byKeys(int64_t M, int64_t N, T Alpha, const T *A, int64_t Lda,
              const T *X, int64_t Ldx, const T *Xt, T *C, int64_t Ldc) const {
    if constexpr (std::is_same_v<T, float>)
      if (Fast)
        return smallGemmAvx512(M, N, Hd, Alpha, A, Lda, 1, Xt, Ldt, false, C,
                               Ldc);
    gemm(false, true, M, N, Hd, Alpha, A, Lda, X, Ldx, T(0), C, Ldc);
  }

  /// C[M, Hd] = Alpha A[M, K] X[K, Hd] (Xr when Fast).
  void rows(int64_t M, int64_t K, T Alpha, const T *A, int64_t Lda, const T *X,
            int64_t Ldx, const T *Xr, T *C, int64_t Ldc) const {
    if constexpr (std::is_same_v<T, float>)
      if (Fast)
        return smallGemmAvx512(M, Hd, K, Alpha, A, Lda, 1, Xr, Hd, false, C,
                               Ldc);
    gemm(false, false, M, Hd, K, Alpha, A, Lda, X, Ldx, T(0), C, Ldc);
  }

  /// C[M, Hd] += Alpha A[K, M]^T X[K, Hd] (Xr when Fast).
  void addColumns(int64_t M, int64_t K, T Alpha, const T *A, int64_t Lda,
                  const T *X, int64_t Ldx, const T *Xr, T *C,
                  int64_t Ldc) const {
    if constexpr (std::is_same_v<T, float>)
      if (Fast)
        return smallGemmAvx512(M, Hd, K, Alpha, A, 1, Lda, Xr, Hd, true, C,
                               Ldc);
    gemm(true, false, M, Hd, K, Alpha, A, Lda, X, Ldx, T(1), C, Ldc);
  }
};

} // namespace weft::cpu

#endif // WEFT_RUNTIME_KERNELS_CPU_ATTENTIONPRODUCTS_H
