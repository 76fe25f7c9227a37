//===- Norms.cu - Layer norm and RMS norm, forward and backward ----------===//
//
// One thread block per row for the row statistics and dx (the formulas of
// runtime/cpu/kernels/Norms.cpp). The weight gradients, and reduce_rows
// (a bias gradient), are column sums over all rows: done in two
// deterministic stages in double, as the CPU accumulates them, partial sums
// over chunks of NormRowChunk rows into scratch, then one thread per column
// adds the chunks in order (no atomics: the result does not depend on
// scheduling).
//
// Scratch (normGradScratchBytes): per row two statistics (double), then per
// term, chunk and column a partial sum (double).
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/kernels/Common.cuh"

namespace weft::cuda {

namespace {

constexpr int NormThreads = 256;
constexpr int64_t NormRowChunk = 128;

int64_t rowChunks(int64_t Rows) {
  return (Rows + NormRowChunk - 1) / NormRowChunk;
}

/// Mean and 1/sqrt(var + eps) of a row, two passes as the CPU.
template <typename T>
__device__ void rowMoments(const T *X, int64_t D, double Eps, Acc<T> &Mean,
                           Acc<T> &Rstd, Acc<T> *Shared) {
  using A = Acc<T>;
  A Sum = 0;
  for (int64_t C = threadIdx.x; C < D; C += blockDim.x)
    Sum += toAcc(X[C]);
  Mean = blockSum(Sum, Shared) / A(D);
  A Var = 0;
  for (int64_t C = threadIdx.x; C < D; C += blockDim.x) {
    A Dv = toAcc(X[C]) - Mean;
    Var += Dv * Dv;
  }
  Var = blockSum(Var, Shared) / A(D);
  Rstd = A(1) / sqrt(Var + A(Eps));
}

template <typename T>
__global__ void layerNormKernel(const T *X, const T *Gamma, const T *Beta, T *Y,
                                int64_t D, double Eps) {
  using A = Acc<T>;
  __shared__ A Shared[32];
  const int64_t R = blockIdx.x;
  const T *XR = X + R * D;
  T *YR = Y + R * D;
  A Mean, Rstd;
  rowMoments(XR, D, Eps, Mean, Rstd, Shared);
  for (int64_t C = threadIdx.x; C < D; C += blockDim.x)
    YR[C] = fromAcc<T>((toAcc(XR[C]) - Mean) * Rstd * toAcc(Gamma[C]) +
                       toAcc(Beta[C]));
}

// dxhat = dy*gamma; dx = rstd*(dxhat - mean(dxhat) - xhat*mean(dxhat*xhat)).
template <typename T>
__global__ void layerNormDxKernel(const T *Dy, const T *X, const T *Gamma,
                                  T *Dx, int64_t D, double Eps, double *Stats) {
  using A = Acc<T>;
  __shared__ A Shared[32];
  const int64_t R = blockIdx.x;
  const T *XR = X + R * D, *DyR = Dy + R * D;
  A Mean, Rstd;
  rowMoments(XR, D, Eps, Mean, Rstd, Shared);
  A SumG = 0, SumGX = 0;
  for (int64_t C = threadIdx.x; C < D; C += blockDim.x) {
    A G = toAcc(DyR[C]) * toAcc(Gamma[C]);
    SumG += G;
    SumGX += G * (toAcc(XR[C]) - Mean) * Rstd;
  }
  const A MG = blockSum(SumG, Shared) / A(D);
  const A MGX = blockSum(SumGX, Shared) / A(D);
  T *DxR = Dx + R * D;
  for (int64_t C = threadIdx.x; C < D; C += blockDim.x) {
    A XHat = (toAcc(XR[C]) - Mean) * Rstd;
    DxR[C] =
        fromAcc<T>(Rstd * (toAcc(DyR[C]) * toAcc(Gamma[C]) - MG - XHat * MGX));
  }
  if (threadIdx.x == 0) {
    Stats[2 * R] = Mean;
    Stats[2 * R + 1] = Rstd;
  }
}

template <typename T>
__global__ void rmsNormKernel(const T *X, const T *Gamma, T *Y, int64_t D,
                              double Eps) {
  using A = Acc<T>;
  __shared__ A Shared[32];
  const int64_t R = blockIdx.x;
  const T *XR = X + R * D;
  T *YR = Y + R * D;
  A Sq = 0;
  for (int64_t C = threadIdx.x; C < D; C += blockDim.x) {
    A V = toAcc(XR[C]);
    Sq += V * V;
  }
  const A Rstd = A(1) / sqrt(blockSum(Sq, Shared) / A(D) + A(Eps));
  for (int64_t C = threadIdx.x; C < D; C += blockDim.x)
    YR[C] = fromAcc<T>(toAcc(XR[C]) * Rstd * toAcc(Gamma[C]));
}

// y = x*r*g, r = (mean(x^2)+eps)^-1/2: dx = r*g*dy - x * r^3 * dot / D.
template <typename T>
__global__ void rmsNormDxKernel(const T *Dy, const T *X, const T *Gamma, T *Dx,
                                int64_t D, double Eps, double *Stats) {
  using A = Acc<T>;
  __shared__ A Shared[32];
  const int64_t R = blockIdx.x;
  const T *XR = X + R * D, *DyR = Dy + R * D;
  A Sq = 0, Dot = 0;
  for (int64_t C = threadIdx.x; C < D; C += blockDim.x) {
    A V = toAcc(XR[C]);
    Sq += V * V;
    Dot += toAcc(DyR[C]) * toAcc(Gamma[C]) * V;
  }
  const A Rstd = A(1) / sqrt(blockSum(Sq, Shared) / A(D) + A(Eps));
  const A K = Rstd * Rstd * Rstd * blockSum(Dot, Shared) / A(D);
  T *DxR = Dx + R * D;
  for (int64_t C = threadIdx.x; C < D; C += blockDim.x)
    DxR[C] =
        fromAcc<T>(Rstd * toAcc(DyR[C]) * toAcc(Gamma[C]) - toAcc(XR[C]) * K);
  if (threadIdx.x == 0) {
    Stats[2 * R] = 0;
    Stats[2 * R + 1] = Rstd;
  }
}

// Column sums, in two deterministic stages. Stage 1: one thread per
// column and chunk of NormRowChunk rows adds Terms(r, c, Acc) (NumTerms
// sums at once, in double: the CPU accumulates these in double) into
// Partial[term][chunk][column]. Stage 2: one thread per column adds the
// chunks in order and writes the sums.
template <int NumTerms, typename Terms>
__global__ void columnPartialKernel(Terms F, int64_t Rows, int64_t D,
                                    double *Partial) {
  const int64_t C = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (C >= D)
    return;
  const int64_t R0 = int64_t(blockIdx.y) * NormRowChunk;
  const int64_t R1 = min(Rows, R0 + NormRowChunk);
  double Acc[NumTerms] = {};
  for (int64_t R = R0; R < R1; ++R)
    F(R, C, Acc);
  const int64_t Chunks = gridDim.y;
  for (int T = 0; T < NumTerms; ++T)
    Partial[(T * Chunks + blockIdx.y) * D + C] = Acc[T];
}

template <typename T, int NumTerms>
__global__ void columnFinalKernel(const double *Partial, int64_t Chunks,
                                  int64_t D, T *Out0, T *Out1) {
  WEFT_GRID_STRIDE(C, D) {
    for (int Term = 0; Term < NumTerms; ++Term) {
      double Sum = 0;
      for (int64_t K = 0; K < Chunks; ++K)
        Sum += Partial[(Term * Chunks + K) * D + C];
      (Term == 0 ? Out0 : Out1)[C] = fromAcc<T>(Sum);
    }
  }
}

template <typename T, int NumTerms, typename Terms>
cudaError_t columnSums(Terms F, int64_t Rows, int64_t D, double *Partial,
                       T *Out0, T *Out1, cudaStream_t S) {
  if (D <= 0)
    return cudaSuccess;
  const int64_t Chunks = rowChunks(Rows);
  if (Chunks > 65535)
    return cudaErrorInvalidValue; // 8.4M rows: beyond gridDim.y
  if (Chunks > 0) {
    dim3 Grid(unsigned((D + 127) / 128), unsigned(Chunks));
    columnPartialKernel<NumTerms><<<Grid, 128, 0, S>>>(F, Rows, D, Partial);
  }
  columnFinalKernel<T, NumTerms>
      <<<elementwiseBlocks(D), ElementwiseThreads, 0, S>>>(Partial, Chunks, D,
                                                           Out0, Out1);
  return cudaGetLastError();
}

// dgamma = sum dy * (x - mean) * rstd, dbeta = sum dy (Stats: mean and rstd
// per row; RMS norm stores a mean of 0).
template <typename T, int NumTerms> struct NormWeightTerms {
  const T *Dy, *X;
  const double *Stats;
  __device__ void operator()(int64_t R, int64_t C, double *Acc) const {
    const double Dyv = double(toAcc(Dy[R * D + C]));
    Acc[0] +=
        Dyv * (double(toAcc(X[R * D + C])) - Stats[2 * R]) * Stats[2 * R + 1];
    if (NumTerms == 2)
      Acc[1] += Dyv;
  }
  int64_t D;
};

template <typename T> struct RowTerms {
  const T *X;
  int64_t D;
  __device__ void operator()(int64_t R, int64_t C, double *Acc) const {
    Acc[0] += double(toAcc(X[R * D + C]));
  }
};

bool tooManyRows(int64_t Rows) { return Rows > int64_t(0x7fffffff); }

} // namespace

size_t columnSumScratchBytes(int64_t Rows, int64_t D, int Terms) {
  size_t Elems = size_t(rowChunks(Rows)) * size_t(D) * size_t(Terms);
  return (Elems * sizeof(double) + 255) / 256 * 256;
}

size_t normGradScratchBytes(int64_t Rows, int64_t D) {
  return (size_t(Rows) * 2 * sizeof(double) + 255) / 256 * 256 +
         columnSumScratchBytes(Rows, D, 2);
}

/// Per-row statistics, then the column sums' partials.
static double *partialsAfterStats(void *Scratch, int64_t Rows) {
  return reinterpret_cast<double *>(static_cast<char *>(Scratch) +
                                    (size_t(Rows) * 2 * sizeof(double) + 255) /
                                        256 * 256);
}

template <typename T>
cudaError_t reduceRows(const T *X, T *Y, int64_t Rows, int64_t N, void *Scratch,
                       cudaStream_t S) {
  return columnSums<T, 1>(RowTerms<T>{X, N}, Rows, N,
                          static_cast<double *>(Scratch), Y, Y, S);
}

template <typename T>
cudaError_t layerNorm(const T *X, const T *Gamma, const T *Beta, T *Y,
                      int64_t Rows, int64_t D, double Eps, cudaStream_t S) {
  if (tooManyRows(Rows))
    return cudaErrorInvalidValue;
  if (Rows > 0)
    layerNormKernel<<<unsigned(Rows), NormThreads, 0, S>>>(X, Gamma, Beta, Y, D,
                                                           Eps);
  return cudaGetLastError();
}
template <typename T>
cudaError_t layerNormGrad(const T *Dy, const T *X, const T *Gamma, T *Dx,
                          T *DGamma, T *DBeta, int64_t Rows, int64_t D,
                          double Eps, void *Scratch, cudaStream_t S) {
  if (tooManyRows(Rows))
    return cudaErrorInvalidValue;
  auto *St = static_cast<double *>(Scratch);
  if (Rows > 0)
    layerNormDxKernel<<<unsigned(Rows), NormThreads, 0, S>>>(Dy, X, Gamma, Dx,
                                                             D, Eps, St);
  cudaError_t E = cudaGetLastError();
  if (E != cudaSuccess)
    return E;
  return columnSums<T, 2>(NormWeightTerms<T, 2>{Dy, X, St, D}, Rows, D,
                          partialsAfterStats(Scratch, Rows), DGamma, DBeta, S);
}
template <typename T>
cudaError_t rmsNorm(const T *X, const T *Gamma, T *Y, int64_t Rows, int64_t D,
                    double Eps, cudaStream_t S) {
  if (tooManyRows(Rows))
    return cudaErrorInvalidValue;
  if (Rows > 0)
    rmsNormKernel<<<unsigned(Rows), NormThreads, 0, S>>>(X, Gamma, Y, D, Eps);
  return cudaGetLastError();
}
template <typename T>
cudaError_t rmsNormGrad(const T *Dy, const T *X, const T *Gamma, T *Dx,
                        T *DGamma, int64_t Rows, int64_t D, double Eps,
                        void *Scratch, cudaStream_t S) {
  if (tooManyRows(Rows))
    return cudaErrorInvalidValue;
  auto *St = static_cast<double *>(Scratch);
  if (Rows > 0)
    rmsNormDxKernel<<<unsigned(Rows), NormThreads, 0, S>>>(Dy, X, Gamma, Dx, D,
                                                           Eps, St);
  cudaError_t E = cudaGetLastError();
  if (E != cudaSuccess)
    return E;
  // With the mean stored as 0, dgamma = sum dy * x * rstd.
  return columnSums<T, 1>(NormWeightTerms<T, 1>{Dy, X, St, D}, Rows, D,
                          partialsAfterStats(Scratch, Rows), DGamma, DGamma, S);
}

#define WEFT_INSTANTIATE(T)                                                    \
  template cudaError_t layerNorm<T>(const T *, const T *, const T *, T *,      \
                                    int64_t, int64_t, double, cudaStream_t);   \
  template cudaError_t layerNormGrad<T>(const T *, const T *, const T *, T *,  \
                                        T *, T *, int64_t, int64_t, double,    \
                                        void *, cudaStream_t);                 \
  template cudaError_t rmsNorm<T>(const T *, const T *, T *, int64_t, int64_t, \
                                  double, cudaStream_t);                       \
  template cudaError_t rmsNormGrad<T>(const T *, const T *, const T *, T *,    \
                                      T *, int64_t, int64_t, double, void *,   \
                                      cudaStream_t);                           \
  template cudaError_t reduceRows<T>(const T *, T *, int64_t, int64_t, void *, \
                                     cudaStream_t);
WEFT_INSTANTIATE(float)
WEFT_INSTANTIATE(double)
WEFT_INSTANTIATE(bf16)

} // namespace weft::cuda
