//===- CpuBackend.cpp - Dispatch of bound instructions to CPU kernels -----===//
//
// The dispatch table (op -> kernel adapter) is built once per dtype; the step
// loop indexes it by OpKind and never compares strings. Adapters only unpack
// TensorRefs: shapes were validated at load.
//
//===----------------------------------------------------------------------===//
#include "runtime/Backend.h"
#include "runtime/KernelTable.h"
#include "runtime/cpu/kernels/Kernels.h"

#include <omp.h>
#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace weft {

namespace {

using namespace cpu;

struct CpuState {
  void *Scratch = nullptr;
};

template <typename T>
using KernelFn = Status (*)(const BoundInstruction &, const StepContext &,
                            CpuState &);

template <typename T> struct Kernels {
  using BI = BoundInstruction;
  using SC = StepContext;

  static Status embedding(const BI &I, const SC &, CpuState &) {
    const TensorRef &Tab = I.In[0], &Ids = I.In[1];
    return cpu::embedding(Tab.as<T>(), Tab.Rows, Tab.Last, Ids.as<int32_t>(),
                          Ids.Numel, I.Out[0].as<T>(), I.VocabFirst,
                          vocabTotal(I, Tab.Rows));
  }
  static Status embeddingGrad(const BI &I, const SC &, CpuState &) {
    const TensorRef &Ids = I.In[1], &Tab = I.Out[0];
    // A tied head's gradient to add (weft-fuse-table-grad), in[2].
    const T *Base = I.In.size() == 3 ? I.In[2].as<T>() : nullptr;
    return cpu::embeddingGrad(I.In[0].as<T>(), Ids.as<int32_t>(), Ids.Numel,
                              Tab.Rows, Tab.Last, Tab.as<T>(), I.VocabFirst,
                              vocabTotal(I, Tab.Rows), Base);
  }
  // Under sequence parallelism the rank's positions start at SeqFirst.
  static Status positionEmbedding(const BI &I, const SC &Ctx, CpuState &) {
    const Shape &D = I.In[0].Spec->Dims;
    const int32_t *Pos =
        I.Attrs->TokenTypes ? tokenTypeRow(I, Ctx) : documentRow(I, Ctx);
    if (I.Attrs->TokenTypes && !Pos)
      return Status::error("the step's token types are not set");
    if (Pos)
      cpu::documentPositionEmbedding(I.In[0].as<T>(), I.In[1].as<T>(),
                                     I.Out[0].as<T>(), D[0], D[1], D[2], Pos,
                                     Ctx.DocSeq);
    else if (!I.SeqPos.empty()) // chunks out of order: each row's position
      cpu::documentPositionEmbedding(I.In[0].as<T>(), I.In[1].as<T>(),
                                     I.Out[0].as<T>(), D[0], D[1], D[2],
                                     I.SeqPos.data(), 0);
    else
      cpu::positionEmbedding(I.In[0].as<T>(),
                             I.In[1].as<T>() + I.SeqFirst * D[2],
                             I.Out[0].as<T>(), D[0], D[1], D[2]);
    return Status::success();
  }
  static Status positionEmbeddingGrad(const BI &I, const SC &Ctx, CpuState &) {
    const Shape &D = I.In[0].Spec->Dims;
    const int32_t *Pos =
        I.Attrs->TokenTypes ? tokenTypeRow(I, Ctx) : documentRow(I, Ctx);
    if (I.Attrs->TokenTypes && !Pos)
      return Status::error("the step's token types are not set");
    if (Pos)
      cpu::documentPositionEmbeddingGrad(I.In[0].as<T>(), I.Out[0].as<T>(),
                                         D[0], D[1], I.Out[0].Rows, D[2], Pos,
                                         Ctx.DocSeq);
    else if (!I.SeqPos.empty())
      cpu::documentPositionEmbeddingGrad(I.In[0].as<T>(), I.Out[0].as<T>(),
                                         D[0], D[1], I.Out[0].Rows, D[2],
                                         I.SeqPos.data(), 0);
    else
      cpu::positionEmbeddingGrad(I.In[0].as<T>(), I.Out[0].as<T>(), D[0], D[1],
                                 I.Out[0].Rows, D[2], I.SeqFirst);
    return Status::success();
  }
  static Status matmul(const BI &I, const SC &, CpuState &) {
    const TensorRef &A = I.In[0], &B = I.In[1];
    bool TA = I.Attrs->TransposeA, TB = I.Attrs->TransposeB;
    int64_t M = TA ? A.Last : A.Rows, K = TA ? A.Rows : A.Last;
    int64_t N = TB ? B.Rows : B.Last;
    // A fused bias (weft-fuse-bias), in[2].
    const T *Bias = I.In.size() > 2 ? I.In[2].as<T>() : nullptr;
    cpu::matmul(A.as<T>(), B.as<T>(), I.Out[0].as<T>(), M, N, K, TA, TB, Bias);
    return Status::success();
  }
  static Status biasAdd(const BI &I, const SC &, CpuState &) {
    cpu::biasAdd(I.In[0].as<T>(), I.In[1].as<T>(), I.Out[0].as<T>(),
                 I.In[0].Rows, I.In[0].Last);
    return Status::success();
  }
  // table[row] added to every row: a bias add of that row.
  static Status addRow(const BI &I, const SC &, CpuState &) {
    cpu::biasAdd(I.In[0].as<T>(), I.In[1].as<T>() + I.Attrs->Row * I.In[0].Last,
                 I.Out[0].as<T>(), I.In[0].Rows, I.In[0].Last);
    return Status::success();
  }
  static Status rowGrad(const BI &I, const SC &, CpuState &) {
    const int64_t N = I.In[0].Numel;
    cpu::fill(I.Out[0].as<T>(), I.Out[0].Numel, 0.0);
    cpu::copyBytes(I.In[0].Data, I.Out[0].as<T>() + I.Attrs->Row * N,
                   size_t(N) * sizeof(T));
    return Status::success();
  }
  // The generic path: shapes come from the buffers (validated at load).
  static const Shape &dims(const TensorRef &R) { return R.Spec->Dims; }
  static Status pointwise(const BI &I, const SC &, CpuState &) {
    cpu::pointwise(I.Attrs->Pointwise, I.Attrs->Scalar, I.In[0].as<T>(),
                   I.Out[0].as<T>(), I.In[0].Numel);
    return Status::success();
  }
  static Status pointwiseGrad(const BI &I, const SC &, CpuState &) {
    cpu::pointwiseGrad(I.Attrs->Pointwise, I.Attrs->Scalar, I.In[0].as<T>(),
                       I.In[1].as<T>(), I.Out[0].as<T>(), I.In[0].Numel);
    return Status::success();
  }
  static Status binary(const BI &I, const SC &, CpuState &) {
    cpu::binary(I.Attrs->Binary, I.In[0].as<T>(), dims(I.In[0]),
                I.In[1].as<T>(), dims(I.In[1]), I.Out[0].as<T>(),
                dims(I.Out[0]));
    return Status::success();
  }
  static Status binaryGrad(const BI &I, const SC &, CpuState &) {
    cpu::binaryGrad(I.Attrs->Binary, int(I.Attrs->Operand), I.In[0].as<T>(),
                    dims(I.In[0]), I.In[1].as<T>(), dims(I.In[1]),
                    I.In[2].as<T>(), dims(I.In[2]), I.Out[0].as<T>());
    return Status::success();
  }
  static Status select(const BI &I, const SC &, CpuState &) {
    cpu::select(I.In[0].as<T>(), dims(I.In[0]), I.In[1].as<T>(), dims(I.In[1]),
                I.In[2].as<T>(), dims(I.In[2]), I.Out[0].as<T>(),
                dims(I.Out[0]));
    return Status::success();
  }
  static Status selectGrad(const BI &I, const SC &, CpuState &) {
    cpu::selectGrad(int(I.Attrs->Operand), I.In[0].as<T>(), dims(I.In[0]),
                    I.In[1].as<T>(), dims(I.In[1]), I.Out[0].as<T>(),
                    dims(I.Out[0]));
    return Status::success();
  }
  static Status broadcast(const BI &I, const SC &, CpuState &) {
    cpu::broadcast(I.In[0].as<T>(), dims(I.In[0]), I.Out[0].as<T>(),
                   dims(I.Out[0]));
    return Status::success();
  }
  static Status reduce(const BI &I, const SC &, CpuState &) {
    cpu::reduce(I.In[0].as<T>(), dims(I.In[0]), I.Out[0].as<T>(),
                dims(I.Out[0]));
    return Status::success();
  }
  static Status reshape(const BI &I, const SC &, CpuState &) {
    cpu::copyBytes(I.In[0].Data, I.Out[0].Data,
                   size_t(I.In[0].Numel) * sizeof(T));
    return Status::success();
  }
  static Status transpose(const BI &I, const SC &, CpuState &) {
    cpu::transpose(I.In[0].as<T>(), dims(I.In[0]), I.Attrs->Perm,
                   I.Out[0].as<T>());
    return Status::success();
  }
  static Status softmax(const BI &I, const SC &, CpuState &) {
    cpu::softmax(I.In[0].as<T>(), I.Out[0].as<T>(), I.In[0].Rows, I.In[0].Last);
    return Status::success();
  }
  static Status softmaxGrad(const BI &I, const SC &, CpuState &) {
    cpu::softmaxGrad(I.In[0].as<T>(), I.In[1].as<T>(), I.Out[0].as<T>(),
                     I.In[0].Rows, I.In[0].Last);
    return Status::success();
  }
  // One GEMM per batch index.
  static Status batchMatmul(const BI &I, const SC &, CpuState &) {
    const Shape &A = dims(I.In[0]), &B = dims(I.In[1]);
    const size_t R = A.size();
    bool TA = I.Attrs->TransposeA, TB = I.Attrs->TransposeB;
    int64_t M = A[TA ? R - 1 : R - 2], K = A[TA ? R - 2 : R - 1];
    int64_t N = B[TB ? R - 2 : R - 1];
    int64_t Batch = I.In[0].Numel / (M * K);
    for (int64_t Bi = 0; Bi < Batch; ++Bi)
      cpu::matmul(I.In[0].as<T>() + Bi * M * K, I.In[1].as<T>() + Bi * K * N,
                  I.Out[0].as<T>() + Bi * M * N, M, N, K, TA, TB);
    return Status::success();
  }
  static Status reduceRows(const BI &I, const SC &, CpuState &) {
    cpu::reduceRows(I.In[0].as<T>(), I.Out[0].as<T>(), I.In[0].Rows,
                    I.In[0].Last);
    return Status::success();
  }
  static Status add(const BI &I, const SC &, CpuState &) {
    cpu::add(I.In[0].as<T>(), I.In[1].as<T>(), I.Out[0].as<T>(), I.In[0].Numel);
    return Status::success();
  }
  // y += x, elementwise (y is the only operand read and written).
  static Status accumulate(const BI &I, const SC &, CpuState &) {
    T *Y = I.Out[0].as<T>();
    cpu::add(Y, I.In[0].as<T>(), Y, I.In[0].Numel);
    return Status::success();
  }
  static Status mul(const BI &I, const SC &, CpuState &) {
    cpu::mul(I.In[0].as<T>(), I.In[1].as<T>(), I.Out[0].as<T>(), I.In[0].Numel);
    return Status::success();
  }
  static Status split(const BI &I, const SC &, CpuState &) {
    constexpr size_t MaxParts = 16;
    T *Parts[MaxParts];
    int64_t Sizes[MaxParts];
    // Splits into more than MaxParts pieces go MaxParts at a time.
    int64_t Col = 0;
    for (size_t P0 = 0; P0 < I.Out.size(); P0 += MaxParts) {
      size_t N = std::min(MaxParts, I.Out.size() - P0);
      int64_t Width = 0;
      for (size_t K = 0; K < N; ++K) {
        Parts[K] = I.Out[P0 + K].as<T>();
        Sizes[K] = I.Out[P0 + K].Last;
        Width += Sizes[K];
      }
      if (Width == I.In[0].Last) {
        cpu::split(I.In[0].as<T>(), I.In[0].Rows, I.In[0].Last, Parts, Sizes,
                   int64_t(N));
      } else {
        for (int64_t R = 0; R < I.In[0].Rows; ++R) {
          const T *Src = I.In[0].as<T>() + R * I.In[0].Last + Col;
          for (size_t K = 0; K < N; ++K) {
            std::memcpy(Parts[K] + R * Sizes[K], Src, Sizes[K] * sizeof(T));
            Src += Sizes[K];
          }
        }
      }
      Col += Width;
    }
    return Status::success();
  }
  static Status concat(const BI &I, const SC &, CpuState &) {
    const TensorRef &Y = I.Out[0];
    int64_t Col = 0;
    for (const TensorRef &X : I.In) {
      const T *Src = X.as<T>();
      T *Dst = Y.as<T>() + Col;
      int64_t W = X.Last, Rows = Y.Rows, N = Y.Last;
#pragma omp parallel for schedule(static) if (Rows * W > (1 << 15))
      for (int64_t R = 0; R < Rows; ++R)
        std::memcpy(Dst + R * N, Src + R * W, W * sizeof(T));
      Col += W;
    }
    return Status::success();
  }
  static Status layerNorm(const BI &I, const SC &, CpuState &) {
    cpu::layerNorm(I.In[0].as<T>(), I.In[1].as<T>(), I.In[2].as<T>(),
                   I.Out[0].as<T>(), I.In[0].Rows, I.In[0].Last, I.Attrs->Eps);
    return Status::success();
  }
  static Status layerNormGrad(const BI &I, const SC &, CpuState &S) {
    cpu::layerNormGrad(I.In[0].as<T>(), I.In[1].as<T>(), I.In[2].as<T>(),
                       I.Out[0].as<T>(), I.Out[1].as<T>(), I.Out[2].as<T>(),
                       I.In[1].Rows, I.In[1].Last, I.Attrs->Eps, S.Scratch);
    return Status::success();
  }
  static Status rmsNorm(const BI &I, const SC &, CpuState &) {
    cpu::rmsNorm(I.In[0].as<T>(), I.In[1].as<T>(), I.Out[0].as<T>(),
                 I.In[0].Rows, I.In[0].Last, I.Attrs->Eps);
    return Status::success();
  }
  static Status rmsNormGrad(const BI &I, const SC &, CpuState &S) {
    cpu::rmsNormGrad(I.In[0].as<T>(), I.In[1].as<T>(), I.In[2].as<T>(),
                     I.Out[0].as<T>(), I.Out[1].as<T>(), I.In[1].Rows,
                     I.In[1].Last, I.Attrs->Eps, S.Scratch);
    return Status::success();
  }
  static Status gelu(const BI &I, const SC &, CpuState &) {
    cpu::gelu(I.In[0].as<T>(), I.Out[0].as<T>(), I.In[0].Numel);
    return Status::success();
  }
  static Status geluGrad(const BI &I, const SC &, CpuState &) {
    cpu::geluGrad(I.In[0].as<T>(), I.In[1].as<T>(), I.Out[0].as<T>(),
                  I.In[0].Numel);
    return Status::success();
  }
  static Status act(const BI &I, const SC &, CpuState &) {
    cpu::act(I.Attrs->Act, I.In[0].as<T>(), I.Out[0].as<T>(), I.In[0].Numel);
    return Status::success();
  }
  static Status actGrad(const BI &I, const SC &, CpuState &) {
    cpu::actGrad(I.Attrs->Act, I.In[0].as<T>(), I.In[1].as<T>(),
                 I.Out[0].as<T>(), I.In[0].Numel);
    return Status::success();
  }
  static Status silu(const BI &I, const SC &, CpuState &) {
    cpu::silu(I.In[0].as<T>(), I.Out[0].as<T>(), I.In[0].Numel);
    return Status::success();
  }
  static Status siluGrad(const BI &I, const SC &, CpuState &) {
    cpu::siluGrad(I.In[0].as<T>(), I.In[1].as<T>(), I.Out[0].as<T>(),
                  I.In[0].Numel);
    return Status::success();
  }
  static Status swiglu(const BI &I, const SC &, CpuState &) {
    cpu::swiglu(I.In[0].as<T>(), I.In[1].as<T>(), I.Out[0].as<T>(),
                I.In[0].Numel);
    return Status::success();
  }
  static Status swigluGrad(const BI &I, const SC &, CpuState &) {
    cpu::swigluGrad(I.In[0].as<T>(), I.In[1].as<T>(), I.In[2].as<T>(),
                    I.Out[0].as<T>(), I.Out[1].as<T>(), I.In[0].Numel);
    return Status::success();
  }
  static Status rope(const BI &I, const SC &Ctx, CpuState &) {
    const Shape &D = I.In[0].Spec->Dims;
    int64_t H = I.Attrs->NumHeads;
    const double *Freq =
        I.Attrs->InvFreq.empty() ? nullptr : I.Attrs->InvFreq.data();
    if (const int32_t *Pos = documentRow(I, Ctx))
      cpu::documentRope(I.In[0].as<T>(), I.Out[0].as<T>(), D[0], D[1], H,
                        D[2] / H, I.Attrs->Theta, I.Attrs->Inverse, Freq,
                        I.Attrs->Scale, Pos, Ctx.DocSeq);
    else if (!I.SeqPos.empty())
      cpu::documentRope(I.In[0].as<T>(), I.Out[0].as<T>(), D[0], D[1], H,
                        D[2] / H, I.Attrs->Theta, I.Attrs->Inverse, Freq,
                        I.Attrs->Scale, I.SeqPos.data(), 0);
    else
      cpu::rope(I.In[0].as<T>(), I.Out[0].as<T>(), D[0], D[1], H, D[2] / H,
                I.Attrs->Theta, I.Attrs->Inverse, Freq, I.Attrs->Scale,
                I.SeqFirst);
    return Status::success();
  }
  // The probabilities' dropout (none when p is 0): the rank's first global
  // sample (this micro-batch's) and head, and the heads of every rank.
  static const cpu::AttentionDropout *
  attentionDropout(const BI &I, const SC &Ctx, int64_t HeadDim,
                   cpu::AttentionDropout &D) {
    if (I.Attrs->DropP <= 0)
      return nullptr;
    D.Key = dropoutKey(I, Ctx);
    D.BatchFirst = I.DimFirst[0] + Ctx.Microbatch * I.MicrobatchRows;
    D.HeadFirst = I.DimFirst[2] / HeadDim;
    D.Heads = I.DimTotal[2] / HeadDim;
    return &D;
  }
  // Packed documents' bounds on the keys (none: one sequence a row).
  static const cpu::AttentionDocuments *
  attentionDocuments(const BI &I, const SC &Ctx, cpu::AttentionDocuments &D) {
    D.Pos = documentRow(I, Ctx);
    D.Stride = Ctx.DocSeq;
    D.Window = I.Attrs->Window;
    D.Span = keySpans(I, Ctx);
    return D.Pos || D.Window > 0 || D.Span ? &D : nullptr;
  }
  // Key padding read from a step whose mask was not given would attend to
  // the padding without a word.
  static Status needSpans(const BI &I, const SC &Ctx) {
    return I.Attrs->KeyPadding && !keySpans(I, Ctx)
               ? Status::error("the step's attention mask is not set")
               : Status::success();
  }
  // Where the queries lie in the keys' sequence: runs of consecutive
  // positions (one from SeqFirst; under head-tail load balancing, each
  // stored chunk's).
  static std::vector<cpu::QueryRun> queryRuns(const BI &I, int64_t Sq) {
    std::vector<cpu::QueryRun> Runs;
    if (I.SeqPos.empty())
      return {{0, I.SeqFirst, Sq}};
    for (int64_t R = 0; R < Sq; ++R)
      if (!Runs.empty() &&
          I.SeqPos[size_t(R)] == Runs.back().Global + Runs.back().Rows)
        ++Runs.back().Rows;
      else
        Runs.push_back({R, I.SeqPos[size_t(R)], 1});
    return Runs;
  }
  // Keys and values held in load-balanced order, copied into the natural
  // order past the kernel's scratch (prepare reserves it): K, V, then dK
  // and dV for the gradient.
  static T *orderedScratch(const BI &I, CpuState &S, size_t K) {
    const Shape &Q = I.In[I.Op == OpKind::Attention ? 0 : 1].Spec->Dims;
    const Shape &Kv = I.In[I.Op == OpKind::Attention ? 1 : 2].Spec->Dims;
    size_t Kernel = attentionScratchBytes(Q[1], Kv[1], Q[2] / I.Attrs->NumHeads,
                                          sizeof(T), omp_get_max_threads());
    Kernel = (Kernel + 63) / 64 * 64;
    return reinterpret_cast<T *>(static_cast<char *>(S.Scratch) + Kernel) +
           K * size_t(numElements(Kv));
  }
  // Load-balanced keys and values (SeqChunks > 0): K and V point at their
  // copies in the natural order afterwards.
  static void naturalKeys(const BI &I, CpuState &S, const Shape &Kd,
                          const T *&K, const T *&V) {
    if (I.SeqChunks <= 0)
      return;
    T *Kn = orderedScratch(I, S, 0), *Vn = orderedScratch(I, S, 1);
    cpu::reorderSequence(K, Kn, Kd[0], Kd[1], Kd[2], I.SeqChunks, false);
    cpu::reorderSequence(V, Vn, Kd[0], Kd[1], Kd[2], I.SeqChunks, false);
    K = Kn;
    V = Vn;
  }
  static Status attention(const BI &I, const SC &Ctx, CpuState &S) {
    WEFT_RETURN_IF_ERROR(needSpans(I, Ctx));
    const Shape &D = I.In[0].Spec->Dims, &Kd = I.In[1].Spec->Dims;
    int64_t H = I.Attrs->NumHeads;
    const T *K = I.In[1].as<T>(), *V = I.In[2].as<T>();
    naturalKeys(I, S, Kd, K, V);
    std::vector<cpu::QueryRun> Runs = queryRuns(I, D[1]);
    cpu::AttentionDropout Drop;
    cpu::AttentionDocuments Docs;
    cpu::attention(I.In[0].as<T>(), K, V, I.Out[0].as<T>(), D[0], D[1], Kd[1],
                   {Runs.data(), Runs.size()}, H, I.Attrs->NumKvHeads, D[2] / H,
                   S.Scratch, I.Attrs->AttnScale, !I.Attrs->Bidirectional,
                   attentionDropout(I, Ctx, D[2] / H, Drop),
                   attentionDocuments(I, Ctx, Docs));
    return Status::success();
  }
  static Status attentionGrad(const BI &I, const SC &Ctx, CpuState &S) {
    WEFT_RETURN_IF_ERROR(needSpans(I, Ctx));
    const Shape &D = I.In[1].Spec->Dims, &Kd = I.In[2].Spec->Dims;
    int64_t H = I.Attrs->NumHeads;
    const T *K = I.In[2].as<T>(), *V = I.In[3].as<T>();
    T *Dk = I.Out[1].as<T>(), *Dv = I.Out[2].as<T>();
    naturalKeys(I, S, Kd, K, V);
    if (I.SeqChunks > 0) {
      Dk = orderedScratch(I, S, 2);
      Dv = orderedScratch(I, S, 3);
    }
    std::vector<cpu::QueryRun> Runs = queryRuns(I, D[1]);
    cpu::AttentionDropout Drop;
    cpu::AttentionDocuments Docs;
    cpu::attentionGrad(I.In[0].as<T>(), I.In[1].as<T>(), K, V, I.Out[0].as<T>(),
                       Dk, Dv, D[0], D[1], Kd[1], {Runs.data(), Runs.size()}, H,
                       I.Attrs->NumKvHeads, D[2] / H, S.Scratch,
                       I.Attrs->AttnScale, !I.Attrs->Bidirectional,
                       attentionDropout(I, Ctx, D[2] / H, Drop),
                       attentionDocuments(I, Ctx, Docs));
    if (I.SeqChunks > 0) {
      cpu::reorderSequence(Dk, I.Out[1].as<T>(), Kd[0], Kd[1], Kd[2],
                           I.SeqChunks, true);
      cpu::reorderSequence(Dv, I.Out[2].as<T>(), Kd[0], Kd[1], Kd[2],
                           I.SeqChunks, true);
    }
    return Status::success();
  }
  // Ring attention's steps (MeshOps.cpp sets the rows' positions).
  // A ring step's dropout: attention's, over the whole sequence (q's dim 1
  // in its dim_axes).
  static const cpu::AttentionDropout *ringDropout(const BI &I, const SC &Ctx,
                                                  int64_t HeadDim,
                                                  cpu::AttentionDropout &D) {
    if (!attentionDropout(I, Ctx, HeadDim, D))
      return nullptr;
    D.Seq = I.DimTotal[1];
    return &D;
  }
  static Status attentionBlock(const BI &I, const SC &Ctx, CpuState &S) {
    WEFT_RETURN_IF_ERROR(needSpans(I, Ctx));
    const Shape &D = I.In[0].Spec->Dims, &Kd = I.In[1].Spec->Dims;
    const int64_t H = I.Attrs->NumHeads;
    cpu::AttentionDropout Drop;
    cpu::attentionBlock(I.In[0].as<T>(), I.In[1].as<T>(), I.In[2].as<T>(),
                        I.Out[0].as<T>(), I.Out[1].as<T>(), D[0], D[1], Kd[1],
                        I.SeqPos.data(), I.KeyPos.data(), H,
                        I.Attrs->NumKvHeads, D[2] / H, S.Scratch,
                        I.Attrs->AttnScale, !I.Attrs->Bidirectional,
                        I.Attrs->Window, ringDropout(I, Ctx, D[2] / H, Drop),
                        documentRow(I, Ctx), Ctx.DocSeq, keySpans(I, Ctx));
    return Status::success();
  }
  static Status softmaxMerge(const BI &I, const SC &, CpuState &) {
    const Shape &D = I.In[0].Spec->Dims;
    const int64_t H = I.Attrs->NumHeads;
    cpu::softmaxMerge(I.In[0].as<T>(), I.In[1].as<T>(), I.In[2].as<T>(),
                      I.In[3].as<T>(), I.Out[0].as<T>(), I.Out[1].as<T>(), D[0],
                      D[1], H, D[2] / H);
    return Status::success();
  }
  static Status attentionBlockGrad(const BI &I, const SC &Ctx, CpuState &S) {
    WEFT_RETURN_IF_ERROR(needSpans(I, Ctx));
    const Shape &D = I.In[1].Spec->Dims, &Kd = I.In[2].Spec->Dims;
    const int64_t H = I.Attrs->NumHeads;
    cpu::AttentionDropout Drop;
    cpu::attentionBlockGrad(
        I.In[0].as<T>(), I.In[1].as<T>(), I.In[2].as<T>(), I.In[3].as<T>(),
        I.In[4].as<T>(), I.In[5].as<T>(), I.Out[0].as<T>(), I.Out[1].as<T>(),
        I.Out[2].as<T>(), D[0], D[1], Kd[1], I.SeqPos.data(), I.KeyPos.data(),
        H, I.Attrs->NumKvHeads, D[2] / H, S.Scratch, I.Attrs->AttnScale,
        !I.Attrs->Bidirectional, I.Attrs->Window,
        ringDropout(I, Ctx, D[2] / H, Drop), documentRow(I, Ctx), Ctx.DocSeq,
        keySpans(I, Ctx));
    return Status::success();
  }
  static Status dropout(const BI &I, const SC &Ctx, CpuState &) {
    // Placed at load (MeshOps.cpp): this micro-batch's rows of the step.
    std::vector<int64_t> First = I.DimFirst;
    First[0] += Ctx.Microbatch * I.MicrobatchRows;
    cpu::dropout(I.In[0].as<T>(), I.Out[0].as<T>(), I.In[0].Spec->Dims, First,
                 I.DimTotal, dropoutKey(I, Ctx),
                 I.SeqPos.empty() ? nullptr : I.SeqPos.data());
    return Status::success();
  }
  // A masked-LM loss divides by the step's counted targets (the executor
  // counts them per batch); others by their static denominator.
  static int64_t denominator(const BI &I, const SC &Ctx) {
    return I.Attrs->Masked ? Ctx.CountedTargets : I.Attrs->Denominator;
  }
  static Status crossEntropy(const BI &I, const SC &Ctx, CpuState &) {
    return cpu::crossEntropy(I.In[0].as<T>(), I.In[1].as<int32_t>(),
                             I.In[0].Rows, I.In[0].Last, I.Out[0].as<T>(),
                             denominator(I, Ctx), I.Attrs->Masked,
                             I.Attrs->Classes);
  }
  static Status crossEntropyGrad(const BI &I, const SC &Ctx, CpuState &) {
    return cpu::crossEntropyGrad(
        I.In[0].as<T>(), I.In[1].as<int32_t>(), I.In[2].as<T>(),
        I.Out[0].as<T>(), I.In[0].Rows, I.In[0].Last, denominator(I, Ctx),
        I.Attrs->Masked, I.Attrs->Classes);
  }
  static Status crossEntropyStats(const BI &I, const SC &, CpuState &) {
    const TensorRef &L = I.In[0];
    return cpu::crossEntropyStats(L.as<T>(), I.In[1].as<int32_t>(), L.Rows,
                                  L.Last, I.VocabFirst, vocabTotal(I, L.Last),
                                  I.Out[0].as<T>(), I.Attrs->Masked,
                                  I.Attrs->Classes);
  }
  static Status crossEntropyFromStats(const BI &I, const SC &Ctx, CpuState &) {
    const TensorRef &S = I.In[0];
    int64_t K = S.Spec->Dims[0];
    cpu::crossEntropyFromStats(S.as<T>(), K, S.Numel / (3 * K),
                               denominator(I, Ctx), I.Out[0].as<T>(),
                               I.Attrs->Masked);
    return Status::success();
  }
  static Status crossEntropyStatsGrad(const BI &I, const SC &Ctx, CpuState &) {
    const TensorRef &L = I.In[0];
    return cpu::crossEntropyStatsGrad(
        L.as<T>(), I.In[1].as<int32_t>(), I.In[2].as<T>(),
        I.In[2].Spec->Dims[0], I.In[3].as<T>(), I.Out[0].as<T>(), L.Rows,
        L.Last, I.VocabFirst, vocabTotal(I, L.Last), denominator(I, Ctx),
        I.Attrs->Masked, I.Attrs->Classes);
  }
  static Status fill(const BI &I, const SC &, CpuState &) {
    const TensorRef &Y = I.Out[0];
    if (Y.Spec->Type == DType::I32)
      cpu::fill(Y.as<int32_t>(), Y.Numel, I.Attrs->Value);
    else
      cpu::fill(Y.as<T>(), Y.Numel, I.Attrs->Value);
    return Status::success();
  }
  static Status copy(const BI &I, const SC &, CpuState &) {
    cpu::copyBytes(I.In[0].Data, I.Out[0].Data,
                   size_t(I.In[0].Numel) * dtypeBytes(I.In[0].Spec->Type));
    return Status::success();
  }
  // x [d0.., dD, ..] -> y [c*d0, .., dD/c, ..]: with outer = d0*..*d(D-1)
  // and chunk = dD/c * (the dims after D), y's chunk (k, o) is x's (o, k);
  // `inverse` the other way.
  static Status blockTranspose(const BI &I, const SC &, CpuState &) {
    const bool Inv = I.Attrs->Inverse;
    const TensorRef &X = I.In[0], &Y = I.Out[0];
    const Shape &Full = (Inv ? Y : X).Spec->Dims;
    const Shape &Moved = (Inv ? X : Y).Spec->Dims;
    const size_t D = size_t(I.Attrs->Dim);
    const int64_t Outer = numElements(Shape(Full.begin(), Full.begin() + D));
    const int64_t C = Full[D] / Moved[D];
    const int64_t Chunk = numElements(Shape(Moved.begin() + D, Moved.end()));
    const size_t E = dtypeBytes(X.Spec->Type), Bytes = size_t(Chunk) * E;
    const char *In = static_cast<const char *>(X.Data);
    char *Out = static_cast<char *>(Y.Data);
    for (int64_t K = 0; K < C; ++K)
      for (int64_t O = 0; O < Outer; ++O) {
        const int64_t Blocked = (K * Outer + O) * Chunk,
                      Natural = (O * C + K) * Chunk;
        std::memcpy(Out + (Inv ? Natural : Blocked) * int64_t(E),
                    In + (Inv ? Blocked : Natural) * int64_t(E), Bytes);
      }
    return Status::success();
  }
  // f32 <-> bf16 (the only casts a program may hold: bf16 buffers belong
  // to f32 programs).
  static Status cast(const BI &I, const SC &, CpuState &) {
    const TensorRef &X = I.In[0], &Y = I.Out[0];
    if (X.Spec->Type == DType::BF16 && Y.Spec->Type == DType::F32)
      cpu::widenBf16(X.as<uint16_t>(), Y.as<float>(), X.Numel);
    else if (X.Spec->Type == DType::F32 && Y.Spec->Type == DType::BF16)
      cpu::narrowToBf16(X.as<float>(), Y.as<uint16_t>(), X.Numel);
    else
      return Status::error(std::string("no CPU kernel casts ") +
                           dtypeName(X.Spec->Type) + " to " +
                           dtypeName(Y.Spec->Type));
    return Status::success();
  }
  // A gradient bucket: pieces laid end to end in one flat buffer, or (attrs
  // blocks = n) block b of every piece, for b = 0..n-1.
  static Status pack(const BI &I, const SC &, CpuState &) {
    char *Out = static_cast<char *>(I.Out[0].Data);
    // A gradient written into its bucket (weft-plan-memory) is there:
    // copyBytes skips a copy onto itself.
    forEachPackedRun(
        I, [&](const TensorRef &Piece, size_t At, size_t Flat, size_t Bytes) {
          cpu::copyBytes(static_cast<const char *>(Piece.Data) + At, Out + Flat,
                         Bytes);
        });
    return Status::success();
  }
  static Status unpack(const BI &I, const SC &, CpuState &) {
    const char *In = static_cast<const char *>(I.In[0].Data);
    forEachPackedRun(I, [&](const TensorRef &Piece, size_t At, size_t Flat,
                            size_t Bytes) {
      cpu::copyBytes(In + Flat, static_cast<char *>(Piece.Data) + At, Bytes);
    });
    return Status::success();
  }
  static Status adamw(const BI &I, const SC &Ctx, CpuState &) {
    const AdamWParams P = adamwParams(I, Ctx);
    cpu::adamw(I.In[0].as<T>(), I.In[1].as<T>(), I.In[2].as<T>(),
               I.In[3].as<T>(), I.In[0].Numel, P);
    return Status::success();
  }

  // mean((pred - target)^2): this rank's squared errors over the step's
  // element count (the loss is partial over the ranks that split them).
  static Status mseLoss(const BI &I, const SC &, CpuState &) {
    const T *P = I.In[0].as<T>(), *Y = I.In[1].as<T>();
    const int64_t N = I.In[0].Numel;
    const int64_t D = I.Attrs->Denominator ? I.Attrs->Denominator : N;
    double Sum = 0;
    for (int64_t K = 0; K < N; ++K) {
      const double E = double(P[K]) - double(Y[K]);
      Sum += E * E;
    }
    *I.Out[0].as<T>() = T(Sum / double(D));
    return Status::success();
  }
  // dpred = 2 (pred - target) dloss / count.
  static Status mseLossGrad(const BI &I, const SC &, CpuState &) {
    const T *P = I.In[0].as<T>(), *Y = I.In[1].as<T>();
    const int64_t N = I.In[0].Numel;
    const int64_t D = I.Attrs->Denominator ? I.Attrs->Denominator : N;
    const T Scale = T(2.0 * double(*I.In[2].as<T>()) / double(D));
    T *G = I.Out[0].as<T>();
    for (int64_t K = 0; K < N; ++K)
      G[K] = (P[K] - Y[K]) * Scale;
    return Status::success();
  }

  // The one op-to-kernel table (runtime/KernelTable.h), filled here.
  static KernelTable<KernelFn<T>> table() {
    KernelTable<KernelFn<T>> Tab;
    auto Set = [&](OpKind K, KernelFn<T> F) { Tab.set(K, F); };
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
    Set(OpKind::BlockTranspose, blockTranspose);
    Set(OpKind::Mul, mul);
    Set(OpKind::Split, split);
    Set(OpKind::Concat, concat);
    Set(OpKind::LayerNorm, layerNorm);
    Set(OpKind::LayerNormGrad, layerNormGrad);
    Set(OpKind::RmsNorm, rmsNorm);
    Set(OpKind::RmsNormGrad, rmsNormGrad);
    Set(OpKind::Gelu, gelu);
    Set(OpKind::Dropout, dropout);
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
    Set(OpKind::Copy, copy);
    Set(OpKind::Pack, pack);
    Set(OpKind::Unpack, unpack);
    Set(OpKind::AdamW, adamw);
    Set(OpKind::Cast, cast);
    Set(OpKind::Pointwise, pointwise);
    Set(OpKind::PointwiseGrad, pointwiseGrad);
    Set(OpKind::Binary, binary);
    Set(OpKind::BinaryGrad, binaryGrad);
    Set(OpKind::Select, select);
    Set(OpKind::SelectGrad, selectGrad);
    Set(OpKind::MseLoss, mseLoss);
    Set(OpKind::MseLossGrad, mseLossGrad);
    Set(OpKind::Broadcast, broadcast);
    Set(OpKind::Reduce, reduce);
    Set(OpKind::Reshape, reshape);
    Set(OpKind::Transpose, transpose);
    Set(OpKind::Softmax, softmax);
    Set(OpKind::SoftmaxGrad, softmaxGrad);
    Set(OpKind::BatchMatmul, batchMatmul);
    return Tab;
  }
};

template <typename T> class CpuBackend final : public Backend {
public:
  CpuBackend() : Table(Kernels<T>::table()) {}
  ~CpuBackend() override {
    release(State.Scratch);
    release(WidenScratch);
  }
  const char *name() const override { return "cpu"; }
  std::vector<OpKind> missingKernels(DType) const override {
    return Table.missing();
  }

  void *allocate(size_t Bytes) override {
    // Buffers of 2 MiB and more on transparent huge pages: Debian's kernels
    // give them only to memory that asks (THP "madvise"), and with 4 KiB
    // pages the GEMMs' packing and the optimizer's sweeps miss the TLB.
    // GPT-2 124M's one-rank step ran 0-4% faster, its GEMMs 2-4%.
    const size_t Huge = size_t(1) << 21;
    const size_t Align = Bytes >= Huge ? Huge : 64;
    if (Bytes > SIZE_MAX - Align)
      return nullptr;
    size_t Rounded = (std::max<size_t>(Bytes, 1) + Align - 1) / Align * Align;
    void *P = std::aligned_alloc(Align, Rounded);
    if (!P)
      return nullptr;
    if (Align == Huge)
      madvise(P, Rounded, MADV_HUGEPAGE); // advice: a failure costs nothing
    // Fault the pages in now, not in step 1 (~12 us per 4 KiB page in these
    // VMs); both threads fault in parallel.
    char *C = static_cast<char *>(P);
    const int64_t Block = int64_t(1) << 21;
    const int64_t NumBlocks = int64_t((Rounded + Block - 1) / Block);
#pragma omp parallel for schedule(static) if (NumBlocks > 1)
    for (int64_t B = 0; B < NumBlocks; ++B)
      std::memset(
          C + B * Block, 0,
          size_t(std::min<int64_t>(Block, int64_t(Rounded) - B * Block)));
    return P;
  }
  void release(void *Ptr) override { std::free(Ptr); }

  Expected<size_t>
  prepare(const std::vector<BoundInstruction> &Insts) override {
    size_t Need = 0;
    int Threads = omp_get_max_threads();
    for (const BoundInstruction &I : Insts) {
      if (!Table[I.Op])
        return Status::error(missingKernelMessage(
            std::string("op ") + opName(I.Op), "CPU", "", Table.missing()));
      switch (I.Op) {
      case OpKind::Attention:
      case OpKind::AttentionGrad: {
        size_t Qi = I.Op == OpKind::Attention ? 0 : 1;
        const Shape &Q = I.In[Qi].Spec->Dims;
        size_t Kernel =
            attentionScratchBytes(Q[1], I.In[Qi + 1].Spec->Dims[1],
                                  Q[2] / I.Attrs->NumHeads, sizeof(T), Threads);
        // Keys and values (and their gradients) in the natural order, for
        // load-balanced context parallelism (orderedScratch).
        if (I.SeqChunks > 0)
          Kernel = (Kernel + 63) / 64 * 64 +
                   (I.Op == OpKind::Attention ? 2 : 4) *
                       size_t(I.In[Qi + 1].Numel) * sizeof(T);
        Need = std::max(Need, Kernel);
        break;
      }
      case OpKind::AttentionBlock:
      case OpKind::AttentionBlockGrad: {
        size_t Ki = I.Op == OpKind::AttentionBlock ? 1 : 2;
        Need = std::max(Need, cpu::ringScratchBytes(I.In[Ki].Spec->Dims[1],
                                                    I.In[Ki - 1].Spec->Dims[2] /
                                                        I.Attrs->NumHeads,
                                                    sizeof(T), Threads));
        break;
      }
      case OpKind::LayerNormGrad:
      case OpKind::RmsNormGrad:
        Need = std::max(Need, normGradScratchBytes(I.In[1].Rows));
        break;
      default:
        break;
      }
    }
    release(State.Scratch);
    State.Scratch = allocate(Need);
    if (!State.Scratch)
      return Status::error("cannot allocate " + std::to_string(Need) +
                           " bytes of kernel scratch");
    Expected<size_t> Widen = planWidening(Insts);
    if (!Widen.ok())
      return Widen.status();
    return Need + *Widen;
  }

  // The CPU queue is synchronous: a kernel runs when it is enqueued.
  std::unique_ptr<Queue> createQueue() override { return createHostQueue(); }
  Status run(const BoundInstruction &I, const StepContext &Ctx,
             Queue &) override {
    if (I.Index < Widen.size() && Widen[I.Index])
      return runWidened(I, Ctx, *Widen[I.Index]);
    return Table[I.Op](I, Ctx, State);
  }
  Status findNonFinite(const void *Data, int64_t N, DType Type, Queue &,
                       int64_t &At, double &Value) override {
    At = -1;
    Value = 0;
    if (Type == DType::F64) {
      const double *X = static_cast<const double *>(Data);
      At = firstNonFinite(X, N);
      Value = At >= 0 ? X[At] : 0.0;
    } else if (Type == DType::F32) {
      const float *X = static_cast<const float *>(Data);
      At = firstNonFinite(X, N);
      Value = At >= 0 ? double(X[At]) : 0.0;
    } else {
      return Status::error(std::string("non-finite check of ") +
                           dtypeName(Type) + " data");
    }
    return Status::success();
  }

private:
  // bf16 storage, f32 compute (docs/design.md decision 15): an instruction
  // with bf16 operands runs its f32 kernel on f32 copies of them in
  // WidenScratch, and its bf16 outputs are rounded back. OpenBLAS as
  // Debian builds it has no sbgemm, so GEMMs widen too. Ops that only move
  // bytes (copy, pack, unpack, block_transpose) and cast run as they are.
  struct Widened {
    BoundInstruction BI; // refreshed from the instruction per run
    WideningPlan At;     // f32 offsets in WidenScratch
  };
  static bool movesBytes(OpKind K) {
    return K == OpKind::Copy || K == OpKind::Pack || K == OpKind::Unpack ||
           K == OpKind::BlockTranspose || K == OpKind::Cast;
  }
  Expected<size_t> planWidening(const std::vector<BoundInstruction> &Insts) {
    Widen.clear();
    size_t Need = 0;
    for (const BoundInstruction &I : Insts) {
      bool Any = false;
      for (const auto *Refs : {&I.In, &I.Out})
        for (const TensorRef &R : *Refs)
          Any |= R.Spec->Type == DType::BF16;
      if (!Any || movesBytes(I.Op))
        continue;
      if (sizeof(T) != 4)
        return Status::error(describeInstruction(I) +
                             " has bf16 operands in an f64 program");
      auto W = std::make_unique<Widened>();
      W->BI = I;
      W->At = planBf16Widening(I, 16); // 64-byte aligned
      Need = std::max(Need, size_t(W->At.Floats) * sizeof(float));
      if (I.Index >= Widen.size())
        Widen.resize(I.Index + 1);
      Widen[I.Index] = std::move(W);
    }
    release(WidenScratch);
    WidenScratch = Need ? allocate(Need) : nullptr;
    if (Need && !WidenScratch)
      return Status::error("cannot allocate " + std::to_string(Need) +
                           " bytes for widening bf16 operands");
    return Need;
  }
  Status runWidened(const BoundInstruction &I, const StepContext &Ctx,
                    Widened &W) {
    W.BI = I; // same sizes: reuses W.BI's vectors, allocates nothing
    float *S = static_cast<float *>(WidenScratch);
    for (size_t K = 0; K < I.In.size(); ++K)
      if (W.At.InAt[K] >= 0) {
        cpu::widenBf16(I.In[K].as<uint16_t>(), S + W.At.InAt[K], I.In[K].Numel);
        W.BI.In[K].Data = S + W.At.InAt[K];
      }
    for (size_t K = 0; K < I.Out.size(); ++K)
      if (W.At.OutAt[K] >= 0)
        W.BI.Out[K].Data = S + W.At.OutAt[K];
    WEFT_RETURN_IF_ERROR(Table[I.Op](W.BI, Ctx, State));
    for (size_t K = 0; K < I.Out.size(); ++K)
      if (W.At.OutAt[K] >= 0)
        cpu::narrowToBf16(S + W.At.OutAt[K], I.Out[K].as<uint16_t>(),
                          I.Out[K].Numel);
    return Status::success();
  }

  KernelTable<KernelFn<T>> Table;
  CpuState State;
  std::vector<std::unique_ptr<Widened>> Widen; // by instruction index
  void *WidenScratch = nullptr;
};

} // namespace

std::unique_ptr<Backend> createCpuBackend(DType Type) {
  if (Type == DType::F64)
    return std::make_unique<CpuBackend<double>>();
  return std::make_unique<CpuBackend<float>>();
}

} // namespace weft
