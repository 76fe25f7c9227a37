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

template <typename T>
__global__ void rowLossKernel(const T *Logits, const int32_t *Targets,
                              int64_t V, double *RowLoss, ErrorSink E) {
  __shared__ Acc<T> Shared[32];
  const int64_t R = blockIdx.x;
  const T *X = Logits + R * V;
  Acc<T> M, Sum;
  rowMaxSum(X, V, M, Sum, Shared);
  if (threadIdx.x != 0)
    return;
  const int32_t Target = Targets[R];
  if (!checkTarget(Target, R, V, E)) {
    RowLoss[R] = 0;
    return;
  }
  RowLoss[R] = double(M) + log(double(Sum)) - double(toAcc(X[Target]));
}

// Loss = sum of RowLoss in order / Denominator: one block, each thread a
// contiguous slice, then a fixed tree.
template <typename L>
__global__ void sumRowsKernel(const double *RowLoss, int64_t Rows,
                              double Denominator, L *Loss) {
  __shared__ double Shared[32];
  const int64_t Per = (Rows + blockDim.x - 1) / blockDim.x;
  const int64_t R0 = threadIdx.x * Per, R1 = min(Rows, R0 + Per);
  double S = 0;
  for (int64_t R = R0; R < R1; ++R)
    S += RowLoss[R];
  S = blockSum(S, Shared);
  if (threadIdx.x == 0)
    *Loss = L(S / Denominator);
}

/// Dx = softmax * Scale, Dx[Local] -= Scale (Local outside [0, V): none).
/// Every thread reads X[Local] before any writes (Dx may alias X).
template <typename T>
__device__ void writeGrad(const T *X, T *Dx, int64_t V, Acc<T> Shift,
                          Acc<T> Mul, int64_t Local, double Scale) {
  using A = Acc<T>;
  const bool Has = Local >= 0 && Local < V;
  const A Xt = Has ? toAcc(X[Local]) : A(0);
  __syncthreads();
  for (int64_t J = threadIdx.x; J < V; J += blockDim.x)
    Dx[J] = fromAcc<T>(accExp(toAcc(X[J]) - Shift) * Mul);
  __syncthreads();
  if (Has && threadIdx.x == 0)
    Dx[Local] = fromAcc<T>(double(accExp(Xt - Shift)) * double(Mul) - Scale);
}

template <typename T, typename L>
__global__ void gradKernel(const T *Logits, const int32_t *Targets,
                           const L *DLoss, T *DLogits, int64_t V,
                           double Denominator, ErrorSink E) {
  __shared__ Acc<T> Shared[32];
  const int64_t R = blockIdx.x;
  const T *X = Logits + R * V;
  Acc<T> M, Sum;
  rowMaxSum(X, V, M, Sum, Shared);
  const int32_t Target = Targets[R];
  if (!checkTarget(Target, R, V, E))
    return;
  const double Scale = double(*DLoss) / Denominator;
  writeGrad(X, DLogits + R * V, V, M, Acc<T>(Scale / double(Sum)), Target,
            Scale);
}

template <typename T, typename L>
__global__ void statsKernel(const T *Logits, const int32_t *Targets, int64_t V,
                            int64_t First, int64_t Total, L *Stats,
                            ErrorSink E) {
  __shared__ Acc<T> Shared[32];
  const int64_t R = blockIdx.x;
  const T *X = Logits + R * V;
  Acc<T> M, Sum;
  rowMaxSum(X, V, M, Sum, Shared);
  if (threadIdx.x != 0)
    return;
  const int32_t Target = Targets[R];
  checkTarget(Target, R, Total, E);
  const int64_t Local = int64_t(Target) - First;
  Stats[R * 3] = L(M);
  Stats[R * 3 + 1] = L(Sum);
  Stats[R * 3 + 2] = Local >= 0 && Local < V ? L(toAcc(X[Local])) : L(0);
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
                                       double *RowLoss) {
  WEFT_GRID_STRIDE(R, Rows) {
    double M, S, Target = 0;
    mergeStats(Stats, K, Rows, R, M, S);
    for (int64_t Q = 0; Q < K; ++Q)
      Target += double(Stats[(Q * Rows + R) * 3 + 2]);
    RowLoss[R] = M + log(S) - Target;
  }
}

template <typename T, typename L>
__global__ void
statsGradKernel(const T *Logits, const int32_t *Targets, const L *Stats,
                int64_t K, const L *DLoss, T *DLogits, int64_t Rows, int64_t V,
                int64_t First, int64_t Total, double Denominator, ErrorSink E) {
  const int64_t R = blockIdx.x;
  const int32_t Target = Targets[R];
  if (!checkTarget(Target, R, Total, E))
    return;
  double M, S;
  mergeStats(Stats, K, Rows, R, M, S);
  const double Scale = double(*DLoss) / Denominator;
  writeGrad(Logits + R * V, DLogits + R * V, V, Acc<T>(M), Acc<T>(Scale / S),
            int64_t(Target) - First, Scale);
}

bool badRows(int64_t Rows) { return Rows < 0 || Rows > 0x7fffffff; }

} // namespace

template <typename T, typename L>
cudaError_t crossEntropy(const T *Logits, const int32_t *Targets, int64_t Rows,
                         int64_t V, L *Loss, int64_t Denominator, void *Scratch,
                         ErrorSink E, cudaStream_t S) {
  if (badRows(Rows))
    return cudaErrorInvalidValue;
  auto *RowLoss = static_cast<double *>(Scratch);
  if (Rows > 0) // no rows: a loss of 0 / Denominator, as the CPU
    rowLossKernel<<<unsigned(Rows), RowThreads, 0, S>>>(Logits, Targets, V,
                                                        RowLoss, E);
  sumRowsKernel<<<1, SumThreads, 0, S>>>(
      RowLoss, Rows, double(Denominator > 0 ? Denominator : Rows), Loss);
  return cudaGetLastError();
}

template <typename T, typename L>
cudaError_t crossEntropyGrad(const T *Logits, const int32_t *Targets,
                             const L *DLoss, T *DLogits, int64_t Rows,
                             int64_t V, int64_t Denominator, ErrorSink E,
                             cudaStream_t S) {
  if (badRows(Rows))
    return cudaErrorInvalidValue;
  if (Rows == 0)
    return cudaSuccess;
  gradKernel<<<unsigned(Rows), RowThreads, 0, S>>>(
      Logits, Targets, DLoss, DLogits, V,
      double(Denominator > 0 ? Denominator : Rows), E);
  return cudaGetLastError();
}

template <typename T, typename L>
cudaError_t crossEntropyStats(const T *Logits, const int32_t *Targets,
                              int64_t Rows, int64_t V, int64_t First,
                              int64_t Total, L *Stats, ErrorSink E,
                              cudaStream_t S) {
  if (badRows(Rows))
    return cudaErrorInvalidValue;
  if (Rows == 0)
    return cudaSuccess;
  statsKernel<<<unsigned(Rows), RowThreads, 0, S>>>(Logits, Targets, V, First,
                                                    Total, Stats, E);
  return cudaGetLastError();
}

template <typename L>
cudaError_t crossEntropyFromStats(const L *Stats, int64_t K, int64_t Rows,
                                  int64_t Denominator, L *Loss, void *Scratch,
                                  cudaStream_t S) {
  if (badRows(Rows))
    return cudaErrorInvalidValue;
  auto *RowLoss = static_cast<double *>(Scratch);
  if (Rows > 0)
    rowLossFromStatsKernel<<<elementwiseBlocks(Rows), ElementwiseThreads, 0,
                             S>>>(Stats, K, Rows, RowLoss);
  sumRowsKernel<<<1, SumThreads, 0, S>>>(RowLoss, Rows, double(Denominator),
                                         Loss);
  return cudaGetLastError();
}

template <typename T, typename L>
cudaError_t
crossEntropyStatsGrad(const T *Logits, const int32_t *Targets, const L *Stats,
                      int64_t K, const L *DLoss, T *DLogits, int64_t Rows,
                      int64_t V, int64_t First, int64_t Total,
                      int64_t Denominator, ErrorSink E, cudaStream_t S) {
  if (badRows(Rows))
    return cudaErrorInvalidValue;
  if (Rows == 0)
    return cudaSuccess;
  statsGradKernel<<<unsigned(Rows), RowThreads, 0, S>>>(
      Logits, Targets, Stats, K, DLoss, DLogits, Rows, V, First, Total,
      double(Denominator), E);
  return cudaGetLastError();
}

#define WEFT_INSTANTIATE(T, L)                                                 \
  template cudaError_t crossEntropy<T, L>(const T *, const int32_t *, int64_t, \
                                          int64_t, L *, int64_t, void *,       \
                                          ErrorSink, cudaStream_t);            \
  template cudaError_t crossEntropyGrad<T, L>(                                 \
      const T *, const int32_t *, const L *, T *, int64_t, int64_t, int64_t,   \
      ErrorSink, cudaStream_t);                                                \
  template cudaError_t crossEntropyStats<T, L>(                                \
      const T *, const int32_t *, int64_t, int64_t, int64_t, int64_t, L *,     \
      ErrorSink, cudaStream_t);                                                \
  template cudaError_t crossEntropyStatsGrad<T, L>(                            \
      const T *, const int32_t *, const L *, int64_t, const L *, T *, int64_t, \
      int64_t, int64_t, int64_t, int64_t, ErrorSink, cudaStream_t);
WEFT_INSTANTIATE(float, float)
WEFT_INSTANTIATE(double, double)
WEFT_INSTANTIATE(bf16, float)
template cudaError_t crossEntropyFromStats<float>(const float *, int64_t,
                                                  int64_t, int64_t, float *,
                                                  void *, cudaStream_t);
template cudaError_t crossEntropyFromStats<double>(const double *, int64_t,
                                                   int64_t, int64_t, double *,
                                                   void *, cudaStream_t);

} // namespace weft::cuda
