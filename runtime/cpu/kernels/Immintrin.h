//===- Immintrin.h - <immintrin.h> without GCC 12's false warnings -*- C++ -*-//
//
// GCC 12's AVX-512 headers pass _mm512_undefined_*() as the unused source
// of their unmasked intrinsics, which -W(maybe-)uninitialized reports where
// they are inlined (GCC bug 105593, fixed in GCC 13).
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_RUNTIME_KERNELS_CPU_IMMINTRIN_H
#define WEFT_RUNTIME_KERNELS_CPU_IMMINTRIN_H

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

/// A function compiled for AVX-512F, called only where cpuHasAvx512().
#define WEFT_AVX512 __attribute__((target("avx512f")))

#endif // WEFT_RUNTIME_KERNELS_CPU_IMMINTRIN_H
