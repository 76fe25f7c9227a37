//===- RingAttention.cpp - ring attention's block kernels -----------------===//
//
// Context parallelism's ring (docs/design.md decision 30): the rank's block
// of queries against one block of keys at a time. Every query and key
// carries its global position (QPos, KPos: under head-tail load balancing
// the rows are out of order), and the mask compares positions: causal
// keys at or before the query, a sliding window W those within W of it.
// attentionBlock leaves the block's normalized output and the log of its
// softmax denominator (lse); softmaxMerge combines two blocks by their
// lses; attentionBlockGrad takes the whole row's output and lse, so each
// block's probabilities are exact: P = exp(scale q.k - lse). Dropout drops
// the block's probabilities where they weigh v (keyed by global positions,
// as attention's), never in the denominator, so blocks merge unchanged. Per
// (batch, KV head), the group's query heads run in row blocks of RowBlock
// queries with single-threaded GEMMs (AttentionProducts: AVX-512 on packed
// copies, or BLAS reading [B, S, H*hd] in place); the (batch, KV head) loop
// is the parallel one, so a group's dk and dv have one writer.
//
//===----------------------------------------------------------------------===//
#include "program/AttentionMask.h"
#include "runtime/cpu/kernels/AttentionProducts.h"
#include "runtime/cpu/kernels/Blas.h"
#include "runtime/cpu/kernels/FastMath.h"
#include "runtime/cpu/kernels/Kernels.h"
#include "runtime/cpu/kernels/Parallel.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace weft::cpu {

namespace {

constexpr int64_t RowBlock = 64;

struct BlockShape {
  int64_t B, Sq, Sk, H, Hkv, Hd;
  int64_t ldq() const { return H * Hd; }
  int64_t ldk() const { return Hkv * Hd; }
};

template <typename T> T scaleOf(double Scale, int64_t Hd) {
  return T(Scale > 0 ? Scale : 1.0 / std::sqrt(double(Hd)));
}

// The keys rows [I0, I0 + Rows) may see lie before KEnd: causal, one past
// the last key at or before the rows' latest position (the block's keys
// are one or two runs of rising positions, so most of a masked block is
// skipped, as attention skips its upper triangle); else all of them.
inline int64_t keyEnd(const int32_t *QPos, const int32_t *KPos, int64_t I0,
                      int64_t Rows, int64_t Sk, bool Causal) {
  if (!Causal)
    return Sk;
  const int32_t Last = *std::max_element(QPos + I0, QPos + I0 + Rows);
  int64_t End = Sk;
  while (End > 0 && KPos[End - 1] > Last)
    --End;
  return End;
}

// One row of scores over the block's keys [0, KEnd) (KPos their positions)
// to probabilities in place, the keys Keys does not hold 0; returns the
// row's log-sum-exp over the block, -inf when it sees none of its keys.
// Float rows run in a SIMD clone (vexp inlined, lane sums).
template <typename T>
WEFT_CLONE_BODY T maskedSoftmaxRow(T *Row, const int32_t *KPos, int64_t KEnd,
                                   KeyRange Keys) {
  const T NegInf = -std::numeric_limits<T>::infinity();
  T M = NegInf;
  for (int64_t J = 0; J < KEnd; ++J)
    M = Keys.has(KPos[J]) && Row[J] > M ? Row[J] : M;
  if (M == NegInf) {
    std::fill(Row, Row + KEnd, T(0));
    return NegInf;
  }
  const double Sum = laneSum<T>(KEnd, [&](int64_t J) {
    T E = Keys.has(KPos[J]) ? vexp(Row[J] - M) : T(0);
    Row[J] = E;
    return E;
  });
  const T Inv = T(1) / T(Sum);
  for (int64_t J = 0; J < KEnd; ++J)
    Row[J] *= Inv;
  return M + T(std::log(Sum));
}

// The probabilities of one row again from its log-sum-exp L.
template <typename T>
WEFT_CLONE_BODY void probabilitiesRow(T *Row, const int32_t *KPos, int64_t KEnd,
                                      KeyRange Keys, T L) {
  const T NegInf = -std::numeric_limits<T>::infinity();
  for (int64_t J = 0; J < KEnd; ++J)
    Row[J] = L != NegInf && Keys.has(KPos[J]) ? vexp(Row[J] - L) : T(0);
}

WEFT_SIMD_CLONES float maskedSoftmaxRowF(float *Row, const int32_t *KPos,
                                         int64_t KEnd, KeyRange Keys) {
  return maskedSoftmaxRow(Row, KPos, KEnd, Keys);
}

WEFT_SIMD_CLONES void probabilitiesRowF(float *Row, const int32_t *KPos,
                                        int64_t KEnd, KeyRange Keys, float L) {
  probabilitiesRow(Row, KPos, KEnd, Keys, L);
}

// Multiplies rows [I0, I0 + Rows) of query head Hq's block P by their
// dropout factors (0 or 1 / (1 - p)), keyed as attention's mask: by the
// global (sample, head, query position, key position).
template <typename T>
void dropBlock(T *P, int64_t Sk, int64_t KEnd, int64_t Bi, int64_t Hq,
               int64_t I0, int64_t Rows, const int32_t *QPos,
               const int32_t *KPos, const AttentionDropout &D) {
  const uint64_t Head =
      uint64_t((D.BatchFirst + Bi) * D.Heads + D.HeadFirst + Hq);
  const uint64_t S = uint64_t(D.Seq);
  for (int64_t R = 0; R < Rows; ++R) {
    const uint64_t Row = (Head * S + uint64_t(QPos[I0 + R])) * S;
    T *PR = P + R * Sk;
    // The block's keys are runs of consecutive positions: each run's
    // factors are a run of consecutive mask indices (cpu::dropoutRun).
    for (int64_t J = 0; J < KEnd;) {
      int64_t E = J + 1;
      while (E < KEnd && KPos[E] == KPos[E - 1] + 1)
        ++E;
      dropoutRun(PR + J, PR + J, E - J, Row + uint64_t(KPos[J]), D.Key);
      J = E;
    }
  }
}

} // namespace

// Per thread: two blocks of RowBlock x Sk, and the packed head.
static size_t ringScratchPerThread(int64_t Sk, int64_t Hd) {
  return size_t(2 * RowBlock * Sk) + attentionPackElems(Sk, RowBlock, Hd);
}

size_t ringScratchBytes(int64_t Sk, int64_t Hd, size_t Elem, int Threads) {
  return ringScratchPerThread(Sk, Hd) * Elem * size_t(std::max(Threads, 1));
}

template <typename T>
void attentionBlock(const T *Q, const T *K, const T *V, T *O, T *Lse, int64_t B,
                    int64_t Sq, int64_t Sk, const int32_t *QPos,
                    const int32_t *KPos, int64_t H, int64_t Hkv, int64_t Hd,
                    void *Scratch, double Scale, bool Causal, int64_t Window,
                    const AttentionDropout *Drop, const int32_t *DocPos,
                    int64_t DocStride, const int32_t *Spans) {
  const BlockShape D{B, Sq, Sk, H, Hkv, Hd};
  const T Sc = scaleOf<T>(Scale, Hd);
  const T NegInf = -std::numeric_limits<T>::infinity();
  const int64_t Group = H / Hkv;
  const AttentionProducts<T> Prod(Sk, Hd);
  const size_t PerThread = ringScratchPerThread(Sk, Hd);
#pragma omp parallel for schedule(dynamic)
  for (int64_t BG = 0; BG < B * Hkv; ++BG) {
    const int64_t Bi = BG / Hkv, G = BG % Hkv;
    T *S = static_cast<T *>(Scratch) + omp_get_thread_num() * PerThread;
    const T *Kg = K + Bi * Sk * D.ldk() + G * Hd;
    const T *Vg = V + Bi * Sk * D.ldk() + G * Hd;
    // Packed for the AVX-512 products: K transposed, V by rows.
    const auto Buf = Prod.buffers(S + 2 * RowBlock * Sk, Sk, RowBlock);
    Prod.transposed(Kg, D.ldk(), Sk, Buf.Kt);
    Prod.packed(Vg, D.ldk(), Sk, Buf.Rows);
    for (int64_t Hq = G * Group; Hq < (G + 1) * Group; ++Hq)
      for (int64_t I0 = 0; I0 < Sq; I0 += RowBlock) {
        const int64_t Rows = std::min(RowBlock, Sq - I0);
        const int64_t KEnd = keyEnd(QPos, KPos, I0, Rows, Sk, Causal);
        T *Out = O + (Bi * Sq + I0) * D.ldq() + Hq * Hd;
        if (KEnd == 0) { // no key of this block is visible to these rows
          for (int64_t R = 0; R < Rows; ++R) {
            std::fill(Out + R * D.ldq(), Out + R * D.ldq() + Hd, T(0));
            Lse[(Bi * H + Hq) * Sq + I0 + R] = NegInf;
          }
          continue;
        }
        const T *Qi = Q + (Bi * Sq + I0) * D.ldq() + Hq * Hd;
        Prod.byKeys(Rows, KEnd, Sc, Qi, D.ldq(), Kg, D.ldk(), Buf.Kt, S, Sk);
        for (int64_t R = 0; R < Rows; ++R) {
          T *Row = S + R * Sk;
          const KeyRange Keys =
              keyRange(QPos[I0 + R], Causal, Window,
                       DocPos ? DocPos + Bi * DocStride + I0 + R : nullptr,
                       Spans ? Spans + 2 * Bi : nullptr);
          Lse[(Bi * H + Hq) * Sq + I0 + R] = byType<T>(
              maskedSoftmaxRowF, maskedSoftmaxRow<T>, Row, KPos, KEnd, Keys);
        }
        // Dropped probabilities weigh v; the denominator counted them all.
        if (Drop)
          dropBlock(S, Sk, KEnd, Bi, Hq, I0, Rows, QPos, KPos, *Drop);
        Prod.rows(Rows, KEnd, T(1), S, Sk, Vg, D.ldk(), Buf.Rows, Out, D.ldq());
      }
  }
}

template <typename T>
void softmaxMerge(const T *O1, const T *L1, const T *O2, const T *L2, T *O,
                  T *L, int64_t B, int64_t S, int64_t H, int64_t Hd) {
  const T NegInf = -std::numeric_limits<T>::infinity();
#pragma omp parallel for
  for (int64_t BH = 0; BH < B * H; ++BH) {
    const int64_t Bi = BH / H, Hq = BH % H;
    for (int64_t I = 0; I < S; ++I) {
      const int64_t Li = BH * S + I;
      const T A = L1[Li], C = L2[Li];
      const T M = std::max(A, C);
      T Wa = T(0), Wc = T(0), Lse = NegInf;
      if (M != NegInf) {
        const T Ea = A == NegInf ? T(0) : T(std::exp(double(A - M)));
        const T Ec = C == NegInf ? T(0) : T(std::exp(double(C - M)));
        Lse = M + T(std::log(double(Ea + Ec)));
        Wa = Ea / (Ea + Ec);
        Wc = Ec / (Ea + Ec);
      }
      L[Li] = Lse;
      const int64_t Oi = (Bi * S + I) * H * Hd + Hq * Hd;
      for (int64_t X = 0; X < Hd; ++X)
        O[Oi + X] = Wa * O1[Oi + X] + Wc * O2[Oi + X];
    }
  }
}

template <typename T>
void attentionBlockGrad(const T *Dy, const T *Q, const T *K, const T *V,
                        const T *O, const T *Lse, T *Dq, T *Dk, T *Dv,
                        int64_t B, int64_t Sq, int64_t Sk, const int32_t *QPos,
                        const int32_t *KPos, int64_t H, int64_t Hkv, int64_t Hd,
                        void *Scratch, double Scale, bool Causal,
                        int64_t Window, const AttentionDropout *Drop,
                        const int32_t *DocPos, int64_t DocStride,
                        const int32_t *Spans) {
  const BlockShape D{B, Sq, Sk, H, Hkv, Hd};
  const T Sc = scaleOf<T>(Scale, Hd);
  const int64_t Group = H / Hkv;
  const AttentionProducts<T> Prod(Sk, Hd);
  const size_t PerThread = ringScratchPerThread(Sk, Hd);
#pragma omp parallel for schedule(dynamic)
  for (int64_t BG = 0; BG < B * Hkv; ++BG) {
    const int64_t Bi = BG / Hkv, G = BG % Hkv;
    T *P = static_cast<T *>(Scratch) + omp_get_thread_num() * PerThread;
    T *Dp = P + RowBlock * Sk;
    const T *Kg = K + Bi * Sk * D.ldk() + G * Hd;
    const T *Vg = V + Bi * Sk * D.ldk() + G * Hd;
    // Packed for the AVX-512 products: K and V transposed, K by rows, and a
    // block of queries and of their output gradients by rows.
    const auto Buf = Prod.buffers(Dp + RowBlock * Sk, Sk, RowBlock);
    Prod.transposed(Kg, D.ldk(), Sk, Buf.Kt);
    Prod.transposed(Vg, D.ldk(), Sk, Buf.Vt);
    Prod.packed(Kg, D.ldk(), Sk, Buf.Rows);
    T *DkG = Dk + Bi * Sk * D.ldk() + G * Hd;
    T *DvG = Dv + Bi * Sk * D.ldk() + G * Hd;
    for (int64_t J = 0; J < Sk; ++J)
      for (int64_t X = 0; X < Hd; ++X)
        DkG[J * D.ldk() + X] = DvG[J * D.ldk() + X] = T(0);
    for (int64_t Hq = G * Group; Hq < (G + 1) * Group; ++Hq)
      for (int64_t I0 = 0; I0 < Sq; I0 += RowBlock) {
        const int64_t Rows = std::min(RowBlock, Sq - I0);
        const int64_t Qoff = (Bi * Sq + I0) * D.ldq() + Hq * Hd;
        const int64_t KEnd = keyEnd(QPos, KPos, I0, Rows, Sk, Causal);
        if (KEnd == 0) { // these rows see no key of this block
          for (int64_t R = 0; R < Rows; ++R)
            std::fill(Dq + Qoff + R * D.ldq(), Dq + Qoff + R * D.ldq() + Hd,
                      T(0));
          continue;
        }
        const T *Qi = Q + Qoff, *Dyi = Dy + Qoff;
        Prod.packed(Qi, D.ldq(), Rows, Buf.Qb);
        Prod.packed(Dyi, D.ldq(), Rows, Buf.Dyb);
        Prod.byKeys(Rows, KEnd, Sc, Qi, D.ldq(), Kg, D.ldk(), Buf.Kt, P, Sk);
        for (int64_t R = 0; R < Rows; ++R) {
          T *Row = P + R * Sk;
          const KeyRange Keys =
              keyRange(QPos[I0 + R], Causal, Window,
                       DocPos ? DocPos + Bi * DocStride + I0 + R : nullptr,
                       Spans ? Spans + 2 * Bi : nullptr);
          byType<T>(probabilitiesRowF, probabilitiesRow<T>, Row, KPos, KEnd,
                    Keys, Lse[(Bi * H + Hq) * Sq + I0 + R]);
        }
        // dP = dy v^T (with dropout: through the mask).
        Prod.byKeys(Rows, KEnd, T(1), Dyi, D.ldq(), Vg, D.ldk(), Buf.Vt, Dp,
                    Sk);
        if (Drop)
          dropBlock(Dp, Sk, KEnd, Bi, Hq, I0, Rows, QPos, KPos, *Drop);
        // dS = P (dP - D), D = rowsum(dy * o); scaled once here.
        for (int64_t R = 0; R < Rows; ++R) {
          const T *DyR = Dy + Qoff + R * D.ldq(), *OR = O + Qoff + R * D.ldq();
          T Delta = T(0);
          for (int64_t X = 0; X < Hd; ++X)
            Delta += DyR[X] * OR[X];
          T *PR = P + R * Sk, *DpR = Dp + R * Sk;
          for (int64_t J = 0; J < KEnd; ++J)
            DpR[J] = PR[J] * (DpR[J] - Delta) * Sc;
        }
        // dq = dS k; dk += dS^T q.
        Prod.rows(Rows, KEnd, T(1), Dp, Sk, Kg, D.ldk(), Buf.Rows, Dq + Qoff,
                  D.ldq());
        Prod.addColumns(KEnd, Rows, T(1), Dp, Sk, Qi, D.ldq(), Buf.Qb, DkG,
                        D.ldk());
        // dv += P^T dy (with dropout: the dropped P's, now dS is done).
        if (Drop)
          dropBlock(P, Sk, KEnd, Bi, Hq, I0, Rows, QPos, KPos, *Drop);
        Prod.addColumns(KEnd, Rows, T(1), P, Sk, Dyi, D.ldq(), Buf.Dyb, DvG,
                        D.ldk());
      }
  }
}

#define WEFT_RING_ATTENTION(T)                                                 \
  template void attentionBlock<T>(                                             \
      const T *, const T *, const T *, T *, T *, int64_t, int64_t, int64_t,    \
      const int32_t *, const int32_t *, int64_t, int64_t, int64_t, void *,     \
      double, bool, int64_t, const AttentionDropout *, const int32_t *,        \
      int64_t, const int32_t *);                                               \
  template void softmaxMerge<T>(const T *, const T *, const T *, const T *,    \
                                T *, T *, int64_t, int64_t, int64_t, int64_t); \
  template void attentionBlockGrad<T>(                                         \
      const T *, const T *, const T *, const T *, const T *, const T *, T *,   \
      T *, T *, int64_t, int64_t, int64_t, const int32_t *, const int32_t *,   \
      int64_t, int64_t, int64_t, void *, double, bool, int64_t,                \
      const AttentionDropout *, const int32_t *, int64_t, const int32_t *);
WEFT_RING_ATTENTION(float)
WEFT_RING_ATTENTION(double)
#undef WEFT_RING_ATTENTION

} // namespace weft::cpu
