//===- Common.cuh - What the CUDA kernels share -----------------*- CUDA
//-*-===//
//
// The compute type of each storage type (bf16 computes in f32, as the CPU's
// widened bf16 kernels do), conversions that round to nearest even, block
// reductions, and the launch shape of elementwise kernels. Indices are
// int64_t everywhere: a [B*S, vocab] tensor passes 2^31 elements.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_RUNTIME_KERNELS_CUDA_COMMON_CUH
#define WEFT_RUNTIME_KERNELS_CUDA_COMMON_CUH

#include "runtime/cuda/kernels/Kernels.h"

#include <cstdint>

namespace weft::cuda {

template <typename T> struct ComputeOf { using Type = float; };
template <> struct ComputeOf<double> { using Type = double; };
template <typename T> using Acc = typename ComputeOf<T>::Type;

__device__ __forceinline__ float toAcc(bf16 X) { return __bfloat162float(X); }
__device__ __forceinline__ float toAcc(float X) { return X; }
__device__ __forceinline__ double toAcc(double X) { return X; }

template <typename T> __device__ __forceinline__ T fromAcc(float X);
template <> __device__ __forceinline__ bf16 fromAcc<bf16>(float X) {
  return __float2bfloat16_rn(X);
}
template <> __device__ __forceinline__ float fromAcc<float>(float X) {
  return X;
}
template <typename T> __device__ __forceinline__ T fromAcc(double X);
template <> __device__ __forceinline__ double fromAcc<double>(double X) {
  return X;
}
template <> __device__ __forceinline__ float fromAcc<float>(double X) {
  return float(X);
}
template <> __device__ __forceinline__ bf16 fromAcc<bf16>(double X) {
  return __float2bfloat16_rn(float(X));
}

// exp and log at the compute type's precision (expf is the accurate one,
// not the __expf intrinsic: kernels must agree with the CPU to f32's
// rounding).
__device__ __forceinline__ float accExp(float X) { return expf(X); }
__device__ __forceinline__ double accExp(double X) { return exp(X); }
__device__ __forceinline__ float accTanh(float X) { return tanhf(X); }
__device__ __forceinline__ double accTanh(double X) { return tanh(X); }
template <typename A> __device__ __forceinline__ A accSigmoid(A X) {
  return A(1) / (A(1) + accExp(-X));
}

template <typename A> __device__ __forceinline__ A warpSum(A V) {
  for (int Off = 16; Off > 0; Off /= 2)
    V += __shfl_xor_sync(0xffffffffu, V, Off);
  return V;
}
template <typename A> __device__ __forceinline__ A warpMax(A V) {
  for (int Off = 16; Off > 0; Off /= 2)
    V = max(V, __shfl_xor_sync(0xffffffffu, V, Off));
  return V;
}

/// The sum over the block of V, returned to every thread. Shared holds 32
/// A's; blockDim.x is a multiple of 32. Synchronizes the block.
template <typename A> __device__ A blockSum(A V, A *Shared) {
  const int Lane = threadIdx.x % 32, Warp = threadIdx.x / 32;
  V = warpSum(V);
  __syncthreads(); // Shared may still be read by a previous reduction
  if (Lane == 0)
    Shared[Warp] = V;
  __syncthreads();
  const int Warps = blockDim.x / 32;
  V = Lane < Warps ? Shared[Lane] : A(0);
  return warpSum(V);
}
template <typename A> __device__ A blockMax(A V, A *Shared) {
  const int Lane = threadIdx.x % 32, Warp = threadIdx.x / 32;
  V = warpMax(V);
  __syncthreads();
  if (Lane == 0)
    Shared[Warp] = V;
  __syncthreads();
  const int Warps = blockDim.x / 32;
  V = Lane < Warps ? Shared[Lane] : Shared[0];
  return warpMax(V);
}

/// Records a data error: the first instruction (in stream order) to report
/// one keeps the slot, and of its reports the lowest Index wins, so the
/// message does not depend on which thread ran first. Index < 2^31.
__device__ __forceinline__ void reportError(ErrorSink E, int Code,
                                            long long Index, long long Value,
                                            long long Limit) {
  if (!E.Slot)
    return;
  const int Mine = E.Instruction + 1;
  const int Owner = atomicCAS(&E.Slot->Instruction1, 0, Mine);
  if (Owner != 0 && Owner != Mine)
    return;            // an earlier instruction's error stands
  E.Slot->Code = Code; // the same for every report of one instruction
  E.Slot->Limit = Limit;
  const unsigned long long Key =
      (static_cast<unsigned long long>(Index) << 32) |
      static_cast<unsigned int>(Value);
  atomicMax(&E.Slot->NotKey, ~Key);
}

constexpr int ElementwiseThreads = 256;
/// Blocks for a grid-stride loop over N elements (at least 1; at most what
/// keeps every SM busy several times over).
inline unsigned elementwiseBlocks(int64_t N) {
  int64_t Blocks = (N + ElementwiseThreads - 1) / ElementwiseThreads;
  const int64_t Cap = int64_t(1) << 16;
  return unsigned(Blocks < 1 ? 1 : Blocks > Cap ? Cap : Blocks);
}

#define WEFT_GRID_STRIDE(I, N)                                                 \
  for (int64_t I = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; I < (N);    \
       I += int64_t(gridDim.x) * blockDim.x)

} // namespace weft::cuda

#endif // WEFT_RUNTIME_KERNELS_CUDA_COMMON_CUH
