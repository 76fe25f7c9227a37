//===- Attention.cu - fused causal GQA attention, gradient ------*- C++ -*-===//
//
// Causal multi-head attention with grouped KV heads, the device twin of
// runtime/cpu/kernels/Attention.cpp. Q, Y, Dy, Dq are [B,Sq,H*Hd] and K, V,
// Dk, Dv [B,Sq,Hkv*Hd], row-major: element (b,s,h,d) of a tensor of Heads
// heads sits at ((b*Sq+s)*Heads+h)*Hd+d. Query head h reads KV head
// h / (H/Hkv); scores are Scale q.k (Scale 0: 1/sqrt(Hd)); query i attends
// keys 0..i. bf16 computes in float, float in float, double in double.
//
// Forward, in the FlashAttention-2 manner (Dao 2023). A thread block owns Br
// query rows of one (batch, head) and walks the key blocks of Bc keys up to
// the diagonal (blocks wholly above it are never visited). Per key block it
// forms the Br x Bc scores S = Scale Q K^T, masks the keys after the query
// (and those past Sq), and updates per row the running max m, the running sum
// l and the output accumulator O (online softmax): with m' = max(m, max_j S),
//   O <- exp(m - m') O + exp(S - m') V,
//   l <- exp(m - m') l + sum_j exp(S - m').
// At the end Y = O / l and LSE = m + log l. The scores are never stored.
//
// Backward. With P = softmax(S) (masked entries 0), Y = P V, S = Scale Q K^T:
//   dV = P^T dY                     (Y is linear in V)
//   dP = dY V^T                     (Y is linear in P)
//   dS_ij = P_ij (dP_ij - D_i)      (softmax Jacobian: dP_ij/dS_ik =
//                                    P_ij (1[j=k] - P_ik)), where
//   D_i = sum_k P_ik dP_ik = dY_i . sum_k P_ik V_k = dY_i . Y_i
//   dQ = Scale dS K,  dK = Scale dS^T Q
// and the dK, dV of a KV head sum these over its group's H/Hkv query heads.
// Masked entries have P = 0, hence dS = 0. The gradient gets Dy, Q, K, V
// only, so attentionGrad runs three kernels:
//   1. the forward again, writing no Y but LSE and D = rowsum(dY * Y), with Y
//      taken from the accumulator in the compute precision;
//   2. key grad: a block per (key block, batch, KV head) keeps K, V and the dK,
//      dV accumulators, and walks the group's query heads and the query blocks
//      from the diagonal on, recomputing P = exp(Scale q.k - LSE). It owns its
//      keys, so no atomics;
//   3. query grad: a block per (query block, batch, head) keeps Q, dY and dQ
//      and walks the key blocks up to the diagonal.
// Every sum runs in a fixed order: results do not depend on scheduling.
//
// Two implementations of the three kernels:
//  - tensor cores (bf16, Hd <= 128): 4 warps, each owning 16 rows; the
//    products use nvcuda::wmma 16x16x16 bf16 fragments with float
//    accumulators. Tiles (rows owned x rows walked): forward 64 queries x 64
//    keys, key grad 64 keys x 32 queries, query grad 64 queries x 32 keys. P
//    and dS are rounded to bf16 to enter the products (as FlashAttention
//    does); softmax statistics, D and the accumulators stay float. The
//    accumulator fragment's element layout is unspecified, so the per-row
//    rescale of O reads each element's row from a fragment loaded with row
//    numbers (RowId): fragments of one type share one layout.
//  - SIMT (float, double, and bf16 with Hd > 128): square tiles of Tile rows
//    (32, or 16 when the rows are too wide for shared memory), 8 threads per
//    owned row, each thread holding every 8th column of that row.
// The head dimension is padded (with zeros) to HdP in {16, 32, 64, 128, 256};
// Hd above 256 is refused (cudaErrorInvalidValue).
//
// Scratch (attentionScratchBytes, attentionReferenceScratchBytes): LSE, then
// D, each B*H*Sq values of the compute type (float for float and bf16, double
// for double), (b, h, s) at (b*H+h)*Sq+s, each region rounded up to 256
// bytes. Only the gradients use it.
//
// The reference kernels give a thread block of 128 threads to each (batch,
// head, query) row: a pass over the keys for the row max, a second for the sum
// and the output. Their gradient computes per query row LSE, D and dQ, then
// per key dK and dV from recomputed probabilities.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/kernels/Kernels.h"
#include "runtime/cuda/kernels/RowWalk.cuh"

#include <cuda_runtime.h>
#include <mma.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

namespace weft::cuda {

namespace {

//===----------------------------------------------------------------------===//
// Common helpers
//===----------------------------------------------------------------------===//

/// The largest head dimension any of the kernels take.
constexpr int64_t MaxHeadDim = MaxAttentionHeadDim;

/// The problem's sizes; Group = H / Hkv query heads share a KV head.
struct Dims {
  int64_t B, Sq, H, Hkv, Hd, Group;
};

__host__ __device__ constexpr int64_t ceilDiv(int64_t X, int64_t Y) {
  return (X + Y - 1) / Y;
}
__host__ __device__ constexpr int64_t minI(int64_t X, int64_t Y) {
  return X < Y ? X : Y;
}
__host__ __device__ constexpr size_t roundUp(size_t X, size_t To) {
  return (X + To - 1) / To * To;
}

/// Offset of element (Bi, S, Head, 0) of a [B, Sq, Heads*Hd] tensor.
__device__ __forceinline__ int64_t rowOffset(const Dims &D, int64_t Heads,
                                             int64_t Bi, int64_t S,
                                             int64_t Head) {
  return ((Bi * D.Sq + S) * Heads + Head) * D.Hd;
}

/// Index of (Bi, Head, S) in the [B, H, Sq] statistics LSE and D.
__device__ __forceinline__ int64_t statIndex(const Dims &D, int64_t Bi,
                                             int64_t Head, int64_t S) {
  return (Bi * D.H + Head) * D.Sq + S;
}

/// A 1-D grid enumerates (tile, batch, head) with the tile index major, so
/// that the blocks of equal work run together.
struct BlockTile {
  int64_t Tile, Bi, Head;
};
__device__ __forceinline__ BlockTile blockTile(int64_t B, int64_t Heads) {
  const int64_t Blk = blockIdx.x, PerTile = B * Heads;
  return {Blk / PerTile, Blk % PerTile / Heads, Blk % Heads};
}

/// The compute type of a storage type.
template <typename T> struct ComputeOf { using Type = float; };
template <> struct ComputeOf<double> { using Type = double; };
template <typename T> using Compute = typename ComputeOf<T>::Type;

__device__ __forceinline__ float toCompute(bf16 X) {
  return __bfloat162float(X);
}
__device__ __forceinline__ float toCompute(float X) { return X; }
__device__ __forceinline__ double toCompute(double X) { return X; }

template <typename T, typename A>
__device__ __forceinline__ T fromCompute(A X) {
  if constexpr (std::is_same_v<T, bf16>)
    return __float2bfloat16_rn(X);
  else
    return T(X);
}

__device__ __forceinline__ float expC(float X) { return expf(X); }
__device__ __forceinline__ double expC(double X) { return exp(X); }
__device__ __forceinline__ float logC(float X) { return logf(X); }
__device__ __forceinline__ double logC(double X) { return log(X); }
template <typename A> __device__ __forceinline__ A maxC(A X, A Y) {
  return X > Y ? X : Y;
}
template <typename A> __device__ __forceinline__ A negInf() {
  return A(-INFINITY);
}

/// Max and sum over aligned groups of Width lanes; the whole warp calls.
template <int Width, typename A> __device__ __forceinline__ A groupMax(A X) {
#pragma unroll
  for (int Off = Width / 2; Off > 0; Off /= 2)
    X = maxC(X, __shfl_xor_sync(0xffffffffu, X, Off));
  return X;
}
template <int Width, typename A> __device__ __forceinline__ A groupSum(A X) {
#pragma unroll
  for (int Off = Width / 2; Off > 0; Off /= 2)
    X += __shfl_xor_sync(0xffffffffu, X, Off);
  return X;
}

/// One online-softmax step for a row whose running max is M: the new max
/// and the factor exp(M - MNew) for what was accumulated so far. MRef is the
/// reference to subtract from this block's scores; it is 0 while the row has
/// seen only masked scores, which keeps -inf - -inf out of exp.
template <typename A> struct SoftmaxStep { A MNew, MRef, Alpha; };
template <typename A>
__device__ __forceinline__ SoftmaxStep<A> softmaxStep(A M, A BlockMax) {
  const A MNew = maxC(M, BlockMax);
  const A MRef = MNew == negInf<A>() ? A(0) : MNew;
  return {MNew, MRef, expC(M - MRef)};
}

//===----------------------------------------------------------------------===//
// SIMT kernels (float, double; bf16 with Hd > 128)
//===----------------------------------------------------------------------===//

namespace simt {

/// Threads per owned row; each holds columns Lane8, Lane8 + 8, ...
constexpr int RowThreads = 8;

/// Rows per tile: 32, or 16 for rows of more than 512 bytes. The largest
/// block (key grad, double, HdP 256) then takes 136 KiB of shared memory,
/// within an sm_80's 163 KiB; the others take at most 84 KiB.
template <typename A, int HdP> constexpr int tile() {
  return sizeof(A) * HdP <= 512 ? 32 : 16;
}
template <typename A, int HdP> constexpr int threads() {
  return tile<A, HdP>() * RowThreads;
}
/// Row pitch of a shared tile: one spare column keeps the 8 rows that a warp
/// reads at once on distinct banks.
template <int HdP> constexpr int ld() { return HdP + 1; }

template <typename A, int HdP> constexpr size_t forwardSmem() {
  constexpr int Tl = tile<A, HdP>();
  return (3 * Tl * ld<HdP>() + Tl * (Tl + 1)) * sizeof(A);
}
template <typename A, int HdP> constexpr size_t keyGradSmem() {
  constexpr int Tl = tile<A, HdP>();
  return (4 * Tl * ld<HdP>() + 2 * Tl * (Tl + 1) + 2 * Tl) * sizeof(A);
}
template <typename A, int HdP> constexpr size_t queryGradSmem() {
  constexpr int Tl = tile<A, HdP>();
  return (4 * Tl * ld<HdP>() + Tl * (Tl + 1)) * sizeof(A);
}

/// Loads Rows rows of one head (Src: the first, rows Stride apart) into a
/// shared tile of HdP columns, zero-filling rows >= Valid and columns >= Hd.
template <int Rows, int HdP, int NT, typename A, typename T>
__device__ void loadTile(A *Dst, const T *Src, int64_t Stride, int Valid,
                         int Hd) {
  for (int Idx = threadIdx.x; Idx < Rows * HdP; Idx += NT) {
    const int R = Idx / HdP, C = Idx % HdP;
    Dst[R * ld<HdP>() + C] =
        R < Valid && C < Hd ? toCompute(Src[R * Stride + C]) : A(0);
  }
}

/// Loads the statistics of rows [I0, I0 + Rows) (0 past Sq).
template <int Rows, int NT, typename A>
__device__ void loadStats(A *Dst, const A *Src, int64_t I0, int64_t Sq) {
  for (int R = threadIdx.x; R < Rows; R += NT)
    Dst[R] = I0 + R < Sq ? Src[I0 + R] : A(0);
}

/// Forward: a block per (query tile, batch, head), the diagonal tiles (the
/// longest) first. Y, Lse, Dsum may each be null; Dsum needs Dy.
template <typename T, int HdP>
__global__ void __launch_bounds__(threads<Compute<T>, HdP>())
    forwardKernel(const T *Q, const T *K, const T *V, T *Y, Dims D,
                  Compute<T> Scale, Compute<T> *Lse, Compute<T> *Dsum,
                  const T *Dy) {
  using A = Compute<T>;
  constexpr int Tl = tile<A, HdP>(), NT = Tl * RowThreads, Ld = ld<HdP>();
  constexpr int NS = Tl / RowThreads, NC = HdP / RowThreads;
  extern __shared__ __align__(128) unsigned char Smem[];
  A *Qs = reinterpret_cast<A *>(Smem), *Ks = Qs + Tl * Ld, *Vs = Ks + Tl * Ld;
  A *Ps = Vs + Tl * Ld; // Tl x (Tl + 1) probabilities

  const BlockTile BT = blockTile(D.B, D.H);
  const int64_t Q0 = (ceilDiv(D.Sq, Tl) - 1 - BT.Tile) * Tl;
  const int64_t Kh = BT.Head / D.Group;
  const int64_t LdQ = D.H * D.Hd, LdK = D.Hkv * D.Hd;
  const int Row = threadIdx.x / RowThreads, Lane8 = threadIdx.x % RowThreads;
  const int64_t I = Q0 + Row; // this thread's query

  loadTile<Tl, HdP, NT>(Qs, Q + rowOffset(D, D.H, BT.Bi, Q0, BT.Head), LdQ,
                        int(minI(Tl, D.Sq - Q0)), int(D.Hd));

  A O[NC];
#pragma unroll
  for (int N = 0; N < NC; ++N)
    O[N] = A(0);
  A M = negInf<A>(), L = A(0);

  const int64_t KEnd = minI(Q0 + Tl, D.Sq);
  for (int64_t K0 = 0; K0 < KEnd; K0 += Tl) {
    __syncthreads(); // the previous tile's readers are done with Ks, Vs
    const int Valid = int(minI(Tl, D.Sq - K0));
    loadTile<Tl, HdP, NT>(Ks, K + rowOffset(D, D.Hkv, BT.Bi, K0, Kh), LdK,
                          Valid, int(D.Hd));
    loadTile<Tl, HdP, NT>(Vs, V + rowOffset(D, D.Hkv, BT.Bi, K0, Kh), LdK,
                          Valid, int(D.Hd));
    __syncthreads();

    // Scores of row Row against keys Lane8 + 8 J.
    A S[NS];
#pragma unroll
    for (int J = 0; J < NS; ++J)
      S[J] = A(0);
#pragma unroll 4
    for (int C = 0; C < HdP; ++C) {
      const A Qv = Qs[Row * Ld + C];
#pragma unroll
      for (int J = 0; J < NS; ++J)
        S[J] += Qv * Ks[(Lane8 + RowThreads * J) * Ld + C];
    }
    A BlockMax = negInf<A>();
#pragma unroll
    for (int J = 0; J < NS; ++J) {
      const int64_t Key = K0 + Lane8 + RowThreads * J;
      S[J] = Key <= I && Key < D.Sq ? S[J] * Scale : negInf<A>();
      BlockMax = maxC(BlockMax, S[J]);
    }
    const SoftmaxStep<A> St = softmaxStep(M, groupMax<RowThreads>(BlockMax));
    A Sum = A(0);
#pragma unroll
    for (int J = 0; J < NS; ++J) {
      const A P = expC(S[J] - St.MRef);
      Ps[Row * (Tl + 1) + Lane8 + RowThreads * J] = P;
      Sum += P;
    }
    L = L * St.Alpha + groupSum<RowThreads>(Sum);
    M = St.MNew;
    // Row Row of Ps is written and read by its 8 threads, all in this warp.
    __syncwarp();

#pragma unroll
    for (int N = 0; N < NC; ++N)
      O[N] *= St.Alpha;
#pragma unroll 2
    for (int C = 0; C < Tl; ++C) {
      const A P = Ps[Row * (Tl + 1) + C];
#pragma unroll
      for (int N = 0; N < NC; ++N)
        O[N] += P * Vs[C * Ld + Lane8 + RowThreads * N];
    }
  }

  // L > 0: key 0 is live for every row, padding rows included.
  const A InvL = A(1) / L;
  A Dot = A(0);
  if (I < D.Sq) {
    const int64_t Off = rowOffset(D, D.H, BT.Bi, I, BT.Head);
#pragma unroll
    for (int N = 0; N < NC; ++N) {
      const int C = Lane8 + RowThreads * N;
      if (C >= D.Hd)
        break;
      const A Yv = O[N] * InvL;
      if (Y)
        Y[Off + C] = fromCompute<T>(Yv);
      if (Dsum)
        Dot += toCompute(Dy[Off + C]) * Yv;
    }
  }
  if (Dsum)
    Dot = groupSum<RowThreads>(Dot);
  if (Lane8 == 0 && I < D.Sq) {
    const int64_t At = statIndex(D, BT.Bi, BT.Head, I);
    if (Lse)
      Lse[At] = M + logC(L);
    if (Dsum)
      Dsum[At] = Dot;
  }
}

/// dK, dV: a block per (key tile, batch, KV head), the first key tiles (the
/// longest walks) first. Each thread owns key Row and columns Lane8 + 8 N.
template <typename T, int HdP>
__global__ void __launch_bounds__(threads<Compute<T>, HdP>())
    keyGradKernel(const T *Dy, const T *Q, const T *K, const T *V, T *Dk, T *Dv,
                  Dims D, Compute<T> Scale, const Compute<T> *Lse,
                  const Compute<T> *Dsum) {
  using A = Compute<T>;
  constexpr int Tl = tile<A, HdP>(), NT = Tl * RowThreads, Ld = ld<HdP>();
  constexpr int NS = Tl / RowThreads, NC = HdP / RowThreads;
  extern __shared__ __align__(128) unsigned char Smem[];
  A *Ks = reinterpret_cast<A *>(Smem), *Vs = Ks + Tl * Ld;
  A *Qs = Vs + Tl * Ld, *Dys = Qs + Tl * Ld;
  A *Ps = Dys + Tl * Ld, *Gs = Ps + Tl * (Tl + 1); // [query][key]
  A *LseS = Gs + Tl * (Tl + 1), *DS = LseS + Tl;

  const BlockTile BT = blockTile(D.B, D.Hkv);
  const int64_t K0 = BT.Tile * Tl, Kh = BT.Head;
  const int64_t LdQ = D.H * D.Hd, LdK = D.Hkv * D.Hd;
  const int Row = threadIdx.x / RowThreads, Lane8 = threadIdx.x % RowThreads;
  const int64_t Key = K0 + Row;

  const int ValidK = int(minI(Tl, D.Sq - K0));
  loadTile<Tl, HdP, NT>(Ks, K + rowOffset(D, D.Hkv, BT.Bi, K0, Kh), LdK, ValidK,
                        int(D.Hd));
  loadTile<Tl, HdP, NT>(Vs, V + rowOffset(D, D.Hkv, BT.Bi, K0, Kh), LdK, ValidK,
                        int(D.Hd));
  A GK[NC], GV[NC];
#pragma unroll
  for (int N = 0; N < NC; ++N)
    GK[N] = GV[N] = A(0);

  for (int64_t Hh = Kh * D.Group; Hh < (Kh + 1) * D.Group; ++Hh) {
    const A *LseH = Lse + statIndex(D, BT.Bi, Hh, 0);
    const A *DsumH = Dsum + statIndex(D, BT.Bi, Hh, 0);
    // Queries before K0 see none of these keys: start on the diagonal.
    for (int64_t Q0 = K0; Q0 < D.Sq; Q0 += Tl) {
      __syncthreads(); // the previous tile's readers are done
      const int Valid = int(minI(Tl, D.Sq - Q0));
      loadTile<Tl, HdP, NT>(Qs, Q + rowOffset(D, D.H, BT.Bi, Q0, Hh), LdQ,
                            Valid, int(D.Hd));
      loadTile<Tl, HdP, NT>(Dys, Dy + rowOffset(D, D.H, BT.Bi, Q0, Hh), LdQ,
                            Valid, int(D.Hd));
      loadStats<Tl, NT>(LseS, LseH, Q0, D.Sq);
      loadStats<Tl, NT>(DS, DsumH, Q0, D.Sq);
      __syncthreads();

      // Key Row against queries R = Lane8 + 8 J: S and dP.
      A S[NS], Dp[NS];
#pragma unroll
      for (int J = 0; J < NS; ++J)
        S[J] = Dp[J] = A(0);
#pragma unroll 4
      for (int C = 0; C < HdP; ++C) {
        const A Kv = Ks[Row * Ld + C], Vv = Vs[Row * Ld + C];
#pragma unroll
        for (int J = 0; J < NS; ++J) {
          S[J] += Qs[(Lane8 + RowThreads * J) * Ld + C] * Kv;
          Dp[J] += Dys[(Lane8 + RowThreads * J) * Ld + C] * Vv;
        }
      }
#pragma unroll
      for (int J = 0; J < NS; ++J) {
        const int R = Lane8 + RowThreads * J;
        const int64_t Iq = Q0 + R;
        const bool Live = Key <= Iq && Iq < D.Sq;
        const A P = Live ? expC(S[J] * Scale - LseS[R]) : A(0);
        Ps[R * (Tl + 1) + Row] = P;
        Gs[R * (Tl + 1) + Row] = Live ? P * (Dp[J] - DS[R]) : A(0);
      }
      // Column Row of Ps, Gs is written and read by this row's 8 threads.
      __syncwarp();

      // dV += P^T dY, dK += dS^T Q (Scale applied at the end).
#pragma unroll 2
      for (int R = 0; R < Tl; ++R) {
        const A P = Ps[R * (Tl + 1) + Row], G = Gs[R * (Tl + 1) + Row];
#pragma unroll
        for (int N = 0; N < NC; ++N) {
          const int C = Lane8 + RowThreads * N;
          GV[N] += P * Dys[R * Ld + C];
          GK[N] += G * Qs[R * Ld + C];
        }
      }
    }
  }

  if (Key >= D.Sq)
    return;
  const int64_t Off = rowOffset(D, D.Hkv, BT.Bi, Key, Kh);
#pragma unroll
  for (int N = 0; N < NC; ++N) {
    const int C = Lane8 + RowThreads * N;
    if (C >= D.Hd)
      break;
    Dk[Off + C] = fromCompute<T>(GK[N] * Scale);
    Dv[Off + C] = fromCompute<T>(GV[N]);
  }
}

/// dQ: a block per (query tile, batch, head), the diagonal tiles first.
template <typename T, int HdP>
__global__ void __launch_bounds__(threads<Compute<T>, HdP>())
    queryGradKernel(const T *Dy, const T *Q, const T *K, const T *V, T *Dq,
                    Dims D, Compute<T> Scale, const Compute<T> *Lse,
                    const Compute<T> *Dsum) {
  using A = Compute<T>;
  constexpr int Tl = tile<A, HdP>(), NT = Tl * RowThreads, Ld = ld<HdP>();
  constexpr int NS = Tl / RowThreads, NC = HdP / RowThreads;
  extern __shared__ __align__(128) unsigned char Smem[];
  A *Qs = reinterpret_cast<A *>(Smem), *Dys = Qs + Tl * Ld;
  A *Ks = Dys + Tl * Ld, *Vs = Ks + Tl * Ld;
  A *Gs = Vs + Tl * Ld; // dS, [query][key]

  const BlockTile BT = blockTile(D.B, D.H);
  const int64_t Q0 = (ceilDiv(D.Sq, Tl) - 1 - BT.Tile) * Tl;
  const int64_t Kh = BT.Head / D.Group;
  const int64_t LdQ = D.H * D.Hd, LdK = D.Hkv * D.Hd;
  const int Row = threadIdx.x / RowThreads, Lane8 = threadIdx.x % RowThreads;
  const int64_t I = Q0 + Row;
  const bool RowLive = I < D.Sq;
  const A LseI = RowLive ? Lse[statIndex(D, BT.Bi, BT.Head, I)] : A(0);
  const A DI = RowLive ? Dsum[statIndex(D, BT.Bi, BT.Head, I)] : A(0);

  const int ValidQ = int(minI(Tl, D.Sq - Q0));
  loadTile<Tl, HdP, NT>(Qs, Q + rowOffset(D, D.H, BT.Bi, Q0, BT.Head), LdQ,
                        ValidQ, int(D.Hd));
  loadTile<Tl, HdP, NT>(Dys, Dy + rowOffset(D, D.H, BT.Bi, Q0, BT.Head), LdQ,
                        ValidQ, int(D.Hd));
  A G[NC];
#pragma unroll
  for (int N = 0; N < NC; ++N)
    G[N] = A(0);

  const int64_t KEnd = minI(Q0 + Tl, D.Sq);
  for (int64_t K0 = 0; K0 < KEnd; K0 += Tl) {
    __syncthreads(); // the previous tile's readers are done with Ks, Vs
    const int Valid = int(minI(Tl, D.Sq - K0));
    loadTile<Tl, HdP, NT>(Ks, K + rowOffset(D, D.Hkv, BT.Bi, K0, Kh), LdK,
                          Valid, int(D.Hd));
    loadTile<Tl, HdP, NT>(Vs, V + rowOffset(D, D.Hkv, BT.Bi, K0, Kh), LdK,
                          Valid, int(D.Hd));
    __syncthreads();

    // Query Row against keys Lane8 + 8 J: S and dP.
    A S[NS], Dp[NS];
#pragma unroll
    for (int J = 0; J < NS; ++J)
      S[J] = Dp[J] = A(0);
#pragma unroll 4
    for (int C = 0; C < HdP; ++C) {
      const A Qv = Qs[Row * Ld + C], Dv = Dys[Row * Ld + C];
#pragma unroll
      for (int J = 0; J < NS; ++J) {
        S[J] += Qv * Ks[(Lane8 + RowThreads * J) * Ld + C];
        Dp[J] += Dv * Vs[(Lane8 + RowThreads * J) * Ld + C];
      }
    }
#pragma unroll
    for (int J = 0; J < NS; ++J) {
      const int C = Lane8 + RowThreads * J;
      const bool Live = K0 + C <= I && RowLive;
      const A P = Live ? expC(S[J] * Scale - LseI) : A(0);
      Gs[Row * (Tl + 1) + C] = Live ? P * (Dp[J] - DI) : A(0);
    }
    // Row Row of Gs is written and read by its 8 threads, all in this warp.
    __syncwarp();

    // dQ += dS K (Scale applied at the end).
#pragma unroll 2
    for (int C = 0; C < Tl; ++C) {
      const A Gv = Gs[Row * (Tl + 1) + C];
#pragma unroll
      for (int N = 0; N < NC; ++N)
        G[N] += Gv * Ks[C * Ld + Lane8 + RowThreads * N];
    }
  }

  if (!RowLive)
    return;
  const int64_t Off = rowOffset(D, D.H, BT.Bi, I, BT.Head);
#pragma unroll
  for (int N = 0; N < NC; ++N) {
    const int C = Lane8 + RowThreads * N;
    if (C >= D.Hd)
      break;
    Dq[Off + C] = fromCompute<T>(G[N] * Scale);
  }
}

} // namespace simt

//===----------------------------------------------------------------------===//
// Tensor-core kernels (bf16, Hd <= 128)
//===----------------------------------------------------------------------===//

namespace tc {

namespace wmma = nvcuda::wmma;
using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major>;
using FragB = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major>;
/// A B operand read transposed: B[k][n] at Ptr[n * Ld + k] (K^T from K).
using FragBT =
    wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major>;
using FragC = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

/// 4 warps, each owning 16 rows of a 64-row tile.
constexpr int Warps = 4, Threads = 32 * Warps;

/// Row pitch of a bf16 tile: 8 spare columns (16 bytes) shift consecutive
/// rows by 4 banks, so the 8 rows of a fragment load hit distinct banks (and
/// keep rows 16-byte aligned, 16-row steps 32-byte aligned, as wmma needs).
constexpr int ldHalf(int Cols) { return Cols + 8; }
/// Row pitch of a float staging tile (wmma wants a multiple of 4).
constexpr int ldFloat(int Cols) { return Cols + 4; }
constexpr size_t align128(size_t X) { return roundUp(X, 128); }
constexpr size_t halfTile(int Rows, int Cols) {
  return align128(size_t(Rows) * ldHalf(Cols) * sizeof(bf16));
}
constexpr size_t floatTile(int Rows, int Cols) {
  return align128(size_t(Rows) * ldFloat(Cols) * sizeof(float));
}

/// Shared memory of the forward: Q (Br x HdP), K, V (Bc x HdP) bf16, then
/// per warp the float scores S and the bf16 probabilities P of its 16 rows
/// (16 x Bc) and three 16-float vectors (Alpha, 1/l, D).
template <int HdP> struct ForwardLayout {
  static constexpr int Br = 64, Bc = 64;
  static constexpr size_t Q = 0, K = Q + halfTile(Br, HdP),
                          V = K + halfTile(Bc, HdP),
                          Warp0 = V + halfTile(Bc, HdP);
  static constexpr size_t S = 0, P = S + floatTile(16, Bc),
                          Stats = P + halfTile(16, Bc),
                          WarpBytes = Stats + align128(3 * 16 * sizeof(float));
  static constexpr size_t Bytes = Warp0 + Warps * WarpBytes;
};

/// Key grad: K, V (Bc = 64 keys), Q, dY (Br = 32 queries), LSE and D of the
/// queries, then per warp S^T and dP^T (16 x Br float), P^T and dS^T (bf16).
template <int HdP> struct KeyGradLayout {
  static constexpr int Bc = 64, Br = 32;
  static constexpr size_t K = 0, V = K + halfTile(Bc, HdP),
                          Q = V + halfTile(Bc, HdP), Dy = Q + halfTile(Br, HdP),
                          Stats = Dy + halfTile(Br, HdP),
                          Warp0 = Stats + align128(2 * Br * sizeof(float));
  static constexpr size_t S = 0, Dp = S + floatTile(16, Br),
                          P = Dp + floatTile(16, Br), Ds = P + halfTile(16, Br),
                          WarpBytes = Ds + halfTile(16, Br);
  static constexpr size_t Bytes = Warp0 + Warps * WarpBytes;
};

/// Query grad: Q, dY (Br = 64 queries), K, V (Bc = 32 keys), then per warp S
/// and dP (16 x Bc float) and dS (bf16).
template <int HdP> struct QueryGradLayout {
  static constexpr int Br = 64, Bc = 32;
  static constexpr size_t Q = 0, Dy = Q + halfTile(Br, HdP),
                          K = Dy + halfTile(Br, HdP), V = K + halfTile(Bc, HdP),
                          Warp0 = V + halfTile(Bc, HdP);
  static constexpr size_t S = 0, Dp = S + floatTile(16, Bc),
                          Ds = Dp + floatTile(16, Bc),
                          WarpBytes = Ds + halfTile(16, Bc);
  static constexpr size_t Bytes = Warp0 + Warps * WarpBytes;
};

template <typename X>
__device__ __forceinline__ X *at(unsigned char *Base, size_t Offset) {
  return reinterpret_cast<X *>(Base + Offset);
}

/// Loads Rows rows of one head (Src: the first, rows Stride apart) into a
/// bf16 shared tile of HdP columns, zero-filling rows >= Valid and columns
/// >= Hd. Vec (Hd % 8 == 0 and Src 16-byte aligned): 16-byte pieces.
template <int Rows, int HdP>
__device__ void loadTile(bf16 *Dst, const bf16 *Src, int64_t Stride, int Valid,
                         int Hd, bool Vec) {
  constexpr int Ld = ldHalf(HdP);
  if (Vec) {
    constexpr int Pieces = HdP / 8;
    for (int Idx = threadIdx.x; Idx < Rows * Pieces; Idx += Threads) {
      const int R = Idx / Pieces, C = Idx % Pieces * 8;
      uint4 X = make_uint4(0, 0, 0, 0);
      if (R < Valid && C < Hd)
        X = *reinterpret_cast<const uint4 *>(Src + R * Stride + C);
      *reinterpret_cast<uint4 *>(Dst + R * Ld + C) = X;
    }
  } else {
    for (int Idx = threadIdx.x; Idx < Rows * HdP; Idx += Threads) {
      const int R = Idx / HdP, C = Idx % HdP;
      Dst[R * Ld + C] =
          R < Valid && C < Hd ? Src[R * Stride + C] : __float2bfloat16_rn(0.f);
    }
  }
}

/// Acc (16 x 16 NF) = sum over HdP of A (16 rows at ARows) times B^T, B being
/// 16 NF rows at BRows: the scores of 16 rows against 16 NF rows.
template <int NF, int HdP>
__device__ __forceinline__ void
rowsTimesRowsT(FragC (&Acc)[NF], const bf16 *ARows, const bf16 *BRows) {
  constexpr int Ld = ldHalf(HdP);
#pragma unroll
  for (int N = 0; N < NF; ++N)
    wmma::fill_fragment(Acc[N], 0.f);
    // The reduction loops index no fragment array: unrolling them would only
    // hoist fragment loads and raise register pressure.
#pragma unroll 2
  for (int Kd = 0; Kd < HdP; Kd += 16) {
    FragA Fa;
    wmma::load_matrix_sync(Fa, ARows + Kd, Ld);
#pragma unroll
    for (int N = 0; N < NF; ++N) {
      FragBT Fb;
      wmma::load_matrix_sync(Fb, BRows + N * 16 * Ld + Kd, Ld);
      wmma::mma_sync(Acc[N], Fa, Fb, Acc[N]);
    }
  }
}

/// Acc (16 x HdP) += A (16 x Cols bf16, pitch ldHalf(Cols)) times B (Cols
/// rows of a bf16 HdP-column tile).
template <int Cols, int HdP>
__device__ __forceinline__ void
accumulateProduct(FragC (&Acc)[HdP / 16], const bf16 *As, const bf16 *Bs) {
#pragma unroll 1
  for (int Kk = 0; Kk < Cols; Kk += 16) {
    FragA Fa;
    wmma::load_matrix_sync(Fa, As + Kk, ldHalf(Cols));
#pragma unroll
    for (int N = 0; N < HdP / 16; ++N) {
      FragB Fb;
      wmma::load_matrix_sync(Fb, Bs + Kk * ldHalf(HdP) + N * 16, ldHalf(HdP));
      wmma::mma_sync(Acc[N], Fa, Fb, Acc[N]);
    }
  }
}

template <int NF>
__device__ __forceinline__ void storeFrags(float *Dst, const FragC (&Acc)[NF],
                                           int Ld) {
#pragma unroll
  for (int N = 0; N < NF; ++N)
    wmma::store_matrix_sync(Dst + N * 16, Acc[N], Ld, wmma::mem_row_major);
}

/// Writes a warp's 16 x HdP accumulator as bf16 rows of Dst (row r at
/// Dst + r Stride; null: no write), the first Valid rows and Hd columns, by
/// way of the warp's float staging tile Stage (16 x Cols). With Dy (same
/// layout as Dst), adds each row's Dy_r . row to Dots[r].
template <int HdP, int Cols>
__device__ void storeRows(const FragC (&Acc)[HdP / 16], float *Stage, bf16 *Dst,
                          const bf16 *Dy, float *Dots, int64_t Stride,
                          int Valid, int Hd) {
  constexpr int Ld = ldFloat(Cols), Chunk = HdP < Cols ? HdP : Cols;
  const int Lane = threadIdx.x % 32;
#pragma unroll
  for (int C0 = 0; C0 < HdP; C0 += Chunk) {
    __syncwarp(); // the previous chunk's readers are done with Stage
#pragma unroll
    for (int N = 0; N < Chunk / 16; ++N)
      wmma::store_matrix_sync(Stage + N * 16, Acc[C0 / 16 + N], Ld,
                              wmma::mem_row_major);
    __syncwarp();
    for (int R = 0; R < Valid; ++R) { // Valid is warp-uniform
      float Dot = 0.f;
      for (int C = Lane; C < Chunk && C0 + C < Hd; C += 32) {
        const float X = Stage[R * Ld + C];
        if (Dst)
          Dst[R * Stride + C0 + C] = __float2bfloat16_rn(X);
        if (Dy)
          Dot += __bfloat162float(Dy[R * Stride + C0 + C]) * X;
      }
      if (Dy) {
        Dot = groupSum<32>(Dot);
        if (Lane == 0)
          Dots[R] += Dot;
      }
    }
  }
  __syncwarp();
}

/// bf16 fragments need sm_80: built for an older target, the kernels trap.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define WEFT_NO_TC 1
#endif

/// Forward: a block per (64-query tile, batch, head), diagonal tiles first.
/// Warp W owns rows Q0 + 16 W ...; in its softmax, lanes 2 R and 2 R + 1 own
/// row R, columns Half + 2 J. Y, Lse, Dsum may be null; Dsum needs Dy.
template <int HdP>
__global__ void __launch_bounds__(Threads)
    forwardKernel(const bf16 *Q, const bf16 *K, const bf16 *V, bf16 *Y, Dims D,
                  float Scale, float *Lse, float *Dsum, const bf16 *Dy,
                  bool Vec) {
#ifdef WEFT_NO_TC
  __trap();
#else
  using Lay = ForwardLayout<HdP>;
  constexpr int Br = Lay::Br, Bc = Lay::Bc, NF = HdP / 16;
  constexpr int LdH = ldHalf(HdP), LdS = ldFloat(Bc), LdP = ldHalf(Bc);
  extern __shared__ __align__(128) unsigned char Smem[];
  bf16 *Qs = at<bf16>(Smem, Lay::Q), *Ks = at<bf16>(Smem, Lay::K);
  bf16 *Vs = at<bf16>(Smem, Lay::V);
  const int Warp = threadIdx.x / 32, Lane = threadIdx.x % 32;
  unsigned char *Mine = Smem + Lay::Warp0 + Warp * Lay::WarpBytes;
  float *Ss = at<float>(Mine, Lay::S);
  bf16 *Ps = at<bf16>(Mine, Lay::P);
  float *AlphaS = at<float>(Mine, Lay::Stats), *InvLS = AlphaS + 16;
  float *DotS = AlphaS + 32;

  const BlockTile BT = blockTile(D.B, D.H);
  const int64_t Q0 = (ceilDiv(D.Sq, Br) - 1 - BT.Tile) * Br;
  const int64_t Kh = BT.Head / D.Group;
  const int64_t LdQ = D.H * D.Hd, LdK = D.Hkv * D.Hd;
  const int64_t WarpRow0 = Q0 + 16 * Warp;
  const int R = Lane / 2, Half = Lane % 2;
  const int64_t I = WarpRow0 + R; // the query of this lane's softmax row

  loadTile<Br, HdP>(Qs, Q + rowOffset(D, D.H, BT.Bi, Q0, BT.Head), LdQ,
                    int(minI(Br, D.Sq - Q0)), int(D.Hd), Vec);

  // RowId.x[e] = the row of element e of any FragC.
  for (int E = Lane; E < 256; E += 32)
    Ss[E / 16 * LdS + E % 16] = float(E / 16);
  __syncwarp();
  FragC RowId;
  wmma::load_matrix_sync(RowId, Ss, LdS, wmma::mem_row_major);

  FragC O[NF];
#pragma unroll
  for (int N = 0; N < NF; ++N)
    wmma::fill_fragment(O[N], 0.f);
  float M = -INFINITY, L = 0.f;

  const int64_t KEnd = minI(Q0 + Br, D.Sq);
  for (int64_t K0 = 0; K0 < KEnd; K0 += Bc) {
    __syncthreads(); // every warp is done with Ks, Vs, Ss, Ps (and RowId)
    const int Valid = int(minI(Bc, D.Sq - K0));
    loadTile<Bc, HdP>(Ks, K + rowOffset(D, D.Hkv, BT.Bi, K0, Kh), LdK, Valid,
                      int(D.Hd), Vec);
    loadTile<Bc, HdP>(Vs, V + rowOffset(D, D.Hkv, BT.Bi, K0, Kh), LdK, Valid,
                      int(D.Hd), Vec);
    __syncthreads();

    {
      FragC S[Bc / 16];
      rowsTimesRowsT<Bc / 16, HdP>(S, Qs + 16 * Warp * LdH, Ks);
      storeFrags(Ss, S, LdS);
    }
    __syncwarp();

    // Online softmax of row R over columns Half + 2 J.
    float Sv[Bc / 2];
    float BlockMax = -INFINITY;
#pragma unroll
    for (int J = 0; J < Bc / 2; ++J) {
      const int C = Half + 2 * J;
      const int64_t Key = K0 + C;
      Sv[J] = Key <= I && Key < D.Sq ? Ss[R * LdS + C] * Scale : -INFINITY;
      BlockMax = fmaxf(BlockMax, Sv[J]);
    }
    const SoftmaxStep<float> St = softmaxStep(M, groupMax<2>(BlockMax));
    float Sum = 0.f;
#pragma unroll
    for (int J = 0; J < Bc / 2; ++J) {
      const float P = expf(Sv[J] - St.MRef);
      Ps[R * LdP + Half + 2 * J] = __float2bfloat16_rn(P);
      Sum += P;
    }
    L = L * St.Alpha + groupSum<2>(Sum);
    M = St.MNew;
    if (Half == 0)
      AlphaS[R] = St.Alpha;
    __syncwarp();

    // O <- diag(Alpha) O + P V.
#pragma unroll
    for (int N = 0; N < NF; ++N)
#pragma unroll
      for (int E = 0; E < O[N].num_elements; ++E)
        O[N].x[E] *= AlphaS[int(RowId.x[E])];
    accumulateProduct<Bc, HdP>(O, Ps, Vs);
  }

  // L > 0: key 0 is live for every row, padding rows included.
  if (Half == 0)
    InvLS[R] = 1.f / L;
  if (Lane < 16)
    DotS[Lane] = 0.f;
  __syncwarp();
#pragma unroll
  for (int N = 0; N < NF; ++N)
#pragma unroll
    for (int E = 0; E < O[N].num_elements; ++E)
      O[N].x[E] *= InvLS[int(RowId.x[E])];

  const int Valid = int(WarpRow0 < D.Sq ? minI(16, D.Sq - WarpRow0) : 0);
  if (Valid > 0) {
    const int64_t Off = rowOffset(D, D.H, BT.Bi, WarpRow0, BT.Head);
    storeRows<HdP, Bc>(O, Ss, Y ? Y + Off : nullptr, Dsum ? Dy + Off : nullptr,
                       DotS, LdQ, Valid, int(D.Hd));
  }
  if (Half == 0 && I < D.Sq) {
    const int64_t At = statIndex(D, BT.Bi, BT.Head, I);
    if (Lse)
      Lse[At] = M + logf(L);
    if (Dsum)
      Dsum[At] = DotS[R];
  }
#endif
}

/// dK, dV: a block per (64-key tile, batch, KV head), first tiles first.
/// Warp W owns keys K0 + 16 W ...; lanes 2 R, 2 R + 1 own key R's elements
/// (columns Half + 2 J of the 16 x 32 query block).
template <int HdP>
__global__ void __launch_bounds__(Threads)
    keyGradKernel(const bf16 *Dy, const bf16 *Q, const bf16 *K, const bf16 *V,
                  bf16 *Dk, bf16 *Dv, Dims D, float Scale, const float *Lse,
                  const float *Dsum, bool Vec) {
#ifdef WEFT_NO_TC
  __trap();
#else
  using Lay = KeyGradLayout<HdP>;
  constexpr int Br = Lay::Br, Bc = Lay::Bc, NF = HdP / 16;
  constexpr int LdH = ldHalf(HdP), LdS = ldFloat(Br), LdP = ldHalf(Br);
  extern __shared__ __align__(128) unsigned char Smem[];
  bf16 *Ks = at<bf16>(Smem, Lay::K), *Vs = at<bf16>(Smem, Lay::V);
  bf16 *Qs = at<bf16>(Smem, Lay::Q), *Dys = at<bf16>(Smem, Lay::Dy);
  float *LseS = at<float>(Smem, Lay::Stats), *DS = LseS + Br;
  const int Warp = threadIdx.x / 32, Lane = threadIdx.x % 32;
  unsigned char *Mine = Smem + Lay::Warp0 + Warp * Lay::WarpBytes;
  float *Ss = at<float>(Mine, Lay::S), *Dps = at<float>(Mine, Lay::Dp);
  bf16 *Ps = at<bf16>(Mine, Lay::P), *Gs = at<bf16>(Mine, Lay::Ds);

  const BlockTile BT = blockTile(D.B, D.Hkv);
  const int64_t K0 = BT.Tile * Bc, Kh = BT.Head;
  const int64_t LdQ = D.H * D.Hd, LdK = D.Hkv * D.Hd;
  const int64_t WarpKey0 = K0 + 16 * Warp;
  const int R = Lane / 2, Half = Lane % 2;
  const int64_t Key = WarpKey0 + R;

  const int ValidK = int(minI(Bc, D.Sq - K0));
  loadTile<Bc, HdP>(Ks, K + rowOffset(D, D.Hkv, BT.Bi, K0, Kh), LdK, ValidK,
                    int(D.Hd), Vec);
  loadTile<Bc, HdP>(Vs, V + rowOffset(D, D.Hkv, BT.Bi, K0, Kh), LdK, ValidK,
                    int(D.Hd), Vec);
  FragC GK[NF], GV[NF];
#pragma unroll
  for (int N = 0; N < NF; ++N) {
    wmma::fill_fragment(GK[N], 0.f);
    wmma::fill_fragment(GV[N], 0.f);
  }

  for (int64_t Hh = Kh * D.Group; Hh < (Kh + 1) * D.Group; ++Hh) {
    const float *LseH = Lse + statIndex(D, BT.Bi, Hh, 0);
    const float *DsumH = Dsum + statIndex(D, BT.Bi, Hh, 0);
    // Queries before K0 see none of these keys: start on the diagonal.
    for (int64_t Q0 = K0; Q0 < D.Sq; Q0 += Br) {
      __syncthreads(); // every warp is done with Qs, Dys, LseS, DS
      const int Valid = int(minI(Br, D.Sq - Q0));
      loadTile<Br, HdP>(Qs, Q + rowOffset(D, D.H, BT.Bi, Q0, Hh), LdQ, Valid,
                        int(D.Hd), Vec);
      loadTile<Br, HdP>(Dys, Dy + rowOffset(D, D.H, BT.Bi, Q0, Hh), LdQ, Valid,
                        int(D.Hd), Vec);
      for (int Rr = threadIdx.x; Rr < Br; Rr += Threads) {
        LseS[Rr] = Rr < Valid ? LseH[Q0 + Rr] : 0.f;
        DS[Rr] = Rr < Valid ? DsumH[Q0 + Rr] : 0.f;
      }
      __syncthreads();
      // Skip when every query of the block precedes every key of the warp,
      // or the warp's keys are all past Sq (warp-uniform).
      if (Q0 + Br - 1 < WarpKey0 || WarpKey0 >= D.Sq)
        continue;

      {
        FragC F[Br / 16];
        rowsTimesRowsT<Br / 16, HdP>(F, Ks + 16 * Warp * LdH, Qs); // S^T
        storeFrags(Ss, F, LdS);
        rowsTimesRowsT<Br / 16, HdP>(F, Vs + 16 * Warp * LdH, Dys); // dP^T
        storeFrags(Dps, F, LdS);
      }
      __syncwarp();
#pragma unroll
      for (int J = 0; J < Br / 2; ++J) {
        const int C = Half + 2 * J;
        const int64_t Iq = Q0 + C;
        const bool Live = Key <= Iq && Iq < D.Sq;
        const float P = Live ? expf(Ss[R * LdS + C] * Scale - LseS[C]) : 0.f;
        const float G = Live ? P * (Dps[R * LdS + C] - DS[C]) : 0.f;
        Ps[R * LdP + C] = __float2bfloat16_rn(P);
        Gs[R * LdP + C] = __float2bfloat16_rn(G);
      }
      __syncwarp();
      accumulateProduct<Br, HdP>(GV, Ps, Dys); // dV += P^T dY
      accumulateProduct<Br, HdP>(GK, Gs, Qs);  // dK += dS^T Q
    }
  }

  // Scale the dK accumulator; write dK then dV through the warp's Ss.
#pragma unroll
  for (int N = 0; N < NF; ++N)
#pragma unroll
    for (int E = 0; E < GK[N].num_elements; ++E)
      GK[N].x[E] *= Scale;
  const int Valid = int(WarpKey0 < D.Sq ? minI(16, D.Sq - WarpKey0) : 0);
  if (Valid > 0) {
    const int64_t Off = rowOffset(D, D.Hkv, BT.Bi, WarpKey0, Kh);
    storeRows<HdP, Br>(GK, Ss, Dk + Off, nullptr, nullptr, LdK, Valid,
                       int(D.Hd));
    storeRows<HdP, Br>(GV, Ss, Dv + Off, nullptr, nullptr, LdK, Valid,
                       int(D.Hd));
  }
#endif
}

/// dQ: a block per (64-query tile, batch, head), diagonal tiles first. Warp
/// W owns queries Q0 + 16 W ...; lanes 2 R, 2 R + 1 own row R's elements.
template <int HdP>
__global__ void __launch_bounds__(Threads)
    queryGradKernel(const bf16 *Dy, const bf16 *Q, const bf16 *K, const bf16 *V,
                    bf16 *Dq, Dims D, float Scale, const float *Lse,
                    const float *Dsum, bool Vec) {
#ifdef WEFT_NO_TC
  __trap();
#else
  using Lay = QueryGradLayout<HdP>;
  constexpr int Br = Lay::Br, Bc = Lay::Bc, NF = HdP / 16;
  constexpr int LdH = ldHalf(HdP), LdS = ldFloat(Bc), LdP = ldHalf(Bc);
  extern __shared__ __align__(128) unsigned char Smem[];
  bf16 *Qs = at<bf16>(Smem, Lay::Q), *Dys = at<bf16>(Smem, Lay::Dy);
  bf16 *Ks = at<bf16>(Smem, Lay::K), *Vs = at<bf16>(Smem, Lay::V);
  const int Warp = threadIdx.x / 32, Lane = threadIdx.x % 32;
  unsigned char *Mine = Smem + Lay::Warp0 + Warp * Lay::WarpBytes;
  float *Ss = at<float>(Mine, Lay::S), *Dps = at<float>(Mine, Lay::Dp);
  bf16 *Gs = at<bf16>(Mine, Lay::Ds);

  const BlockTile BT = blockTile(D.B, D.H);
  const int64_t Q0 = (ceilDiv(D.Sq, Br) - 1 - BT.Tile) * Br;
  const int64_t Kh = BT.Head / D.Group;
  const int64_t LdQ = D.H * D.Hd, LdK = D.Hkv * D.Hd;
  const int64_t WarpRow0 = Q0 + 16 * Warp;
  const int R = Lane / 2, Half = Lane % 2;
  const int64_t I = WarpRow0 + R;
  const bool RowLive = I < D.Sq;
  const float LseI = RowLive ? Lse[statIndex(D, BT.Bi, BT.Head, I)] : 0.f;
  const float DI = RowLive ? Dsum[statIndex(D, BT.Bi, BT.Head, I)] : 0.f;

  const int ValidQ = int(minI(Br, D.Sq - Q0));
  loadTile<Br, HdP>(Qs, Q + rowOffset(D, D.H, BT.Bi, Q0, BT.Head), LdQ, ValidQ,
                    int(D.Hd), Vec);
  loadTile<Br, HdP>(Dys, Dy + rowOffset(D, D.H, BT.Bi, Q0, BT.Head), LdQ,
                    ValidQ, int(D.Hd), Vec);
  FragC G[NF];
#pragma unroll
  for (int N = 0; N < NF; ++N)
    wmma::fill_fragment(G[N], 0.f);

  const int64_t KEnd = minI(Q0 + Br, D.Sq);
  for (int64_t K0 = 0; K0 < KEnd; K0 += Bc) {
    __syncthreads(); // every warp is done with Ks, Vs
    const int Valid = int(minI(Bc, D.Sq - K0));
    loadTile<Bc, HdP>(Ks, K + rowOffset(D, D.Hkv, BT.Bi, K0, Kh), LdK, Valid,
                      int(D.Hd), Vec);
    loadTile<Bc, HdP>(Vs, V + rowOffset(D, D.Hkv, BT.Bi, K0, Kh), LdK, Valid,
                      int(D.Hd), Vec);
    __syncthreads();
    // Skip when every key follows every query of the warp, or the warp's
    // queries are all past Sq (warp-uniform).
    if (K0 > WarpRow0 + 15 || WarpRow0 >= D.Sq)
      continue;

    {
      FragC F[Bc / 16];
      rowsTimesRowsT<Bc / 16, HdP>(F, Qs + 16 * Warp * LdH, Ks); // S
      storeFrags(Ss, F, LdS);
      rowsTimesRowsT<Bc / 16, HdP>(F, Dys + 16 * Warp * LdH, Vs); // dP
      storeFrags(Dps, F, LdS);
    }
    __syncwarp();
#pragma unroll
    for (int J = 0; J < Bc / 2; ++J) {
      const int C = Half + 2 * J;
      const bool Live = K0 + C <= I && RowLive;
      const float P = Live ? expf(Ss[R * LdS + C] * Scale - LseI) : 0.f;
      const float Gv = Live ? P * (Dps[R * LdS + C] - DI) : 0.f;
      Gs[R * LdP + C] = __float2bfloat16_rn(Gv);
    }
    __syncwarp();
    accumulateProduct<Bc, HdP>(G, Gs, Ks); // dQ += dS K
  }

#pragma unroll
  for (int N = 0; N < NF; ++N)
#pragma unroll
    for (int E = 0; E < G[N].num_elements; ++E)
      G[N].x[E] *= Scale;
  const int Valid = int(WarpRow0 < D.Sq ? minI(16, D.Sq - WarpRow0) : 0);
  if (Valid > 0)
    storeRows<HdP, Bc>(G, Ss, Dq + rowOffset(D, D.H, BT.Bi, WarpRow0, BT.Head),
                       nullptr, nullptr, LdQ, Valid, int(D.Hd));
#endif
}

#undef WEFT_NO_TC

} // namespace tc

//===----------------------------------------------------------------------===//
// Reference kernels
//===----------------------------------------------------------------------===//

namespace ref {

constexpr int Threads = 128, Warps = Threads / 32;
/// Columns per thread of a row accumulator (column threadIdx.x + Threads N).
constexpr int PerThread = MaxHeadDim / Threads;

/// The block's max or sum of X, in a fixed order; every thread gets it.
template <bool IsMax, typename A> __device__ A blockReduce(A X, A *Buf) {
  X = IsMax ? groupMax<32>(X) : groupSum<32>(X);
  __syncthreads(); // Buf's previous readers are done
  if (threadIdx.x % 32 == 0)
    Buf[threadIdx.x / 32] = X;
  __syncthreads();
  X = Buf[0];
  for (int W = 1; W < Warps; ++W)
    X = IsMax ? maxC(X, Buf[W]) : X + Buf[W];
  return X;
}

using rows::accumulateRows;
using rows::dot;
using rows::loadRow;

/// Forward: a block per (batch, head, query), the query index minor.
template <typename T>
__global__ void __launch_bounds__(Threads)
    forwardKernel(const T *Q, const T *K, const T *V, T *Y, Dims D,
                  Compute<T> Scale) {
  using A = Compute<T>;
  __shared__ A Qs[MaxHeadDim], Ps[Threads], Buf[Warps];
  const int64_t Blk = blockIdx.x, I = Blk % D.Sq, BH = Blk / D.Sq;
  const int64_t Bi = BH / D.H, Hh = BH % D.H, Kh = Hh / D.Group;
  const int64_t LdK = D.Hkv * D.Hd;
  const T *KRows = K + rowOffset(D, D.Hkv, Bi, 0, Kh);
  const T *VRows = V + rowOffset(D, D.Hkv, Bi, 0, Kh);
  const int64_t Off = rowOffset(D, D.H, Bi, I, Hh);
  loadRow(Qs, Q + Off, D.Hd);
  __syncthreads();

  A M = negInf<A>();
  for (int64_t J = threadIdx.x; J <= I; J += Threads)
    M = maxC(M, Scale * dot(Qs, KRows + J * LdK, D.Hd));
  M = blockReduce<true>(M, Buf);

  A Sum = A(0), Acc[PerThread] = {};
  for (int64_t J0 = 0; J0 <= I; J0 += Threads) {
    const int64_t J = J0 + threadIdx.x;
    const A P =
        J <= I ? expC(Scale * dot(Qs, KRows + J * LdK, D.Hd) - M) : A(0);
    Sum += P;
    __syncthreads(); // the previous chunk's readers are done with Ps
    Ps[threadIdx.x] = P;
    __syncthreads();
    accumulateRows(Acc, Ps, int(minI(Threads, I + 1 - J0)), VRows + J0 * LdK,
                   LdK, D.Hd);
  }
  Sum = blockReduce<false>(Sum, Buf);
#pragma unroll
  for (int N = 0; N < PerThread; ++N) {
    const int64_t C = threadIdx.x + Threads * N;
    if (C < D.Hd)
      Y[Off + C] = fromCompute<T>(Acc[N] / Sum);
  }
}

/// Gradient, per (batch, head, query) row: LSE and D = sum_j P_j dP_j into
/// the scratch, and dQ = Scale sum_j P_j (dP_j - D) k_j.
template <typename T>
__global__ void __launch_bounds__(Threads)
    rowGradKernel(const T *Dy, const T *Q, const T *K, const T *V, T *Dq,
                  Dims D, Compute<T> Scale, Compute<T> *Lse, Compute<T> *Dsum) {
  using A = Compute<T>;
  __shared__ A Qs[MaxHeadDim], Dys[MaxHeadDim], Gs[Threads], Buf[Warps];
  const int64_t Blk = blockIdx.x, I = Blk % D.Sq, BH = Blk / D.Sq;
  const int64_t Bi = BH / D.H, Hh = BH % D.H, Kh = Hh / D.Group;
  const int64_t LdK = D.Hkv * D.Hd;
  const T *KRows = K + rowOffset(D, D.Hkv, Bi, 0, Kh);
  const T *VRows = V + rowOffset(D, D.Hkv, Bi, 0, Kh);
  const int64_t Off = rowOffset(D, D.H, Bi, I, Hh);
  loadRow(Qs, Q + Off, D.Hd);
  loadRow(Dys, Dy + Off, D.Hd);
  __syncthreads();

  A M = negInf<A>();
  for (int64_t J = threadIdx.x; J <= I; J += Threads)
    M = maxC(M, Scale * dot(Qs, KRows + J * LdK, D.Hd));
  M = blockReduce<true>(M, Buf);

  A Sum = A(0), PDp = A(0);
  for (int64_t J = threadIdx.x; J <= I; J += Threads) {
    const A P = expC(Scale * dot(Qs, KRows + J * LdK, D.Hd) - M);
    Sum += P;
    PDp += P * dot(Dys, VRows + J * LdK, D.Hd);
  }
  Sum = blockReduce<false>(Sum, Buf);
  const A DI = blockReduce<false>(PDp, Buf) / Sum;

  A Acc[PerThread] = {};
  for (int64_t J0 = 0; J0 <= I; J0 += Threads) {
    const int64_t J = J0 + threadIdx.x;
    A G = A(0);
    if (J <= I) {
      const A P = expC(Scale * dot(Qs, KRows + J * LdK, D.Hd) - M) / Sum;
      G = P * (dot(Dys, VRows + J * LdK, D.Hd) - DI);
    }
    __syncthreads(); // the previous chunk's readers are done with Gs
    Gs[threadIdx.x] = G;
    __syncthreads();
    accumulateRows(Acc, Gs, int(minI(Threads, I + 1 - J0)), KRows + J0 * LdK,
                   LdK, D.Hd);
  }
#pragma unroll
  for (int N = 0; N < PerThread; ++N) {
    const int64_t C = threadIdx.x + Threads * N;
    if (C < D.Hd)
      Dq[Off + C] = fromCompute<T>(Scale * Acc[N]);
  }
  if (threadIdx.x == 0) {
    Lse[statIndex(D, Bi, Hh, I)] = M + logC(Sum);
    Dsum[statIndex(D, Bi, Hh, I)] = DI;
  }
}

/// Gradient, per (batch, KV head, key): over the group's heads and the
/// queries i >= key, dV = sum P_i dy_i and dK = Scale sum P_i (dP_i - D_i) q_i.
template <typename T>
__global__ void __launch_bounds__(Threads)
    keyGradKernel(const T *Dy, const T *Q, const T *K, const T *V, T *Dk, T *Dv,
                  Dims D, Compute<T> Scale, const Compute<T> *Lse,
                  const Compute<T> *Dsum) {
  using A = Compute<T>;
  __shared__ A Ks[MaxHeadDim], Vs[MaxHeadDim], Ps[Threads], Gs[Threads];
  const int64_t Blk = blockIdx.x, J = Blk % D.Sq, BK = Blk / D.Sq;
  const int64_t Bi = BK / D.Hkv, Kh = BK % D.Hkv;
  const int64_t LdQ = D.H * D.Hd;
  const int64_t Off = rowOffset(D, D.Hkv, Bi, J, Kh);
  loadRow(Ks, K + Off, D.Hd);
  loadRow(Vs, V + Off, D.Hd);
  __syncthreads();

  A AccK[PerThread] = {}, AccV[PerThread] = {};
  for (int64_t Hh = Kh * D.Group; Hh < (Kh + 1) * D.Group; ++Hh) {
    const T *QRows = Q + rowOffset(D, D.H, Bi, 0, Hh);
    const T *DyRows = Dy + rowOffset(D, D.H, Bi, 0, Hh);
    for (int64_t I0 = J; I0 < D.Sq; I0 += Threads) {
      const int64_t I = I0 + threadIdx.x;
      A P = A(0), G = A(0);
      if (I < D.Sq) {
        const int64_t At = statIndex(D, Bi, Hh, I);
        P = expC(Scale * dot(Ks, QRows + I * LdQ, D.Hd) - Lse[At]);
        G = P * (dot(Vs, DyRows + I * LdQ, D.Hd) - Dsum[At]);
      }
      __syncthreads(); // the previous chunk's readers are done
      Ps[threadIdx.x] = P;
      Gs[threadIdx.x] = G;
      __syncthreads();
      const int Count = int(minI(Threads, D.Sq - I0));
      accumulateRows(AccV, Ps, Count, DyRows + I0 * LdQ, LdQ, D.Hd);
      accumulateRows(AccK, Gs, Count, QRows + I0 * LdQ, LdQ, D.Hd);
    }
  }
#pragma unroll
  for (int N = 0; N < PerThread; ++N) {
    const int64_t C = threadIdx.x + Threads * N;
    if (C < D.Hd) {
      Dk[Off + C] = fromCompute<T>(Scale * AccK[N]);
      Dv[Off + C] = fromCompute<T>(AccV[N]);
    }
  }
}

} // namespace ref

//===----------------------------------------------------------------------===//
// Host side
//===----------------------------------------------------------------------===//

constexpr int64_t MaxGrid = 0x7fffffff; // gridDim.x limit

/// Validates the sizes; Empty: nothing to compute (B or Sq is 0).
cudaError_t makeDims(int64_t B, int64_t Sq, int64_t H, int64_t Hkv, int64_t Hd,
                     Dims &D, bool &Empty) {
  if (B < 0 || Sq < 0 || H <= 0 || Hkv <= 0 || H % Hkv != 0 || Hd <= 0 ||
      Hd > MaxHeadDim)
    return cudaErrorInvalidValue;
  D = {B, Sq, H, Hkv, Hd, H / Hkv};
  Empty = B == 0 || Sq == 0;
  // Keep every element offset far from int64 overflow.
  if (!Empty && double(B) * double(Sq) * double(H) * double(Hd) > 0x1p60)
    return cudaErrorInvalidValue;
  return cudaSuccess;
}

/// Scale 0 (or below, as on the CPU) means 1/sqrt(Hd).
double resolveScale(double Scale, int64_t Hd) {
  return Scale > 0 ? Scale : 1.0 / std::sqrt(double(Hd));
}

/// Bytes of one [B, H, Sq] statistics region (LSE or D), 256-aligned.
size_t statBytes(int64_t B, int64_t Sq, int64_t H, size_t ComputeBytes) {
  return roundUp(size_t(B) * size_t(H) * size_t(Sq) * ComputeBytes, 256);
}

bool aligned16(const void *P) {
  return reinterpret_cast<uintptr_t>(P) % 16 == 0;
}

/// Lets Kernel use Bytes of dynamic shared memory (above 48 KiB: opt in).
template <typename Kernel> cudaError_t allowSmem(Kernel *F, size_t Bytes) {
  if (Bytes <= 48 * 1024)
    return cudaSuccess;
  return cudaFuncSetAttribute(F, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              int(Bytes));
}

template <int N> using HdTag = std::integral_constant<int, N>;

/// Calls F with the padded head dimension HdP >= Hd, up to MaxHdP.
template <int MaxHdP, typename Fn> cudaError_t dispatchHd(int64_t Hd, Fn &&F) {
  if (Hd <= 16)
    return F(HdTag<16>());
  if (Hd <= 32)
    return F(HdTag<32>());
  if (Hd <= 64)
    return F(HdTag<64>());
  if constexpr (MaxHdP >= 128) {
    if (Hd <= 128)
      return F(HdTag<128>());
  }
  if constexpr (MaxHdP >= 256) {
    if (Hd <= 256)
      return F(HdTag<256>());
  }
  return cudaErrorInvalidValue;
}

/// The forward (Y) or the gradient's statistics pass (Lse, Dsum, Dy).
template <typename T, int HdP>
cudaError_t forwardSimt(const T *Q, const T *K, const T *V, T *Y, const Dims &D,
                        double Scale, Compute<T> *Lse, Compute<T> *Dsum,
                        const T *Dy, cudaStream_t S) {
  using A = Compute<T>;
  constexpr size_t Smem = simt::forwardSmem<A, HdP>();
  auto *F = simt::forwardKernel<T, HdP>;
  if (cudaError_t E = allowSmem(F, Smem))
    return E;
  const int64_t Blocks = ceilDiv(D.Sq, simt::tile<A, HdP>()) * D.B * D.H;
  if (Blocks > MaxGrid)
    return cudaErrorInvalidValue;
  F<<<unsigned(Blocks), simt::threads<A, HdP>(), Smem, S>>>(
      Q, K, V, Y, D, A(Scale), Lse, Dsum, Dy);
  return cudaGetLastError();
}

template <typename T, int HdP>
cudaError_t gradSimt(const T *Dy, const T *Q, const T *K, const T *V, T *Dq,
                     T *Dk, T *Dv, const Dims &D, double Scale, Compute<T> *Lse,
                     Compute<T> *Dsum, cudaStream_t S) {
  using A = Compute<T>;
  constexpr int Tl = simt::tile<A, HdP>(), NT = simt::threads<A, HdP>();
  constexpr size_t KeySmem = simt::keyGradSmem<A, HdP>();
  constexpr size_t QuerySmem = simt::queryGradSmem<A, HdP>();
  auto *FK = simt::keyGradKernel<T, HdP>;
  auto *FQ = simt::queryGradKernel<T, HdP>;
  if (cudaError_t E = allowSmem(FK, KeySmem))
    return E;
  if (cudaError_t E = allowSmem(FQ, QuerySmem))
    return E;
  const int64_t KeyBlocks = ceilDiv(D.Sq, Tl) * D.B * D.Hkv;
  const int64_t QueryBlocks = ceilDiv(D.Sq, Tl) * D.B * D.H;
  if (KeyBlocks > MaxGrid || QueryBlocks > MaxGrid)
    return cudaErrorInvalidValue;
  if (cudaError_t E =
          forwardSimt<T, HdP>(Q, K, V, nullptr, D, Scale, Lse, Dsum, Dy, S))
    return E;
  FK<<<unsigned(KeyBlocks), NT, KeySmem, S>>>(Dy, Q, K, V, Dk, Dv, D, A(Scale),
                                              Lse, Dsum);
  if (cudaError_t E = cudaGetLastError())
    return E;
  FQ<<<unsigned(QueryBlocks), NT, QuerySmem, S>>>(Dy, Q, K, V, Dq, D, A(Scale),
                                                  Lse, Dsum);
  return cudaGetLastError();
}

template <int HdP>
cudaError_t forwardTc(const bf16 *Q, const bf16 *K, const bf16 *V, bf16 *Y,
                      const Dims &D, double Scale, float *Lse, float *Dsum,
                      const bf16 *Dy, bool Vec, cudaStream_t S) {
  using Lay = tc::ForwardLayout<HdP>;
  auto *F = tc::forwardKernel<HdP>;
  if (cudaError_t E = allowSmem(F, Lay::Bytes))
    return E;
  const int64_t Blocks = ceilDiv(D.Sq, Lay::Br) * D.B * D.H;
  if (Blocks > MaxGrid)
    return cudaErrorInvalidValue;
  F<<<unsigned(Blocks), tc::Threads, Lay::Bytes, S>>>(
      Q, K, V, Y, D, float(Scale), Lse, Dsum, Dy, Vec);
  return cudaGetLastError();
}

template <int HdP>
cudaError_t gradTc(const bf16 *Dy, const bf16 *Q, const bf16 *K, const bf16 *V,
                   bf16 *Dq, bf16 *Dk, bf16 *Dv, const Dims &D, double Scale,
                   float *Lse, float *Dsum, bool Vec, cudaStream_t S) {
  using KeyLay = tc::KeyGradLayout<HdP>;
  using QueryLay = tc::QueryGradLayout<HdP>;
  auto *FK = tc::keyGradKernel<HdP>;
  auto *FQ = tc::queryGradKernel<HdP>;
  if (cudaError_t E = allowSmem(FK, KeyLay::Bytes))
    return E;
  if (cudaError_t E = allowSmem(FQ, QueryLay::Bytes))
    return E;
  const int64_t KeyBlocks = ceilDiv(D.Sq, KeyLay::Bc) * D.B * D.Hkv;
  const int64_t QueryBlocks = ceilDiv(D.Sq, QueryLay::Br) * D.B * D.H;
  if (KeyBlocks > MaxGrid || QueryBlocks > MaxGrid)
    return cudaErrorInvalidValue;
  if (cudaError_t E =
          forwardTc<HdP>(Q, K, V, nullptr, D, Scale, Lse, Dsum, Dy, Vec, S))
    return E;
  FK<<<unsigned(KeyBlocks), tc::Threads, KeyLay::Bytes, S>>>(
      Dy, Q, K, V, Dk, Dv, D, float(Scale), Lse, Dsum, Vec);
  if (cudaError_t E = cudaGetLastError())
    return E;
  FQ<<<unsigned(QueryBlocks), tc::Threads, QueryLay::Bytes, S>>>(
      Dy, Q, K, V, Dq, D, float(Scale), Lse, Dsum, Vec);
  return cudaGetLastError();
}

} // namespace

//===----------------------------------------------------------------------===//
// Launchers
//===----------------------------------------------------------------------===//

size_t attentionScratchBytes(int64_t B, int64_t Sq, int64_t H, int64_t Hkv,
                             int64_t Hd, size_t ElemBytes) {
  (void)Hkv;
  (void)Hd;
  const size_t ComputeBytes = ElemBytes == sizeof(double) ? 8 : 4;
  return 2 * statBytes(B, Sq, H, ComputeBytes);
}

size_t attentionReferenceScratchBytes(int64_t B, int64_t Sq, int64_t H,
                                      int64_t Hkv, int64_t Hd,
                                      size_t ElemBytes) {
  return attentionScratchBytes(B, Sq, H, Hkv, Hd, ElemBytes);
}

template <typename T>
cudaError_t attention(const T *Q, const T *K, const T *V, T *Y, int64_t B,
                      int64_t Sq, int64_t H, int64_t Hkv, int64_t Hd,
                      double Scale, void *Scratch, cudaStream_t S) {
  (void)Scratch; // the forward keeps its statistics in registers
  Dims D;
  bool Empty;
  if (cudaError_t E = makeDims(B, Sq, H, Hkv, Hd, D, Empty))
    return E;
  if (Empty)
    return cudaSuccess;
  if (!Q || !K || !V || !Y)
    return cudaErrorInvalidValue;
  const double Sc = resolveScale(Scale, Hd);
  if constexpr (std::is_same_v<T, bf16>) {
    if (Hd <= 128) {
      const bool Vec =
          Hd % 8 == 0 && aligned16(Q) && aligned16(K) && aligned16(V);
      return dispatchHd<128>(Hd, [&](auto P) {
        return forwardTc<decltype(P)::value>(Q, K, V, Y, D, Sc, nullptr,
                                             nullptr, nullptr, Vec, S);
      });
    }
    return forwardSimt<bf16, 256>(Q, K, V, Y, D, Sc, nullptr, nullptr, nullptr,
                                  S);
  } else {
    return dispatchHd<256>(Hd, [&](auto P) {
      return forwardSimt<T, decltype(P)::value>(Q, K, V, Y, D, Sc, nullptr,
                                                nullptr, nullptr, S);
    });
  }
}

template <typename T>
cudaError_t attentionGrad(const T *Dy, const T *Q, const T *K, const T *V,
                          T *Dq, T *Dk, T *Dv, int64_t B, int64_t Sq, int64_t H,
                          int64_t Hkv, int64_t Hd, double Scale, void *Scratch,
                          cudaStream_t S) {
  using A = Compute<T>;
  Dims D;
  bool Empty;
  if (cudaError_t E = makeDims(B, Sq, H, Hkv, Hd, D, Empty))
    return E;
  if (Empty)
    return cudaSuccess;
  if (!Dy || !Q || !K || !V || !Dq || !Dk || !Dv || !Scratch ||
      !aligned16(Scratch))
    return cudaErrorInvalidValue;
  const double Sc = resolveScale(Scale, Hd);
  A *Lse = static_cast<A *>(Scratch);
  A *Dsum = reinterpret_cast<A *>(static_cast<char *>(Scratch) +
                                  statBytes(B, Sq, H, sizeof(A)));
  if constexpr (std::is_same_v<T, bf16>) {
    if (Hd <= 128) {
      const bool Vec = Hd % 8 == 0 && aligned16(Dy) && aligned16(Q) &&
                       aligned16(K) && aligned16(V);
      return dispatchHd<128>(Hd, [&](auto P) {
        return gradTc<decltype(P)::value>(Dy, Q, K, V, Dq, Dk, Dv, D, Sc, Lse,
                                          Dsum, Vec, S);
      });
    }
    return gradSimt<bf16, 256>(Dy, Q, K, V, Dq, Dk, Dv, D, Sc, Lse, Dsum, S);
  } else {
    return dispatchHd<256>(Hd, [&](auto P) {
      return gradSimt<T, decltype(P)::value>(Dy, Q, K, V, Dq, Dk, Dv, D, Sc,
                                             Lse, Dsum, S);
    });
  }
}

template <typename T>
cudaError_t attentionReference(const T *Q, const T *K, const T *V, T *Y,
                               int64_t B, int64_t Sq, int64_t H, int64_t Hkv,
                               int64_t Hd, double Scale, cudaStream_t S) {
  Dims D;
  bool Empty;
  if (cudaError_t E = makeDims(B, Sq, H, Hkv, Hd, D, Empty))
    return E;
  if (Empty)
    return cudaSuccess;
  if (!Q || !K || !V || !Y || B * H * Sq > MaxGrid)
    return cudaErrorInvalidValue;
  ref::forwardKernel<T><<<unsigned(B * H * Sq), ref::Threads, 0, S>>>(
      Q, K, V, Y, D, Compute<T>(resolveScale(Scale, Hd)));
  return cudaGetLastError();
}

template <typename T>
cudaError_t attentionGradReference(const T *Dy, const T *Q, const T *K,
                                   const T *V, T *Dq, T *Dk, T *Dv, int64_t B,
                                   int64_t Sq, int64_t H, int64_t Hkv,
                                   int64_t Hd, double Scale, void *Scratch,
                                   cudaStream_t S) {
  using A = Compute<T>;
  Dims D;
  bool Empty;
  if (cudaError_t E = makeDims(B, Sq, H, Hkv, Hd, D, Empty))
    return E;
  if (Empty)
    return cudaSuccess;
  if (!Dy || !Q || !K || !V || !Dq || !Dk || !Dv || !Scratch ||
      !aligned16(Scratch) || B * H * Sq > MaxGrid)
    return cudaErrorInvalidValue;
  const A Sc = A(resolveScale(Scale, Hd));
  A *Lse = static_cast<A *>(Scratch);
  A *Dsum = reinterpret_cast<A *>(static_cast<char *>(Scratch) +
                                  statBytes(B, Sq, H, sizeof(A)));
  ref::rowGradKernel<T><<<unsigned(B * H * Sq), ref::Threads, 0, S>>>(
      Dy, Q, K, V, Dq, D, Sc, Lse, Dsum);
  if (cudaError_t E = cudaGetLastError())
    return E;
  ref::keyGradKernel<T><<<unsigned(B * Hkv * Sq), ref::Threads, 0, S>>>(
      Dy, Q, K, V, Dk, Dv, D, Sc, Lse, Dsum);
  return cudaGetLastError();
}

#define WEFT_INSTANTIATE(T)                                                    \
  template cudaError_t attention<T>(const T *, const T *, const T *, T *,      \
                                    int64_t, int64_t, int64_t, int64_t,        \
                                    int64_t, double, void *, cudaStream_t);    \
  template cudaError_t attentionGrad<T>(                                       \
      const T *, const T *, const T *, const T *, T *, T *, T *, int64_t,      \
      int64_t, int64_t, int64_t, int64_t, double, void *, cudaStream_t);       \
  template cudaError_t attentionReference<T>(                                  \
      const T *, const T *, const T *, T *, int64_t, int64_t, int64_t,         \
      int64_t, int64_t, double, cudaStream_t);                                 \
  template cudaError_t attentionGradReference<T>(                              \
      const T *, const T *, const T *, const T *, T *, T *, T *, int64_t,      \
      int64_t, int64_t, int64_t, int64_t, double, void *, cudaStream_t);

WEFT_INSTANTIATE(float)
WEFT_INSTANTIATE(double)
WEFT_INSTANTIATE(bf16)

#undef WEFT_INSTANTIATE

} // namespace weft::cuda
