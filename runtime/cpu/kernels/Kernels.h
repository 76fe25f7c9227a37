//===- Kernels.h - CPU kernels, one per program op ------------*- C++ -*-===//
//
// Plain functions on raw pointers, templated on the float type (float and
// double are instantiated). Shapes were validated at load; kernels only check
// data (ids, targets). Row-major throughout. Kernels that need scratch take it
// preallocated so the step loop never allocates: see the *ScratchBytes
// helpers.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_RUNTIME_KERNELS_CPU_KERNELS_H
#define WEFT_RUNTIME_KERNELS_CPU_KERNELS_H

#include "program/Activation.h"
#include "program/Dropout.h"
#include "program/Pointwise.h"
#include "program/Status.h"
#include "runtime/AdamWParams.h"
#include "runtime/CrossEntropyRows.h"
#include "runtime/cpu/kernels/BlasCore.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace weft::cpu {

// Embeddings. The table [V, D] holds the ids [First, First + V) of a vocab
// of Total ids (a vocab-parallel shard; First = 0 and Total = V otherwise):
// ids outside [0, Total) are an error, ids outside the shard give zero rows
// (and add nothing to the gradient).
template <typename T>
Status embedding(const T *Table, int64_t V, int64_t D, const int32_t *Ids,
                 int64_t N, T *Y, int64_t First, int64_t Total);
template <typename T>
Status embeddingGrad(const T *Dy, const int32_t *Ids, int64_t N, int64_t V,
                     int64_t D, T *DTable, int64_t First, int64_t Total,
                     const T *Base = nullptr);
template <typename T>
void positionEmbedding(const T *X, const T *Table, T *Y, int64_t B, int64_t S,
                       int64_t D);
// DTable [P,D]: rows [First, First+S) get the sum over the batch of Dy
// [B,S,D]; every other row is zero (First: the rank's first position under
// sequence parallelism).
template <typename T>
void positionEmbeddingGrad(const T *Dy, T *DTable, int64_t B, int64_t S,
                           int64_t P, int64_t D, int64_t First = 0);
// Packed documents: position (b, s) is Pos[b * Stride + s], its index in
// its document (Table: the whole [P, D] table).
template <typename T>
void documentPositionEmbedding(const T *X, const T *Table, T *Y, int64_t B,
                               int64_t S, int64_t D, const int32_t *Pos,
                               int64_t Stride);
template <typename T>
void documentPositionEmbeddingGrad(const T *Dy, T *DTable, int64_t B, int64_t S,
                                   int64_t P, int64_t D, const int32_t *Pos,
                                   int64_t Stride);

// C[M,N] = op(A) op(B) (+ Bias[N] on every row); A is [M,K] ([K,M] when
// TransA), B is [K,N] ([N,K] when TransB).
template <typename T>
void matmul(const T *A, const T *B, T *C, int64_t M, int64_t N, int64_t K,
            bool TransA, bool TransB, const T *Bias = nullptr);

// The generic path (Generic.cpp; docs/design.md decision 20). Shapes are
// full row-major shapes; Broadcast.h's rules (validated at load).
using Dims = std::vector<int64_t>;
template <typename T>
void pointwise(PointwiseFn Fn, double C, const T *X, T *Y, int64_t N);
template <typename T>
void pointwiseGrad(PointwiseFn Fn, double C, const T *X, const T *Dy, T *Dx,
                   int64_t N);
template <typename T>
void binary(BinaryFn Fn, const T *A, const Dims &AShape, const T *B,
            const Dims &BShape, T *Y, const Dims &YShape);
// The gradient of operand Operand (0: A, 1: B) of Y = A fn B, summed over
// the dims it was stretched along; Out has that operand's shape.
template <typename T>
void binaryGrad(BinaryFn Fn, int Operand, const T *A, const Dims &AShape,
                const T *B, const Dims &BShape, const T *Dy, const Dims &YShape,
                T *Out);
// Y = C != 0 ? A : B, all three broadcast to YShape.
template <typename T>
void select(const T *C, const Dims &CShape, const T *A, const Dims &AShape,
            const T *B, const Dims &BShape, T *Y, const Dims &YShape);
// Out (OutShape, broadcast to YShape) = Dy where operand Operand (0: A,
// 1: B) of a select by C was picked, summed over the stretched dims.
template <typename T>
void selectGrad(int Operand, const T *C, const Dims &CShape, const T *Dy,
                const Dims &YShape, T *Out, const Dims &OutShape);
template <typename T>
void broadcast(const T *X, const Dims &XShape, T *Y, const Dims &YShape);
// Y (whose shape broadcasts to X's) = X summed over the stretched dims.
template <typename T>
void reduce(const T *X, const Dims &XShape, T *Y, const Dims &YShape);
template <typename T>
void transpose(const T *X, const Dims &XShape, const Dims &Perm, T *Y);
template <typename T> void softmax(const T *X, T *Y, int64_t Rows, int64_t N);
template <typename T>
void softmaxGrad(const T *Y, const T *Dy, T *Dx, int64_t Rows, int64_t N);

// Elementwise and row-broadcast.
template <typename T>
void biasAdd(const T *X, const T *Bias, T *Y, int64_t Rows, int64_t N);
template <typename T>
void reduceRows(const T *X, T *Y, int64_t Rows, int64_t N);
template <typename T> void add(const T *A, const T *B, T *Y, int64_t N);
template <typename T> void mul(const T *A, const T *B, T *Y, int64_t N);
template <typename T> void fill(T *Y, int64_t N, double Value);
void copyBytes(const void *X, void *Y, size_t Bytes);

// Split X [Rows, N] along columns into Parts[k] [Rows, Sizes[k]]; concat is
// the inverse.
template <typename T>
void split(const T *X, int64_t Rows, int64_t N, T *const *Parts,
           const int64_t *Sizes, int64_t NumParts);
template <typename T>
void concat(const T *const *Parts, const int64_t *Sizes, int64_t NumParts,
            int64_t Rows, int64_t N, T *Y);

// Norms. The grads need Rows*2 doubles of scratch (per-row statistics).
inline size_t normGradScratchBytes(int64_t Rows) {
  return size_t(Rows) * 2 * sizeof(double);
}
template <typename T>
void layerNorm(const T *X, const T *Gamma, const T *Beta, T *Y, int64_t Rows,
               int64_t D, double Eps);
template <typename T>
void layerNormGrad(const T *Dy, const T *X, const T *Gamma, T *Dx, T *DGamma,
                   T *DBeta, int64_t Rows, int64_t D, double Eps,
                   void *Scratch);
template <typename T>
void rmsNorm(const T *X, const T *Gamma, T *Y, int64_t Rows, int64_t D,
             double Eps);
template <typename T>
void rmsNormGrad(const T *Dy, const T *X, const T *Gamma, T *Dx, T *DGamma,
                 int64_t Rows, int64_t D, double Eps, void *Scratch);

// Activations.
template <typename T> void gelu(const T *X, T *Y, int64_t N);
template <typename T> void geluGrad(const T *Dy, const T *X, T *Dx, int64_t N);
template <typename T> void silu(const T *X, T *Y, int64_t N);
template <typename T> void siluGrad(const T *Dy, const T *X, T *Dx, int64_t N);
template <typename T> void swiglu(const T *Gate, const T *Up, T *Y, int64_t N);
template <typename T>
void swigluGrad(const T *Dy, const T *Gate, const T *Up, T *DGate, T *DUp,
                int64_t N);

// transformers' ACT2FN activation K elementwise, and dx = dy * K'(x)
// (program/Activation.h; computed in double precision).
template <typename T> void act(Activation K, const T *X, T *Y, int64_t N);
template <typename T>
void actGrad(Activation K, const T *Dy, const T *X, T *Dx, int64_t N);

// Rotary position embedding on X [B,S,H*Hd] (HF rotate_half convention):
// pair i turns by pos * f_i, f_i = InvFreq[i] or Theta^(-2i/Hd) when InvFreq
// is null, and the result is multiplied by Scale (in both directions).
// Packed documents: row b's position s rotates by Pos[b * Stride + s].
template <typename T>
void documentRope(const T *X, T *Y, int64_t B, int64_t S, int64_t H, int64_t Hd,
                  double Theta, bool Inverse, const double *InvFreq,
                  double Scale, const int32_t *Pos, int64_t Stride);
template <typename T>
void rope(const T *X, T *Y, int64_t B, int64_t S, int64_t H, int64_t Hd,
          double Theta, bool Inverse, const double *InvFreq = nullptr,
          double Scale = 1.0, int64_t First = 0);

/// Queries at local rows [Local, Local + Rows) hold global positions
/// [Global, Global + Rows) of the keys' sequence.
struct QueryRun {
  int64_t Local = 0, Global = 0, Rows = 0;
};
/// The runs covering a block's queries: one (the whole sequence, or a
/// context-parallel rank's block), or two under head-tail load balancing.
struct QueryRuns {
  const QueryRun *Data = nullptr;
  size_t Size = 0;
  const QueryRun *begin() const { return Data; }
  const QueryRun *end() const { return Data + Size; }
};

// Causal attention of scores Scale * q.k (Scale 0: 1/sqrt(Hd)).
// Q, Y: [B,Sq,H*Hd]; K, V: [B,Sk,Hkv*Hd], the keys in their order; Runs
// place the queries in the keys' sequence (Sq = Sk and one run from 0 but
// under context parallelism). Queries run in blocks of AttentionRowBlock rows;
// scratch holds, per thread (Threads = omp_get_max_threads() when the
// kernel runs), two blocks of min(Sq, AttentionRowBlock) x Sk elements, and
// where the AVX-512 products may run (attentionPacksHeads, Avx512.h) a head
// packed three ways: its keys and values transposed (Hd x attentionKeysLd(Sk)
// each), one of them row by row (Sk x Hd), and two blocks of queries or
// their gradients (Blk x Hd each).
constexpr int64_t AttentionRowBlock = 64;
/// Heads of 32 or more go through the AVX-512 products on CPUs that have
/// them; smaller ones fill too little of a 64-column tile.
inline bool attentionPacksHeads(int64_t Hd) { return Hd >= 32; }
/// A transposed head's leading dimension: Sk rounded up to 16, plus 16 so
/// its rows do not all map to the same L1 sets (at Sk = 256, 1 KiB apart,
/// the score product ran at 111 GFLOP/s against 146 with the 16).
inline int64_t attentionKeysLd(int64_t Sk) { return (Sk + 15) / 16 * 16 + 16; }
/// The packed head's elements (AttentionProducts::buffers), for row blocks
/// of Blk queries.
inline size_t attentionPackElems(int64_t Sk, int64_t Blk, int64_t Hd) {
  if (!attentionPacksHeads(Hd))
    return 0;
  return size_t(Hd) *
         (2 * size_t(attentionKeysLd(Sk)) + size_t(Sk) + 2 * size_t(Blk));
}
inline size_t attentionScratchPerThread(int64_t Sq, int64_t Sk, int64_t Hd) {
  int64_t Blk = Sq < AttentionRowBlock ? Sq : AttentionRowBlock;
  return 2 * size_t(Blk) * size_t(Sk) + attentionPackElems(Sk, Blk, Hd);
}
inline size_t attentionScratchBytes(int64_t Sq, int64_t Sk, int64_t Hd,
                                    size_t ElemBytes, int Threads) {
  return size_t(Threads) * attentionScratchPerThread(Sq, Sk, Hd) * ElemBytes;
}
/// Load-balanced context parallelism: copies X [B, S, W], each sequence held
/// as Chunks chunks in the stored order (program/SeqChunks.h), into Y in
/// the natural order; ToStored: the other way.
template <typename T>
void reorderSequence(const T *X, T *Y, int64_t B, int64_t S, int64_t W,
                     int64_t Chunks, bool ToStored);
/// Dropout of the attention probabilities [B, H, S, S]: probability
/// (b, h, i, j) of the rank's block (i a global query) is global element
/// (((BatchFirst + b) * Heads + HeadFirst + h) * S + i) * S + j of the mask.
struct AttentionDropout {
  DropoutKey Key;
  int64_t BatchFirst = 0, HeadFirst = 0, Heads = 0;
  /// Ring attention: the whole sequence's length (the keys of one kernel
  /// call are a block of it).
  int64_t Seq = 0;
};
/// Rows that pack documents: Pos[b * Stride + i] is query i's index in its
/// document (causal attention then reads keys i - Pos .. i only).
struct AttentionDocuments {
  const int32_t *Pos = nullptr;
  int64_t Stride = 0;
  /// A sliding window W (0: none): query i reads keys j > i - W too.
  int64_t Window = 0;
  /// Key padding: per local row, its tokens' keys [F, E) (null: none).
  const int32_t *Span = nullptr;
};
template <typename T>
void attention(const T *Q, const T *K, const T *V, T *Y, int64_t B, int64_t Sq,
               int64_t Sk, QueryRuns Runs, int64_t H, int64_t Hkv, int64_t Hd,
               void *Scratch, double Scale = 0, bool Causal = true,
               const AttentionDropout *Drop = nullptr,
               const AttentionDocuments *Docs = nullptr);
template <typename T>
void attentionGrad(const T *Dy, const T *Q, const T *K, const T *V, T *Dq,
                   T *Dk, T *Dv, int64_t B, int64_t Sq, int64_t Sk,
                   QueryRuns Runs, int64_t H, int64_t Hkv, int64_t Hd,
                   void *Scratch, double Scale = 0, bool Causal = true,
                   const AttentionDropout *Drop = nullptr,
                   const AttentionDocuments *Docs = nullptr);

/// Ring attention (RingAttention.cpp): q [B,Sq,H*hd] against one block of
/// keys k, v [B,Sk,Hkv*hd], every row at its global position (QPos, KPos).
/// attentionBlock: o like q, normalized over the block, and lse [B,H,Sq]
/// (-inf: no visible key); softmaxMerge: the two blocks' combination;
/// attentionBlockGrad: the block's dq and dk, dv from the whole rows' o and
/// lse. Scratch: ringScratchBytes. DocPos (packed documents, queries in
/// natural order): row b's query i is DocPos[b * DocStride + i] positions
/// into its document, and sees no key before the document's start. Spans
/// (key padding): row b's tokens are the keys [Spans[2b], Spans[2b+1]),
/// as attention's.
size_t ringScratchBytes(int64_t Sk, int64_t Hd, size_t Elem, int Threads);
template <typename T>
void attentionBlock(const T *Q, const T *K, const T *V, T *O, T *Lse, int64_t B,
                    int64_t Sq, int64_t Sk, const int32_t *QPos,
                    const int32_t *KPos, int64_t H, int64_t Hkv, int64_t Hd,
                    void *Scratch, double Scale, bool Causal, int64_t Window,
                    const AttentionDropout *Drop = nullptr,
                    const int32_t *DocPos = nullptr, int64_t DocStride = 0,
                    const int32_t *Spans = nullptr);
template <typename T>
void softmaxMerge(const T *O1, const T *L1, const T *O2, const T *L2, T *O,
                  T *L, int64_t B, int64_t S, int64_t H, int64_t Hd);
template <typename T>
void attentionBlockGrad(const T *Dy, const T *Q, const T *K, const T *V,
                        const T *O, const T *Lse, T *Dq, T *Dk, T *Dv,
                        int64_t B, int64_t Sq, int64_t Sk, const int32_t *QPos,
                        const int32_t *KPos, int64_t H, int64_t Hkv, int64_t Hd,
                        void *Scratch, double Scale, bool Causal,
                        int64_t Window, const AttentionDropout *Drop = nullptr,
                        const int32_t *DocPos = nullptr, int64_t DocStride = 0,
                        const int32_t *Spans = nullptr);

/// y = x * keep / (1 - p) over a tensor of local shape Local whose element
/// at local coordinates c is the global element First + c of a tensor of
/// shape Total (program/Dropout.h keys the mask by its row-major index).
/// SeqPos (load-balanced context parallelism): dim 1's global coordinate of
/// each local one, in place of First[1] + c.
template <typename T>
void dropout(const T *X, T *Y, const std::vector<int64_t> &Local,
             const std::vector<int64_t> &First,
             const std::vector<int64_t> &Total, const DropoutKey &Key,
             const int32_t *SeqPos = nullptr);
/// Y[J] = X[J] * Key.factor(Index + J) for J < N (Y may be X): the
/// elements of a run of consecutive global indices, four to a Philox call.
template <typename T>
void dropoutRun(const T *X, T *Y, int64_t N, uint64_t Index,
                const DropoutKey &Key);

// Cross entropy over Rows rows of Logits [Rows, V], summed and divided by
// Denominator (0: Rows, the mean): a rank's share of a mean over more rows
// (data or sequence parallelism, micro-batches) is its sum over all of them.
// Masked (a masked-LM loss): rows whose target is IgnoreTarget add nothing
// (their gradient is 0) and Denominator is the step's counted targets (0:
// none, a loss of 0); more counted rows here than that is an error.
// Classes > 0 (a vocabulary padded by weft-pad-vocab): only a row's first
// Classes columns are classes; the rest are outside the softmax and get a
// zero gradient.
template <typename T>
Status crossEntropy(const T *Logits, const int32_t *Targets, int64_t Rows,
                    int64_t V, T *Loss, int64_t Denominator = 0,
                    bool Masked = false, int64_t Classes = 0);
template <typename T>
Status crossEntropyGrad(const T *Logits, const int32_t *Targets, const T *DLoss,
                        T *DLogits, int64_t Rows, int64_t V,
                        int64_t Denominator = 0, bool Masked = false,
                        int64_t Classes = 0);

// Vocab-parallel cross entropy. Logits [Rows, V] hold the ids [First,
// First + V) of Total. Stats [Rows, 3]: per row the max, the sum of
// exp(x - max), and the target's logit when it lies in the shard, else 0.
// Classes > 0: the global columns from Classes on are padding.
template <typename T>
Status crossEntropyStats(const T *Logits, const int32_t *Targets, int64_t Rows,
                         int64_t V, int64_t First, int64_t Total, T *Stats,
                         bool Masked = false, int64_t Classes = 0);
// Stats [K, Rows, 3] of K shards: Loss = sum over rows of the row's loss,
// divided by Denominator.
template <typename T>
void crossEntropyFromStats(const T *Stats, int64_t K, int64_t Rows,
                           int64_t Denominator, T *Loss, bool Masked = false);
// DLogits = (softmax - onehot) * DLoss / Denominator for this shard, the
// softmax's max and sum merged from Stats [K, Rows, 3]. DLogits may alias
// Logits.
template <typename T>
Status crossEntropyStatsGrad(const T *Logits, const int32_t *Targets,
                             const T *Stats, int64_t K, const T *DLoss,
                             T *DLogits, int64_t Rows, int64_t V, int64_t First,
                             int64_t Total, int64_t Denominator,
                             bool Masked = false, int64_t Classes = 0);

/// One torch.optim.AdamW step (1-based Step) on N elements, in place.
template <typename T>
void adamw(T *Param, const T *Grad, T *M, T *V, int64_t N,
           const AdamWParams &P);

/// bfloat16 storage (program/Bf16.h): Y = X widened (exact) or rounded to
/// nearest even.
void widenBf16(const uint16_t *X, float *Y, int64_t N);
void narrowToBf16(const float *X, uint16_t *Y, int64_t N);

/// Index of the first NaN or infinity among X[0, N), or -1.
template <typename T> int64_t firstNonFinite(const T *X, int64_t N);

/// Keeps the BLAS library single-threaded: weft splits GEMMs over its own
/// OpenMP threads (Threads.cpp).
void serialBlas();
/// The GEMM library and its kernels, e.g. "OpenBLAS Zen" or "BLIS zen3".
std::string blasName();

/// Sets the OpenMP thread count (N <= 0: threadsThatFit this node); OpenBLAS
/// stays serial.
void setNumThreads(int N);
int numThreads();
/// The ranks the launcher started on this node (Open MPI's
/// OMPI_COMM_WORLD_LOCAL_SIZE, MPICH's MPI_LOCALNRANKS), 1 without one.
int localRanks();
/// The cores this process may run on (its affinity mask: a launcher that
/// binds ranks to cores gives each its own).
int usableCores();
/// Threads per rank that fit the node: the usable cores shared by the
/// node's ranks, at least 1. N ranks unbound on C cores get C / N each
/// (4 ranks on 2 cores, each with all cores, ran 33x slower).
int threadsThatFit(int UsableCores, int HardwareCores, int LocalRanks);
/// A warning when Threads (> 1) per rank times the node's ranks exceed
/// its cores ("" when they fit).
std::string oversubscriptionWarning(int Threads, int HardwareCores,
                                    int LocalRanks);

} // namespace weft::cpu

#endif // WEFT_RUNTIME_KERNELS_CPU_KERNELS_H
