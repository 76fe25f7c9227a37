//===- Broadcast.h - NumPy's broadcasting of shapes -------------*- C++ -*-===//
//
// The generic path's binary, broadcast and reduce ops (docs/design.md
// decision 20): shapes align at the right and a dim of 1 stretches. Shared
// by the program loader's checks and the CPU kernels.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_PROGRAM_BROADCAST_H
#define WEFT_PROGRAM_BROADCAST_H

#include <cstddef>
#include <cstdint>
#include <vector>

namespace weft {

/// The broadcast of A and B into Out; false when they do not broadcast.
inline bool broadcastShapes(const std::vector<int64_t> &A,
                            const std::vector<int64_t> &B,
                            std::vector<int64_t> &Out) {
  size_t Rank = A.size() > B.size() ? A.size() : B.size();
  Out.assign(Rank, 1);
  for (size_t I = 0; I < Rank; ++I) {
    int64_t DA = I < Rank - A.size() ? 1 : A[I - (Rank - A.size())];
    int64_t DB = I < Rank - B.size() ? 1 : B[I - (Rank - B.size())];
    if (DA != DB && DA != 1 && DB != 1)
      return false;
    Out[I] = DA == 1 ? DB : DA;
  }
  return true;
}

/// Whether From broadcasts to exactly To.
inline bool broadcastsTo(const std::vector<int64_t> &From,
                         const std::vector<int64_t> &To) {
  std::vector<int64_t> Out;
  return From.size() <= To.size() && broadcastShapes(From, To, Out) &&
         Out == To;
}

/// Element strides of a tensor of shape From read at the indices of shape
/// To (From broadcasts to To): 0 along stretched and missing dims.
inline std::vector<int64_t> broadcastStrides(const std::vector<int64_t> &From,
                                             const std::vector<int64_t> &To) {
  std::vector<int64_t> Strides(To.size(), 0);
  int64_t Stride = 1;
  for (size_t K = From.size(); K-- > 0;) {
    size_t At = To.size() - From.size() + K;
    Strides[At] = From[K] == 1 && To[At] != 1 ? 0 : Stride;
    Stride *= From[K];
  }
  return Strides;
}

} // namespace weft

#endif // WEFT_PROGRAM_BROADCAST_H
