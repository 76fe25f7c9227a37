//===- Generic.cu - The generic path, dropout and mse on the GPU ---------===//
//
// The device twins of runtime/cpu/kernels/Generic.cpp (and of the CPU's
// dropout and mse loss), computing with the same formulas: program/
// Pointwise.h's functions and program/Dropout.h's masks are compiled for
// both. An operand broadcast into the output's shape is read through
// strides that are 0 along stretched dims (Indexer). An output summed over
// the dims its operand was stretched along is one thread per output
// element, adding its terms in the row-major order of the full shape, as
// the CPU does: the same sum whatever the scheduling. That is slow where
// one element sums many terms (a whole tensor to a scalar), which the
// generic path's graphs rarely do; the fused ops cover the hot paths.
//
//===----------------------------------------------------------------------===//
#include "program/Broadcast.h"
#include "runtime/cuda/kernels/Common.cuh"

namespace weft::cuda {

namespace {

constexpr int RowThreads = 256;
constexpr int SumThreads = 1024;

int64_t numel(const GenericDims &S) {
  int64_t N = 1;
  for (int64_t D : S)
    N *= D;
  return N;
}

/// The flat indices of a shape (up to MaxGenericRank dims) to the offsets
/// of K operands, each read through its own strides.
template <int K> struct Indexer {
  int Rank = 0;
  int64_t Dim[MaxGenericRank] = {};
  int64_t Stride[K][MaxGenericRank] = {};

  __device__ void offsets(int64_t I, int64_t (&Off)[K]) const {
    for (int J = 0; J < K; ++J)
      Off[J] = 0;
    for (int D = Rank - 1; D >= 0; --D) {
      const int64_t C = I % Dim[D];
      I /= Dim[D];
      for (int J = 0; J < K; ++J)
        Off[J] += C * Stride[J][D];
    }
  }
};

/// Shape's indices, each operand (which broadcasts to Shape) read through
/// broadcastStrides. False when Shape has too many dims.
template <int K>
bool makeIndexer(const GenericDims &Shape, const GenericDims *const (&Ops)[K],
                 Indexer<K> &X) {
  if (Shape.size() > size_t(MaxGenericRank))
    return false;
  X.Rank = int(Shape.size());
  for (int J = 0; J < K; ++J) {
    const GenericDims Strides = broadcastStrides(*Ops[J], Shape);
    for (int D = 0; D < X.Rank; ++D)
      X.Stride[J][D] = Strides[size_t(D)];
  }
  for (int D = 0; D < X.Rank; ++D)
    X.Dim[D] = Shape[size_t(D)];
  return true;
}

/// A sum of Full's elements into Out (which broadcasts to Full): Kept
/// indexes Out's elements (Full's dims with the summed ones set to 1),
/// Summed the terms of one element (only the summed dims), both with the
/// strides of every operand in Full.
template <int K> struct SumPlan {
  Indexer<K> Kept, Summed;
  int64_t Outputs = 0, Terms = 1;
};

template <int K>
bool makeSumPlan(const GenericDims &Full, const GenericDims &Out,
                 const GenericDims *const (&Ops)[K], SumPlan<K> &P) {
  if (Full.size() > size_t(MaxGenericRank) || Out.size() > Full.size())
    return false;
  if (!makeIndexer(Full, Ops, P.Kept))
    return false;
  P.Summed = P.Kept;
  const size_t Lead = Full.size() - Out.size();
  P.Outputs = 1;
  for (size_t D = 0; D < Full.size(); ++D) {
    const int64_t O = D < Lead ? 1 : Out[D - Lead];
    const bool Sums = O == 1 && Full[D] != 1;
    P.Kept.Dim[D] = Sums ? 1 : Full[D];
    P.Summed.Dim[D] = Sums ? Full[D] : 1;
    P.Outputs *= P.Kept.Dim[D];
    P.Terms *= P.Summed.Dim[D];
  }
  return true;
}

template <typename T, int K, typename Term>
__global__ void sumKernel(T *Out, SumPlan<K> P, Term F) {
  WEFT_GRID_STRIDE(O, P.Outputs) {
    int64_t Base[K];
    P.Kept.offsets(O, Base);
    Acc<T> S = 0;
    for (int64_t J = 0; J < P.Terms; ++J) {
      int64_t Off[K];
      P.Summed.offsets(J, Off);
      for (int Q = 0; Q < K; ++Q)
        Off[Q] += Base[Q];
      S += F(Off);
    }
    Out[O] = fromAcc<T>(S);
  }
}

template <typename T, int K, typename Term>
cudaError_t launchSum(T *Out, const SumPlan<K> &P, Term F, cudaStream_t S) {
  if (P.Outputs > 0)
    sumKernel<<<elementwiseBlocks(P.Outputs), ElementwiseThreads, 0, S>>>(Out,
                                                                          P, F);
  return cudaGetLastError();
}

// The terms of the sums (operand 0 indexes the full shape).
template <typename T> struct BinaryGradTerm {
  BinaryFn Fn;
  int Operand;
  const T *A, *B, *Dy;
  __device__ Acc<T> operator()(const int64_t (&Off)[3]) const {
    return weft::binaryGrad<Acc<T>>(Fn, Operand, toAcc(A[Off[1]]),
                                    toAcc(B[Off[2]]), toAcc(Dy[Off[0]]));
  }
};
template <typename T> struct SelectGradTerm {
  bool WhenTrue;
  const T *C, *Dy;
  __device__ Acc<T> operator()(const int64_t (&Off)[2]) const {
    return (toAcc(C[Off[1]]) != Acc<T>(0)) == WhenTrue ? toAcc(Dy[Off[0]])
                                                       : Acc<T>(0);
  }
};
template <typename T> struct ReduceTerm {
  const T *X;
  __device__ Acc<T> operator()(const int64_t (&Off)[1]) const {
    return toAcc(X[Off[0]]);
  }
};

template <typename T>
__global__ void pointwiseKernel(PointwiseFn Fn, Acc<T> C, const T *X, T *Y,
                                int64_t N) {
  WEFT_GRID_STRIDE(I, N) {
    Y[I] = fromAcc<T>(weft::pointwise<Acc<T>>(Fn, toAcc(X[I]), C));
  }
}

template <typename T>
__global__ void pointwiseGradKernel(PointwiseFn Fn, Acc<T> C, const T *X,
                                    const T *Dy, T *Dx, int64_t N) {
  WEFT_GRID_STRIDE(I, N) {
    Dx[I] = fromAcc<T>(
        weft::pointwiseGrad<Acc<T>>(Fn, toAcc(X[I]), C, toAcc(Dy[I])));
  }
}

// Y[i] = F(the operands' offsets at i): binary, select, broadcast and
// transpose.
template <typename T, int K, typename Value>
__global__ void mapKernel(T *Y, int64_t N, Indexer<K> X, Value F) {
  WEFT_GRID_STRIDE(I, N) {
    int64_t Off[K];
    X.offsets(I, Off);
    Y[I] = F(Off);
  }
}

template <typename T, int K, typename Value>
cudaError_t launchMap(T *Y, int64_t N, const Indexer<K> &X, Value F,
                      cudaStream_t S) {
  if (N > 0)
    mapKernel<<<elementwiseBlocks(N), ElementwiseThreads, 0, S>>>(Y, N, X, F);
  return cudaGetLastError();
}

// The values of the maps (operand k at Off[k]).
template <typename T> struct BinaryValue {
  BinaryFn Fn;
  const T *A, *B;
  __device__ T operator()(const int64_t (&Off)[2]) const {
    return fromAcc<T>(
        weft::binary<Acc<T>>(Fn, toAcc(A[Off[0]]), toAcc(B[Off[1]])));
  }
};
// Only the picked operand is read: a mask's -inf in the other never
// reaches y.
template <typename T> struct SelectValue {
  const T *C, *A, *B;
  __device__ T operator()(const int64_t (&Off)[3]) const {
    return toAcc(C[Off[0]]) != Acc<T>(0) ? A[Off[1]] : B[Off[2]];
  }
};
template <typename T> struct GatherValue {
  const T *X;
  __device__ T operator()(const int64_t (&Off)[1]) const { return X[Off[0]]; }
};

template <typename T>
__global__ void softmaxKernel(const T *X, T *Y, int64_t N) {
  using A = Acc<T>;
  __shared__ A Shared[32];
  const T *Xr = X + int64_t(blockIdx.x) * N;
  T *Yr = Y + int64_t(blockIdx.x) * N;
  A Mx = -INFINITY;
  for (int64_t J = threadIdx.x; J < N; J += blockDim.x)
    Mx = max(Mx, toAcc(Xr[J]));
  const A M = blockMax(Mx, Shared);
  A S = 0;
  for (int64_t J = threadIdx.x; J < N; J += blockDim.x)
    S += accExp(toAcc(Xr[J]) - M);
  const A Sum = blockSum(S, Shared);
  for (int64_t J = threadIdx.x; J < N; J += blockDim.x)
    Yr[J] = fromAcc<T>(accExp(toAcc(Xr[J]) - M) / Sum);
}

template <typename T>
__global__ void softmaxGradKernel(const T *Y, const T *Dy, T *Dx, int64_t N) {
  using A = Acc<T>;
  __shared__ A Shared[32];
  const int64_t Row = int64_t(blockIdx.x) * N;
  A D = 0;
  for (int64_t J = threadIdx.x; J < N; J += blockDim.x)
    D += toAcc(Dy[Row + J]) * toAcc(Y[Row + J]);
  const A Dot = blockSum(D, Shared);
  for (int64_t J = threadIdx.x; J < N; J += blockDim.x)
    Dx[Row + J] = fromAcc<T>(toAcc(Y[Row + J]) * (toAcc(Dy[Row + J]) - Dot));
}

// One block: each thread a contiguous slice summed in f64, then a fixed
// tree.
template <typename T>
__global__ void mseLossKernel(const T *P, const T *Y, int64_t N, double Divisor,
                              T *Loss) {
  __shared__ double Shared[32];
  const int64_t Per = (N + blockDim.x - 1) / blockDim.x;
  const int64_t K0 = threadIdx.x * Per, K1 = min(N, K0 + Per);
  double S = 0;
  for (int64_t K = K0; K < K1; ++K) {
    const double E = double(toAcc(P[K])) - double(toAcc(Y[K]));
    S += E * E;
  }
  S = blockSum(S, Shared);
  if (threadIdx.x == 0)
    *Loss = fromAcc<T>(S / Divisor);
}

template <typename T>
__global__ void mseLossGradKernel(const T *P, const T *Y, const T *DLoss,
                                  int64_t N, double Divisor, T *DP) {
  const Acc<T> Scale = Acc<T>(2.0 * double(toAcc(*DLoss)) / Divisor);
  WEFT_GRID_STRIDE(K, N) {
    DP[K] = fromAcc<T>((toAcc(P[K]) - toAcc(Y[K])) * Scale);
  }
}

/// Where a rank's block of a tensor lies in the global one.
struct Block {
  int Rank = 0;
  int64_t Local[MaxGenericRank] = {}, First[MaxGenericRank] = {},
          Total[MaxGenericRank] = {};
};

template <typename T>
__global__ void dropoutKernel(const T *X, T *Y, int64_t N, Block B,
                              DropoutKey Key, const int32_t *SeqPos) {
  WEFT_GRID_STRIDE(I, N) {
    // The element's global index: its coordinates, offset by the rank's
    // block, read in the global shape.
    uint64_t Index = 0, Stride = 1;
    int64_t Rest = I;
    for (int D = B.Rank - 1; D >= 0; --D) {
      const int64_t C = Rest % B.Local[D];
      Rest /= B.Local[D];
      const int64_t G = D == 1 && SeqPos ? SeqPos[C] : B.First[D] + C;
      Index += uint64_t(G) * Stride;
      Stride *= uint64_t(B.Total[D]);
    }
    Y[I] = fromAcc<T>(toAcc(X[I]) * Acc<T>(Key.factor(Index)));
  }
}

bool badRows(int64_t Rows) { return Rows < 0 || Rows > 0x7fffffff; }

} // namespace

template <typename T>
cudaError_t pointwise(PointwiseFn Fn, double C, const T *X, T *Y, int64_t N,
                      cudaStream_t S) {
  if (N > 0)
    pointwiseKernel<<<elementwiseBlocks(N), ElementwiseThreads, 0, S>>>(
        Fn, Acc<T>(C), X, Y, N);
  return cudaGetLastError();
}

template <typename T>
cudaError_t pointwiseGrad(PointwiseFn Fn, double C, const T *X, const T *Dy,
                          T *Dx, int64_t N, cudaStream_t S) {
  if (N > 0)
    pointwiseGradKernel<<<elementwiseBlocks(N), ElementwiseThreads, 0, S>>>(
        Fn, Acc<T>(C), X, Dy, Dx, N);
  return cudaGetLastError();
}

template <typename T>
cudaError_t binary(BinaryFn Fn, const T *A, const GenericDims &AShape,
                   const T *B, const GenericDims &BShape, T *Y,
                   const GenericDims &YShape, cudaStream_t S) {
  Indexer<2> X;
  if (!makeIndexer(YShape, {&AShape, &BShape}, X))
    return cudaErrorInvalidValue;
  return launchMap(Y, numel(YShape), X, BinaryValue<T>{Fn, A, B}, S);
}

template <typename T>
cudaError_t binaryGrad(BinaryFn Fn, int Operand, const T *A,
                       const GenericDims &AShape, const T *B,
                       const GenericDims &BShape, const T *Dy,
                       const GenericDims &YShape, T *Out, cudaStream_t S) {
  SumPlan<3> P;
  if (!makeSumPlan(YShape, Operand == 0 ? AShape : BShape,
                   {&YShape, &AShape, &BShape}, P))
    return cudaErrorInvalidValue;
  return launchSum(Out, P, BinaryGradTerm<T>{Fn, Operand, A, B, Dy}, S);
}

template <typename T>
cudaError_t select(const T *C, const GenericDims &CShape, const T *A,
                   const GenericDims &AShape, const T *B,
                   const GenericDims &BShape, T *Y, const GenericDims &YShape,
                   cudaStream_t S) {
  Indexer<3> X;
  if (!makeIndexer(YShape, {&CShape, &AShape, &BShape}, X))
    return cudaErrorInvalidValue;
  return launchMap(Y, numel(YShape), X, SelectValue<T>{C, A, B}, S);
}

template <typename T>
cudaError_t selectGrad(int Operand, const T *C, const GenericDims &CShape,
                       const T *Dy, const GenericDims &YShape, T *Out,
                       const GenericDims &OutShape, cudaStream_t S) {
  SumPlan<2> P;
  if (!makeSumPlan(YShape, OutShape, {&YShape, &CShape}, P))
    return cudaErrorInvalidValue;
  return launchSum(Out, P, SelectGradTerm<T>{Operand == 0, C, Dy}, S);
}

template <typename T>
cudaError_t broadcast(const T *X, const GenericDims &XShape, T *Y,
                      const GenericDims &YShape, cudaStream_t S) {
  Indexer<1> Ix;
  if (!makeIndexer(YShape, {&XShape}, Ix))
    return cudaErrorInvalidValue;
  return launchMap(Y, numel(YShape), Ix, GatherValue<T>{X}, S);
}

template <typename T>
cudaError_t reduce(const T *X, const GenericDims &XShape, T *Y,
                   const GenericDims &YShape, cudaStream_t S) {
  SumPlan<1> P;
  if (!makeSumPlan(XShape, YShape, {&XShape}, P))
    return cudaErrorInvalidValue;
  return launchSum(Y, P, ReduceTerm<T>{X}, S);
}

template <typename T>
cudaError_t transpose(const T *X, const GenericDims &XShape,
                      const GenericDims &Perm, T *Y, cudaStream_t S) {
  const size_t R = XShape.size();
  if (R > size_t(MaxGenericRank) || Perm.size() != R)
    return cudaErrorInvalidValue;
  // out dim d = x dim perm[d]: out's indices read x at x's strides.
  GenericDims XStrides(R, 1);
  for (size_t D = R; D-- > 1;)
    XStrides[D - 1] = XStrides[D] * XShape[D];
  Indexer<1> Ix;
  Ix.Rank = int(R);
  for (size_t D = 0; D < R; ++D) {
    if (Perm[D] < 0 || size_t(Perm[D]) >= R)
      return cudaErrorInvalidValue;
    Ix.Dim[D] = XShape[size_t(Perm[D])];
    Ix.Stride[0][D] = XStrides[size_t(Perm[D])];
  }
  return launchMap(Y, numel(XShape), Ix, GatherValue<T>{X}, S);
}

template <typename T>
cudaError_t softmax(const T *X, T *Y, int64_t Rows, int64_t N, cudaStream_t S) {
  if (badRows(Rows))
    return cudaErrorInvalidValue;
  if (Rows > 0 && N > 0)
    softmaxKernel<<<unsigned(Rows), RowThreads, 0, S>>>(X, Y, N);
  return cudaGetLastError();
}

template <typename T>
cudaError_t softmaxGrad(const T *Y, const T *Dy, T *Dx, int64_t Rows, int64_t N,
                        cudaStream_t S) {
  if (badRows(Rows))
    return cudaErrorInvalidValue;
  if (Rows > 0 && N > 0)
    softmaxGradKernel<<<unsigned(Rows), RowThreads, 0, S>>>(Y, Dy, Dx, N);
  return cudaGetLastError();
}

template <typename T>
cudaError_t mseLoss(const T *P, const T *Y, int64_t N, int64_t Divisor, T *Loss,
                    cudaStream_t S) {
  if (N < 0 || Divisor < 1)
    return cudaErrorInvalidValue;
  mseLossKernel<<<1, SumThreads, 0, S>>>(P, Y, N, double(Divisor), Loss);
  return cudaGetLastError();
}

template <typename T>
cudaError_t mseLossGrad(const T *P, const T *Y, const T *DLoss, int64_t N,
                        int64_t Divisor, T *DP, cudaStream_t S) {
  if (N < 0 || Divisor < 1)
    return cudaErrorInvalidValue;
  if (N > 0)
    mseLossGradKernel<<<elementwiseBlocks(N), ElementwiseThreads, 0, S>>>(
        P, Y, DLoss, N, double(Divisor), DP);
  return cudaGetLastError();
}

template <typename T>
cudaError_t dropout(const T *X, T *Y, const GenericDims &Local,
                    const GenericDims &First, const GenericDims &Total,
                    const DropoutKey &Key, const int32_t *SeqPos,
                    cudaStream_t S) {
  const size_t R = Local.size();
  if (R > size_t(MaxGenericRank) || First.size() != R || Total.size() != R)
    return cudaErrorInvalidValue;
  Block B;
  B.Rank = int(R);
  for (size_t D = 0; D < R; ++D) {
    B.Local[D] = Local[D];
    B.First[D] = First[D];
    B.Total[D] = Total[D];
  }
  const int64_t N = numel(Local);
  if (N > 0)
    dropoutKernel<<<elementwiseBlocks(N), ElementwiseThreads, 0, S>>>(
        X, Y, N, B, Key, SeqPos);
  return cudaGetLastError();
}

#define WEFT_INSTANTIATE(T)                                                    \
  template cudaError_t pointwise<T>(PointwiseFn, double, const T *, T *,       \
                                    int64_t, cudaStream_t);                    \
  template cudaError_t pointwiseGrad<T>(                                       \
      PointwiseFn, double, const T *, const T *, T *, int64_t, cudaStream_t);  \
  template cudaError_t binary<T>(BinaryFn, const T *, const GenericDims &,     \
                                 const T *, const GenericDims &, T *,          \
                                 const GenericDims &, cudaStream_t);           \
  template cudaError_t binaryGrad<T>(                                          \
      BinaryFn, int, const T *, const GenericDims &, const T *,                \
      const GenericDims &, const T *, const GenericDims &, T *, cudaStream_t); \
  template cudaError_t select<T>(                                              \
      const T *, const GenericDims &, const T *, const GenericDims &,          \
      const T *, const GenericDims &, T *, const GenericDims &, cudaStream_t); \
  template cudaError_t selectGrad<T>(int, const T *, const GenericDims &,      \
                                     const T *, const GenericDims &, T *,      \
                                     const GenericDims &, cudaStream_t);       \
  template cudaError_t broadcast<T>(const T *, const GenericDims &, T *,       \
                                    const GenericDims &, cudaStream_t);        \
  template cudaError_t reduce<T>(const T *, const GenericDims &, T *,          \
                                 const GenericDims &, cudaStream_t);           \
  template cudaError_t transpose<T>(const T *, const GenericDims &,            \
                                    const GenericDims &, T *, cudaStream_t);   \
  template cudaError_t softmax<T>(const T *, T *, int64_t, int64_t,            \
                                  cudaStream_t);                               \
  template cudaError_t softmaxGrad<T>(const T *, const T *, T *, int64_t,      \
                                      int64_t, cudaStream_t);                  \
  template cudaError_t mseLoss<T>(const T *, const T *, int64_t, int64_t, T *, \
                                  cudaStream_t);                               \
  template cudaError_t mseLossGrad<T>(const T *, const T *, const T *,         \
                                      int64_t, int64_t, T *, cudaStream_t);    \
  template cudaError_t dropout<T>(                                             \
      const T *, T *, const GenericDims &, const GenericDims &,                \
      const GenericDims &, const DropoutKey &, const int32_t *, cudaStream_t);
WEFT_INSTANTIATE(float)
WEFT_INSTANTIATE(double)
WEFT_INSTANTIATE(bf16)

} // namespace weft::cuda
