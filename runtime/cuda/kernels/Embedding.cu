//===- Embedding.cu - Token and position embeddings, rotary embedding ----===//
//
// The embedding gradient is a scatter-add of Dy's rows into the table rows
// of their ids. To stay deterministic (no float atomics), the ids are sorted
// with their positions (a stable radix sort: positions ascend within an id).
// Then the sorted positions are cut into chunks of GradChunk: a block per
// chunk sums, in token order, each run of equal ids within it. A run inside
// one chunk is its table row; the pieces of a run that crosses chunks (a
// padding id repeated across the batch) are added in chunk order by a
// second kernel. So no run is summed serially by one block, and the sum
// does not depend on scheduling (it may round apart from the CPU's one
// serial sum).
//
// Scratch of embeddingGrad (embeddingGradScratchBytes): keys and values in
// and out (4 x N int32), cub's temporary storage, then two pieces per
// chunk ([chunks, 2, D] doubles at most).
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/kernels/Common.cuh"

#include <cub/device/device_radix_sort.cuh>

namespace weft::cuda {

namespace {

constexpr int RowThreads = 128;

template <typename T>
__global__ void embeddingKernel(const T *Table, int64_t V, int64_t D,
                                const int32_t *Ids, int64_t N, T *Y,
                                int64_t First, int64_t Total, ErrorSink E) {
  WEFT_GRID_STRIDE(I, N * D) {
    const int64_t R = I / D, C = I % D;
    const int64_t Id = Ids[R];
    if (Id < 0 || Id >= Total) {
      if (C == 0)
        reportError(E, IdOutOfRange, R, Id, Total);
      Y[I] = fromAcc<T>(Acc<T>(0));
      continue;
    }
    const int64_t Row = Id - First;
    Y[I] = Row >= 0 && Row < V ? Table[Row * D + C] : fromAcc<T>(Acc<T>(0));
  }
}

__global__ void iotaKernel(int32_t *X, int64_t N) {
  WEFT_GRID_STRIDE(I, N) { X[I] = int32_t(I); }
}

constexpr int64_t GradChunk = 64; // sorted positions per block

// Block c sums each run of equal ids among sorted positions [c L, c L + L)
// in token order. A run wholly inside goes to its table row; the piece of
// a run that began before the chunk to Pieces[2c] (the chunk's head), the
// piece of one that began in it and goes on to Pieces[2c + 1] (its tail).
template <typename T>
__global__ void embeddingGradChunksKernel(const T *Dy, const int32_t *SortedIds,
                                          const int32_t *Positions, int64_t N,
                                          int64_t V, int64_t D, T *DTable,
                                          Acc<T> *Pieces, int64_t First,
                                          int64_t Total, ErrorSink E) {
  const int64_t C = blockIdx.x, C0 = C * GradChunk, C1 = min(N, C0 + GradChunk);
  for (int64_t A = C0; A < C1;) { // every thread walks the same runs
    const int32_t Id = SortedIds[A];
    int64_t B = A + 1;
    while (B < C1 && SortedIds[B] == Id)
      ++B;
    const bool Begins = A == 0 || SortedIds[A - 1] != Id;
    const bool Ends = B == N || SortedIds[B] != Id;
    const int64_t Row = int64_t(Id) - First;
    if (Id < 0 || Id >= Total) {
      if (Begins && threadIdx.x == 0)
        reportError(E, IdOutOfRange, Positions[A], Id, Total);
    } else if (Row >= 0 && Row < V) {
      Acc<T> *Piece = Pieces + (2 * C + (Begins ? 1 : 0)) * D;
      for (int64_t Col = threadIdx.x; Col < D; Col += blockDim.x) {
        Acc<T> Sum = 0;
        for (int64_t K = A; K < B; ++K)
          Sum += toAcc(Dy[int64_t(Positions[K]) * D + Col]);
        if (Begins && Ends)
          DTable[Row * D + Col] = fromAcc<T>(Sum);
        else
          Piece[Col] = Sum;
      }
    }
    A = B;
  }
}

// Block c: the run that begins in chunk c and goes on past it, if any, as
// its pieces' sum in chunk order (c's tail, then the next chunks' heads).
template <typename T>
__global__ void embeddingGradPiecesKernel(const int32_t *SortedIds, int64_t N,
                                          int64_t V, int64_t D, T *DTable,
                                          const Acc<T> *Pieces, int64_t First,
                                          int64_t Total) {
  const int64_t C = blockIdx.x, C0 = C * GradChunk,
                End = min(N, C0 + GradChunk);
  const int32_t Id = SortedIds[End - 1];
  const bool GoesOn = End < N && SortedIds[End] == Id;
  const bool BeganHere =
      C0 == 0 || SortedIds[C0] != Id || SortedIds[C0 - 1] != Id;
  const int64_t Row = int64_t(Id) - First;
  if (!GoesOn || !BeganHere || Id < 0 || Id >= Total || Row < 0 || Row >= V)
    return;
  for (int64_t Col = threadIdx.x; Col < D; Col += blockDim.x) {
    Acc<T> Sum = Pieces[(2 * C + 1) * D + Col];
    for (int64_t Next = C + 1;; ++Next) {
      Sum += Pieces[2 * Next * D + Col];
      const int64_t NextEnd = min(N, (Next + 1) * GradChunk);
      if (NextEnd == N || SortedIds[NextEnd] != Id)
        break;
    }
    DTable[Row * D + Col] = fromAcc<T>(Sum);
  }
}

template <typename T>
__global__ void positionEmbeddingKernel(const T *X, const T *Table, T *Y,
                                        int64_t B, int64_t Sq, int64_t D) {
  WEFT_GRID_STRIDE(I, B * Sq * D) {
    const int64_t Pos = (I / D) % Sq, C = I % D;
    Y[I] = fromAcc<T>(toAcc(X[I]) + toAcc(Table[Pos * D + C]));
  }
}

// Row r (of B*Sq) adds table row Pos[r]: packed documents' positions,
// token types, or load-balanced chunks' positions.
template <typename T>
__global__ void positionEmbeddingAtKernel(const T *X, const T *Table, T *Y,
                                          int64_t N, int64_t D,
                                          const int32_t *Pos) {
  WEFT_GRID_STRIDE(I, N * D) {
    const int64_t Row = Pos[I / D], C = I % D;
    Y[I] = fromAcc<T>(toAcc(X[I]) + toAcc(Table[Row * D + C]));
  }
}

template <typename T>
__global__ void positionEmbeddingGradKernel(const T *Dy, T *DTable, int64_t B,
                                            int64_t Sq, int64_t P, int64_t D,
                                            int64_t First) {
  WEFT_GRID_STRIDE(I, P * D) {
    const int64_t Pos = I / D, C = I % D;
    Acc<T> Sum = 0;
    if (Pos >= First && Pos < First + Sq)
      for (int64_t Bi = 0; Bi < B; ++Bi)
        Sum += toAcc(Dy[(Bi * Sq + Pos - First) * D + C]);
    DTable[I] = fromAcc<T>(Sum);
  }
}

// Pair i of a head turns by pos * f_i; angles in double, as the CPU.
template <typename T>
__global__ void ropeKernel(const T *X, T *Y, int64_t B, int64_t Sq, int64_t H,
                           int64_t Hd, double Theta, bool Inverse,
                           const double *InvFreq, double Scale, int64_t First,
                           const int32_t *Positions, int64_t PosStride) {
  const int64_t Half = Hd / 2;
  WEFT_GRID_STRIDE(J, B * Sq * H * Half) {
    const int64_t I = J % Half, Hh = (J / Half) % H, Row = J / (Half * H);
    // A block of the sequence: from its first position, or each token's
    // (load-balanced chunks: one row for all, PosStride 0; packed
    // documents: a row per sample).
    const int64_t Pos = Positions ? Positions[(Row / Sq) * PosStride + Row % Sq]
                                  : First + Row % Sq;
    const double F =
        InvFreq ? InvFreq[I] : pow(Theta, -2.0 * double(I) / double(Hd));
    const double Angle = double(Pos) * F * (Inverse ? -1.0 : 1.0);
    double Sd, Cd;
    sincos(Angle, &Sd, &Cd);
    using A = Acc<T>;
    const A C = A(Cd * Scale), Sn = A(Sd * Scale);
    const int64_t At = Row * H * Hd + Hh * Hd + I;
    const A X0 = toAcc(X[At]), X1 = toAcc(X[At + Half]);
    Y[At] = fromAcc<T>(X0 * C - X1 * Sn);
    Y[At + Half] = fromAcc<T>(X1 * C + X0 * Sn);
  }
}

size_t align256(size_t Bytes) { return (Bytes + 255) / 256 * 256; }

size_t cubSortBytes(int64_t N) {
  size_t Bytes = 0;
  cub::DeviceRadixSort::SortPairs(nullptr, Bytes, (const int32_t *)nullptr,
                                  (int32_t *)nullptr, (const int32_t *)nullptr,
                                  (int32_t *)nullptr, int(N));
  return Bytes;
}

int64_t gradChunks(int64_t N) { return (N + GradChunk - 1) / GradChunk; }

} // namespace

size_t embeddingGradScratchBytes(int64_t N, int64_t D) {
  return 4 * align256(size_t(N) * sizeof(int32_t)) + align256(cubSortBytes(N)) +
         size_t(gradChunks(N)) * 2 * size_t(D) * sizeof(double);
}

template <typename T>
cudaError_t embedding(const T *Table, int64_t V, int64_t D, const int32_t *Ids,
                      int64_t N, T *Y, int64_t First, int64_t Total,
                      ErrorSink E, cudaStream_t S) {
  if (N * D > 0)
    embeddingKernel<<<elementwiseBlocks(N * D), ElementwiseThreads, 0, S>>>(
        Table, V, D, Ids, N, Y, First, Total, E);
  return cudaGetLastError();
}

template <typename T>
cudaError_t embeddingGrad(const T *Dy, const int32_t *Ids, int64_t N, int64_t V,
                          int64_t D, T *DTable, int64_t First, int64_t Total,
                          void *Scratch, ErrorSink E, cudaStream_t S) {
  cudaError_t Err =
      cudaMemsetAsync(DTable, 0, size_t(V) * size_t(D) * sizeof(T), S);
  if (Err != cudaSuccess || N <= 0)
    return Err;
  if (N > 0x7fffffff)
    return cudaErrorInvalidValue; // cub sorts int-indexed sequences
  char *P = static_cast<char *>(Scratch);
  const size_t Slot = align256(size_t(N) * sizeof(int32_t));
  int32_t *KeysOut = reinterpret_cast<int32_t *>(P);
  int32_t *ValsIn = reinterpret_cast<int32_t *>(P + Slot);
  int32_t *ValsOut = reinterpret_cast<int32_t *>(P + 2 * Slot);
  void *Temp = P + 4 * Slot;
  size_t TempBytes = cubSortBytes(N);
  iotaKernel<<<elementwiseBlocks(N), ElementwiseThreads, 0, S>>>(ValsIn, N);
  Err = cub::DeviceRadixSort::SortPairs(Temp, TempBytes, Ids, KeysOut, ValsIn,
                                        ValsOut, int(N), 0, 32, S);
  if (Err != cudaSuccess)
    return Err;
  auto *Pieces =
      reinterpret_cast<Acc<T> *>(P + 4 * Slot + align256(cubSortBytes(N)));
  const unsigned Chunks = unsigned(gradChunks(N));
  embeddingGradChunksKernel<<<Chunks, RowThreads, 0, S>>>(
      Dy, KeysOut, ValsOut, N, V, D, DTable, Pieces, First, Total, E);
  embeddingGradPiecesKernel<<<Chunks, RowThreads, 0, S>>>(
      KeysOut, N, V, D, DTable, Pieces, First, Total);
  return cudaGetLastError();
}

template <typename T>
cudaError_t positionEmbedding(const T *X, const T *Table, T *Y, int64_t B,
                              int64_t Sq, int64_t D, cudaStream_t S) {
  const int64_t N = B * Sq * D;
  if (N > 0)
    positionEmbeddingKernel<<<elementwiseBlocks(N), ElementwiseThreads, 0, S>>>(
        X, Table, Y, B, Sq, D);
  return cudaGetLastError();
}

template <typename T>
cudaError_t positionEmbeddingGrad(const T *Dy, T *DTable, int64_t B, int64_t Sq,
                                  int64_t P, int64_t D, int64_t First,
                                  cudaStream_t S) {
  if (P * D > 0)
    positionEmbeddingGradKernel<<<elementwiseBlocks(P * D), ElementwiseThreads,
                                  0, S>>>(Dy, DTable, B, Sq, P, D, First);
  return cudaGetLastError();
}

template <typename T>
cudaError_t positionEmbeddingAt(const T *X, const T *Table, T *Y, int64_t N,
                                int64_t D, const int32_t *Pos, cudaStream_t S) {
  if (N * D > 0)
    positionEmbeddingAtKernel<<<elementwiseBlocks(N * D), ElementwiseThreads, 0,
                                S>>>(X, Table, Y, N, D, Pos);
  return cudaGetLastError();
}

template <typename T>
cudaError_t rope(const T *X, T *Y, int64_t B, int64_t Sq, int64_t H, int64_t Hd,
                 double Theta, bool Inverse, const double *InvFreq,
                 double Scale, int64_t First, const int32_t *Positions,
                 int64_t PosStride, cudaStream_t S) {
  const int64_t N = B * Sq * H * (Hd / 2);
  if (N > 0)
    ropeKernel<<<elementwiseBlocks(N), ElementwiseThreads, 0, S>>>(
        X, Y, B, Sq, H, Hd, Theta, Inverse, InvFreq, Scale, First, Positions,
        PosStride);
  return cudaGetLastError();
}

#define WEFT_INSTANTIATE(T)                                                    \
  template cudaError_t embedding<T>(const T *, int64_t, int64_t,               \
                                    const int32_t *, int64_t, T *, int64_t,    \
                                    int64_t, ErrorSink, cudaStream_t);         \
  template cudaError_t embeddingGrad<T>(                                       \
      const T *, const int32_t *, int64_t, int64_t, int64_t, T *, int64_t,     \
      int64_t, void *, ErrorSink, cudaStream_t);                               \
  template cudaError_t positionEmbedding<T>(                                   \
      const T *, const T *, T *, int64_t, int64_t, int64_t, cudaStream_t);     \
  template cudaError_t positionEmbeddingGrad<T>(const T *, T *, int64_t,       \
                                                int64_t, int64_t, int64_t,     \
                                                int64_t, cudaStream_t);        \
  template cudaError_t positionEmbeddingAt<T>(const T *, const T *, T *,       \
                                              int64_t, int64_t,                \
                                              const int32_t *, cudaStream_t);  \
  template cudaError_t rope<T>(const T *, T *, int64_t, int64_t, int64_t,      \
                               int64_t, double, bool, const double *, double,  \
                               int64_t, const int32_t *, int64_t,              \
                               cudaStream_t);
WEFT_INSTANTIATE(float)
WEFT_INSTANTIATE(double)
WEFT_INSTANTIATE(bf16)

} // namespace weft::cuda
