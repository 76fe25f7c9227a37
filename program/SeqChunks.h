//===- SeqChunks.h - the stored order of load-balanced sequences -*- C++
//-*-===//
//
// Load-balanced context parallelism (docs/design.md, decision 30) holds each
// sequence as C equal chunks in the order 0, C-1, 1, C-2, ...: rank i of the
// C/2 along cp holds stored chunks 2i and 2i+1, chunks i and C-1-i, and so
// as many earlier keys for causal attention as every other rank.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_PROGRAM_SEQCHUNKS_H
#define WEFT_PROGRAM_SEQCHUNKS_H

#include <cstdint>

namespace weft {

/// The mesh axis of context parallelism (dialect/ShardingRule.h's
/// kContextAxis): the one a load-balanced sequence is split over.
inline constexpr const char *ContextAxisName = "cp";

/// The chunk stored K-th of C (C even): K/2 for even K, C-1-(K-1)/2 for odd.
inline int64_t storedChunk(int64_t K, int64_t Chunks) {
  return K % 2 == 0 ? K / 2 : Chunks - 1 - (K - 1) / 2;
}

/// The position in the sequence of the token stored at index J of a
/// sequence of Seq tokens held as Chunks chunks (Chunks <= 0: J itself).
inline int64_t seqPosition(int64_t J, int64_t Seq, int64_t Chunks) {
  if (Chunks <= 0)
    return J;
  const int64_t Len = Seq / Chunks;
  return storedChunk(J / Len, Chunks) * Len + J % Len;
}

} // namespace weft

#endif // WEFT_PROGRAM_SEQCHUNKS_H
