//===- Kernels.h - CUDA kernels, one launcher per program op ---*- C++ -*-===//
//
// Host-callable launchers for the CUDA backend (runtime/CudaBackend.cpp),
// each the device twin of the CPU kernel of the same name
// (runtime/cpu/kernels/Kernels.h): same layouts, same semantics. T is the
// storage type, float, double or __nv_bfloat16 (bf16 computes in f32, as
// the CPU's widened bf16 kernels do; f64 in f64). A launcher enqueues on
// Stream and returns the launch's error; it never synchronizes.
//
// Data errors (a token id outside the vocab, a target outside it) cannot be
// returned from a kernel: the kernel records the first one in the backend's
// KernelError slot (device memory), which the queue reads when it
// synchronizes (reportKernelError).
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_RUNTIME_KERNELS_CUDA_KERNELS_H
#define WEFT_RUNTIME_KERNELS_CUDA_KERNELS_H

#include "program/Activation.h"
#include "program/Dropout.h"
#include "program/Pointwise.h"
#include "runtime/AdamWParams.h"

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace weft::cuda {

using bf16 = __nv_bfloat16;

/// The first data error since the last reset (device memory, zeroed by a
/// reset): the first instruction in stream order that hit one, and of its
/// errors the one at the lowest index, as the CPU kernels report.
struct KernelError {
  int Instruction1;          // the instruction + 1; 0: no error
  int Code;                  // a KernelErrorCode
  unsigned long long NotKey; // ~((index << 32) | uint32(value)): max wins
  long long Limit;           // the bound it broke
};
enum KernelErrorCode : int {
  NoKernelError = 0,
  IdOutOfRange = 1,     // embedding: a token id outside [0, Total)
  TargetOutOfRange = 2, // cross entropy: a target outside [0, Total)
};

/// Where a data-checking kernel reports: the slot and its instruction.
struct ErrorSink {
  KernelError *Slot = nullptr;
  int Instruction = 0;
};

// Embeddings (see the CPU kernels: a vocab-parallel shard holds ids
// [First, First + V) of Total).
template <typename T>
cudaError_t embedding(const T *Table, int64_t V, int64_t D, const int32_t *Ids,
                      int64_t N, T *Y, int64_t First, int64_t Total,
                      ErrorSink E, cudaStream_t S);
/// DTable is overwritten (zeroed, then rows of ids in the shard summed:
/// in token order within chunks of sorted positions, the chunks' pieces in
/// order). Scratch: embeddingGradScratchBytes(N, D).
template <typename T>
cudaError_t embeddingGrad(const T *Dy, const int32_t *Ids, int64_t N, int64_t V,
                          int64_t D, T *DTable, int64_t First, int64_t Total,
                          void *Scratch, ErrorSink E, cudaStream_t S);
size_t embeddingGradScratchBytes(int64_t N, int64_t D);
template <typename T>
cudaError_t positionEmbedding(const T *X, const T *Table, T *Y, int64_t B,
                              int64_t Sq, int64_t D, cudaStream_t S);
template <typename T>
cudaError_t positionEmbeddingGrad(const T *Dy, T *DTable, int64_t B, int64_t Sq,
                                  int64_t P, int64_t D, int64_t First,
                                  cudaStream_t S);

// Elementwise and row-broadcast.
template <typename T>
cudaError_t biasAdd(const T *X, const T *Bias, T *Y, int64_t Rows, int64_t N,
                    cudaStream_t S);
/// Y[c] = sum over rows of X[r, c], in double. Scratch:
/// columnSumScratchBytes(Rows, N, 1).
template <typename T>
cudaError_t reduceRows(const T *X, T *Y, int64_t Rows, int64_t N, void *Scratch,
                       cudaStream_t S);
size_t columnSumScratchBytes(int64_t Rows, int64_t N, int Terms);
template <typename T>
cudaError_t add(const T *A, const T *B, T *Y, int64_t N, cudaStream_t S);
template <typename T>
cudaError_t mul(const T *A, const T *B, T *Y, int64_t N, cudaStream_t S);
template <typename T>
cudaError_t fill(T *Y, int64_t N, double Value, cudaStream_t S);
/// Y[i] = X[i] converted (float -> bf16 rounding to nearest even, bf16 ->
/// float exactly).
template <typename From, typename To>
cudaError_t cast(const From *X, To *Y, int64_t N, cudaStream_t S);
/// Copies a Rows x Width block between row-major matrices of leading
/// dimensions Ldx and Ldy (elements of ElemBytes): split, concat, pack.
cudaError_t copyBlock(const void *X, int64_t Ldx, void *Y, int64_t Ldy,
                      int64_t Rows, int64_t Width, size_t ElemBytes,
                      cudaStream_t S);

// Norms.
template <typename T>
cudaError_t layerNorm(const T *X, const T *Gamma, const T *Beta, T *Y,
                      int64_t Rows, int64_t D, double Eps, cudaStream_t S);
/// DGamma and DBeta are overwritten. Scratch: layerNormGradScratchBytes.
template <typename T>
cudaError_t layerNormGrad(const T *Dy, const T *X, const T *Gamma, T *Dx,
                          T *DGamma, T *DBeta, int64_t Rows, int64_t D,
                          double Eps, void *Scratch, cudaStream_t S);
template <typename T>
cudaError_t rmsNorm(const T *X, const T *Gamma, T *Y, int64_t Rows, int64_t D,
                    double Eps, cudaStream_t S);
template <typename T>
cudaError_t rmsNormGrad(const T *Dy, const T *X, const T *Gamma, T *Dx,
                        T *DGamma, int64_t Rows, int64_t D, double Eps,
                        void *Scratch, cudaStream_t S);
/// Per-row statistics and the weight gradients' partial column sums.
size_t normGradScratchBytes(int64_t Rows, int64_t D);

// Activations.
template <typename T>
cudaError_t gelu(const T *X, T *Y, int64_t N, cudaStream_t S);
template <typename T>
cudaError_t geluGrad(const T *Dy, const T *X, T *Dx, int64_t N, cudaStream_t S);
template <typename T>
cudaError_t silu(const T *X, T *Y, int64_t N, cudaStream_t S);
template <typename T>
cudaError_t siluGrad(const T *Dy, const T *X, T *Dx, int64_t N, cudaStream_t S);
template <typename T>
cudaError_t swiglu(const T *Gate, const T *Up, T *Y, int64_t N, cudaStream_t S);
template <typename T>
cudaError_t swigluGrad(const T *Dy, const T *Gate, const T *Up, T *DGate,
                       T *DUp, int64_t N, cudaStream_t S);
template <typename T>
cudaError_t act(Activation K, const T *X, T *Y, int64_t N, cudaStream_t S);
template <typename T>
cudaError_t actGrad(Activation K, const T *Dy, const T *X, T *Dx, int64_t N,
                    cudaStream_t S);

/// Rotary embedding (HF rotate_half) on X [B,Sq,H*Hd], token (b, s) at
/// position Positions[b * PosStride + s] (device; null: First + s);
/// InvFreq: Hd/2 device doubles or null (Theta^(-2i/Hd)).
template <typename T>
cudaError_t rope(const T *X, T *Y, int64_t B, int64_t Sq, int64_t H, int64_t Hd,
                 double Theta, bool Inverse, const double *InvFreq,
                 double Scale, int64_t First, const int32_t *Positions,
                 int64_t PosStride, cudaStream_t S);
/// Y = X + Table[Pos[r]] for each of the N rows r of X [N, D] (Pos:
/// device): packed documents' positions, token types, load-balanced
/// chunks' positions. Its gradient is embeddingGrad with Pos as the ids.
template <typename T>
cudaError_t positionEmbeddingAt(const T *X, const T *Table, T *Y, int64_t N,
                                int64_t D, const int32_t *Pos, cudaStream_t S);

/// The largest head dimension the attention kernels (fused and masked)
/// take.
constexpr int64_t MaxAttentionHeadDim = 256;

/// Attention under every mask, and ring attention's blocks
/// (MaskedAttention.cu): Q [B,Sq,H*Hd] at global positions QPos [Sq]
/// against K, V [B,Sk,Hkv*Hd] at KPos [Sk]; each query sees the keys of
/// program/AttentionMask.h's range, their probabilities dropped as the
/// CPU's. Every pointer is device memory.
struct MaskedAttention {
  int64_t B = 0, Sq = 0, Sk = 0, H = 0, Hkv = 0, Hd = 0;
  double Scale = 0; // 0: 1/sqrt(Hd)
  bool Causal = true;
  int64_t Window = 0;
  const int32_t *QPos = nullptr, *KPos = nullptr;
  /// Packed documents: Doc[b * DocStride + i] is local query i's index in
  /// its document (null: none).
  const int32_t *Doc = nullptr;
  int64_t DocStride = 0;
  /// Key padding: row b's tokens are the keys [Spans[2b], Spans[2b+1]).
  const int32_t *Spans = nullptr;
  /// Dropout of the probabilities: global element ((BatchFirst + b) *
  /// Heads + HeadFirst + h, query position, key position) of a
  /// [.., Seq, Seq] mask.
  bool Drop = false;
  DropoutKey Key;
  int64_t BatchFirst = 0, HeadFirst = 0, Heads = 0, Seq = 0;
};
/// O normalized over the visible keys and Lse [B,H,Sq] (-inf, O = 0: none
/// visible; Lse may be null), both of type S: T, or f32 for bf16 inputs
/// (a whole-sequence gradient recomputes them at the CPU's precision).
template <typename T, typename S>
cudaError_t maskedAttention(const MaskedAttention &M, const T *Q, const T *K,
                            const T *V, S *O, S *Lse, cudaStream_t St);
/// The block's dq and dk, dv from the whole rows' O and Lse. Scratch:
/// maskedAttentionScratchBytes(B, Sq, H).
template <typename T, typename S>
cudaError_t maskedAttentionGrad(const MaskedAttention &M, const T *Dy,
                                const T *Q, const T *K, const T *V, const S *O,
                                const S *Lse, T *Dq, T *Dk, T *Dv,
                                void *Scratch, cudaStream_t St);
size_t maskedAttentionScratchBytes(int64_t B, int64_t Sq, int64_t H);
/// Two blocks' outputs [B,S,H*Hd] and log-sum-exps [B,H,S] merged.
template <typename T>
cudaError_t softmaxMerge(const T *O1, const T *L1, const T *O2, const T *L2,
                         T *O, T *L, int64_t B, int64_t S, int64_t H,
                         int64_t Hd, cudaStream_t St);

// Cross entropy (Loss and DLoss: one element of type L; f32 for bf16
// logits), as the CPU kernels (runtime/cpu/kernels/Kernels.h).
/// Which columns and rows count (runtime/CrossEntropyRows.h): a row's first
/// Columns columns are classes (the rest, a padded vocabulary's tail, get
/// a zero gradient); Masked skips rows whose target is -100; the summed
/// losses are divided by Divisor.
struct CeRows {
  int64_t Columns = 0;
  bool Masked = false;
  double Divisor = 1;
};
template <typename T, typename L>
cudaError_t crossEntropy(const T *Logits, const int32_t *Targets, int64_t Rows,
                         int64_t V, const CeRows &How, L *Loss, void *Scratch,
                         ErrorSink E, cudaStream_t S);
template <typename T, typename L>
cudaError_t crossEntropyGrad(const T *Logits, const int32_t *Targets,
                             const L *DLoss, T *DLogits, int64_t Rows,
                             int64_t V, const CeRows &How, ErrorSink E,
                             cudaStream_t S);
/// Rows doubles: the per-row losses before their sum.
inline size_t crossEntropyScratchBytes(int64_t Rows) {
  return size_t(Rows) * sizeof(double);
}
/// A vocab shard's statistics; targets are checked against TargetBound
/// (the classes, or the whole vocabulary), How.Divisor is unused.
template <typename T, typename L>
cudaError_t crossEntropyStats(const T *Logits, const int32_t *Targets,
                              int64_t Rows, int64_t V, int64_t First,
                              int64_t TargetBound, const CeRows &How, L *Stats,
                              ErrorSink E, cudaStream_t S);
template <typename L>
cudaError_t crossEntropyFromStats(const L *Stats, int64_t K, int64_t Rows,
                                  const CeRows &How, L *Loss, void *Scratch,
                                  cudaStream_t S);
template <typename T, typename L>
cudaError_t
crossEntropyStatsGrad(const T *Logits, const int32_t *Targets, const L *Stats,
                      int64_t K, const L *DLoss, T *DLogits, int64_t Rows,
                      int64_t V, int64_t First, int64_t TargetBound,
                      const CeRows &How, ErrorSink E, cudaStream_t S);

// The generic path (docs/design.md decision 20), as the CPU's
// (runtime/cpu/kernels/Generic.cpp): shapes broadcast as NumPy's, up to
// MaxGenericRank dims. An output summed over stretched dims is one thread
// per element adding its terms in the row-major order of the full shape:
// the CPU's order, so the sum does not depend on scheduling.
using GenericDims = std::vector<int64_t>;
constexpr int MaxGenericRank = 8;
template <typename T>
cudaError_t pointwise(PointwiseFn Fn, double C, const T *X, T *Y, int64_t N,
                      cudaStream_t S);
template <typename T>
cudaError_t pointwiseGrad(PointwiseFn Fn, double C, const T *X, const T *Dy,
                          T *Dx, int64_t N, cudaStream_t S);
template <typename T>
cudaError_t binary(BinaryFn Fn, const T *A, const GenericDims &AShape,
                   const T *B, const GenericDims &BShape, T *Y,
                   const GenericDims &YShape, cudaStream_t S);
template <typename T>
cudaError_t binaryGrad(BinaryFn Fn, int Operand, const T *A,
                       const GenericDims &AShape, const T *B,
                       const GenericDims &BShape, const T *Dy,
                       const GenericDims &YShape, T *Out, cudaStream_t S);
template <typename T>
cudaError_t select(const T *C, const GenericDims &CShape, const T *A,
                   const GenericDims &AShape, const T *B,
                   const GenericDims &BShape, T *Y, const GenericDims &YShape,
                   cudaStream_t S);
template <typename T>
cudaError_t selectGrad(int Operand, const T *C, const GenericDims &CShape,
                       const T *Dy, const GenericDims &YShape, T *Out,
                       const GenericDims &OutShape, cudaStream_t S);
template <typename T>
cudaError_t broadcast(const T *X, const GenericDims &XShape, T *Y,
                      const GenericDims &YShape, cudaStream_t S);
template <typename T>
cudaError_t reduce(const T *X, const GenericDims &XShape, T *Y,
                   const GenericDims &YShape, cudaStream_t S);
template <typename T>
cudaError_t transpose(const T *X, const GenericDims &XShape,
                      const GenericDims &Perm, T *Y, cudaStream_t S);
/// Softmax over the last dim of X [Rows, N], and its gradient from Y.
template <typename T>
cudaError_t softmax(const T *X, T *Y, int64_t Rows, int64_t N, cudaStream_t S);
template <typename T>
cudaError_t softmaxGrad(const T *Y, const T *Dy, T *Dx, int64_t Rows, int64_t N,
                        cudaStream_t S);
/// Loss = sum((P - Y)^2) / Divisor (summed in f64, as the CPU), and
/// DP = (P - Y) * 2 * DLoss / Divisor.
template <typename T>
cudaError_t mseLoss(const T *P, const T *Y, int64_t N, int64_t Divisor, T *Loss,
                    cudaStream_t S);
template <typename T>
cudaError_t mseLossGrad(const T *P, const T *Y, const T *DLoss, int64_t N,
                        int64_t Divisor, T *DP, cudaStream_t S);
/// Inverted dropout of X (shape Local, the rank's block at First of the
/// global shape Total), each element's mask drawn from its global index
/// (program/Dropout.h); SeqPos (device, or null): dim 1's global
/// coordinate of each local one (load-balanced chunks).
template <typename T>
cudaError_t dropout(const T *X, T *Y, const GenericDims &Local,
                    const GenericDims &First, const GenericDims &Total,
                    const DropoutKey &Key, const int32_t *SeqPos,
                    cudaStream_t S);

/// One torch.optim.AdamW step on N elements in place (see cpu::adamw).
template <typename T>
cudaError_t adamw(T *Param, const T *Grad, T *M, T *V, int64_t N,
                  const AdamWParams &P, cudaStream_t S);

/// *At = the first index of a NaN or infinity among X[0, N), or -1 (At:
/// one device int64).
template <typename T>
cudaError_t firstNonFinite(const T *X, int64_t N, long long *At,
                           cudaStream_t S);

// Causal multi-head attention with grouped KV heads (runtime/cuda/kernels/
// Attention.cu): Q, Y [B,Sq,H*Hd]; K, V [B,Sq,Hkv*Hd]; query head h reads
// KV head h / (H / Hkv); scores Scale * q.k (Scale 0: 1/sqrt(Hd)). Fused in
// the FlashAttention-2 manner: the Sq x Sq scores are never stored.
template <typename T>
cudaError_t attention(const T *Q, const T *K, const T *V, T *Y, int64_t B,
                      int64_t Sq, int64_t H, int64_t Hkv, int64_t Hd,
                      double Scale, void *Scratch, cudaStream_t S);
/// Dq, Dk, Dv are overwritten. The forward's statistics are recomputed
/// (the program hands the gradient only Dy, Q, K and V).
template <typename T>
cudaError_t attentionGrad(const T *Dy, const T *Q, const T *K, const T *V,
                          T *Dq, T *Dk, T *Dv, int64_t B, int64_t Sq, int64_t H,
                          int64_t Hkv, int64_t Hd, double Scale, void *Scratch,
                          cudaStream_t S);
/// The scratch attention and attentionGrad need (bytes; 256-aligned).
size_t attentionScratchBytes(int64_t B, int64_t Sq, int64_t H, int64_t Hkv,
                             int64_t Hd, size_t ElemBytes);
/// The plain reference the tests compare the fused kernels against: one
/// thread block per (batch, head, query), two passes over the keys.
template <typename T>
cudaError_t attentionReference(const T *Q, const T *K, const T *V, T *Y,
                               int64_t B, int64_t Sq, int64_t H, int64_t Hkv,
                               int64_t Hd, double Scale, cudaStream_t S);
template <typename T>
cudaError_t attentionGradReference(const T *Dy, const T *Q, const T *K,
                                   const T *V, T *Dq, T *Dk, T *Dv, int64_t B,
                                   int64_t Sq, int64_t H, int64_t Hkv,
                                   int64_t Hd, double Scale, void *Scratch,
                                   cudaStream_t S);
size_t attentionReferenceScratchBytes(int64_t B, int64_t Sq, int64_t H,
                                      int64_t Hkv, int64_t Hd,
                                      size_t ElemBytes);

} // namespace weft::cuda

#endif // WEFT_RUNTIME_KERNELS_CUDA_KERNELS_H
