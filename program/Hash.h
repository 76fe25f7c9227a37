//===- Hash.h - FNV-1a and splitmix64 as fixed by the program format
//-------===//
#ifndef WEFT_RUNTIME_HASH_H
#define WEFT_RUNTIME_HASH_H

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace weft {

inline uint64_t fnv1a64(const void *Data, size_t Size) {
  const auto *P = static_cast<const unsigned char *>(Data);
  uint64_t H = 0xcbf29ce484222325ULL;
  for (size_t I = 0; I < Size; ++I) {
    H ^= P[I];
    H *= 0x100000001b3ULL;
  }
  return H;
}

inline uint64_t fnv1a64(std::string_view S) {
  return fnv1a64(S.data(), S.size());
}

inline uint64_t splitmix64(uint64_t X) {
  X += 0x9e3779b97f4a7c15ULL;
  uint64_t Z = X;
  Z = (Z ^ (Z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  Z = (Z ^ (Z >> 27)) * 0x94d049bb133111ebULL;
  return Z ^ (Z >> 31);
}

} // namespace weft

#endif // WEFT_RUNTIME_HASH_H
