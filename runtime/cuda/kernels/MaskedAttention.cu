//===- MaskedAttention.cu - Attention under every mask, and ring blocks ---===//
//
// The CUDA twin of the CPU's ring kernels (runtime/cpu/kernels/
// RingAttention.cpp), which cover every mask attention has: queries and
// keys at global positions (QPos, KPos; context parallelism holds a block
// of the queries, a ring step a block of the keys, load balancing both out
// of order), the keys each query sees as program/AttentionMask.h's range
// (causal or not, a sliding window, packed documents, key padding), and
// dropout of the probabilities keyed by global (sample, head, query, key)
// (program/Dropout.h). The fused kernels (Attention.cu) stay the path of
// plain causal attention; the backend sends everything else here.
//
// A thread block of 128 threads per (batch, head, query) row, as the
// reference kernels: the row max over the visible keys, then the sum and
// the output in chunks of 128 keys. The gradient is one kernel per query
// row (dq, and D = dy . o into the scratch) and one per (batch, KV head,
// key) for dk and dv over the group's heads and every query: each output
// has one owner, so no atomics, and every sum runs in a fixed order.
// Whole-sequence attention is one block whose output is the row's: its
// gradient recomputes o and the log-sum-exp first.
//
//===----------------------------------------------------------------------===//
#include "program/AttentionMask.h"
#include "runtime/cuda/kernels/Common.cuh"
#include "runtime/cuda/kernels/RowWalk.cuh"

namespace weft::cuda {

namespace {

constexpr int Threads = 128;
constexpr int64_t MaxHd = MaxAttentionHeadDim;
constexpr int PerThread = int(MaxHd) / Threads;

template <typename A> __device__ __forceinline__ A negInf() {
  return -INFINITY;
}

template <typename A> __device__ __forceinline__ A accLog(A X);
template <> __device__ __forceinline__ float accLog(float X) { return logf(X); }
template <> __device__ __forceinline__ double accLog(double X) {
  return log(X);
}

using rows::accumulateRows;
using rows::dot;
using rows::loadRow;

/// The row of a block per (batch, head, query), the query minor: its
/// indices, the offset of its query row, and of its KV head's row 0.
struct QueryRow {
  int64_t I, BH, Bi, Hh, LdK, Off, KvOff;
  __device__ explicit QueryRow(const MaskedAttention &M)
      : I(blockIdx.x % M.Sq), BH(blockIdx.x / M.Sq), Bi(BH / M.H), Hh(BH % M.H),
        LdK(M.Hkv * M.Hd), Off((Bi * M.Sq + I) * M.H * M.Hd + Hh * M.Hd),
        KvOff(Bi * M.Sk * LdK + Hh / (M.H / M.Hkv) * M.Hd) {}
};

/// The keys local query I of batch row Bi sees.
__device__ __forceinline__ KeyRange rangeOf(const MaskedAttention &M,
                                            int64_t Bi, int64_t I) {
  return keyRange(M.QPos[I], M.Causal, M.Window,
                  M.Doc ? M.Doc + Bi * M.DocStride + I : nullptr,
                  M.Spans ? M.Spans + 2 * Bi : nullptr);
}

/// The dropout factor of probability (Bi, Hh, I, J): 0 or 1 / (1 - p).
template <typename A>
__device__ __forceinline__ A dropFactor(const MaskedAttention &M, int64_t Bi,
                                        int64_t Hh, int64_t I, int64_t J) {
  if (!M.Drop)
    return A(1);
  const uint64_t Head =
      uint64_t((M.BatchFirst + Bi) * M.Heads + M.HeadFirst + Hh);
  const uint64_t S = uint64_t(M.Seq);
  return A(
      M.Key.factor((Head * S + uint64_t(M.QPos[I])) * S + uint64_t(M.KPos[J])));
}

template <typename T> __device__ Acc<T> scaleOf(const MaskedAttention &M) {
  return Acc<T>(M.Scale > 0 ? M.Scale : 1.0 / sqrt(double(M.Hd)));
}

// Forward, a block per (batch, head, query), the query minor: o normalized
// over the visible keys (dropped probabilities weigh v; the denominator
// counts them all), lse = max + log(sum) (-inf and o = 0: none visible).
template <typename T, typename S>
__global__ void __launch_bounds__(Threads)
    forwardKernel(MaskedAttention M, const T *Q, const T *K, const T *V, S *O,
                  S *Lse) {
  using A = Acc<T>;
  __shared__ A Qs[MaxHd], Ps[Threads], Buf[32];
  const QueryRow Row(M);
  const int64_t I = Row.I, BH = Row.BH, Bi = Row.Bi, Hh = Row.Hh, LdK = Row.LdK,
                Off = Row.Off;
  const T *Kr = K + Row.KvOff, *Vr = V + Row.KvOff;
  const A Sc = scaleOf<T>(M);
  loadRow(Qs, Q + Off, M.Hd);
  __syncthreads();
  const KeyRange R = rangeOf(M, Bi, I);

  A Mx = negInf<A>();
  for (int64_t J = threadIdx.x; J < M.Sk; J += Threads)
    if (R.has(M.KPos[J]))
      Mx = max(Mx, Sc * dot(Qs, Kr + J * LdK, M.Hd));
  Mx = blockMax(Mx, Buf);

  A Sum = A(0), Out[PerThread] = {};
  for (int64_t J0 = 0; J0 < M.Sk; J0 += Threads) {
    const int64_t J = J0 + threadIdx.x;
    A P = A(0);
    if (J < M.Sk && Mx != negInf<A>() && R.has(M.KPos[J]))
      P = accExp(Sc * dot(Qs, Kr + J * LdK, M.Hd) - Mx);
    Sum += P;
    const A W = P == A(0) ? A(0) : P * dropFactor<A>(M, Bi, Hh, I, J);
    __syncthreads(); // the previous chunk's readers are done with Ps
    Ps[threadIdx.x] = W;
    __syncthreads();
    accumulateRows(Out, Ps, int(min(int64_t(Threads), M.Sk - J0)),
                   Vr + J0 * LdK, LdK, M.Hd);
  }
  Sum = blockSum(Sum, Buf);
  const A Inv = Sum > A(0) ? A(1) / Sum : A(0);
#pragma unroll
  for (int N = 0; N < PerThread; ++N) {
    const int64_t C = threadIdx.x + Threads * N;
    if (C < M.Hd)
      O[Off + C] = fromAcc<S>(Out[N] * Inv);
  }
  if (threadIdx.x == 0 && Lse)
    Lse[BH * M.Sq + I] =
        fromAcc<S>(Sum > A(0) ? Mx + accLog(Sum) : negInf<A>());
}

// Gradient, a block per (batch, head, query): D = dy . o (into Dsum) and
// dq = Scale sum_j P_j (dP_j - D) k_j, with P = exp(s - lse) over the
// visible keys and dP = (dy . v_j) times the dropout factor.
template <typename T, typename S>
__global__ void __launch_bounds__(Threads)
    queryGradKernel(MaskedAttention M, const T *Dy, const T *Q, const T *K,
                    const T *V, const S *O, const S *Lse, T *Dq, Acc<T> *Dsum) {
  using A = Acc<T>;
  __shared__ A Qs[MaxHd], Dys[MaxHd], Gs[Threads], Buf[32];
  const QueryRow Row(M);
  const int64_t I = Row.I, BH = Row.BH, Bi = Row.Bi, Hh = Row.Hh, LdK = Row.LdK,
                Off = Row.Off;
  const T *Kr = K + Row.KvOff, *Vr = V + Row.KvOff;
  const A Sc = scaleOf<T>(M);
  loadRow(Qs, Q + Off, M.Hd);
  loadRow(Dys, Dy + Off, M.Hd);
  __syncthreads();
  A Part = A(0);
  for (int64_t C = threadIdx.x; C < M.Hd; C += Threads)
    Part += Dys[C] * toAcc(O[Off + C]);
  const A D = blockSum(Part, Buf);
  const A L = toAcc(Lse[BH * M.Sq + I]);
  const KeyRange R = rangeOf(M, Bi, I);

  A Out[PerThread] = {};
  for (int64_t J0 = 0; J0 < M.Sk; J0 += Threads) {
    const int64_t J = J0 + threadIdx.x;
    A Gj = A(0);
    if (J < M.Sk && L != negInf<A>() && R.has(M.KPos[J])) {
      const A P = accExp(Sc * dot(Qs, Kr + J * LdK, M.Hd) - L);
      const A Dp =
          dot(Dys, Vr + J * LdK, M.Hd) * dropFactor<A>(M, Bi, Hh, I, J);
      Gj = P * (Dp - D) * Sc;
    }
    __syncthreads(); // the previous chunk's readers are done with Gs
    Gs[threadIdx.x] = Gj;
    __syncthreads();
    accumulateRows(Out, Gs, int(min(int64_t(Threads), M.Sk - J0)),
                   Kr + J0 * LdK, LdK, M.Hd);
  }
#pragma unroll
  for (int N = 0; N < PerThread; ++N) {
    const int64_t C = threadIdx.x + Threads * N;
    if (C < M.Hd)
      Dq[Off + C] = fromAcc<T>(Out[N]);
  }
  if (threadIdx.x == 0)
    Dsum[BH * M.Sq + I] = D;
}

// Gradient, a block per (batch, KV head, key): over the group's heads and
// every query that sees the key, dv = sum P dropped dy and
// dk = Scale sum P (dP - D) q.
template <typename T, typename S>
__global__ void __launch_bounds__(Threads)
    keyGradKernel(MaskedAttention M, const T *Dy, const T *Q, const T *K,
                  const T *V, const S *Lse, const Acc<T> *Dsum, T *Dk, T *Dv) {
  using A = Acc<T>;
  __shared__ A Ks[MaxHd], Vs[MaxHd], Gs[Threads], Ws[Threads];
  const int64_t Blk = blockIdx.x, J = Blk % M.Sk, BG = Blk / M.Sk;
  const int64_t Bi = BG / M.Hkv, G = BG % M.Hkv, Group = M.H / M.Hkv;
  const int64_t LdQ = M.H * M.Hd, LdK = M.Hkv * M.Hd;
  const int64_t Off = (Bi * M.Sk + J) * LdK + G * M.Hd;
  const A Sc = scaleOf<T>(M);
  loadRow(Ks, K + Off, M.Hd);
  loadRow(Vs, V + Off, M.Hd);
  __syncthreads();
  const int64_t Pk = M.KPos[J];

  A AccK[PerThread] = {}, AccV[PerThread] = {};
  for (int64_t Hh = G * Group; Hh < (G + 1) * Group; ++Hh) {
    const T *Qr = Q + Bi * M.Sq * LdQ + Hh * M.Hd;
    const T *Dyr = Dy + Bi * M.Sq * LdQ + Hh * M.Hd;
    const int64_t Stat = (Bi * M.H + Hh) * M.Sq;
    for (int64_t I0 = 0; I0 < M.Sq; I0 += Threads) {
      const int64_t I = I0 + threadIdx.x;
      A Gi = A(0), Wi = A(0);
      if (I < M.Sq) {
        const A L = toAcc(Lse[Stat + I]);
        if (L != negInf<A>() && rangeOf(M, Bi, I).has(Pk)) {
          const A P = accExp(Sc * dot(Ks, Qr + I * LdQ, M.Hd) - L);
          const A F = dropFactor<A>(M, Bi, Hh, I, J);
          const A Dp = dot(Vs, Dyr + I * LdQ, M.Hd) * F;
          Gi = P * (Dp - Dsum[Stat + I]) * Sc;
          Wi = P * F;
        }
      }
      __syncthreads(); // the previous chunk's readers are done
      Gs[threadIdx.x] = Gi;
      Ws[threadIdx.x] = Wi;
      __syncthreads();
      const int Count = int(min(int64_t(Threads), M.Sq - I0));
      accumulateRows(AccV, Ws, Count, Dyr + I0 * LdQ, LdQ, M.Hd);
      accumulateRows(AccK, Gs, Count, Qr + I0 * LdQ, LdQ, M.Hd);
    }
  }
#pragma unroll
  for (int N = 0; N < PerThread; ++N) {
    const int64_t C = threadIdx.x + Threads * N;
    if (C < M.Hd) {
      Dk[Off + C] = fromAcc<T>(AccK[N]);
      Dv[Off + C] = fromAcc<T>(AccV[N]);
    }
  }
}

// o = wa o1 + wc o2 by the blocks' log-sum-exps, as the CPU's.
template <typename T>
__global__ void mergeKernel(const T *O1, const T *L1, const T *O2, const T *L2,
                            T *O, T *L, int64_t B, int64_t S, int64_t H,
                            int64_t Hd) {
  using A = Acc<T>;
  WEFT_GRID_STRIDE(Row, B * H * S) {
    const int64_t BH = Row / S, I = Row % S, Bi = BH / H, Hq = BH % H;
    const A Xa = toAcc(L1[Row]), Xc = toAcc(L2[Row]);
    const A Mx = max(Xa, Xc);
    A Wa = A(0), Wc = A(0), Lse = negInf<A>();
    if (Mx != negInf<A>()) {
      const A Ea = Xa == negInf<A>() ? A(0) : accExp(Xa - Mx);
      const A Ec = Xc == negInf<A>() ? A(0) : accExp(Xc - Mx);
      Lse = Mx + accLog(Ea + Ec);
      Wa = Ea / (Ea + Ec);
      Wc = Ec / (Ea + Ec);
    }
    L[Row] = fromAcc<T>(Lse);
    const int64_t Oi = (Bi * S + I) * H * Hd + Hq * Hd;
    for (int64_t X = 0; X < Hd; ++X)
      O[Oi + X] = fromAcc<T>(Wa * toAcc(O1[Oi + X]) + Wc * toAcc(O2[Oi + X]));
  }
}

bool badShape(const MaskedAttention &M) {
  return M.B < 0 || M.Sq < 0 || M.Sk < 0 || M.H <= 0 || M.Hkv <= 0 ||
         M.H % M.Hkv != 0 || M.Hd <= 0 || M.Hd > MaxHd || !M.QPos || !M.KPos ||
         double(M.B) * double(M.H) * double(M.Sq) > 0x7fffffff ||
         double(M.B) * double(M.Hkv) * double(M.Sk) > 0x7fffffff;
}

size_t roundUp256(size_t X) { return (X + 255) / 256 * 256; }

} // namespace

size_t maskedAttentionScratchBytes(int64_t B, int64_t Sq, int64_t H) {
  return roundUp256(size_t(B) * size_t(H) * size_t(Sq) * sizeof(double));
}

template <typename T, typename S>
cudaError_t maskedAttention(const MaskedAttention &M, const T *Q, const T *K,
                            const T *V, S *O, S *Lse, cudaStream_t St) {
  if (badShape(M))
    return cudaErrorInvalidValue;
  if (M.B * M.H * M.Sq > 0)
    forwardKernel<<<unsigned(M.B * M.H * M.Sq), Threads, 0, St>>>(M, Q, K, V, O,
                                                                  Lse);
  return cudaGetLastError();
}

template <typename T, typename S>
cudaError_t maskedAttentionGrad(const MaskedAttention &M, const T *Dy,
                                const T *Q, const T *K, const T *V, const S *O,
                                const S *Lse, T *Dq, T *Dk, T *Dv,
                                void *Scratch, cudaStream_t St) {
  if (badShape(M))
    return cudaErrorInvalidValue;
  auto *Dsum = static_cast<Acc<T> *>(Scratch);
  if (M.B * M.H * M.Sq > 0)
    queryGradKernel<<<unsigned(M.B * M.H * M.Sq), Threads, 0, St>>>(
        M, Dy, Q, K, V, O, Lse, Dq, Dsum);
  if (M.B * M.Hkv * M.Sk > 0)
    keyGradKernel<<<unsigned(M.B * M.Hkv * M.Sk), Threads, 0, St>>>(
        M, Dy, Q, K, V, Lse, Dsum, Dk, Dv);
  return cudaGetLastError();
}

template <typename T>
cudaError_t softmaxMerge(const T *O1, const T *L1, const T *O2, const T *L2,
                         T *O, T *L, int64_t B, int64_t S, int64_t H,
                         int64_t Hd, cudaStream_t St) {
  const int64_t Rows = B * H * S;
  if (Rows > 0)
    mergeKernel<<<elementwiseBlocks(Rows), ElementwiseThreads, 0, St>>>(
        O1, L1, O2, L2, O, L, B, S, H, Hd);
  return cudaGetLastError();
}

#define WEFT_INSTANTIATE_MASKED(T, S)                                          \
  template cudaError_t maskedAttention<T, S>(const MaskedAttention &,          \
                                             const T *, const T *, const T *,  \
                                             S *, S *, cudaStream_t);          \
  template cudaError_t maskedAttentionGrad<T, S>(                              \
      const MaskedAttention &, const T *, const T *, const T *, const T *,     \
      const S *, const S *, T *, T *, T *, void *, cudaStream_t);
WEFT_INSTANTIATE_MASKED(float, float)
WEFT_INSTANTIATE_MASKED(double, double)
WEFT_INSTANTIATE_MASKED(bf16, bf16)
WEFT_INSTANTIATE_MASKED(bf16, float) // o and lse recomputed in f32

#define WEFT_INSTANTIATE(T)                                                    \
  template cudaError_t softmaxMerge<T>(const T *, const T *, const T *,        \
                                       const T *, T *, T *, int64_t, int64_t,  \
                                       int64_t, int64_t, cudaStream_t);
WEFT_INSTANTIATE(float)
WEFT_INSTANTIATE(double)
WEFT_INSTANTIATE(bf16)

} // namespace weft::cuda
