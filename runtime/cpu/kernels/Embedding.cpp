//===- Embedding.cpp - token and position embeddings and their gradients --===//
#include "runtime/cpu/kernels/Kernels.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace weft::cpu {

namespace {
Status checkIds(const int32_t *Ids, int64_t N, int64_t V, const char *Op) {
  for (int64_t I = 0; I < N; ++I)
    if (Ids[I] < 0 || Ids[I] >= V)
      return Status::error(std::string(Op) + ": id " + std::to_string(Ids[I]) +
                           " at position " + std::to_string(I) +
                           " is outside [0, " + std::to_string(V) + ")");
  return Status::success();
}

// dy's rows added into their ids' rows of DTable, in row order.
template <typename T>
void scatterRows(const T *Dy, const int32_t *Ids, int64_t N, int64_t V,
                 int64_t D, T *DTable, int64_t First) {
  constexpr int64_t Block = 64;
  int64_t NumBlocks = (D + Block - 1) / Block;
#pragma omp parallel for schedule(static) if (N * D > (1 << 15))
  for (int64_t Blk = 0; Blk < NumBlocks; ++Blk) {
    int64_t C0 = Blk * Block, C1 = std::min(D, C0 + Block);
    for (int64_t R = 0; R < N; ++R) {
      int64_t Row = int64_t(Ids[R]) - First;
      if (Row < 0 || Row >= V)
        continue;
      T *Dst = DTable + Row * D;
      const T *Src = Dy + R * D;
      for (int64_t C = C0; C < C1; ++C)
        Dst[C] += Src[C];
    }
  }
}
} // namespace

template <typename T>
Status embedding(const T *Table, int64_t V, int64_t D, const int32_t *Ids,
                 int64_t N, T *Y, int64_t First, int64_t Total) {
  WEFT_RETURN_IF_ERROR(checkIds(Ids, N, Total, "embedding"));
#pragma omp parallel for schedule(static) if (N * D > (1 << 15))
  for (int64_t R = 0; R < N; ++R) {
    int64_t Row = int64_t(Ids[R]) - First;
    if (Row >= 0 && Row < V)
      std::memcpy(Y + R * D, Table + Row * D, D * sizeof(T));
    else
      std::fill(Y + R * D, Y + (R + 1) * D, T(0));
  }
  return Status::success();
}

// Each thread owns a block of columns of the table, so the scatter-add needs
// no atomics and its order does not depend on the thread count. With a
// Base (a tied head's gradient, weft-fuse-table-grad; never DTable itself)
// only the touched rows start from zero, and one pass then adds the base
// to every row: base + 0 where no id points, as an add of the zeroed table.
template <typename T>
Status embeddingGrad(const T *Dy, const int32_t *Ids, int64_t N, int64_t V,
                     int64_t D, T *DTable, int64_t First, int64_t Total,
                     const T *Base) {
  WEFT_RETURN_IF_ERROR(checkIds(Ids, N, Total, "embedding_grad"));
  std::vector<uint8_t> Touched(Base ? size_t(V) : 0, 0);
  if (Base) {
    for (int64_t R = 0; R < N; ++R) {
      int64_t Row = int64_t(Ids[R]) - First;
      if (Row >= 0 && Row < V && !Touched[size_t(Row)]) {
        Touched[size_t(Row)] = 1;
        std::fill(DTable + Row * D, DTable + (Row + 1) * D, T(0));
      }
    }
  } else {
    int64_t Size = V * D;
#pragma omp parallel for schedule(static) if (Size > (1 << 15))
    for (int64_t I = 0; I < Size; ++I)
      DTable[I] = T(0);
  }
  scatterRows(Dy, Ids, N, V, D, DTable, First);
  if (Base) {
#pragma omp parallel for schedule(static) if (V * D > (1 << 15))
    for (int64_t Row = 0; Row < V; ++Row) {
      const T *B = Base + Row * D;
      T *Out = DTable + Row * D;
      if (Touched[size_t(Row)])
        for (int64_t C = 0; C < D; ++C)
          Out[C] = B[C] + Out[C];
      else
        for (int64_t C = 0; C < D; ++C)
          Out[C] = B[C] + T(0);
    }
  }
  return Status::success();
}

template <typename T>
void positionEmbedding(const T *X, const T *Table, T *Y, int64_t B, int64_t S,
                       int64_t D) {
#pragma omp parallel for schedule(static) if (B * S * D > (1 << 15))
  for (int64_t R = 0; R < B * S; ++R) {
    const T *XR = X + R * D, *TR = Table + (R % S) * D;
    T *YR = Y + R * D;
    for (int64_t C = 0; C < D; ++C)
      YR[C] = XR[C] + TR[C];
  }
}

template <typename T>
void positionEmbeddingGrad(const T *Dy, T *DTable, int64_t B, int64_t S,
                           int64_t P, int64_t D, int64_t First) {
#pragma omp parallel for schedule(static) if (P * D > (1 << 15))
  for (int64_t Pos = 0; Pos < P; ++Pos) {
    T *Dst = DTable + Pos * D;
    for (int64_t C = 0; C < D; ++C)
      Dst[C] = T(0);
    if (Pos < First || Pos >= First + S)
      continue;
    for (int64_t Bi = 0; Bi < B; ++Bi) {
      const T *Src = Dy + (Bi * S + Pos - First) * D;
      for (int64_t C = 0; C < D; ++C)
        Dst[C] += Src[C];
    }
  }
}

template <typename T>
void documentPositionEmbedding(const T *X, const T *Table, T *Y, int64_t B,
                               int64_t S, int64_t D, const int32_t *Pos,
                               int64_t Stride) {
#pragma omp parallel for schedule(static) if (B * S * D > (1 << 15))
  for (int64_t R = 0; R < B * S; ++R) {
    const T *XR = X + R * D, *TR = Table + Pos[(R / S) * Stride + R % S] * D;
    T *YR = Y + R * D;
    for (int64_t C = 0; C < D; ++C)
      YR[C] = XR[C] + TR[C];
  }
}

// Serial over the rows (positions repeat across documents), each row's
// columns vectorized.
template <typename T>
void documentPositionEmbeddingGrad(const T *Dy, T *DTable, int64_t B, int64_t S,
                                   int64_t P, int64_t D, const int32_t *Pos,
                                   int64_t Stride) {
  for (int64_t I = 0; I < P * D; ++I)
    DTable[I] = T(0);
  for (int64_t Bi = 0; Bi < B; ++Bi)
    for (int64_t Si = 0; Si < S; ++Si) {
      T *Dst = DTable + Pos[Bi * Stride + Si] * D;
      const T *Src = Dy + (Bi * S + Si) * D;
      for (int64_t C = 0; C < D; ++C)
        Dst[C] += Src[C];
    }
}

#define WEFT_INSTANTIATE(T)                                                    \
  template Status embedding<T>(const T *, int64_t, int64_t, const int32_t *,   \
                               int64_t, T *, int64_t, int64_t);                \
  template Status embeddingGrad<T>(const T *, const int32_t *, int64_t,        \
                                   int64_t, int64_t, T *, int64_t, int64_t,    \
                                   const T *);                                 \
  template void positionEmbedding<T>(const T *, const T *, T *, int64_t,       \
                                     int64_t, int64_t);                        \
  template void positionEmbeddingGrad<T>(const T *, T *, int64_t, int64_t,     \
                                         int64_t, int64_t, int64_t);           \
  template void documentPositionEmbedding<T>(const T *, const T *, T *,        \
                                             int64_t, int64_t, int64_t,        \
                                             const int32_t *, int64_t);        \
  template void documentPositionEmbeddingGrad<T>(const T *, T *, int64_t,      \
                                                 int64_t, int64_t, int64_t,    \
                                                 const int32_t *, int64_t);
WEFT_INSTANTIATE(float)
WEFT_INSTANTIATE(double)

} // namespace weft::cpu
