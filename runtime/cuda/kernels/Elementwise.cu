//===- Elementwise.cu - Elementwise ops, activations, casts, AdamW -------===//
//
// One grid-stride kernel per op; every formula is the CPU kernel's
// (runtime/cpu/kernels), computed in the storage type's compute type.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/kernels/Common.cuh"

#include <cmath>
#include <type_traits>

namespace weft::cuda {

namespace {

constexpr double SqrtTwoOverPi = 0.79788456080286535588;

template <typename T, typename F>
__global__ void mapKernel(const T *X, T *Y, int64_t N, F Fn) {
  WEFT_GRID_STRIDE(I, N) { Y[I] = fromAcc<T>(Fn(toAcc(X[I]))); }
}
template <typename T, typename F>
__global__ void zipKernel(const T *A, const T *B, T *Y, int64_t N, F Fn) {
  WEFT_GRID_STRIDE(I, N) { Y[I] = fromAcc<T>(Fn(toAcc(A[I]), toAcc(B[I]))); }
}

template <typename T, typename F>
cudaError_t map(const T *X, T *Y, int64_t N, F Fn, cudaStream_t S) {
  if (N > 0)
    mapKernel<<<elementwiseBlocks(N), ElementwiseThreads, 0, S>>>(X, Y, N, Fn);
  return cudaGetLastError();
}
template <typename T, typename F>
cudaError_t zip(const T *A, const T *B, T *Y, int64_t N, F Fn, cudaStream_t S) {
  if (N > 0)
    zipKernel<<<elementwiseBlocks(N), ElementwiseThreads, 0, S>>>(A, B, Y, N,
                                                                  Fn);
  return cudaGetLastError();
}

template <typename T>
__global__ void biasAddKernel(const T *X, const T *Bias, T *Y, int64_t Rows,
                              int64_t N) {
  WEFT_GRID_STRIDE(I, Rows * N) {
    Y[I] = fromAcc<T>(toAcc(X[I]) + toAcc(Bias[I % N]));
  }
}

template <typename T> __global__ void fillKernel(T *Y, int64_t N, T Value) {
  WEFT_GRID_STRIDE(I, N) { Y[I] = Value; }
}

template <typename From, typename To>
__global__ void castKernel(const From *X, To *Y, int64_t N) {
  WEFT_GRID_STRIDE(I, N) { Y[I] = fromAcc<To>(toAcc(X[I])); }
}

template <typename T>
__global__ void swigluGradKernel(const T *Dy, const T *Gate, const T *Up,
                                 T *DGate, T *DUp, int64_t N) {
  WEFT_GRID_STRIDE(I, N) {
    using A = Acc<T>;
    A G = toAcc(Gate[I]), Sg = accSigmoid(G), D = toAcc(Dy[I]),
      U = toAcc(Up[I]);
    DUp[I] = fromAcc<T>(D * G * Sg);
    DGate[I] = fromAcc<T>(D * U * Sg * (A(1) + G * (A(1) - Sg)));
  }
}

template <typename T>
__global__ void actKernel(Activation K, const T *X, T *Y, int64_t N) {
  WEFT_GRID_STRIDE(I, N) {
    Y[I] = fromAcc<T>(activate(K, double(toAcc(X[I]))));
  }
}
template <typename T>
__global__ void actGradKernel(Activation K, const T *Dy, const T *X, T *Dx,
                              int64_t N) {
  WEFT_GRID_STRIDE(I, N) {
    Dx[I] =
        fromAcc<T>(double(toAcc(Dy[I])) * activateGrad(K, double(toAcc(X[I]))));
  }
}

// torch.optim.AdamW, in the CPU kernel's order of operations.
template <typename T>
__global__ void adamwKernel(T *Param, const T *Grad, T *M, T *V, int64_t N,
                            Acc<T> Decay, Acc<T> B1, Acc<T> B2,
                            Acc<T> OneMinusB1, Acc<T> OneMinusB2,
                            Acc<T> StepSize, Acc<T> Bc2Sqrt, Acc<T> Eps) {
  using A = Acc<T>;
  WEFT_GRID_STRIDE(I, N) {
    A G = toAcc(Grad[I]);
    A Pi = toAcc(Param[I]) * Decay;
    A Mi = B1 * toAcc(M[I]) + OneMinusB1 * G;
    A Vi = B2 * toAcc(V[I]) + OneMinusB2 * G * G;
    M[I] = fromAcc<T>(Mi);
    V[I] = fromAcc<T>(Vi);
    Param[I] = fromAcc<T>(Pi - StepSize * Mi / (sqrt(Vi) / Bc2Sqrt + Eps));
  }
}

template <typename T>
__global__ void firstNonFiniteKernel(const T *X, int64_t N,
                                     unsigned long long *At) {
  WEFT_GRID_STRIDE(I, N) {
    if (!isfinite(toAcc(X[I])))
      atomicMin(At, static_cast<unsigned long long>(I));
  }
}

} // namespace

template <typename T>
cudaError_t biasAdd(const T *X, const T *Bias, T *Y, int64_t Rows, int64_t N,
                    cudaStream_t S) {
  if (Rows * N > 0)
    biasAddKernel<<<elementwiseBlocks(Rows * N), ElementwiseThreads, 0, S>>>(
        X, Bias, Y, Rows, N);
  return cudaGetLastError();
}
template <typename T>
cudaError_t add(const T *A, const T *B, T *Y, int64_t N, cudaStream_t S) {
  return zip(
      A, B, Y, N, [] __device__(Acc<T> X, Acc<T> Z) { return X + Z; }, S);
}
template <typename T>
cudaError_t mul(const T *A, const T *B, T *Y, int64_t N, cudaStream_t S) {
  return zip(
      A, B, Y, N, [] __device__(Acc<T> X, Acc<T> Z) { return X * Z; }, S);
}
template <typename T>
cudaError_t fill(T *Y, int64_t N, double Value, cudaStream_t S) {
  T V;
  if constexpr (std::is_same_v<T, bf16>)
    V = __float2bfloat16_rn(float(Value));
  else
    V = T(Value);
  if (N > 0)
    fillKernel<<<elementwiseBlocks(N), ElementwiseThreads, 0, S>>>(Y, N, V);
  return cudaGetLastError();
}
template <typename From, typename To>
cudaError_t cast(const From *X, To *Y, int64_t N, cudaStream_t S) {
  if (N > 0)
    castKernel<<<elementwiseBlocks(N), ElementwiseThreads, 0, S>>>(X, Y, N);
  return cudaGetLastError();
}
cudaError_t copyBlock(const void *X, int64_t Ldx, void *Y, int64_t Ldy,
                      int64_t Rows, int64_t Width, size_t ElemBytes,
                      cudaStream_t S) {
  if (Rows <= 0 || Width <= 0)
    return cudaSuccess;
  const int64_t RowBytes = Width * int64_t(ElemBytes);
  if (Rows == 1 || (Ldx == Width && Ldy == Width))
    return cudaMemcpyAsync(Y, X, size_t(Rows * RowBytes),
                           cudaMemcpyDeviceToDevice, S);
  return cudaMemcpy2DAsync(Y, size_t(Ldy) * ElemBytes, X,
                           size_t(Ldx) * ElemBytes, size_t(RowBytes),
                           size_t(Rows), cudaMemcpyDeviceToDevice, S);
}

template <typename T>
cudaError_t gelu(const T *X, T *Y, int64_t N, cudaStream_t S) {
  return map(
      X, Y, N,
      [] __device__(Acc<T> V) {
        using A = Acc<T>;
        const A C = A(SqrtTwoOverPi), K = A(0.044715);
        return A(0.5) * V * (A(1) + accTanh(C * (V + K * V * V * V)));
      },
      S);
}
template <typename T>
cudaError_t geluGrad(const T *Dy, const T *X, T *Dx, int64_t N,
                     cudaStream_t S) {
  return zip(
      Dy, X, Dx, N,
      [] __device__(Acc<T> D, Acc<T> V) {
        using A = Acc<T>;
        const A C = A(SqrtTwoOverPi), K = A(0.044715);
        A Th = accTanh(C * (V + K * V * V * V));
        return D * (A(0.5) * (A(1) + Th) + A(0.5) * V * (A(1) - Th * Th) * C *
                                               (A(1) + A(3) * K * V * V));
      },
      S);
}
template <typename T>
cudaError_t silu(const T *X, T *Y, int64_t N, cudaStream_t S) {
  return map(
      X, Y, N, [] __device__(Acc<T> V) { return V * accSigmoid(V); }, S);
}
template <typename T>
cudaError_t siluGrad(const T *Dy, const T *X, T *Dx, int64_t N,
                     cudaStream_t S) {
  return zip(
      Dy, X, Dx, N,
      [] __device__(Acc<T> D, Acc<T> V) {
        using A = Acc<T>;
        A Sg = accSigmoid(V);
        return D * Sg * (A(1) + V * (A(1) - Sg));
      },
      S);
}
template <typename T>
cudaError_t swiglu(const T *Gate, const T *Up, T *Y, int64_t N,
                   cudaStream_t S) {
  return zip(
      Gate, Up, Y, N,
      [] __device__(Acc<T> G, Acc<T> U) { return G * accSigmoid(G) * U; }, S);
}
template <typename T>
cudaError_t swigluGrad(const T *Dy, const T *Gate, const T *Up, T *DGate,
                       T *DUp, int64_t N, cudaStream_t S) {
  if (N > 0)
    swigluGradKernel<<<elementwiseBlocks(N), ElementwiseThreads, 0, S>>>(
        Dy, Gate, Up, DGate, DUp, N);
  return cudaGetLastError();
}
template <typename T>
cudaError_t act(Activation K, const T *X, T *Y, int64_t N, cudaStream_t S) {
  if (N > 0)
    actKernel<<<elementwiseBlocks(N), ElementwiseThreads, 0, S>>>(K, X, Y, N);
  return cudaGetLastError();
}
template <typename T>
cudaError_t actGrad(Activation K, const T *Dy, const T *X, T *Dx, int64_t N,
                    cudaStream_t S) {
  if (N > 0)
    actGradKernel<<<elementwiseBlocks(N), ElementwiseThreads, 0, S>>>(K, Dy, X,
                                                                      Dx, N);
  return cudaGetLastError();
}

template <typename T>
cudaError_t adamw(T *Param, const T *Grad, T *M, T *V, int64_t N,
                  const AdamWParams &P, cudaStream_t S) {
  using A = Acc<T>;
  const double Bc1 = 1.0 - std::pow(P.Beta1, double(P.Step));
  const double Bc2 = 1.0 - std::pow(P.Beta2, double(P.Step));
  if (N > 0)
    adamwKernel<<<elementwiseBlocks(N), ElementwiseThreads, 0, S>>>(
        Param, Grad, M, V, N, A(P.Decay ? 1.0 - P.Lr * P.WeightDecay : 1.0),
        A(P.Beta1), A(P.Beta2), A(1.0 - P.Beta1), A(1.0 - P.Beta2),
        A(P.Lr / Bc1), A(std::sqrt(Bc2)), A(P.Eps));
  return cudaGetLastError();
}

template <typename T>
cudaError_t firstNonFinite(const T *X, int64_t N, long long *At,
                           cudaStream_t S) {
  // All ones: -1 when nothing is found (atomicMin keeps the first index).
  auto *U = reinterpret_cast<unsigned long long *>(At);
  cudaError_t E = cudaMemsetAsync(U, 0xff, sizeof(*U), S);
  if (E != cudaSuccess)
    return E;
  if (N > 0)
    firstNonFiniteKernel<<<elementwiseBlocks(N), ElementwiseThreads, 0, S>>>(
        X, N, U);
  return cudaGetLastError();
}

#define WEFT_INSTANTIATE(T)                                                    \
  template cudaError_t biasAdd<T>(const T *, const T *, T *, int64_t, int64_t, \
                                  cudaStream_t);                               \
  template cudaError_t add<T>(const T *, const T *, T *, int64_t,              \
                              cudaStream_t);                                   \
  template cudaError_t mul<T>(const T *, const T *, T *, int64_t,              \
                              cudaStream_t);                                   \
  template cudaError_t fill<T>(T *, int64_t, double, cudaStream_t);            \
  template cudaError_t gelu<T>(const T *, T *, int64_t, cudaStream_t);         \
  template cudaError_t geluGrad<T>(const T *, const T *, T *, int64_t,         \
                                   cudaStream_t);                              \
  template cudaError_t silu<T>(const T *, T *, int64_t, cudaStream_t);         \
  template cudaError_t siluGrad<T>(const T *, const T *, T *, int64_t,         \
                                   cudaStream_t);                              \
  template cudaError_t swiglu<T>(const T *, const T *, T *, int64_t,           \
                                 cudaStream_t);                                \
  template cudaError_t swigluGrad<T>(const T *, const T *, const T *, T *,     \
                                     T *, int64_t, cudaStream_t);              \
  template cudaError_t act<T>(Activation, const T *, T *, int64_t,             \
                              cudaStream_t);                                   \
  template cudaError_t actGrad<T>(Activation, const T *, const T *, T *,       \
                                  int64_t, cudaStream_t);                      \
  template cudaError_t adamw<T>(T *, const T *, T *, T *, int64_t,             \
                                const AdamWParams &, cudaStream_t);            \
  template cudaError_t firstNonFinite<T>(const T *, int64_t, long long *,      \
                                         cudaStream_t);
WEFT_INSTANTIATE(float)
WEFT_INSTANTIATE(double)
WEFT_INSTANTIATE(bf16)
template cudaError_t fill<int32_t>(int32_t *, int64_t, double, cudaStream_t);
template cudaError_t cast<float, bf16>(const float *, bf16 *, int64_t,
                                       cudaStream_t);
template cudaError_t cast<bf16, float>(const bf16 *, float *, int64_t,
                                       cudaStream_t);

} // namespace weft::cuda
