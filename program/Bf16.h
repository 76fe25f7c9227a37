//===- Bf16.h - bfloat16 <-> float conversions ------------------*- C++ -*-===//
//
// bfloat16 is the top half of an IEEE f32: widening is exact (a shift);
// narrowing rounds to nearest, ties to even, as PyTorch's and CUDA's
// __float2bfloat16 do; NaN stays NaN (quiet), infinities stay infinite and
// finite values past the largest bf16 round to infinity.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_PROGRAM_BF16_H
#define WEFT_PROGRAM_BF16_H

#include <cstdint>
#include <cstring>

namespace weft {

inline float bf16ToFloat(uint16_t H) {
  uint32_t Bits = uint32_t(H) << 16;
  float F;
  std::memcpy(&F, &Bits, 4);
  return F;
}

inline uint16_t floatToBf16(float F) {
  uint32_t Bits;
  std::memcpy(&Bits, &F, 4);
  if ((Bits & 0x7fffffffU) > 0x7f800000U) // NaN: keep the sign, quiet it
    return uint16_t((Bits >> 16) | 0x0040U);
  Bits += 0x7fffU + ((Bits >> 16) & 1U);
  return uint16_t(Bits >> 16);
}

} // namespace weft

#endif // WEFT_PROGRAM_BF16_H
