//===- SoftmaxAvx512.h - Softmax rows in AVX-512 intrinsics ----*- C++ -*-===//
//
// FastMath's softmaxRow and softmaxGradRow, written out in AVX-512 for the
// short rows of attention (a causal block's rows average half a block of
// keys): GCC's clone of the generic row spent more on each row's fixed work
// (a scalar max tail and reduction, a memset of the masked keys, the lane
// sums through the stack) than on its exponentials. Same operations in the
// same order, no fused multiply-add: the result is the generic row's, bit
// for bit (GenericKernels.Avx512SoftmaxRowsMatchTheGenericRows).
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_RUNTIME_KERNELS_CPU_SOFTMAXAVX512_H
#define WEFT_RUNTIME_KERNELS_CPU_SOFTMAXAVX512_H

#include <cstdint>

namespace weft::cpu {

/// The CPU runs AVX-512F (the test that picks the avx512f SIMD clones);
/// false on other architectures and compilers.
bool cpuHasAvx512();

/// softmaxRow(X, Y, N), then Y[N, KEnd) = 0. Y may be X. Only where
/// cpuHasAvx512().
void softmaxRowAvx512(const float *X, float *Y, int64_t N, int64_t KEnd);

/// softmaxGradRow(P, D, Out, N, KEnd). Out may be D. Only where
/// cpuHasAvx512().
void softmaxGradRowAvx512(const float *P, const float *D, float *Out, int64_t N,
                          int64_t KEnd);

} // namespace weft::cpu

#endif // WEFT_RUNTIME_KERNELS_CPU_SOFTMAXAVX512_H
