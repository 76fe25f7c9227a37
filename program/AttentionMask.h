//===- AttentionMask.h - The keys a query sees ------------------*- C++ -*-===//
//
// Attention's masks as one range of key positions per query: causal, the
// keys up to the query; a sliding window (causal), those within it; a
// packed document (Doc: the query's index in its document), those of its
// document; key padding (Span: the row's tokens [F, E)), those tokens, and
// a causal query before F, which has none, itself. The CPU's ring kernels
// and the CUDA backend's masked attention share this definition.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_PROGRAM_ATTENTIONMASK_H
#define WEFT_PROGRAM_ATTENTIONMASK_H

#include "program/HostDevice.h"

#include <cstdint>

namespace weft {

/// The key positions [Lo, Hi] a query sees.
struct KeyRange {
  int64_t Lo, Hi;
  WEFT_HOST_DEVICE bool has(int64_t Pk) const { return Lo <= Pk && Pk <= Hi; }
};

/// The keys query position Pq sees (Doc, Span: null when absent).
WEFT_HOST_DEVICE inline KeyRange keyRange(int64_t Pq, bool Causal,
                                          int64_t Window, const int32_t *Doc,
                                          const int32_t *Span) {
  KeyRange K{INT64_MIN, Causal ? Pq : INT64_MAX};
  if (Causal && Window > 0)
    K.Lo = Pq - Window + 1;
  if (Doc && Pq - *Doc > K.Lo)
    K.Lo = Pq - *Doc;
  if (Span) {
    if (Span[0] > K.Lo)
      K.Lo = Span[0];
    if (int64_t(Span[1]) - 1 < K.Hi)
      K.Hi = int64_t(Span[1]) - 1;
    if (K.Lo > K.Hi)
      K.Lo = K.Hi = Pq;
  }
  return K;
}

} // namespace weft

#endif // WEFT_PROGRAM_ATTENTIONMASK_H
