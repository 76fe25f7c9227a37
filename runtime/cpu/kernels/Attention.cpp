//===- Attention.cpp - multi-head (GQA) attention and its gradient --------===//
//
// Per (batch, head) the scores are computed in row blocks of RowBlock queries:
// causal, block [i0,i1) needs keys [0,i1) only, which skips most of the
// masked upper triangle; bidirectional (an encoder's), it reads every key.
// Under context parallelism the queries are a block of the sequence, in
// runs of consecutive global positions (QueryRun: one run, or two under
// head-tail load balancing), and the keys are the whole sequence in order:
// every index below that compares a query with a key is global.
// The products (AttentionProducts.h) run single-threaded: AVX-512
// micro-kernels on packed copies of the head, or BLAS reading Q/K/V in place
// in the [B,S,H*hd] layout through their leading dimension (as always, see
// Threads.cpp). The (batch, head) loop is the parallel one. Scratch per
// thread: one block of probabilities, one of their gradients, and the packed
// head (Kernels.h, attentionScratchPerThread).
//
//===----------------------------------------------------------------------===//
#include "program/SeqChunks.h"
#include "runtime/cpu/kernels/AttentionProducts.h"
#include "runtime/cpu/kernels/Avx512.h"
#include "runtime/cpu/kernels/Blas.h"
#include "runtime/cpu/kernels/FastMath.h"
#include "runtime/cpu/kernels/Kernels.h"
#include "runtime/cpu/kernels/Parallel.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

namespace weft::cpu {

namespace {

constexpr int64_t RowBlock = AttentionRowBlock;

/// Softmax of rows [I0, I1) of a scores block (row r of the block holds
/// global query I0+r; columns [0, KEnd) are valid), masking keys after the
/// query when causal (KEnd = I1 then), else over all KEnd keys.
template <typename T>
WEFT_CLONE_BODY void softmaxRows(T *P, int64_t Ld, int64_t I0, int64_t I1,
                                 int64_t KEnd, bool Causal) {
  for (int64_t I = I0; I < I1; ++I) {
    T *Row = P + (I - I0) * Ld;
    int64_t N = Causal ? I + 1 : KEnd;
    softmaxRow(Row, Row, N);
    for (int64_t J = N; J < KEnd; ++J)
      Row[J] = T(0);
  }
}

WEFT_SIMD_CLONES void softmaxRowsF(float *P, int64_t Ld, int64_t I0, int64_t I1,
                                   int64_t KEnd, bool Causal) {
  softmaxRows(P, Ld, I0, I1, KEnd, Causal);
}

template <typename T>
void softmaxBlock(T *P, int64_t Ld, int64_t I0, int64_t I1, int64_t KEnd,
                  bool Causal) {
  if constexpr (std::is_same_v<T, float>)
    if (cpuHasAvx512()) {
      for (int64_t I = I0; I < I1; ++I)
        softmaxRowAvx512(P + (I - I0) * Ld, P + (I - I0) * Ld,
                         Causal ? I + 1 : KEnd, KEnd);
      return;
    }
  byType<T>(softmaxRowsF, softmaxRows<T>, P, Ld, I0, I1, KEnd, Causal);
}

/// dS = P (dP - rowsum(P dP)) for one row, in place in DR.
WEFT_SIMD_CLONES void softmaxGradRowF(const float *PR, float *DR, int64_t N,
                                      int64_t KEnd) {
  softmaxGradRow(PR, DR, DR, N, KEnd);
}

template <typename T>
void softmaxGradRows(const T *P, T *DP, int64_t Ld, int64_t G0, int64_t G1,
                     int64_t KEnd, bool Causal) {
  for (int64_t I = G0; I < G1; ++I) {
    const T *PR = P + (I - G0) * Ld;
    T *DR = DP + (I - G0) * Ld;
    const int64_t N = Causal ? I + 1 : KEnd;
    if constexpr (std::is_same_v<T, float>) {
      if (cpuHasAvx512())
        softmaxGradRowAvx512(PR, DR, DR, N, KEnd);
      else
        softmaxGradRowF(PR, DR, N, KEnd);
    } else
      softmaxGradRow(PR, DR, DR, N, KEnd);
  }
}

// Packed documents: query I of a row reads keys [I - Pos[I], I], its own
// document's, and within a sliding window W keys past I - W only. Key
// padding: the row's tokens are keys [F, E) = Span[0..1], which every query
// of a bidirectional attention reads, and a causal query I up to I (one
// before F, which has no key, reads itself). The others' probabilities
// are 0. I0, I1 and I are global; Pos holds the block's local queries, query
// I at Pos[I + Off].
template <typename T>
void softmaxDocumentRows(T *P, int64_t Ld, int64_t I0, int64_t I1, int64_t KEnd,
                         const int32_t *Pos, int64_t Off, int64_t Window,
                         const int32_t *Span, bool Causal) {
  for (int64_t I = I0; I < I1; ++I) {
    T *Row = P + (I - I0) * Ld;
    int64_t Lo = Pos ? I - Pos[I + Off] : 0, Hi = Causal ? I : KEnd - 1;
    if (Window > 0)
      Lo = std::max<int64_t>(Lo, I - Window + 1);
    if (Span) {
      Lo = std::max<int64_t>(Lo, Span[0]);
      Hi = std::min<int64_t>(Hi, Span[1] - 1);
      if (Lo > Hi)
        Lo = Hi = I;
    }
    // Keys Lo..Hi, as one row of Hi + 1 - Lo keys, all read.
    softmaxBlock(Row + Lo, Ld, I, I + 1, Hi + 1 - Lo, false);
    for (int64_t J = 0; J < Lo; ++J)
      Row[J] = T(0);
    for (int64_t J = Hi + 1; J < KEnd; ++J)
      Row[J] = T(0);
  }
}

template <typename T>
void softmaxFor(T *P, int64_t Ld, int64_t I0, int64_t I1, int64_t KEnd,
                bool Causal, const AttentionDocuments *Docs, int64_t Bi,
                int64_t Off) {
  if (Docs)
    softmaxDocumentRows(P, Ld, I0, I1, KEnd,
                        Docs->Pos ? Docs->Pos + Bi * Docs->Stride : nullptr,
                        Off, Docs->Window,
                        Docs->Span ? Docs->Span + 2 * Bi : nullptr, Causal);
  else
    softmaxBlock(P, Ld, I0, I1, KEnd, Causal);
}

} // namespace

// Scales probabilities [I0, I1) x [0, KEnd) of head (Bi, Hh) by their
// dropout factors: 0, or 1 / (1 - p). I0 and I1 are global queries of a
// sequence of S.
template <typename T>
void dropRows(T *P, int64_t Ld, int64_t Bi, int64_t Hh, int64_t S, int64_t I0,
              int64_t I1, int64_t KEnd, const AttentionDropout &D) {
  const uint64_t Head =
      uint64_t((D.BatchFirst + Bi) * D.Heads + D.HeadFirst + Hh);
  for (int64_t I = I0; I < I1; ++I) {
    const uint64_t Row = (Head * uint64_t(S) + uint64_t(I)) * uint64_t(S);
    T *R = P + (I - I0) * Ld;
    dropoutRun(R, R, KEnd, Row, D.Key);
  }
}

template <typename T>
void attention(const T *Q, const T *K, const T *V, T *Y, int64_t B, int64_t Sq,
               int64_t Sk, QueryRuns Runs, int64_t H, int64_t Hkv, int64_t Hd,
               void *Scratch, double ScaleAttr, bool Causal,
               const AttentionDropout *Drop, const AttentionDocuments *Docs) {
  const int64_t Ldq = H * Hd, Ldk = Hkv * Hd, Group = H / Hkv;
  const T Scale = T(ScaleAttr > 0 ? ScaleAttr : 1.0 / std::sqrt(double(Hd)));
  const int64_t Blk = std::min(RowBlock, Sq);
  const bool Parallel = double(B * H) * Sq * Sk * Hd > 1e6;
  const AttentionProducts<T> Prod(Sk, Hd);
  const size_t PerThread = attentionScratchPerThread(Sq, Sk, Hd);
#pragma omp parallel for schedule(dynamic, 1) if (Parallel)
  for (int64_t BH = 0; BH < B * H; ++BH) {
    int64_t Bi = BH / H, Hh = BH % H, Kh = Hh / Group;
    T *P = static_cast<T *>(Scratch) + omp_get_thread_num() * PerThread;
    // Packed for the AVX-512 products: K transposed, V by rows.
    const auto Buf = Prod.buffers(P + 2 * Blk * Sk, Sk, Blk);
    T *Kt = Buf.Kt, *Vr = Buf.Rows;
    const T *Qp = Q + Bi * Sq * Ldq + Hh * Hd;
    const T *Kp = K + Bi * Sk * Ldk + Kh * Hd;
    const T *Vp = V + Bi * Sk * Ldk + Kh * Hd;
    T *Yp = Y + Bi * Sq * Ldq + Hh * Hd;
    Prod.transposed(Kp, Ldk, Sk, Kt);
    Prod.packed(Vp, Ldk, Sk, Vr);
    for (const QueryRun &Run : Runs)
      for (int64_t I0 = Run.Local; I0 < Run.Local + Run.Rows; I0 += Blk) {
        int64_t I1 = std::min(Run.Local + Run.Rows, I0 + Blk);
        int64_t G0 = Run.Global + I0 - Run.Local, G1 = G0 + I1 - I0;
        int64_t KEnd = Causal ? G1 : Sk;
        Prod.byKeys(I1 - I0, KEnd, Scale, Qp + I0 * Ldq, Ldq, Kp, Ldk, Kt, P,
                    Sk);
        softmaxFor(P, Sk, G0, G1, KEnd, Causal, Docs, Bi,
                   Run.Local - Run.Global);
        if (Drop)
          dropRows(P, Sk, Bi, Hh, Sk, G0, G1, KEnd, *Drop);
        Prod.rows(I1 - I0, KEnd, T(1), P, Sk, Vp, Ldk, Vr, Yp + I0 * Ldq, Ldq);
      }
  }
}

// Parallel over (batch, kv head): the query heads of a group accumulate into
// the same dK/dV slice, so one task owns the whole group. dK and dV cover
// every key; under context parallelism they sum this rank's queries only.
template <typename T>
void attentionGrad(const T *Dy, const T *Q, const T *K, const T *V, T *Dq,
                   T *Dk, T *Dv, int64_t B, int64_t Sq, int64_t Sk,
                   QueryRuns Runs, int64_t H, int64_t Hkv, int64_t Hd,
                   void *Scratch, double ScaleAttr, bool Causal,
                   const AttentionDropout *Drop,
                   const AttentionDocuments *Docs) {
  const int64_t Ldq = H * Hd, Ldk = Hkv * Hd, Group = H / Hkv;
  const T Scale = T(ScaleAttr > 0 ? ScaleAttr : 1.0 / std::sqrt(double(Hd)));
  const int64_t Blk = std::min(RowBlock, Sq);
  const bool Parallel = double(B * H) * Sq * Sk * Hd > 1e6;
  const AttentionProducts<T> Prod(Sk, Hd);
  const size_t PerThread = attentionScratchPerThread(Sq, Sk, Hd);
#pragma omp parallel for schedule(dynamic, 1) if (Parallel)
  for (int64_t BK = 0; BK < B * Hkv; ++BK) {
    int64_t Bi = BK / Hkv, Kh = BK % Hkv;
    T *P = static_cast<T *>(Scratch) + omp_get_thread_num() * PerThread;
    T *DP = P + Blk * Sk;
    // Packed for the AVX-512 products: K and V transposed, K by rows, and a
    // block of queries and of their output gradients by rows.
    const auto Buf = Prod.buffers(DP + Blk * Sk, Sk, Blk);
    T *Kt = Buf.Kt, *Vt = Buf.Vt, *Kr = Buf.Rows, *Qb = Buf.Qb, *Dyb = Buf.Dyb;
    const T *Kp = K + Bi * Sk * Ldk + Kh * Hd;
    const T *Vp = V + Bi * Sk * Ldk + Kh * Hd;
    T *Dkp = Dk + Bi * Sk * Ldk + Kh * Hd;
    T *Dvp = Dv + Bi * Sk * Ldk + Kh * Hd;
    Prod.transposed(Kp, Ldk, Sk, Kt);
    Prod.transposed(Vp, Ldk, Sk, Vt);
    Prod.packed(Kp, Ldk, Sk, Kr);
    for (int64_t I = 0; I < Sk; ++I)
      for (int64_t C = 0; C < Hd; ++C) {
        Dkp[I * Ldk + C] = T(0);
        Dvp[I * Ldk + C] = T(0);
      }
    for (int64_t Hh = Kh * Group; Hh < (Kh + 1) * Group; ++Hh) {
      const T *Qp = Q + Bi * Sq * Ldq + Hh * Hd;
      const T *Dyp = Dy + Bi * Sq * Ldq + Hh * Hd;
      T *Dqp = Dq + Bi * Sq * Ldq + Hh * Hd;
      for (const QueryRun &Run : Runs)
        for (int64_t I0 = Run.Local; I0 < Run.Local + Run.Rows; I0 += Blk) {
          int64_t I1 = std::min(Run.Local + Run.Rows, I0 + Blk), M = I1 - I0;
          int64_t G0 = Run.Global + I0 - Run.Local, G1 = G0 + M;
          int64_t KEnd = Causal ? G1 : Sk;
          const T *Qi = Qp + I0 * Ldq, *Dyi = Dyp + I0 * Ldq;
          Prod.packed(Qi, Ldq, M, Qb);
          Prod.packed(Dyi, Ldq, M, Dyb);
          Prod.byKeys(M, KEnd, Scale, Qi, Ldq, Kp, Ldk, Kt, P, Sk);
          softmaxFor(P, Sk, G0, G1, KEnd, Causal, Docs, Bi,
                     Run.Local - Run.Global);
          // dV[0:kend] += P^T dY[i0:i1] (with dropout: the dropped P's, once
          // dS no longer needs P below)
          if (!Drop)
            Prod.addColumns(KEnd, M, T(1), P, Sk, Dyi, Ldq, Dyb, Dvp, Ldk);
          // dP = dY V^T (with dropout: its gradient through the mask)
          Prod.byKeys(M, KEnd, T(1), Dyi, Ldq, Vp, Ldk, Vt, DP, Sk);
          if (Drop)
            dropRows(DP, Sk, Bi, Hh, Sk, G0, G1, KEnd, *Drop);
          // dS = P (dP - rowsum(P dP)), in place in DP (P is 0 where masked).
          softmaxGradRows(P, DP, Sk, G0, G1, KEnd, Causal);
          // dQ[i0:i1] = scale dS K[0:kend]; dK[0:kend] += scale dS^T Q[i0:i1]
          Prod.rows(M, KEnd, Scale, DP, Sk, Kp, Ldk, Kr, Dqp + I0 * Ldq, Ldq);
          Prod.addColumns(KEnd, M, Scale, DP, Sk, Qi, Ldq, Qb, Dkp, Ldk);
          if (Drop) {
            dropRows(P, Sk, Bi, Hh, Sk, G0, G1, KEnd, *Drop);
            Prod.addColumns(KEnd, M, T(1), P, Sk, Dyi, Ldq, Dyb, Dvp, Ldk);
          }
        }
    }
  }
}

template <typename T>
void reorderSequence(const T *X, T *Y, int64_t B, int64_t S, int64_t W,
                     int64_t Chunks, bool ToStored) {
  const int64_t Len = S / Chunks, Block = Len * W;
  for (int64_t Bi = 0; Bi < B; ++Bi)
    for (int64_t K = 0; K < Chunks; ++K) {
      const int64_t Stored = Bi * S * W + K * Block;
      const int64_t Natural = Bi * S * W + storedChunk(K, Chunks) * Block;
      std::copy_n(X + (ToStored ? Natural : Stored), Block,
                  Y + (ToStored ? Stored : Natural));
    }
}

#define WEFT_ATTENTION(T)                                                      \
  template void attention<T>(                                                  \
      const T *, const T *, const T *, T *, int64_t, int64_t, int64_t,         \
      QueryRuns, int64_t, int64_t, int64_t, void *, double, bool,              \
      const AttentionDropout *, const AttentionDocuments *);                   \
  template void attentionGrad<T>(                                              \
      const T *, const T *, const T *, const T *, T *, T *, T *, int64_t,      \
      int64_t, int64_t, QueryRuns, int64_t, int64_t, int64_t, void *, double,  \
      bool, const AttentionDropout *, const AttentionDocuments *);             \
  template void reorderSequence<T>(const T *, T *, int64_t, int64_t, int64_t,  \
                                   int64_t, bool);
WEFT_ATTENTION(float)
WEFT_ATTENTION(double)
#undef WEFT_ATTENTION

} // namespace weft::cpu
