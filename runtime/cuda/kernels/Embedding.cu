//===- Embedding.cu - Token and position embeddings, rotary embedding ----===//
//
// The embedding gradient is a scatter-add of Dy's rows into the table rows
// of their ids. To stay deterministic (no float atomics), the ids are sorted
// with their positions (a stable radix sort: positions ascend within an id),
// and one block per run of equal ids sums that run's rows in token order,
// as the CPU kernel does.
//
// Scratch of embeddingGrad (embeddingGradScratchBytes): keys and values in
// and out (4 x N int32), then cub's temporary storage.
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

// Block per sorted position that starts a run of equal ids.
template <typename T>
__global__ void embeddingGradRunsKernel(const T *Dy, const int32_t *SortedIds,
                                        const int32_t *Positions, int64_t N,
                                        int64_t V, int64_t D, T *DTable,
                                        int64_t First, int64_t Total,
                                        ErrorSink E) {
  const int64_t Start = blockIdx.x;
  const int32_t Id = SortedIds[Start];
  if (Start > 0 && SortedIds[Start - 1] == Id)
    return;
  if (Id < 0 || Id >= Total) {
    if (threadIdx.x == 0)
      reportError(E, IdOutOfRange, Positions[Start], Id, Total);
    return;
  }
  const int64_t Row = int64_t(Id) - First;
  if (Row < 0 || Row >= V)
    return;
  int64_t End = Start + 1;
  while (End < N && SortedIds[End] == Id)
    ++End;
  for (int64_t C = threadIdx.x; C < D; C += blockDim.x) {
    Acc<T> Sum = 0;
    for (int64_t K = Start; K < End; ++K)
      Sum += toAcc(Dy[int64_t(Positions[K]) * D + C]);
    DTable[Row * D + C] = fromAcc<T>(Sum);
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
                           const double *InvFreq, double Scale) {
  const int64_t Half = Hd / 2;
  WEFT_GRID_STRIDE(J, B * Sq * H * Half) {
    const int64_t I = J % Half, Hh = (J / Half) % H, Row = J / (Half * H);
    const int64_t Pos = Row % Sq;
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

} // namespace

size_t embeddingGradScratchBytes(int64_t N) {
  return 4 * align256(size_t(N) * sizeof(int32_t)) + align256(cubSortBytes(N));
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
  embeddingGradRunsKernel<<<unsigned(N), RowThreads, 0, S>>>(
      Dy, KeysOut, ValsOut, N, V, D, DTable, First, Total, E);
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
cudaError_t rope(const T *X, T *Y, int64_t B, int64_t Sq, int64_t H, int64_t Hd,
                 double Theta, bool Inverse, const double *InvFreq,
                 double Scale, cudaStream_t S) {
  const int64_t N = B * Sq * H * (Hd / 2);
  if (N > 0)
    ropeKernel<<<elementwiseBlocks(N), ElementwiseThreads, 0, S>>>(
        X, Y, B, Sq, H, Hd, Theta, Inverse, InvFreq, Scale);
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
  template cudaError_t rope<T>(const T *, T *, int64_t, int64_t, int64_t,      \
                               int64_t, double, bool, const double *, double,  \
                               cudaStream_t);
WEFT_INSTANTIATE(float)
WEFT_INSTANTIATE(double)
WEFT_INSTANTIATE(bf16)

} // namespace weft::cuda
