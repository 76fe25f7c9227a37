//===- CrossEntropy.cu - Cross entropy, whole and vocab-parallel ---------===//
//
// One thread block per row for its max and sum of exponentials (the
// formulas of runtime/cpu/kernels/CrossEntropy.cpp). The loss is a sum of
// per-row losses (double, in scratch) added in row order by one block, so
// it does not depend on scheduling. T is the logits' type, L the loss's
// (and the statistics'): f32 for bf16 logits, as in the CPU's mixed
// precision.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/kernels/Common.cuh"

namespace weft::cuda {

namespace {

constexpr int RowThreads = 256;
constexpr int SumThreads = 1024;

template <typename T>
__device__ void rowMaxSum(const T *X, int64_t V, Acc<T> &M, Acc<T> &Sum,
                          Acc<T> *Shared) {
  using A = Acc<T>;
  A Mx = -INFINITY;
  for (int64_t J = threadIdx.x; J < V; J += blockDim.x)
    Mx = max(Mx, toAcc(X[J]));
  M = blockMax(Mx, Shared);
  A S = 0;
  for (int64_t J = threadIdx.x; J < V; J += blockDim.x)
    S += accExp(toAcc(X[J]) - M);
  Sum = blockSum(S, Shared);
}

__device__ bool checkTarget(int32_t Target, int64_t R, int64_t Total,
                            ErrorSink E) {
  if (Target >= 0 && Target < Total)
    return true;
  if (threadIdx.x == 0)
    reportError(E, TargetOutOfRange, R, Target, Total);
  return false;
}

// Whether row R counts: a masked loss skips the rows whose target is -100.
__device__ __forceinline__ bool ignored(const CeRows &How, int32_t Target) {
  return How.Masked && Target == -100;
}

template <typename T>
__global__ void rowLossKernel(const T *Logits, const int32_t *Targets,
                              int64_t V, CeRows How, double *RowLoss,
                              ErrorSink E) {
  __shared__ Acc<T> Shared[32];
  const int64_t R = blockIdx.x;
  const int32_t Target = Targets[R];
  if (ignored(How, Target)) { // the whole block returns
    if (threadIdx.x == 0)
      RowLoss[R] = 0;
    return;
  }
  const T *X = Logits + R * V;
  Acc<T> M, Sum;
  rowMaxSum(X, How.Columns, M, Sum, Shared);
  if (threadIdx.x != 0)
    return;
  if (!checkTarget(Target, R, How.Columns, E)) {
    RowLoss[R] = 0;
    return;
  }
  RowLoss[R] = double(M) + log(double(Sum)) - double(toAcc(X[Target]));
}

// Loss = sum of RowLoss in order / Divisor: one block, each thread a
// contiguous slice, then a fixed tree.
template <typename L>
__global__ void sumRowsKernel(const double *RowLoss, int64_t Rows,
                              double Divisor, L *Loss) {
  __shared__ double Shared[32];
  const int64_t Per = (Rows + blockDim.x - 1) / blockDim.x;
  const int64_t R0 = threadIdx.x * Per, R1 = min(Rows, R0 + Per);
  double S = 0;
  for (int64_t R = R0; R < R1; ++R)
    S += RowLoss[R];
  S = blockSum(S, Shared);
  if (threadIdx.x == 0)
    *Loss = L(S / Divisor);
}

/// Dx = softmax * Scale over the first C columns, 0 after them (a padded
/// vocabulary's tail), Dx[Local] -= Scale (Local outside [0, C): none).
/// Every thread reads X[Local] before any writes (Dx may alias X).
template <typename T>
__device__ void writeGrad(const T *X, T *Dx, int64_t V, int64_t C, Acc<T> Shift,
                          Acc<T> Mul, int64_t Local, double Scale) {
  using A = Acc<T>;
  const bool Has = Local >= 0 && Local < C;
  const A Xt = Has ? toAcc(X[Local]) : A(0);
  __syncthreads();
  for (int64_t J = threadIdx.x; J < V; J += blockDim.x)
    Dx[J] = J < C ? fromAcc<T>(accExp(toAcc(X[J]) - Shift) * Mul)
                  : fromAcc<T>(A(0));
  __syncthreads();
  if (Has && threadIdx.x == 0)
    Dx[Local] = fromAcc<T>(double(accExp(Xt - Shift)) * double(Mul) - Scale);
}

/// An ignored row's gradient: zero.
template <typename T> __device__ void zeroRow(T *Dx, int64_t V) {
  for (int64_t J = threadIdx.x; J < V; J += blockDim.x)
    Dx[J] = fromAcc<T>(Acc<T>(0));
}

template <typename T, typename L>
__global__ void gradKernel(const T *Logits, const int32_t *Targets,
                           const L *DLoss, T *DLogits, int64_t V, CeRows How,
                           ErrorSink E) {
  __shared__ Acc<T> Shared[32];
  const int64_t R = blockIdx.x;
  const int32_t Target = Targets[R];
  if (ignored(How, Target))
    return zeroRow(DLogits + R * V, V);
  const T *X = Logits + R * V;
  Acc<T> M, Sum;
  rowMaxSum(X, How.Columns, M, Sum, Shared);
  if (!checkTarget(Target, R, How.Columns, E))
    return;
  const double Scale = double(*DLoss) / How.Divisor;
  writeGrad(X, DLogits + R * V, V, How.Columns, M, Acc<T>(Scale / double(Sum)),
            Target, Scale);
}

template <typename T, typename L>
__global__ void statsKernel(const T *Logits, const int32_t *Targets, int64_t V,
                            int64_t First, int64_t TargetBound, CeRows How,
                            L *Stats, ErrorSink E) {
  __shared__ Acc<T> Shared[32];
  const int64_t R = blockIdx.x;
  const int32_t Target = Targets[R];
  if (ignored(How, Target)) {
    // A sum of exponentials of 0 marks the row: a counted one has >= 1.
    if (threadIdx.x == 0)
      Stats[R * 3] = Stats[R * 3 + 1] = Stats[R * 3 + 2] = L(0);
    return;
  }
  const T *X = Logits + R * V;
  Acc<T> M, Sum;
  rowMaxSum(X, How.Columns, M, Sum, Shared);
  if (threadIdx.x != 0)
    return;
  checkTarget(Target, R, TargetBound, E);
  const int64_t Local = int64_t(Target) - First;
  Stats[R * 3] = L(M);
  Stats[R * 3 + 1] = L(Sum);
  Stats[R * 3 + 2] =
      Local >= 0 && Local < How.Columns ? L(toAcc(X[Local])) : L(0);
}

// Row R's global max and sum of exponentials, merged from K shards.
template <typename L>
__device__ void mergeStats(const L *Stats, int64_t K, int64_t Rows, int64_t R,
                           double &M, double &S) {
  M = double(Stats[R * 3]);
  for (int64_t Q = 1; Q < K; ++Q)
    M = max(M, double(Stats[(Q * Rows + R) * 3]));
  S = 0;
  for (int64_t Q = 0; Q < K; ++Q) {
    const L *St = Stats + (Q * Rows + R) * 3;
    S += double(St[1]) * exp(double(St[0]) - M);
  }
}

template <typename L>
__global__ void rowLossFromStatsKernel(const L *Stats, int64_t K, int64_t Rows,
                                       CeRows How, double *RowLoss) {
  WEFT_GRID_STRIDE(R, Rows) {
    double M, S, Target = 0;
    mergeStats(Stats, K, Rows, R, M, S);
    if (How.Masked && S == 0) { // an ignored row
      RowLoss[R] = 0;
      continue;
    }
    for (int64_t Q = 0; Q < K; ++Q)
      Target += double(Stats[(Q * Rows + R) * 3 + 2]);
    RowLoss[R] = M + log(S) - Target;
  }
}

template <typename T, typename L>
__global__ void
statsGradKernel(const T *Logits, const int32_t *Targets, const L *Stats,
                int64_t K, const L *DLoss, T *DLogits, int64_t Rows, int64_t V,
                int64_t First, int64_t TargetBound, CeRows How, ErrorSink E) {
  const int64_t R = blockIdx.x;
  const int32_t Target = Targets[R];
  if (ignored(How, Target))
    return zeroRow(DLogits + R * V, V);
  if (!checkTarget(Target, R, TargetBound, E))
    return;
  double M, S;
  mergeStats(Stats, K, Rows, R, M, S);
  const double Scale = double(*DLoss) / How.Divisor;
  writeGrad(Logits + R * V, DLogits + R * V, V, How.Columns, Acc<T>(M),
            Acc<T>(Scale / S), int64_t(Target) - First, Scale);
}

// A row count the grid takes, and class columns a row has.
bool badShape(int64_t Rows, int64_t V, const CeRows &How) {
  return Rows < 0 || Rows > 0x7fffffff || How.Columns < 1 || How.Columns > V;
}

} // namespace

template <typename T, typename L>
cudaError_t crossEntropy(const T *Logits, const int32_t *Targets, int64_t Rows,
                         int64_t V, const CeRows &How, L *Loss, void *Scratch,
                         ErrorSink E, cudaStream_t S) {
  if (badShape(Rows, V, How))
    return cudaErrorInvalidValue;
  auto *RowLoss = static_cast<double *>(Scratch);
  if (Rows > 0) // no rows: a loss of 0 / Divisor, as the CPU
    rowLossKernel<<<unsigned(Rows), RowThreads, 0, S>>>(Logits, Targets, V, How,
                                                        RowLoss, E);
  sumRowsKernel<<<1, SumThreads, 0, S>>>(RowLoss, Rows, How.Divisor, Loss);
  return cudaGetLastError();
}

template <typename T, typename L>
cudaError_t crossEntropyGrad(const T *Logits, const int32_t *Targets,
                             const L *DLoss, T *DLogits, int64_t Rows,
                             int64_t V, const CeRows &How, ErrorSink E,
                             cudaStream_t S) {
  if (badShape(Rows, V, How))
    return cudaErrorInvalidValue;
  if (Rows == 0)
    return cudaSuccess;
  gradKernel<<<unsigned(Rows), RowThreads, 0, S>>>(Logits, Targets, DLoss,
                                                   DLogits, V, How, E);
  return cudaGetLastError();
}

template <typename T, typename L>
cudaError_t crossEntropyStats(const T *Logits, const int32_t *Targets,
                              int64_t Rows, int64_t V, int64_t First,
                              int64_t TargetBound, const CeRows &How, L *Stats,
                              ErrorSink E, cudaStream_t S) {
  if (badShape(Rows, V, How))
    return cudaErrorInvalidValue;
  if (Rows == 0)
    return cudaSuccess;
  statsKernel<<<unsigned(Rows), RowThreads, 0, S>>>(Logits, Targets, V, First,
                                                    TargetBound, How, Stats, E);
  return cudaGetLastError();
}

template <typename L>
cudaError_t crossEntropyFromStats(const L *Stats, int64_t K, int64_t Rows,
                                  const CeRows &How, L *Loss, void *Scratch,
                                  cudaStream_t S) {
  if (Rows < 0 || Rows > 0x7fffffff)
    return cudaErrorInvalidValue;
  auto *RowLoss = static_cast<double *>(Scratch);
  if (Rows > 0)
    rowLossFromStatsKernel<<<elementwiseBlocks(Rows), ElementwiseThreads, 0,
                             S>>>(Stats, K, Rows, How, RowLoss);
  sumRowsKernel<<<1, SumThreads, 0, S>>>(RowLoss, Rows, How.Divisor, Loss);
  return cudaGetLastError();
}

template <typename T, typename L>
cudaError_t
crossEntropyStatsGrad(const T *Logits, const int32_t *Targets, const L *Stats,
                      int64_t K, const L *DLoss, T *DLogits, int64_t Rows,
                      int64_t V, int64_t First, int64_t TargetBound,
                      const CeRows &How, ErrorSink E, cudaStream_t S) {
  if (badShape(Rows, V, How))
    return cudaErrorInvalidValue;
  if (Rows == 0)
    return cudaSuccess;
  statsGradKernel<<<unsigned(Rows), RowThreads, 0, S>>>(
      Logits, Targets, Stats, K, DLoss, DLogits, Rows, V, First, TargetBound,
      How, E);
  return cudaGetLastError();
}

#define WEFT_INSTANTIATE(T, L)                                                 \
  template cudaError_t crossEntropy<T, L>(const T *, const int32_t *, int64_t, \
                                          int64_t, const CeRows &, L *,        \
                                          void *, ErrorSink, cudaStream_t);    \
  template cudaError_t crossEntropyGrad<T, L>(                                 \
      const T *, const int32_t *, const L *, T *, int64_t, int64_t,            \
      const CeRows &, ErrorSink, cudaStream_t);                                \
  template cudaError_t crossEntropyStats<T, L>(                                \
      const T *, const int32_t *, int64_t, int64_t, int64_t, int64_t,          \
      const CeRows &, L *, ErrorSink, cudaStream_t);                           \
  template cudaError_t crossEntropyStatsGrad<T, L>(                            \
      const T *, const int32_t *, const L *, int64_t, const L *, T *, int64_t, \
      int64_t, int64_t, int64_t, const CeRows &, ErrorSink, cudaStream_t);
WEFT_INSTANTIATE(float, float)
WEFT_INSTANTIATE(double, double)
WEFT_INSTANTIATE(bf16, float)
template cudaError_t crossEntropyFromStats<float>(const float *, int64_t,
                                                  int64_t, const CeRows &,
                                                  float *, void *,
                                                  cudaStream_t);
template cudaError_t crossEntropyFromStats<double>(const double *, int64_t,
                                                   int64_t, const CeRows &,
                                                   double *, void *,
                                                   cudaStream_t);

} // namespace weft::cuda
