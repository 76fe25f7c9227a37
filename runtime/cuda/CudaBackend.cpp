//===- CudaBackend.cpp - Bound instructions on a CUDA device -------------===//
//
// The CUDA twin of runtime/cpu/CpuBackend.cpp: device memory from cudaMalloc,
// a queue per CUDA stream (runtime/cuda/CudaQueue.h), GEMMs on cuBLASLt and
// every other op on weft's own kernels (runtime/cuda/kernels).
//
// prepare() makes a plan per instruction once: its kernel, chosen by its
// operands' dtypes, its cuBLASLt plan, its rope frequencies on the device,
// and the scratch all kernels share. An instruction whose float operands
// all have one dtype (f32, f64 or bf16; the loss and statistics of a bf16
// cross entropy are f32) runs its kernel in that dtype. Any other mix of
// bf16 and f32 runs as the CPU backend does: bf16 operands widened to f32
// scratch, the f32 kernel, outputs rounded back (docs/design.md decision
// 15). Ops that only move bytes run on any dtype.
//
//===----------------------------------------------------------------------===//
#include "program/SeqChunks.h"
#include "runtime/Backend.h"
#include "runtime/CrossEntropyRows.h"
#include "runtime/KernelTable.h"
#include "runtime/cuda/CudaMatmul.h"
#include "runtime/cuda/CudaQueue.h"
#include "runtime/cuda/HostPlans.h"
#include "runtime/cuda/PluginImpl.h"
#include "runtime/cuda/kernels/Kernels.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <type_traits>

namespace weft {

namespace {

using namespace cuda;
using BI = BoundInstruction;
using SC = StepContext;

constexpr size_t GemmWorkspaceBytes = size_t(32) << 20;

size_t align256(size_t Bytes) { return (Bytes + 255) / 256 * 256; }

/// Positions on the device. Attention's (MaskedAttention.cu): the queries'
/// and keys' global positions, copied at prepare; the step's packed
/// documents and key spans, copied per run. Rope's, dropout's and a
/// position embedding's: load-balanced rows' positions (SeqPos), copied at
/// prepare; a position embedding's table row per token (Rows: packed
/// documents' positions or token types per run, else SeqPos per row).
struct PositionArrays {
  int32_t *QPos = nullptr, *KPos = nullptr, *Doc = nullptr, *Spans = nullptr,
          *SeqPos = nullptr, *Rows = nullptr;
  std::vector<int32_t> HostDoc; // a run's rows, gathered
  ~PositionArrays() {
    for (int32_t *P : {QPos, KPos, Doc, Spans, SeqPos, Rows})
      cudaFree(P);
  }
};

/// What a kernel adapter needs besides the instruction.
struct Ctx {
  cudaStream_t Stream = nullptr;
  void *Scratch = nullptr;
  ErrorSink Sink;
  cublasLtHandle_t Lt = nullptr;
  void *Workspace = nullptr;
  const CudaMatmulPlan *Gemm = nullptr;
  const double *InvFreq = nullptr;            // rope, on the device
  struct PositionArrays *Positions = nullptr; // rows' positions, masks
  CudaQueue *Queue = nullptr;
};

using KernelFn = Status (*)(const BI &, const SC &, Ctx &);

Status check(cudaError_t E, const BI &I) {
  return cudaStatus(E, describeInstruction(I));
}

/// The GEMM of a matmul (2-D views of its operands), and the one GEMM of
/// each batch index of a batch_matmul ([b..., m, k] x [b..., k, n]).
GemmShape matmulGemm(const BI &I, DType T) {
  const TensorRef &A = I.In[0], &B = I.In[1];
  GemmShape S;
  S.TransA = I.Attrs->TransposeA;
  S.TransB = I.Attrs->TransposeB;
  S.Type = T;
  if (I.Op == OpKind::BatchMatmul) {
    const Shape &Ad = A.Spec->Dims, &Bd = B.Spec->Dims;
    const size_t R = Ad.size();
    S.M = Ad[S.TransA ? R - 1 : R - 2];
    S.K = Ad[S.TransA ? R - 2 : R - 1];
    S.N = Bd[S.TransB ? R - 2 : R - 1];
    return S;
  }
  S.M = S.TransA ? A.Last : A.Rows;
  S.K = S.TransA ? A.Rows : A.Last;
  S.N = S.TransB ? B.Rows : B.Last;
  return S;
}
/// The attention ops, which read the rows' positions (PositionArrays).
bool attentionOp(OpKind K) {
  return K == OpKind::Attention || K == OpKind::AttentionGrad ||
         K == OpKind::AttentionBlock || K == OpKind::AttentionBlockGrad;
}

/// Device int32 copies of Host (N elements; uninitialized when Host is
/// null) for attention's positions.
Status deviceInts(const int32_t *Host, int64_t N, const BI &I, int32_t *&Out) {
  WEFT_RETURN_IF_ERROR(cudaStatus(
      cudaMalloc(reinterpret_cast<void **>(&Out),
                 std::max<size_t>(size_t(N) * sizeof(int32_t), 1)),
      describeInstruction(I) + ": cudaMalloc (attention positions)"));
  if (!Host || N == 0)
    return Status::success();
  return cudaStatus(cudaMemcpy(Out, Host, size_t(N) * sizeof(int32_t),
                               cudaMemcpyHostToDevice),
                    describeInstruction(I) + ": cudaMemcpy (positions)");
}

/// An attention op's rows' global positions on the device: the queries'
/// (SeqPos, else SeqFirst on), the keys' (a ring block's KeyPos, else the
/// sequence in its stored order), and room for a run's documents and key
/// spans.
Expected<std::unique_ptr<PositionArrays>> positionArrays(const BI &I) {
  if (!attentionOp(I.Op)) { // rope, dropout, position embeddings
    auto M = std::make_unique<PositionArrays>();
    const Shape &D = I.In[0].Spec->Dims;
    if (!I.SeqPos.empty())
      WEFT_RETURN_IF_ERROR(
          deviceInts(I.SeqPos.data(), int64_t(I.SeqPos.size()), I, M->SeqPos));
    if (I.Op == OpKind::PositionEmbedding ||
        I.Op == OpKind::PositionEmbeddingGrad || I.Op == OpKind::Rope) {
      std::vector<int32_t> Rows;
      for (int64_t B = 0; !I.SeqPos.empty() && B < D[0]; ++B)
        Rows.insert(Rows.end(), I.SeqPos.begin(), I.SeqPos.end());
      WEFT_RETURN_IF_ERROR(deviceInts(Rows.empty() ? nullptr : Rows.data(),
                                      D[0] * D[1], I, M->Rows));
    }
    return M;
  }
  const bool Grad =
      I.Op == OpKind::AttentionGrad || I.Op == OpKind::AttentionBlockGrad;
  const Shape &Qd = I.In[Grad ? 1 : 0].Spec->Dims;
  const Shape &Kd = I.In[Grad ? 2 : 1].Spec->Dims;
  const bool Ring =
      I.Op == OpKind::AttentionBlock || I.Op == OpKind::AttentionBlockGrad;
  std::vector<int32_t> Q(static_cast<size_t>(Qd[1])),
      K(static_cast<size_t>(Kd[1]));
  for (int64_t R = 0; R < Qd[1]; ++R)
    Q[size_t(R)] =
        I.SeqPos.empty() ? int32_t(I.SeqFirst + R) : I.SeqPos[size_t(R)];
  if (Ring && I.KeyPos.size() != K.size())
    return Status::error(
        describeInstruction(I) + ": " + std::to_string(I.KeyPos.size()) +
        " key positions for " + std::to_string(K.size()) + " keys");
  for (int64_t J = 0; J < Kd[1]; ++J)
    K[size_t(J)] = Ring ? I.KeyPos[size_t(J)]
                        : int32_t(seqPosition(J, Kd[1], I.SeqChunks));
  auto M = std::make_unique<PositionArrays>();
  WEFT_RETURN_IF_ERROR(deviceInts(Q.data(), Qd[1], I, M->QPos));
  WEFT_RETURN_IF_ERROR(deviceInts(K.data(), Kd[1], I, M->KPos));
  WEFT_RETURN_IF_ERROR(deviceInts(nullptr, Qd[0] * Qd[1], I, M->Doc));
  WEFT_RETURN_IF_ERROR(deviceInts(nullptr, 2 * Qd[0], I, M->Spans));
  return M;
}

/// A masked attention gradient's recomputed o [B,S,H*Hd] and log-sum-exp
/// [B,H,S], of Elem bytes each, 256-aligned.
size_t recomputeBytes(const Shape &Q, int64_t H, size_t Elem) {
  return align256((size_t(numElements(Q)) + size_t(Q[0] * H * Q[1])) * Elem);
}

/// The loss type of a cross entropy whose logits are T.
template <typename T>
using LossOf = std::conditional_t<std::is_same_v<T, bf16>, float, T>;

template <typename T> struct Kernels {
  using L = LossOf<T>;

  static Status embedding(const BI &I, const SC &, Ctx &C) {
    const TensorRef &Tab = I.In[0], &Ids = I.In[1];
    return check(cuda::embedding(Tab.as<T>(), Tab.Rows, Tab.Last,
                                 Ids.as<int32_t>(), Ids.Numel, I.Out[0].as<T>(),
                                 I.VocabFirst, vocabTotal(I, Tab.Rows), C.Sink,
                                 C.Stream),
                 I);
  }
  static Status embeddingGrad(const BI &I, const SC &, Ctx &C) {
    const TensorRef &Ids = I.In[1], &Tab = I.Out[0];
    WEFT_RETURN_IF_ERROR(
        check(cuda::embeddingGrad(I.In[0].as<T>(), Ids.as<int32_t>(), Ids.Numel,
                                  Tab.Rows, Tab.Last, Tab.as<T>(), I.VocabFirst,
                                  vocabTotal(I, Tab.Rows), C.Scratch, C.Sink,
                                  C.Stream),
              I));
    // A tied head's gradient (weft-fuse-table-grad): the add it replaced,
    // base + table, in place on the table (the CPU's one pass, as two).
    if (I.In.size() < 3)
      return Status::success();
    return check(cuda::add(I.In[2].as<T>(), Tab.as<T>(), Tab.as<T>(), Tab.Numel,
                           C.Stream),
                 I);
  }
  // Rows [B, S] of a step-wide host array (rows Stride apart) to Device
  // [B * S], through the queue's staging.
  static Status copyRows(const int32_t *Host, int64_t Stride, int64_t B,
                         int64_t S, Ctx &C, int32_t *Device) {
    std::vector<int32_t> &H = C.Positions->HostDoc;
    H.resize(size_t(B * S));
    for (int64_t R = 0; R < B; ++R)
      std::copy(Host + R * Stride, Host + R * Stride + S, H.begin() + R * S);
    return C.Queue->copyToDevice(Device, H.data(), H.size() * sizeof(int32_t));
  }
  // The table row of every token, on the device, when it is not its
  // position from SeqFirst: packed documents' positions or token types
  // (this run's rows, copied), or load-balanced chunks' (prepare's); null
  // otherwise.
  static Status tableRows(const BI &I, const SC &Step, Ctx &C,
                          const int32_t *&Rows) {
    const Shape &D = I.In[0].Spec->Dims;
    const int32_t *Pos =
        I.Attrs->TokenTypes ? tokenTypeRow(I, Step) : documentRow(I, Step);
    if (I.Attrs->TokenTypes && !Pos)
      return Status::error(describeInstruction(I) +
                           ": the step's token types are not set");
    Rows = nullptr;
    if (Pos) {
      WEFT_RETURN_IF_ERROR(
          copyRows(Pos, Step.DocSeq, D[0], D[1], C, C.Positions->Rows));
      Rows = C.Positions->Rows;
    } else if (!I.SeqPos.empty()) {
      Rows = C.Positions->Rows;
    }
    return Status::success();
  }
  static Status positionEmbedding(const BI &I, const SC &Step, Ctx &C) {
    const Shape &D = I.In[0].Spec->Dims;
    const int32_t *Rows = nullptr;
    WEFT_RETURN_IF_ERROR(tableRows(I, Step, C, Rows));
    if (Rows)
      return check(cuda::positionEmbeddingAt(I.In[0].as<T>(), I.In[1].as<T>(),
                                             I.Out[0].as<T>(), D[0] * D[1],
                                             D[2], Rows, C.Stream),
                   I);
    return check(cuda::positionEmbedding(
                     I.In[0].as<T>(), I.In[1].as<T>() + I.SeqFirst * D[2],
                     I.Out[0].as<T>(), D[0], D[1], D[2], C.Stream),
                 I);
  }
  // Rows given: the embedding gradient's scatter-add, the rows as ids.
  static Status positionEmbeddingGrad(const BI &I, const SC &Step, Ctx &C) {
    const Shape &D = I.In[0].Spec->Dims;
    const TensorRef &Tab = I.Out[0];
    const int32_t *Rows = nullptr;
    WEFT_RETURN_IF_ERROR(tableRows(I, Step, C, Rows));
    if (Rows)
      return check(cuda::embeddingGrad(I.In[0].as<T>(), Rows, D[0] * D[1],
                                       Tab.Rows, Tab.Last, Tab.as<T>(), 0,
                                       Tab.Rows, C.Scratch, C.Sink, C.Stream),
                   I);
    return check(cuda::positionEmbeddingGrad(I.In[0].as<T>(), Tab.as<T>(), D[0],
                                             D[1], Tab.Rows, D[2], I.SeqFirst,
                                             C.Stream),
                 I);
  }
  static Status matmul(const BI &I, const SC &, Ctx &C) {
    WEFT_RETURN_IF_ERROR(C.Gemm->run(C.Lt, I.In[0].Data, I.In[1].Data,
                                     I.Out[0].Data, C.Workspace,
                                     GemmWorkspaceBytes, C.Stream));
    if (I.In.size() < 3)
      return Status::success();
    // A fused bias (weft-fuse-bias), added in place after the product: the
    // same two kernels as an unfused bias_add. cuBLASLt's bias epilogue
    // would fold it into the GEMM (not done: no GPU to check it on).
    const TensorRef &Y = I.Out[0];
    return check(cuda::biasAdd(Y.as<T>(), I.In[2].as<T>(), Y.as<T>(), Y.Rows,
                               Y.Last, C.Stream),
                 I);
  }
  static Status biasAdd(const BI &I, const SC &, Ctx &C) {
    return check(cuda::biasAdd(I.In[0].as<T>(), I.In[1].as<T>(),
                               I.Out[0].as<T>(), I.In[0].Rows, I.In[0].Last,
                               C.Stream),
                 I);
  }
  // table[row] added to every row: a bias add of that row.
  static Status addRow(const BI &I, const SC &, Ctx &C) {
    return check(cuda::biasAdd(I.In[0].as<T>(),
                               I.In[1].as<T>() + I.Attrs->Row * I.In[0].Last,
                               I.Out[0].as<T>(), I.In[0].Rows, I.In[0].Last,
                               C.Stream),
                 I);
  }
  static Status rowGrad(const BI &I, const SC &, Ctx &C) {
    const int64_t N = I.In[0].Numel;
    WEFT_RETURN_IF_ERROR(
        check(cuda::fill(I.Out[0].as<T>(), I.Out[0].Numel, 0.0, C.Stream), I));
    return check(cudaMemcpyAsync(I.Out[0].as<T>() + I.Attrs->Row * N,
                                 I.In[0].Data, size_t(N) * sizeof(T),
                                 cudaMemcpyDeviceToDevice, C.Stream),
                 I);
  }
  static Status reduceRows(const BI &I, const SC &, Ctx &C) {
    return check(cuda::reduceRows(I.In[0].as<T>(), I.Out[0].as<T>(),
                                  I.In[0].Rows, I.In[0].Last, C.Scratch,
                                  C.Stream),
                 I);
  }
  static Status add(const BI &I, const SC &, Ctx &C) {
    return check(cuda::add(I.In[0].as<T>(), I.In[1].as<T>(), I.Out[0].as<T>(),
                           I.In[0].Numel, C.Stream),
                 I);
  }
  static Status accumulate(const BI &I, const SC &, Ctx &C) {
    T *Y = I.Out[0].as<T>();
    return check(cuda::add(Y, I.In[0].as<T>(), Y, I.In[0].Numel, C.Stream), I);
  }
  static Status mul(const BI &I, const SC &, Ctx &C) {
    return check(cuda::mul(I.In[0].as<T>(), I.In[1].as<T>(), I.Out[0].as<T>(),
                           I.In[0].Numel, C.Stream),
                 I);
  }
  static Status layerNorm(const BI &I, const SC &, Ctx &C) {
    return check(cuda::layerNorm(I.In[0].as<T>(), I.In[1].as<T>(),
                                 I.In[2].as<T>(), I.Out[0].as<T>(),
                                 I.In[0].Rows, I.In[0].Last, I.Attrs->Eps,
                                 C.Stream),
                 I);
  }
  static Status layerNormGrad(const BI &I, const SC &, Ctx &C) {
    return check(cuda::layerNormGrad(I.In[0].as<T>(), I.In[1].as<T>(),
                                     I.In[2].as<T>(), I.Out[0].as<T>(),
                                     I.Out[1].as<T>(), I.Out[2].as<T>(),
                                     I.In[1].Rows, I.In[1].Last, I.Attrs->Eps,
                                     C.Scratch, C.Stream),
                 I);
  }
  static Status rmsNorm(const BI &I, const SC &, Ctx &C) {
    return check(cuda::rmsNorm(I.In[0].as<T>(), I.In[1].as<T>(),
                               I.Out[0].as<T>(), I.In[0].Rows, I.In[0].Last,
                               I.Attrs->Eps, C.Stream),
                 I);
  }
  static Status rmsNormGrad(const BI &I, const SC &, Ctx &C) {
    return check(cuda::rmsNormGrad(I.In[0].as<T>(), I.In[1].as<T>(),
                                   I.In[2].as<T>(), I.Out[0].as<T>(),
                                   I.Out[1].as<T>(), I.In[1].Rows, I.In[1].Last,
                                   I.Attrs->Eps, C.Scratch, C.Stream),
                 I);
  }
  static Status gelu(const BI &I, const SC &, Ctx &C) {
    return check(
        cuda::gelu(I.In[0].as<T>(), I.Out[0].as<T>(), I.In[0].Numel, C.Stream),
        I);
  }
  static Status geluGrad(const BI &I, const SC &, Ctx &C) {
    return check(cuda::geluGrad(I.In[0].as<T>(), I.In[1].as<T>(),
                                I.Out[0].as<T>(), I.In[0].Numel, C.Stream),
                 I);
  }
  static Status act(const BI &I, const SC &, Ctx &C) {
    return check(cuda::act(I.Attrs->Act, I.In[0].as<T>(), I.Out[0].as<T>(),
                           I.In[0].Numel, C.Stream),
                 I);
  }
  static Status actGrad(const BI &I, const SC &, Ctx &C) {
    return check(cuda::actGrad(I.Attrs->Act, I.In[0].as<T>(), I.In[1].as<T>(),
                               I.Out[0].as<T>(), I.In[0].Numel, C.Stream),
                 I);
  }
  static Status silu(const BI &I, const SC &, Ctx &C) {
    return check(
        cuda::silu(I.In[0].as<T>(), I.Out[0].as<T>(), I.In[0].Numel, C.Stream),
        I);
  }
  static Status siluGrad(const BI &I, const SC &, Ctx &C) {
    return check(cuda::siluGrad(I.In[0].as<T>(), I.In[1].as<T>(),
                                I.Out[0].as<T>(), I.In[0].Numel, C.Stream),
                 I);
  }
  static Status swiglu(const BI &I, const SC &, Ctx &C) {
    return check(cuda::swiglu(I.In[0].as<T>(), I.In[1].as<T>(),
                              I.Out[0].as<T>(), I.In[0].Numel, C.Stream),
                 I);
  }
  static Status swigluGrad(const BI &I, const SC &, Ctx &C) {
    return check(cuda::swigluGrad(I.In[0].as<T>(), I.In[1].as<T>(),
                                  I.In[2].as<T>(), I.Out[0].as<T>(),
                                  I.Out[1].as<T>(), I.In[0].Numel, C.Stream),
                 I);
  }
  // Positions from SeqFirst, load-balanced rows' (one row for all), or
  // packed documents' (this run's, a row per sample), as the CPU's.
  static Status rope(const BI &I, const SC &Step, Ctx &C) {
    const Shape &D = I.In[0].Spec->Dims;
    int64_t H = I.Attrs->NumHeads;
    const int32_t *Pos = C.Positions->SeqPos;
    int64_t Stride = 0;
    if (const int32_t *Doc = documentRow(I, Step)) {
      WEFT_RETURN_IF_ERROR(
          copyRows(Doc, Step.DocSeq, D[0], D[1], C, C.Positions->Rows));
      Pos = C.Positions->Rows;
      Stride = D[1];
    }
    return check(cuda::rope(I.In[0].as<T>(), I.Out[0].as<T>(), D[0], D[1], H,
                            D[2] / H, I.Attrs->Theta, I.Attrs->Inverse,
                            C.InvFreq, I.Attrs->Scale, I.SeqFirst, Pos, Stride,
                            C.Stream),
                 I);
  }
  // Plain causal attention runs on the fused kernels (Attention.cu); any
  // mask, dropout or block of the sequence on MaskedAttention.cu's.
  static bool plain(const BI &I, const SC &Step) {
    const OpAttrs &At = *I.Attrs;
    return !At.Bidirectional && At.Window <= 0 && At.DropP <= 0 &&
           !At.KeyPadding && At.SeqAxes.empty() && I.SeqPos.empty() &&
           I.SeqChunks <= 0 && !documentRow(I, Step);
  }
  // The masked kernels' arguments; this run's documents and key spans
  // copied to the device. QIn is the queries' input.
  static Status masked(const BI &I, const SC &Step, Ctx &C, size_t QIn,
                       bool Ring, MaskedAttention &M) {
    const Shape &Qd = I.In[QIn].Spec->Dims, &Kd = I.In[QIn + 1].Spec->Dims;
    const OpAttrs &At = *I.Attrs;
    M.B = Qd[0];
    M.Sq = Qd[1];
    M.Sk = Kd[1];
    M.H = At.NumHeads;
    M.Hkv = At.NumKvHeads;
    M.Hd = Qd[2] / M.H;
    M.Scale = At.AttnScale;
    M.Causal = !At.Bidirectional;
    M.Window = At.Window;
    M.QPos = C.Positions->QPos;
    M.KPos = C.Positions->KPos;
    if (At.KeyPadding && !keySpans(I, Step))
      return Status::error(describeInstruction(I) +
                           ": the step's attention mask is not set");
    if (const int32_t *Doc = documentRow(I, Step)) {
      WEFT_RETURN_IF_ERROR(
          copyRows(Doc, Step.DocSeq, M.B, M.Sq, C, C.Positions->Doc));
      M.Doc = C.Positions->Doc;
      M.DocStride = M.Sq;
    }
    if (const int32_t *Spans = keySpans(I, Step)) {
      WEFT_RETURN_IF_ERROR(C.Queue->copyToDevice(
          C.Positions->Spans, Spans, size_t(2 * M.B) * sizeof(int32_t)));
      M.Spans = C.Positions->Spans;
    }
    if (At.DropP > 0) {
      M.Drop = true;
      M.Key = dropoutKey(I, Step);
      M.BatchFirst = I.DimFirst[0] + Step.Microbatch * I.MicrobatchRows;
      M.HeadFirst = I.DimFirst[2] / M.Hd;
      M.Heads = I.DimTotal[2] / M.Hd;
      M.Seq = Ring ? I.DimTotal[1] : M.Sk;
    }
    return Status::success();
  }
  static Status attention(const BI &I, const SC &Step, Ctx &C) {
    const Shape &D = I.In[0].Spec->Dims;
    int64_t H = I.Attrs->NumHeads;
    if (plain(I, Step))
      return check(cuda::attention(I.In[0].as<T>(), I.In[1].as<T>(),
                                   I.In[2].as<T>(), I.Out[0].as<T>(), D[0],
                                   D[1], H, I.Attrs->NumKvHeads, D[2] / H,
                                   I.Attrs->AttnScale, C.Scratch, C.Stream),
                   I);
    MaskedAttention M;
    WEFT_RETURN_IF_ERROR(masked(I, Step, C, 0, false, M));
    return check(cuda::maskedAttention(M, I.In[0].as<T>(), I.In[1].as<T>(),
                                       I.In[2].as<T>(), I.Out[0].as<T>(),
                                       static_cast<T *>(nullptr), C.Stream),
                 I);
  }
  static Status attentionGrad(const BI &I, const SC &Step, Ctx &C) {
    const Shape &D = I.In[1].Spec->Dims;
    int64_t H = I.Attrs->NumHeads;
    if (plain(I, Step))
      return check(cuda::attentionGrad(
                       I.In[0].as<T>(), I.In[1].as<T>(), I.In[2].as<T>(),
                       I.In[3].as<T>(), I.Out[0].as<T>(), I.Out[1].as<T>(),
                       I.Out[2].as<T>(), D[0], D[1], H, I.Attrs->NumKvHeads,
                       D[2] / H, I.Attrs->AttnScale, C.Scratch, C.Stream),
                   I);
    // The whole rows' o and log-sum-exp again (f32 for bf16, as the CPU's
    // widened kernel), then the block gradient.
    MaskedAttention M;
    WEFT_RETURN_IF_ERROR(masked(I, Step, C, 1, false, M));
    L *O = static_cast<L *>(C.Scratch);
    L *Lse = O + maskedRowsOf(I);
    void *Rest = static_cast<char *>(C.Scratch) + maskedGradExtraBytes(I);
    WEFT_RETURN_IF_ERROR(
        check(cuda::maskedAttention(M, I.In[1].as<T>(), I.In[2].as<T>(),
                                    I.In[3].as<T>(), O, Lse, C.Stream),
              I));
    return check(cuda::maskedAttentionGrad(
                     M, I.In[0].as<T>(), I.In[1].as<T>(), I.In[2].as<T>(),
                     I.In[3].as<T>(), O, Lse, I.Out[0].as<T>(),
                     I.Out[1].as<T>(), I.Out[2].as<T>(), Rest, C.Stream),
                 I);
  }
  // The o and log-sum-exp a masked attention gradient recomputes, in L,
  // before the kernel's own scratch: elements of o, then bytes of both.
  static int64_t maskedRowsOf(const BI &I) { return I.In[1].Numel; }
  static size_t maskedGradExtraBytes(const BI &I) {
    return recomputeBytes(I.In[1].Spec->Dims, I.Attrs->NumHeads, sizeof(L));
  }
  // Ring attention (MeshOps.cpp sets the rows' positions).
  static Status attentionBlock(const BI &I, const SC &Step, Ctx &C) {
    MaskedAttention M;
    WEFT_RETURN_IF_ERROR(masked(I, Step, C, 0, true, M));
    return check(cuda::maskedAttention(M, I.In[0].as<T>(), I.In[1].as<T>(),
                                       I.In[2].as<T>(), I.Out[0].as<T>(),
                                       I.Out[1].as<T>(), C.Stream),
                 I);
  }
  static Status softmaxMerge(const BI &I, const SC &, Ctx &C) {
    const Shape &D = I.In[0].Spec->Dims;
    const int64_t H = I.Attrs->NumHeads;
    return check(cuda::softmaxMerge(I.In[0].as<T>(), I.In[1].as<T>(),
                                    I.In[2].as<T>(), I.In[3].as<T>(),
                                    I.Out[0].as<T>(), I.Out[1].as<T>(), D[0],
                                    D[1], H, D[2] / H, C.Stream),
                 I);
  }
  static Status attentionBlockGrad(const BI &I, const SC &Step, Ctx &C) {
    MaskedAttention M;
    WEFT_RETURN_IF_ERROR(masked(I, Step, C, 1, true, M));
    return check(cuda::maskedAttentionGrad(
                     M, I.In[0].as<T>(), I.In[1].as<T>(), I.In[2].as<T>(),
                     I.In[3].as<T>(), I.In[4].as<T>(), I.In[5].as<T>(),
                     I.Out[0].as<T>(), I.Out[1].as<T>(), I.Out[2].as<T>(),
                     C.Scratch, C.Stream),
                 I);
  }
  // The columns a row's loss reads and its divisor (a masked loss: the
  // step's counted targets), as the CPU's (runtime/CrossEntropyRows.h).
  static Status ceRows(const BI &I, const SC &Step, int64_t V, int64_t First,
                       int64_t Total, CeRows &How) {
    WEFT_RETURN_IF_ERROR(classColumns(V, First, Total, I.Attrs->Classes,
                                      opName(I.Op), How.Columns)
                             .withContext(describeInstruction(I)));
    How.Masked = I.Attrs->Masked;
    // The statistics divide nothing: they need no count (as the CPU's).
    if (How.Masked && Step.CountedTargets < 0 &&
        I.Op != OpKind::CrossEntropyStats)
      return Status::error(describeInstruction(I) +
                           ": the step's count of targets is unknown");
    const int64_t Rows = I.In[0].Rows;
    How.Divisor =
        lossDivisor(How.Masked ? Step.CountedTargets : I.Attrs->Denominator,
                    Rows, How.Masked);
    return Status::success();
  }
  // Targets of a vocab-parallel loss lie in the classes, or the vocabulary.
  static int64_t targetBound(const BI &I, int64_t Total) {
    return I.Attrs->Classes > 0 ? I.Attrs->Classes : Total;
  }
  static Status crossEntropy(const BI &I, const SC &Step, Ctx &C) {
    const TensorRef &Lg = I.In[0];
    CeRows How;
    WEFT_RETURN_IF_ERROR(ceRows(I, Step, Lg.Last, 0, Lg.Last, How));
    return check(cuda::crossEntropy(Lg.as<T>(), I.In[1].as<int32_t>(), Lg.Rows,
                                    Lg.Last, How, I.Out[0].as<L>(), C.Scratch,
                                    C.Sink, C.Stream),
                 I);
  }
  static Status crossEntropyGrad(const BI &I, const SC &Step, Ctx &C) {
    const TensorRef &Lg = I.In[0];
    CeRows How;
    WEFT_RETURN_IF_ERROR(ceRows(I, Step, Lg.Last, 0, Lg.Last, How));
    return check(cuda::crossEntropyGrad(
                     Lg.as<T>(), I.In[1].as<int32_t>(), I.In[2].as<L>(),
                     I.Out[0].as<T>(), Lg.Rows, Lg.Last, How, C.Sink, C.Stream),
                 I);
  }
  static Status crossEntropyStats(const BI &I, const SC &Step, Ctx &C) {
    const TensorRef &Lg = I.In[0];
    const int64_t Total = vocabTotal(I, Lg.Last);
    CeRows How;
    WEFT_RETURN_IF_ERROR(ceRows(I, Step, Lg.Last, I.VocabFirst, Total, How));
    return check(cuda::crossEntropyStats(Lg.as<T>(), I.In[1].as<int32_t>(),
                                         Lg.Rows, Lg.Last, I.VocabFirst,
                                         targetBound(I, Total), How,
                                         I.Out[0].as<L>(), C.Sink, C.Stream),
                 I);
  }
  static Status crossEntropyFromStats(const BI &I, const SC &Step, Ctx &C) {
    const TensorRef &St = I.In[0];
    const int64_t K = St.Spec->Dims[0], Rows = St.Numel / (3 * K);
    CeRows How;
    How.Columns = 1; // reads no logits
    How.Masked = I.Attrs->Masked;
    How.Divisor =
        lossDivisor(How.Masked ? Step.CountedTargets : I.Attrs->Denominator,
                    Rows, How.Masked);
    return check(cuda::crossEntropyFromStats(St.as<L>(), K, Rows, How,
                                             I.Out[0].as<L>(), C.Scratch,
                                             C.Stream),
                 I);
  }
  static Status crossEntropyStatsGrad(const BI &I, const SC &Step, Ctx &C) {
    const TensorRef &Lg = I.In[0];
    const int64_t Total = vocabTotal(I, Lg.Last);
    CeRows How;
    WEFT_RETURN_IF_ERROR(ceRows(I, Step, Lg.Last, I.VocabFirst, Total, How));
    return check(cuda::crossEntropyStatsGrad(
                     Lg.as<T>(), I.In[1].as<int32_t>(), I.In[2].as<L>(),
                     I.In[2].Spec->Dims[0], I.In[3].as<L>(), I.Out[0].as<T>(),
                     Lg.Rows, Lg.Last, I.VocabFirst, targetBound(I, Total), How,
                     C.Sink, C.Stream),
                 I);
  }
  static Status fill(const BI &I, const SC &, Ctx &C) {
    const TensorRef &Y = I.Out[0];
    if (Y.Spec->Type == DType::I32)
      return check(
          cuda::fill(Y.as<int32_t>(), Y.Numel, I.Attrs->Value, C.Stream), I);
    return check(cuda::fill(Y.as<T>(), Y.Numel, I.Attrs->Value, C.Stream), I);
  }
  static Status adamw(const BI &I, const SC &Step, Ctx &C) {
    const AdamWParams P = adamwParams(I, Step);
    return check(cuda::adamw(I.In[0].as<T>(), I.In[1].as<T>(), I.In[2].as<T>(),
                             I.In[3].as<T>(), I.In[0].Numel, P, C.Stream),
                 I);
  }

  // The generic path: shapes come from the buffers (validated at load).
  static const Shape &dims(const TensorRef &R) { return R.Spec->Dims; }
  static Status pointwise(const BI &I, const SC &, Ctx &C) {
    return check(cuda::pointwise(I.Attrs->Pointwise, I.Attrs->Scalar,
                                 I.In[0].as<T>(), I.Out[0].as<T>(),
                                 I.In[0].Numel, C.Stream),
                 I);
  }
  static Status pointwiseGrad(const BI &I, const SC &, Ctx &C) {
    return check(cuda::pointwiseGrad(I.Attrs->Pointwise, I.Attrs->Scalar,
                                     I.In[0].as<T>(), I.In[1].as<T>(),
                                     I.Out[0].as<T>(), I.In[0].Numel, C.Stream),
                 I);
  }
  static Status binary(const BI &I, const SC &, Ctx &C) {
    return check(cuda::binary(I.Attrs->Binary, I.In[0].as<T>(), dims(I.In[0]),
                              I.In[1].as<T>(), dims(I.In[1]), I.Out[0].as<T>(),
                              dims(I.Out[0]), C.Stream),
                 I);
  }
  static Status binaryGrad(const BI &I, const SC &, Ctx &C) {
    return check(cuda::binaryGrad(I.Attrs->Binary, int(I.Attrs->Operand),
                                  I.In[0].as<T>(), dims(I.In[0]),
                                  I.In[1].as<T>(), dims(I.In[1]),
                                  I.In[2].as<T>(), dims(I.In[2]),
                                  I.Out[0].as<T>(), C.Stream),
                 I);
  }
  static Status select(const BI &I, const SC &, Ctx &C) {
    return check(cuda::select(I.In[0].as<T>(), dims(I.In[0]), I.In[1].as<T>(),
                              dims(I.In[1]), I.In[2].as<T>(), dims(I.In[2]),
                              I.Out[0].as<T>(), dims(I.Out[0]), C.Stream),
                 I);
  }
  static Status selectGrad(const BI &I, const SC &, Ctx &C) {
    return check(cuda::selectGrad(int(I.Attrs->Operand), I.In[0].as<T>(),
                                  dims(I.In[0]), I.In[1].as<T>(), dims(I.In[1]),
                                  I.Out[0].as<T>(), dims(I.Out[0]), C.Stream),
                 I);
  }
  static Status broadcast(const BI &I, const SC &, Ctx &C) {
    return check(cuda::broadcast(I.In[0].as<T>(), dims(I.In[0]),
                                 I.Out[0].as<T>(), dims(I.Out[0]), C.Stream),
                 I);
  }
  static Status reduce(const BI &I, const SC &, Ctx &C) {
    return check(cuda::reduce(I.In[0].as<T>(), dims(I.In[0]), I.Out[0].as<T>(),
                              dims(I.Out[0]), C.Stream),
                 I);
  }
  static Status transpose(const BI &I, const SC &, Ctx &C) {
    return check(cuda::transpose(I.In[0].as<T>(), dims(I.In[0]), I.Attrs->Perm,
                                 I.Out[0].as<T>(), C.Stream),
                 I);
  }
  static Status softmax(const BI &I, const SC &, Ctx &C) {
    return check(cuda::softmax(I.In[0].as<T>(), I.Out[0].as<T>(), I.In[0].Rows,
                               I.In[0].Last, C.Stream),
                 I);
  }
  static Status softmaxGrad(const BI &I, const SC &, Ctx &C) {
    return check(cuda::softmaxGrad(I.In[0].as<T>(), I.In[1].as<T>(),
                                   I.Out[0].as<T>(), I.In[0].Rows, I.In[0].Last,
                                   C.Stream),
                 I);
  }
  // One GEMM per batch index, each on the plan prepare made for one.
  static Status batchMatmul(const BI &I, const SC &, Ctx &C) {
    const GemmShape G = matmulGemm(I, I.In[0].Spec->Type); // M, N, K
    const int64_t Batch = I.In[0].Numel / (G.M * G.K);
    for (int64_t B = 0; B < Batch; ++B)
      WEFT_RETURN_IF_ERROR(C.Gemm->run(
          C.Lt, I.In[0].as<T>() + B * G.M * G.K,
          I.In[1].as<T>() + B * G.K * G.N, I.Out[0].as<T>() + B * G.M * G.N,
          C.Workspace, GemmWorkspaceBytes, C.Stream));
    return Status::success();
  }
  // mean((pred - target)^2) over the step's elements (attrs.denominator,
  // else this rank's), as the CPU.
  static int64_t mseDivisor(const BI &I) {
    return I.Attrs->Denominator ? I.Attrs->Denominator : I.In[0].Numel;
  }
  static Status mseLoss(const BI &I, const SC &, Ctx &C) {
    return check(cuda::mseLoss(I.In[0].as<T>(), I.In[1].as<T>(), I.In[0].Numel,
                               mseDivisor(I), I.Out[0].as<T>(), C.Stream),
                 I);
  }
  static Status mseLossGrad(const BI &I, const SC &, Ctx &C) {
    return check(cuda::mseLossGrad(I.In[0].as<T>(), I.In[1].as<T>(),
                                   I.In[2].as<T>(), I.In[0].Numel,
                                   mseDivisor(I), I.Out[0].as<T>(), C.Stream),
                 I);
  }
  static Status dropout(const BI &I, const SC &Step, Ctx &C) {
    // Placed at load (MeshOps.cpp): this micro-batch's rows of the step.
    std::vector<int64_t> First = I.DimFirst;
    if (First.empty())
      First.assign(dims(I.In[0]).size(), 0);
    First[0] += Step.Microbatch * I.MicrobatchRows;
    const std::vector<int64_t> &Total =
        I.DimTotal.empty() ? dims(I.In[0]) : I.DimTotal;
    return check(cuda::dropout(I.In[0].as<T>(), I.Out[0].as<T>(), dims(I.In[0]),
                               First, Total, dropoutKey(I, Step),
                               C.Positions->SeqPos, C.Stream),
                 I);
  }

  // The one op-to-kernel table (runtime/KernelTable.h), filled here; the
  // byte-moving ops (Bytes::of) run whatever the dtype.
  static KernelTable<KernelFn> table() {
    KernelTable<KernelFn> Tab;
    auto Set = [&](OpKind K, KernelFn F) { Tab.set(K, F); };
    Set(OpKind::Embedding, embedding);
    Set(OpKind::EmbeddingGrad, embeddingGrad);
    Set(OpKind::PositionEmbedding, positionEmbedding);
    Set(OpKind::PositionEmbeddingGrad, positionEmbeddingGrad);
    Set(OpKind::Matmul, matmul);
    Set(OpKind::BiasAdd, biasAdd);
    Set(OpKind::ReduceRows, reduceRows);
    Set(OpKind::AddRow, addRow);
    Set(OpKind::RowGrad, rowGrad);
    Set(OpKind::Add, add);
    Set(OpKind::Accumulate, accumulate);
    Set(OpKind::Mul, mul);
    Set(OpKind::LayerNorm, layerNorm);
    Set(OpKind::LayerNormGrad, layerNormGrad);
    Set(OpKind::RmsNorm, rmsNorm);
    Set(OpKind::RmsNormGrad, rmsNormGrad);
    Set(OpKind::Gelu, gelu);
    Set(OpKind::GeluGrad, geluGrad);
    Set(OpKind::Act, act);
    Set(OpKind::ActGrad, actGrad);
    Set(OpKind::Silu, silu);
    Set(OpKind::SiluGrad, siluGrad);
    Set(OpKind::Swiglu, swiglu);
    Set(OpKind::SwigluGrad, swigluGrad);
    Set(OpKind::Rope, rope);
    Set(OpKind::Attention, attention);
    Set(OpKind::AttentionGrad, attentionGrad);
    Set(OpKind::AttentionBlock, attentionBlock);
    Set(OpKind::SoftmaxMerge, softmaxMerge);
    Set(OpKind::AttentionBlockGrad, attentionBlockGrad);
    Set(OpKind::CrossEntropy, crossEntropy);
    Set(OpKind::CrossEntropyGrad, crossEntropyGrad);
    Set(OpKind::CrossEntropyStats, crossEntropyStats);
    Set(OpKind::CrossEntropyFromStats, crossEntropyFromStats);
    Set(OpKind::CrossEntropyStatsGrad, crossEntropyStatsGrad);
    Set(OpKind::Fill, fill);
    Set(OpKind::AdamW, adamw);
    Set(OpKind::Pointwise, pointwise);
    Set(OpKind::PointwiseGrad, pointwiseGrad);
    Set(OpKind::Binary, binary);
    Set(OpKind::BinaryGrad, binaryGrad);
    Set(OpKind::Select, select);
    Set(OpKind::SelectGrad, selectGrad);
    Set(OpKind::Broadcast, broadcast);
    Set(OpKind::Reduce, reduce);
    Set(OpKind::Transpose, transpose);
    Set(OpKind::Softmax, softmax);
    Set(OpKind::SoftmaxGrad, softmaxGrad);
    Set(OpKind::BatchMatmul, batchMatmul);
    Set(OpKind::MseLoss, mseLoss);
    Set(OpKind::MseLossGrad, mseLossGrad);
    Set(OpKind::Dropout, dropout);
    return Tab;
  }
};

// Ops that move bytes, whatever their dtype.
struct Bytes {
  static size_t elemBytes(const TensorRef &R) {
    return dtypeBytes(R.Spec->Type);
  }
  // memmove semantics, as the CPU's copy (cudaMemcpy must not overlap).
  static Status copy(const BI &I, const SC &, Ctx &C) {
    auto *D = static_cast<char *>(I.Out[0].Data);
    auto *S = static_cast<const char *>(I.In[0].Data);
    for (const CopyPiece &P : memmovePieces(
             reinterpret_cast<uintptr_t>(D), reinterpret_cast<uintptr_t>(S),
             size_t(I.In[0].Numel) * elemBytes(I.In[0])))
      WEFT_RETURN_IF_ERROR(
          check(cudaMemcpyAsync(D + P.Offset, S + P.Offset, P.Bytes,
                                cudaMemcpyDeviceToDevice, C.Stream),
                I));
    return Status::success();
  }
  // Pieces end to end, or (attrs blocks = n) block b of every piece for
  // b = 0..n-1, as the CPU backend.
  static Status pack(const BI &I, const SC &, Ctx &C) {
    char *Out = static_cast<char *>(I.Out[0].Data);
    cudaError_t E = cudaSuccess;
    forEachPackedRun(
        I, [&](const TensorRef &Piece, size_t At, size_t Flat, size_t Bytes) {
          // A gradient written into its bucket (weft-plan-memory) is there.
          const char *From = static_cast<const char *>(Piece.Data) + At;
          if (E == cudaSuccess && From != Out + Flat)
            E = cudaMemcpyAsync(Out + Flat, From, Bytes,
                                cudaMemcpyDeviceToDevice, C.Stream);
        });
    return check(E, I);
  }
  static Status unpack(const BI &I, const SC &, Ctx &C) {
    const char *In = static_cast<const char *>(I.In[0].Data);
    cudaError_t E = cudaSuccess;
    forEachPackedRun(
        I, [&](const TensorRef &Piece, size_t At, size_t Flat, size_t Bytes) {
          if (E == cudaSuccess)
            E = cudaMemcpyAsync(static_cast<char *>(Piece.Data) + At, In + Flat,
                                Bytes, cudaMemcpyDeviceToDevice, C.Stream);
        });
    return check(E, I);
  }
  // X [Rows, N] into column blocks Out[k] [Rows, W_k]; concat the inverse.
  static Status split(const BI &I, const SC &, Ctx &C) {
    const TensorRef &X = I.In[0];
    const size_t E = elemBytes(X);
    int64_t Col = 0;
    for (const TensorRef &P : I.Out) {
      WEFT_RETURN_IF_ERROR(check(
          cuda::copyBlock(static_cast<const char *>(X.Data) + Col * E, X.Last,
                          P.Data, P.Last, X.Rows, P.Last, E, C.Stream),
          I));
      Col += P.Last;
    }
    return Status::success();
  }
  static Status concat(const BI &I, const SC &, Ctx &C) {
    const TensorRef &Y = I.Out[0];
    const size_t E = elemBytes(Y);
    int64_t Col = 0;
    for (const TensorRef &P : I.In) {
      WEFT_RETURN_IF_ERROR(check(
          cuda::copyBlock(P.Data, P.Last, static_cast<char *>(Y.Data) + Col * E,
                          Y.Last, Y.Rows, P.Last, E, C.Stream),
          I));
      Col += P.Last;
    }
    return Status::success();
  }
  // x [d0.., dD, ..] -> y [c*d0, .., dD/c, ..] (see the CPU backend): for
  // each k, Outer chunks at stride c*Chunk in the natural layout are
  // contiguous in the blocked one: one 2-D copy per k.
  static Status blockTranspose(const BI &I, const SC &, Ctx &C) {
    const bool Inv = I.Attrs->Inverse;
    const TensorRef &X = I.In[0], &Y = I.Out[0];
    const Shape &Full = (Inv ? Y : X).Spec->Dims;
    const Shape &Moved = (Inv ? X : Y).Spec->Dims;
    const size_t D = size_t(I.Attrs->Dim);
    const int64_t Outer = numElements(Shape(Full.begin(), Full.begin() + D));
    const int64_t K = Full[D] / Moved[D];
    const int64_t Chunk = numElements(Shape(Moved.begin() + D, Moved.end()));
    const size_t E = elemBytes(X);
    const char *In = static_cast<const char *>(X.Data);
    char *Out = static_cast<char *>(Y.Data);
    for (int64_t Kk = 0; Kk < K; ++Kk) {
      const char *Natural = (Inv ? Out : In) + Kk * Chunk * int64_t(E);
      const char *Blocked = (Inv ? In : Out) + Kk * Outer * Chunk * int64_t(E);
      // Natural rows at stride K*Chunk, blocked rows at stride Chunk.
      const void *Src = Inv ? Blocked : Natural;
      void *Dst = const_cast<char *>(Inv ? Natural : Blocked);
      int64_t LdSrc = Inv ? Chunk : K * Chunk, LdDst = Inv ? K * Chunk : Chunk;
      WEFT_RETURN_IF_ERROR(check(
          cuda::copyBlock(Src, LdSrc, Dst, LdDst, Outer, Chunk, E, C.Stream),
          I));
    }
    return Status::success();
  }
  // f32 <-> bf16, the only casts a program holds.
  static Status cast(const BI &I, const SC &, Ctx &C) {
    const TensorRef &X = I.In[0], &Y = I.Out[0];
    if (X.Spec->Type == DType::BF16 && Y.Spec->Type == DType::F32)
      return check(cuda::cast(X.as<bf16>(), Y.as<float>(), X.Numel, C.Stream),
                   I);
    if (X.Spec->Type == DType::F32 && Y.Spec->Type == DType::BF16)
      return check(cuda::cast(X.as<float>(), Y.as<bf16>(), X.Numel, C.Stream),
                   I);
    return Status::error(describeInstruction(I) + ": no CUDA kernel casts " +
                         dtypeName(X.Spec->Type) + " to " +
                         dtypeName(Y.Spec->Type));
  }
  static KernelFn of(OpKind K) {
    switch (K) {
    case OpKind::Copy:
    case OpKind::Reshape: // the same bytes in another shape
      return copy;
    case OpKind::Pack:
      return pack;
    case OpKind::Unpack:
      return unpack;
    case OpKind::Split:
      return split;
    case OpKind::Concat:
      return concat;
    case OpKind::BlockTranspose:
      return blockTranspose;
    case OpKind::Cast:
      return cast;
    default:
      return nullptr;
    }
  }
};

/// Which of kernelTables() runs dtype T.
int tableOf(DType T) { return T == DType::F64 ? 1 : T == DType::BF16 ? 2 : 0; }

/// The f32, f64 and bf16 tables (tableOf's order); the byte-moving ops in
/// each.
std::array<KernelTable<KernelFn>, 3> kernelTables() {
  std::array<KernelTable<KernelFn>, 3> Tables = {Kernels<float>::table(),
                                                 Kernels<double>::table(),
                                                 Kernels<bf16>::table()};
  for (KernelTable<KernelFn> &Table : Tables)
    for (int K = 0; K < NumOpKinds; ++K)
      if (KernelFn F = Bytes::of(OpKind(K)))
        Table.set(OpKind(K), F);
  return Tables;
}

class CudaBackend final : public Backend {
public:
  CudaBackend() : Tables(kernelTables()) {}
  std::vector<OpKind> missingKernels(DType T) const override {
    return Tables[tableOf(T)].missing();
  }
  ~CudaBackend() override {
    Plans.clear();
    release(Scratch);
    release(Workspace);
    release(ErrorSlot);
    release(NonFiniteAt);
    for (double *F : Freqs)
      cudaFree(F);
    if (Lt)
      cublasLtDestroy(Lt);
  }

  Status init() {
    WEFT_RETURN_IF_ERROR(cublasStatus(cublasLtCreate(&Lt), "cublasLtCreate"));
    ErrorSlot = allocate(sizeof(KernelError));
    NonFiniteAt = allocate(sizeof(long long));
    Workspace = allocate(GemmWorkspaceBytes);
    if (!ErrorSlot || !NonFiniteAt || !Workspace)
      return Status::error("cudaMalloc of the CUDA backend's " +
                           std::to_string(GemmWorkspaceBytes >> 20) +
                           " MiB GEMM workspace failed");
    return Status::success();
  }

  const char *name() const override { return "cuda"; }

  void *allocate(size_t Bytes) override {
    void *P = nullptr;
    if (cudaMalloc(&P, std::max<size_t>(Bytes, 1)) != cudaSuccess) {
      cudaGetLastError(); // clear the sticky-free error
      return nullptr;
    }
    // cudaMemset may return before it has run, and the queues' streams do
    // not wait for the legacy stream: finish it before anyone uses P.
    if (cudaMemset(P, 0, std::max<size_t>(Bytes, 1)) != cudaSuccess ||
        cudaDeviceSynchronize() != cudaSuccess) {
      cudaFree(P);
      return nullptr;
    }
    return P;
  }
  void release(void *Ptr) override {
    if (Ptr)
      cudaFree(Ptr);
  }

  std::unique_ptr<Queue> createQueue() override {
    Expected<std::unique_ptr<CudaQueue>> Q =
        CudaQueue::create(static_cast<KernelError *>(ErrorSlot),
                          [this](int I) { return nameOf(I); });
    if (!Q.ok())
      return nullptr;
    return std::move(*Q);
  }

  Expected<size_t> prepare(const std::vector<BI> &Insts) override;
  Status run(const BI &I, const SC &Ctx, Queue &Q) override;
  Status findNonFinite(const void *Data, int64_t N, DType T, Queue &Q,
                       int64_t &At, double &Value) override;

private:
  struct Plan {
    KernelFn Fn = nullptr;
    std::unique_ptr<CudaMatmulPlan> Gemm;
    const double *InvFreq = nullptr;
    // Widened to f32: the offsets of bf16 operands in the widening region
    // of Scratch.
    bool Widen = false;
    WideningPlan At;
    BI Copy; // the instruction with widened pointers, refreshed per run
    std::unique_ptr<PositionArrays> Positions; // ops that read positions
  };

  std::string nameOf(int I) const {
    std::string Op = I >= 0 && size_t(I) < OpNames.size() ? OpNames[I] : "?";
    return "instructions[" + std::to_string(I) + "] (" + Op + ")";
  }
  Expected<size_t> kernelScratch(const BI &I, DType T) const;

  std::array<KernelTable<KernelFn>, 3> Tables;
  cublasLtHandle_t Lt = nullptr;
  void *ErrorSlot = nullptr, *NonFiniteAt = nullptr, *Workspace = nullptr;
  void *Scratch = nullptr;
  size_t WidenOffset = 0; // bytes into Scratch where widened operands go
  std::vector<std::unique_ptr<Plan>> Plans; // by instruction index
  std::vector<std::string> OpNames;         // by instruction index
  std::vector<double *> Freqs;
};

Expected<size_t> CudaBackend::kernelScratch(const BI &I, DType T) const {
  const size_t E = dtypeBytes(T);
  switch (I.Op) {
  case OpKind::Attention:
  case OpKind::AttentionGrad: {
    const Shape &D = I.In[I.Op == OpKind::Attention ? 0 : 1].Spec->Dims;
    int64_t H = I.Attrs->NumHeads;
    const size_t Fused =
        attentionScratchBytes(D[0], D[1], H, I.Attrs->NumKvHeads, D[2] / H, E);
    if (I.Op == OpKind::Attention)
      return Fused;
    // The masked gradient: o and the log-sum-exp (f32 for bf16), then its
    // own.
    const size_t Masked =
        recomputeBytes(D, H, T == DType::BF16 ? sizeof(float) : E) +
        maskedAttentionScratchBytes(D[0], D[1], H);
    return std::max(Fused, Masked);
  }
  case OpKind::AttentionBlockGrad: {
    const Shape &D = I.In[1].Spec->Dims;
    return maskedAttentionScratchBytes(D[0], D[1], I.Attrs->NumHeads);
  }
  case OpKind::LayerNormGrad:
  case OpKind::RmsNormGrad:
    return normGradScratchBytes(I.In[1].Rows, I.In[1].Last);
  case OpKind::ReduceRows:
    return columnSumScratchBytes(I.In[0].Rows, I.In[0].Last, 1);
  case OpKind::EmbeddingGrad:
    return embeddingGradScratchBytes(I.In[1].Numel, I.Out[0].Last);
  case OpKind::PositionEmbeddingGrad: // rows given: an embedding gradient
    return embeddingGradScratchBytes(I.In[0].Rows, I.Out[0].Last);
  case OpKind::CrossEntropy:
    return crossEntropyScratchBytes(I.In[0].Rows);
  case OpKind::CrossEntropyFromStats: {
    int64_t K = I.In[0].Spec->Dims[0];
    return crossEntropyScratchBytes(I.In[0].Numel / (3 * K));
  }
  default:
    return size_t(0);
  }
}

Expected<size_t> CudaBackend::prepare(const std::vector<BI> &Insts) {
  Plans.clear();
  OpNames.clear();
  for (double *F : Freqs)
    cudaFree(F);
  Freqs.clear();
  size_t KernelBytes = 0;
  int64_t WidenFloats = 0;
  for (const BI &I : Insts) {
    if (I.Index >= Plans.size()) {
      Plans.resize(I.Index + 1);
      OpNames.resize(I.Index + 1);
    }
    OpNames[I.Index] = opName(I.Op);
    // The generic kernels index through MaxGenericRank dims at most.
    for (const auto *Ops : {&I.In, &I.Out})
      for (size_t K = 0; K < Ops->size(); ++K)
        if ((*Ops)[K].Spec->Dims.size() > size_t(MaxGenericRank) &&
            backendRunsOp(I.Op))
          return Status::error(
              describeInstruction(I) + ": " + (Ops == &I.In ? "in[" : "out[") +
              std::to_string(K) + "] has " +
              std::to_string((*Ops)[K].Spec->Dims.size()) +
              " dims; the CUDA kernels take at most " +
              std::to_string(MaxGenericRank) + ": run it with --device cpu");
    // Both attention kernels hold a query row of the head dim in shared
    // memory: 256 values at most.
    if (attentionOp(I.Op)) {
      const bool Grad =
          I.Op == OpKind::AttentionGrad || I.Op == OpKind::AttentionBlockGrad;
      const int64_t Hd =
          I.In[Grad ? 1 : 0].Spec->Dims.back() / I.Attrs->NumHeads;
      if (Hd > MaxAttentionHeadDim)
        return Status::error(
            describeInstruction(I) + ": head dim " + std::to_string(Hd) +
            " exceeds the CUDA attention kernels' " +
            std::to_string(MaxAttentionHeadDim) + ": run it with --device cpu");
    }
    auto P = std::make_unique<Plan>();
    Expected<KernelChoice> Choice = chooseKernel(I);
    if (!Choice.ok())
      return Choice.status();
    const DType T = Choice->Type;
    if (Choice->How == KernelChoice::Bytes) {
      P->Fn = Bytes::of(I.Op);
    } else {
      P->Fn = Tables[tableOf(T)][I.Op];
      if (Choice->How == KernelChoice::Widen) {
        P->Widen = true;
        P->Copy = I;
        P->At = planBf16Widening(I, 64); // 256-byte aligned
        WidenFloats = std::max(WidenFloats, P->At.Floats);
      }
    }
    if (!P->Fn)
      return Status::error(missingKernelMessage(
          describeInstruction(I), "CUDA", dtypeName(T), missingKernels(T)));
    Expected<size_t> Need = kernelScratch(I, T);
    if (!Need.ok())
      return Need.status();
    KernelBytes = std::max(KernelBytes, align256(*Need));
    if (I.Op == OpKind::Matmul || I.Op == OpKind::BatchMatmul) {
      const GemmShape S = matmulGemm(I, T);
      Expected<std::unique_ptr<CudaMatmulPlan>> G =
          CudaMatmulPlan::create(Lt, S, GemmWorkspaceBytes);
      if (!G.ok())
        return Status::error(describeInstruction(I) + ": " +
                             G.status().message());
      P->Gemm = std::move(*G);
    }
    if (I.Op == OpKind::Rope && !I.Attrs->InvFreq.empty()) {
      const std::vector<double> &F = I.Attrs->InvFreq;
      double *D = nullptr;
      WEFT_RETURN_IF_ERROR(cudaStatus(
          cudaMalloc(reinterpret_cast<void **>(&D), F.size() * sizeof(double)),
          describeInstruction(I) + ": cudaMalloc (rope frequencies)"));
      Freqs.push_back(D);
      WEFT_RETURN_IF_ERROR(cudaStatus(
          cudaMemcpy(D, F.data(), F.size() * sizeof(double),
                     cudaMemcpyHostToDevice),
          describeInstruction(I) + ": cudaMemcpy (rope frequencies)"));
      P->InvFreq = D;
    }
    if (attentionOp(I.Op) || I.Op == OpKind::Rope || I.Op == OpKind::Dropout ||
        I.Op == OpKind::PositionEmbedding ||
        I.Op == OpKind::PositionEmbeddingGrad) {
      Expected<std::unique_ptr<PositionArrays>> M = positionArrays(I);
      if (!M.ok())
        return M.status();
      P->Positions = std::move(*M);
    }
    Plans[I.Index] = std::move(P);
  }
  release(Scratch);
  WidenOffset = KernelBytes;
  size_t Total = KernelBytes + align256(size_t(WidenFloats) * sizeof(float));
  Scratch = Total ? allocate(Total) : nullptr;
  if (Total && !Scratch)
    return Status::error("cannot allocate " + std::to_string(Total) +
                         " bytes of CUDA kernel scratch");
  // The rope frequencies were copied on the legacy stream.
  WEFT_RETURN_IF_ERROR(cudaStatus(cudaDeviceSynchronize(),
                                  "cudaDeviceSynchronize (after prepare)"));
  return Total + GemmWorkspaceBytes;
}

Status CudaBackend::run(const BI &I, const SC &SCtx, Queue &Q) {
  auto *CQ = dynamic_cast<CudaQueue *>(&Q);
  if (!CQ)
    return Status::error(describeInstruction(I) +
                         ": the CUDA backend runs on a CUDA queue");
  if (I.Index >= Plans.size() || !Plans[I.Index])
    return Status::error(describeInstruction(I) + " was not prepared");
  Plan &P = *Plans[I.Index];
  Ctx C;
  C.Stream = CQ->stream();
  C.Scratch = Scratch;
  C.Sink = ErrorSink{static_cast<KernelError *>(ErrorSlot), int(I.Index)};
  C.Lt = Lt;
  C.Workspace = Workspace;
  C.Gemm = P.Gemm.get();
  C.InvFreq = P.InvFreq;
  C.Positions = P.Positions.get();
  C.Queue = CQ;
  if (!P.Widen)
    return P.Fn(I, SCtx, C);
  // bf16 operands to f32 scratch, the f32 kernel, f32 results to bf16.
  P.Copy = I;
  float *W =
      reinterpret_cast<float *>(static_cast<char *>(Scratch) + WidenOffset);
  for (size_t K = 0; K < I.In.size(); ++K)
    if (P.At.InAt[K] >= 0) {
      WEFT_RETURN_IF_ERROR(
          check(cuda::cast(I.In[K].as<bf16>(), W + P.At.InAt[K], I.In[K].Numel,
                           C.Stream),
                I));
      P.Copy.In[K].Data = W + P.At.InAt[K];
    }
  for (size_t K = 0; K < I.Out.size(); ++K)
    if (P.At.OutAt[K] >= 0)
      P.Copy.Out[K].Data = W + P.At.OutAt[K];
  WEFT_RETURN_IF_ERROR(P.Fn(P.Copy, SCtx, C));
  for (size_t K = 0; K < I.Out.size(); ++K)
    if (P.At.OutAt[K] >= 0)
      WEFT_RETURN_IF_ERROR(
          check(cuda::cast(W + P.At.OutAt[K], I.Out[K].as<bf16>(),
                           I.Out[K].Numel, C.Stream),
                I));
  return Status::success();
}

Status CudaBackend::findNonFinite(const void *Data, int64_t N, DType T,
                                  Queue &Q, int64_t &At, double &Value) {
  At = -1;
  Value = 0;
  auto *CQ = dynamic_cast<CudaQueue *>(&Q);
  if (!CQ)
    return Status::error("non-finite check: the CUDA backend needs its queue");
  auto *Slot = static_cast<long long *>(NonFiniteAt);
  cudaError_t E;
  switch (T) {
  case DType::F32:
    E = firstNonFinite(static_cast<const float *>(Data), N, Slot, CQ->stream());
    break;
  case DType::F64:
    E = firstNonFinite(static_cast<const double *>(Data), N, Slot,
                       CQ->stream());
    break;
  case DType::BF16:
    E = firstNonFinite(static_cast<const bf16 *>(Data), N, Slot, CQ->stream());
    break;
  default:
    return Status::error(std::string("non-finite check of ") + dtypeName(T) +
                         " data");
  }
  WEFT_RETURN_IF_ERROR(cudaStatus(E, "non-finite check"));
  long long Found = -1;
  WEFT_RETURN_IF_ERROR(Q.copyToHost(&Found, Slot, sizeof(Found)));
  WEFT_RETURN_IF_ERROR(Q.synchronize());
  if (Found < 0)
    return Status::success();
  At = Found;
  const char *Elem = static_cast<const char *>(Data) + Found * dtypeBytes(T);
  if (T == DType::F64) {
    WEFT_RETURN_IF_ERROR(Q.copyToHost(&Value, Elem, sizeof(double)));
    return Q.synchronize();
  }
  float F = 0;
  if (T == DType::F32) {
    WEFT_RETURN_IF_ERROR(Q.copyToHost(&F, Elem, sizeof(float)));
  } else {
    uint16_t H = 0;
    WEFT_RETURN_IF_ERROR(Q.copyToHost(&H, Elem, sizeof(H)));
    WEFT_RETURN_IF_ERROR(Q.synchronize());
    uint32_t Bits = uint32_t(H) << 16;
    std::memcpy(&F, &Bits, sizeof(F));
  }
  WEFT_RETURN_IF_ERROR(Q.synchronize());
  Value = F;
  return Status::success();
}

} // namespace

int countCudaDevices() {
  int N = 0;
  if (cudaGetDeviceCount(&N) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return N;
}

std::vector<OpKind> cudaMissingKernelsOf(DType T) {
  return kernelTables()[tableOf(T)].missing();
}

Expected<std::unique_ptr<Backend>> createCudaBackendOnDevice(DType) {
  int N = 0;
  cudaError_t E = cudaGetDeviceCount(&N);
  if (E != cudaSuccess) {
    cudaGetLastError();
    return Status::error(std::string("no CUDA device: cudaGetDeviceCount: ") +
                         cudaGetErrorName(E) + " (" + cudaGetErrorString(E) +
                         ")");
  }
  if (N == 0)
    return Status::error("no CUDA device: cudaGetDeviceCount found none");
  auto B = std::make_unique<CudaBackend>();
  WEFT_RETURN_IF_ERROR(B->init());
  return std::unique_ptr<Backend>(std::move(B));
}

} // namespace weft
