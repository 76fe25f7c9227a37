//===- Bf16.cpp - bfloat16 storage <-> f32 compute ------------------------===//
#include "program/Bf16.h"
#include "runtime/cpu/kernels/Kernels.h"

namespace weft::cpu {

void widenBf16(const uint16_t *X, float *Y, int64_t N) {
#pragma omp parallel for schedule(static) if (N > (1 << 16))
  for (int64_t I = 0; I < N; ++I)
    Y[I] = bf16ToFloat(X[I]);
}

void narrowToBf16(const float *X, uint16_t *Y, int64_t N) {
#pragma omp parallel for schedule(static) if (N > (1 << 16))
  for (int64_t I = 0; I < N; ++I)
    Y[I] = floatToBf16(X[I]);
}

} // namespace weft::cpu
