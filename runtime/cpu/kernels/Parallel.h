//===- Parallel.h - Chunked parallel loops and SIMD clones -----*- C++ -*-===//
#ifndef WEFT_RUNTIME_KERNELS_CPU_PARALLEL_H
#define WEFT_RUNTIME_KERNELS_CPU_PARALLEL_H

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>

/// Compiles a function three times, for AVX-512, AVX2 and baseline x86-64,
/// and picks one at load time by the CPU (binaries must run on any x86-64).
/// Only for non-template functions; they call the shared inline body. The
/// runtime is compiled with -ffp-contract=off, so no clone fuses a multiply
/// and an add (AVX-512F has FMA): every clone computes each element exactly
/// as SSE2 does, and results do not depend on the machine.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define WEFT_SIMD_CLONES                                                       \
  __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define WEFT_SIMD_CLONES
#endif

/// For the bodies a WEFT_SIMD_CLONES function calls: a body GCC leaves out
/// of line is compiled once, for baseline x86-64, and every clone calls that
/// copy (seen for loops with a local array: the column sums ran in SSE2).
#if defined(__GNUC__)
#define WEFT_CLONE_BODY __attribute__((always_inline)) inline
#else
#define WEFT_CLONE_BODY inline
#endif

namespace weft::cpu {

/// Calls F(Begin, End) on one contiguous range per thread (ranges start at
/// multiples of 16); serially when N <= Grain.
template <typename Fn> void forChunks(int64_t N, int64_t Grain, Fn F) {
  if (N <= Grain || omp_get_max_threads() == 1) {
    F(int64_t(0), N);
    return;
  }
#pragma omp parallel
  {
    int64_t Threads = omp_get_num_threads(), Id = omp_get_thread_num();
    int64_t Chunk = ((N + Threads - 1) / Threads + 15) / 16 * 16;
    int64_t Begin = std::min(N, Id * Chunk), End = std::min(N, Begin + Chunk);
    if (Begin < End)
      F(Begin, End);
  }
}

/// Calls FloatClone (a WEFT_SIMD_CLONES function, which exists for f32 only)
/// when T is float, else Body (the template body it wraps, for f64).
template <typename T, typename Clone, typename Body, typename... Args>
inline decltype(auto) byType(Clone &&FloatClone, Body &&Generic, Args &&...A) {
  if constexpr (std::is_same_v<T, float>)
    return FloatClone(std::forward<Args>(A)...);
  else
    return Generic(std::forward<Args>(A)...);
}

} // namespace weft::cpu

#endif // WEFT_RUNTIME_KERNELS_CPU_PARALLEL_H
