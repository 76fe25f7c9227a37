//===- RowWalk.cuh - A thread block walking rows of Hd values ---*- CUDA
//-*-===//
//
// What the row-per-block attention kernels share (Attention.cu's reference
// kernels, MaskedAttention.cu): the block loads one row into shared memory,
// dots it with rows of another tensor, and accumulates weighted rows into
// per-thread columns (column threadIdx.x + blockDim.x N). A is the compute
// type; a stored T converts to it (bf16 widens exactly).
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_RUNTIME_KERNELS_CUDA_ROWWALK_CUH
#define WEFT_RUNTIME_KERNELS_CUDA_ROWWALK_CUH

#include <cstdint>

namespace weft::cuda::rows {

/// Loads a row of Hd values into shared memory (the caller syncs).
template <typename A, typename T>
__device__ void loadRow(A *Dst, const T *Src, int64_t Hd) {
  for (int64_t C = threadIdx.x; C < Hd; C += blockDim.x)
    Dst[C] = A(Src[C]);
}

template <typename A, typename T>
__device__ A dot(const A *X, const T *Y, int64_t Hd) {
  A S = A(0);
  for (int64_t C = 0; C < Hd; ++C)
    S += X[C] * A(Y[C]);
  return S;
}

/// Acc[N] += sum over c < Count of W[c] times row c of Src (rows Stride
/// apart), at column threadIdx.x + blockDim.x N.
template <typename A, typename T, int PerThread>
__device__ void accumulateRows(A (&Acc)[PerThread], const A *W, int Count,
                               const T *Src, int64_t Stride, int64_t Hd) {
#pragma unroll
  for (int N = 0; N < PerThread; ++N) {
    const int64_t C = threadIdx.x + int64_t(blockDim.x) * N;
    if (C >= Hd)
      break;
    for (int Cc = 0; Cc < Count; ++Cc)
      Acc[N] += W[Cc] * A(Src[Cc * Stride + C]);
  }
}

} // namespace weft::cuda::rows

#endif // WEFT_RUNTIME_KERNELS_CUDA_ROWWALK_CUH
