//===- Shard.h - Local <-> global element indices of sharded tensors -*- C++
//-*-===//
//
// docs/program-format.md, "Meshes and shards": a dim of global size G with c
// shards and b blocks is viewed as [b, G/b]; shard s holds, of every block,
// elements [s*G/(b*c), (s+1)*G/(b*c)). Init, data, checkpoints and
// --save-grads all go through these functions.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_RUNTIME_SHARD_H
#define WEFT_RUNTIME_SHARD_H

#include "program/Program.h"

#include <cstdint>
#include <cstring>

namespace weft {

/// The global index of local index L of a dim of global size G split in C
/// shards of B blocks, on shard S.
inline int64_t localToGlobal(int64_t L, int64_t G, int64_t C, int64_t B,
                             int64_t S) {
  int64_t Piece = G / (B * C);
  return (L / Piece) * (G / B) + S * Piece + L % Piece;
}

/// One rank's placement of a tensor: per dim, local and global size, shard
/// count, shard index and blocks.
struct ShardMap {
  Shape Local, Global;
  std::vector<int64_t> Count, Index, Blocks;
  int64_t localNumel() const { return numElements(Local); }
  int64_t globalNumel() const { return numElements(Global); }
};

/// The placement of L on rank Rank of M.
ShardMap shardMap(const Layout &L, const Mesh &M, int64_t Rank);

/// Calls F(LocalOffset, GlobalOffset, Count) for every run of elements that
/// are contiguous both locally and globally (row-major offsets), covering
/// the local tensor once.
template <typename Fn> void forEachRun(const ShardMap &S, Fn &&F) {
  const size_t R = S.Local.size();
  if (R == 0) {
    F(int64_t(0), int64_t(0), int64_t(1));
    return;
  }
  const int64_t LastL = S.Local[R - 1], LastG = S.Global[R - 1];
  const int64_t Piece = LastG / (S.Blocks[R - 1] * S.Count[R - 1]);
  std::vector<int64_t> GStride(R, 1);
  for (size_t D = R - 1; D-- > 0;)
    GStride[D] = GStride[D + 1] * S.Global[D + 1];
  const int64_t Rows = S.localNumel() / LastL;
  std::vector<int64_t> Idx(R, 0); // odometer over the leading local dims
  for (int64_t Row = 0; Row < Rows; ++Row) {
    int64_t GBase = 0;
    for (size_t D = 0; D + 1 < R; ++D)
      GBase += localToGlobal(Idx[D], S.Global[D], S.Count[D], S.Blocks[D],
                             S.Index[D]) *
               GStride[D];
    for (int64_t L = 0; L < LastL; L += Piece)
      F(Row * LastL + L,
        GBase + localToGlobal(L, LastG, S.Count[R - 1], S.Blocks[R - 1],
                              S.Index[R - 1]),
        Piece);
    for (size_t D = R - 1; D-- > 0;) {
      if (++Idx[D] < S.Local[D])
        break;
      Idx[D] = 0;
    }
  }
}

/// Copies the rank's block of Global (S.Global elements of ElemBytes) into
/// Local.
inline void extractShard(const ShardMap &S, const void *Global, void *Local,
                         size_t ElemBytes) {
  forEachRun(S, [&](int64_t L, int64_t G, int64_t N) {
    std::memcpy(static_cast<char *>(Local) + L * ElemBytes,
                static_cast<const char *>(Global) + G * ElemBytes,
                N * ElemBytes);
  });
}

/// Writes Local into the rank's block of Global.
inline void insertShard(const ShardMap &S, const void *Local, void *Global,
                        size_t ElemBytes) {
  forEachRun(S, [&](int64_t L, int64_t G, int64_t N) {
    std::memcpy(static_cast<char *>(Global) + G * ElemBytes,
                static_cast<const char *>(Local) + L * ElemBytes,
                N * ElemBytes);
  });
}

} // namespace weft

#endif // WEFT_RUNTIME_SHARD_H
