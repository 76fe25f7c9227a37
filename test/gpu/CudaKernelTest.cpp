//===- CudaKernelTest.cpp - The CUDA backend against the CPU backend -----===//
//
// The GPU tests (docs/design.md, "The device boundary"): every instruction
// of real programs (compiled by weft-compile into WEFT_GPU_PROGRAMS: GPT-2
// and Llama shapes in f64, f32 and bf16; imported graphs on the generic
// path, a padded vocabulary, masked and mse losses, dropout) runs on the
// CPU backend and on the CUDA backend from the same random operands, and
// their outputs must agree:
// f64 to 1e-10, f32 to 1e-4 and bf16 to 2e-2, each relative to the largest
// value of the output (bf16 keeps 8 significant bits: two roundings of one
// value may differ by 2^-7). The fused attention is checked against the
// plain reference kernel on shapes that cut its tiles unevenly, and data
// errors (a token id outside the vocab) must come back as errors. The
// step's packed documents, key spans and token types are drawn for the
// programs that read them.
//
// Without a CUDA device the binary says so and exits 77, which ctest
// reports as skipped (SKIP_RETURN_CODE).
//
//===----------------------------------------------------------------------===//
#include "program/Bf16.h"
#include "program/Program.h"
#include "runtime/Backend.h"
#include "runtime/Queue.h"
#include "runtime/cuda/kernels/Kernels.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

using namespace weft;

namespace {

std::string programDir() {
  const char *D = std::getenv("WEFT_GPU_PROGRAMS");
  return D ? D : "gpu-programs";
}

std::vector<std::string> programFiles() {
  std::vector<std::string> Files;
  std::error_code Ec;
  for (const auto &E : std::filesystem::directory_iterator(programDir(), Ec))
    if (E.path().extension() == ".weft")
      Files.push_back(E.path().string());
  std::sort(Files.begin(), Files.end());
  return Files;
}

/// Host bytes of one buffer, as doubles for comparison.
double valueAt(const std::vector<char> &Bytes, DType T, size_t I) {
  switch (T) {
  case DType::F64:
    return reinterpret_cast<const double *>(Bytes.data())[I];
  case DType::F32:
    return reinterpret_cast<const float *>(Bytes.data())[I];
  case DType::BF16:
    return bf16ToFloat(reinterpret_cast<const uint16_t *>(Bytes.data())[I]);
  case DType::I32:
    return reinterpret_cast<const int32_t *>(Bytes.data())[I];
  }
  return 0;
}

void setValue(std::vector<char> &Bytes, DType T, size_t I, double V) {
  switch (T) {
  case DType::F64:
    reinterpret_cast<double *>(Bytes.data())[I] = V;
    break;
  case DType::F32:
    reinterpret_cast<float *>(Bytes.data())[I] = float(V);
    break;
  case DType::BF16:
    reinterpret_cast<uint16_t *>(Bytes.data())[I] = floatToBf16(float(V));
    break;
  case DType::I32:
    reinterpret_cast<int32_t *>(Bytes.data())[I] = int32_t(V);
    break;
  }
}

double tolerance(DType T) {
  return T == DType::F64 ? 1e-10 : T == DType::F32 ? 1e-4 : 2e-2;
}

TensorRef refOf(const BufferSpec &S, void *Data) {
  TensorRef R;
  R.Data = Data;
  R.Spec = &S;
  R.Numel = S.numel();
  R.Last = S.Dims.empty() ? 1 : S.Dims.back();
  R.Rows = R.Last ? R.Numel / R.Last : 0;
  return R;
}

/// The shards of the vocabulary an op with vocab_axes splits (1: none).
int64_t vocabShards(const Program &P, const Instruction &I) {
  return std::max<int64_t>(P.Devices.count(I.Attrs.VocabAxes), 1);
}

/// Operand values a kernel accepts: ids inside the vocab, targets inside
/// the program's bound (a masked loss's every third -100, ignored), Adam's
/// second moment non-negative, the rest normal.
std::vector<char> randomOperand(const Program &P, const Instruction &I,
                                int64_t Id, std::mt19937 &G) {
  const BufferSpec &S = P.Buffers[size_t(Id)];
  std::vector<char> Bytes(size_t(S.bytes()));
  std::normal_distribution<double> Normal(0.0, 1.0);
  const bool SecondMoment =
      I.Op == OpKind::AdamW && I.In.size() > 3 && I.In[3] == Id;
  const bool Targets = isCrossEntropy(I.Op) && I.In.size() > 1 && I.In[1] == Id;
  // Merged vocab statistics [K, .., 3] (max, sum of exponentials, target
  // logit): a sum is at least 1 (the max's own term).
  const bool Stats = (I.Op == OpKind::CrossEntropyFromStats && I.In[0] == Id) ||
                     (I.Op == OpKind::CrossEntropyStatsGrad &&
                      I.In.size() > 2 && I.In[2] == Id);
  const int64_t Bound =
      std::max<int64_t>(Targets ? P.targetBound() : P.Vocab, 1);
  for (int64_t K = 0; K < S.numel(); ++K) {
    double V;
    if (S.Type == DType::I32)
      V = Targets && I.Attrs.Masked && K % 3 == 1
              ? -100.0
              : double(G() % uint64_t(Bound));
    else if (SecondMoment)
      V = std::fabs(Normal(G)) * 1e-3;
    else if (Stats && K % 3 == 1)
      V = 1 + std::fabs(Normal(G));
    else
      V = Normal(G);
    setValue(Bytes, S.Type, size_t(K), V);
  }
  return Bytes;
}

struct Outcome {
  size_t Compared = 0;
  std::set<std::string> Ops;
};

/// Runs instruction N of P on both backends from the same operands and
/// compares every output buffer.
void compareInstruction(const Program &P, size_t N, Backend &Gpu, Queue &Q,
                        Outcome &Out) {
  const Instruction &I = P.Instructions[N];
  std::unique_ptr<Backend> Cpu = createCpuBackend(P.Type);
  std::mt19937 G(unsigned(1000 + N));
  std::map<int64_t, std::vector<char>> Host, Initial;
  std::map<int64_t, void *> Device;
  for (const auto *Ids : {&I.In, &I.Out})
    for (int64_t Id : *Ids)
      if (!Host.count(Id))
        Host[Id] = Initial[Id] = randomOperand(P, I, Id, G);
  BoundInstruction CpuI, GpuI;
  CpuI.Op = GpuI.Op = I.Op;
  CpuI.Attrs = GpuI.Attrs = &I.Attrs;
  CpuI.Index = GpuI.Index = 0;
  for (auto &[Id, Bytes] : Host) {
    void *D = Gpu.allocate(Bytes.size());
    ASSERT_NE(D, nullptr);
    Device[Id] = D;
    ASSERT_TRUE(Q.copyToDevice(D, Bytes.data(), Bytes.size()).ok());
  }
  for (int64_t Id : I.In) {
    CpuI.In.push_back(refOf(P.Buffers[size_t(Id)], Host[Id].data()));
    GpuI.In.push_back(refOf(P.Buffers[size_t(Id)], Device[Id]));
  }
  for (int64_t Id : I.Out) {
    CpuI.Out.push_back(refOf(P.Buffers[size_t(Id)], Host[Id].data()));
    GpuI.Out.push_back(refOf(P.Buffers[size_t(Id)], Device[Id]));
  }
  // A vocab-parallel op runs as the last shard (a padded vocabulary's
  // tail is there); dropout as the whole tensor of micro-batch 1.
  const int64_t Shards = vocabShards(P, I);
  if (!I.Attrs.VocabAxes.empty() && !I.In.empty()) {
    const int64_t Local =
        I.Op == OpKind::Embedding || I.Op == OpKind::EmbeddingGrad
            ? P.Buffers[size_t(I.Op == OpKind::Embedding ? I.In[0] : I.Out[0])]
                  .Dims[0]
            : P.Buffers[size_t(I.In[0])].Dims.back();
    CpuI.VocabTotal = GpuI.VocabTotal = Local * Shards;
    CpuI.VocabFirst = GpuI.VocabFirst = Local * (Shards - 1);
  }
  if (!I.In.empty()) {
    const Shape &D = P.Buffers[size_t(I.In[0])].Dims;
    CpuI.DimFirst = GpuI.DimFirst = std::vector<int64_t>(D.size(), 0);
    CpuI.DimTotal = GpuI.DimTotal = D;
    if (!D.empty()) {
      CpuI.DimTotal[0] = GpuI.DimTotal[0] = 2 * D[0];
      CpuI.MicrobatchRows = GpuI.MicrobatchRows = D[0];
    }
  }
  // A ring step's block: queries and keys at positions 0, 1, ...
  if (I.Op == OpKind::AttentionBlock || I.Op == OpKind::AttentionBlockGrad) {
    const size_t Q = I.Op == OpKind::AttentionBlock ? 0 : 1;
    const int64_t Sq = P.Buffers[size_t(I.In[Q])].Dims[1],
                  Sk = P.Buffers[size_t(I.In[Q + 1])].Dims[1];
    for (int64_t R = 0; R < Sq; ++R)
      CpuI.SeqPos.push_back(int32_t(R));
    for (int64_t R = 0; R < Sk; ++R)
      CpuI.KeyPos.push_back(int32_t(R));
    GpuI.SeqPos = CpuI.SeqPos;
    GpuI.KeyPos = CpuI.KeyPos;
  }
  StepContext Ctx;
  Ctx.Lr = 1e-3;
  Ctx.Step = 3;
  Ctx.Optimizer = &P.Optimizer;
  Ctx.Seed = 1234;
  Ctx.Microbatch = 1;
  // The step's rows (micro-batch 1 of 2): packed documents of 5 tokens
  // (for a program that packs them), key spans [r % 3, S - r % 2) and token
  // types 0, then 1 from a third of the row on.
  std::vector<int32_t> DocPos, Spans, Types;
  if (!I.In.empty() && P.Buffers[size_t(I.In[0])].Dims.size() >= 2) {
    const Shape &D = P.Buffers[size_t(I.In[0])].Dims;
    const int64_t Rows = 2 * D[0], S = D[1];
    for (int64_t R = 0; R < Rows; ++R) {
      Spans.push_back(int32_t(R % 3));
      Spans.push_back(int32_t(S - R % 2));
      for (int64_t K = 0; K < S; ++K) {
        DocPos.push_back(int32_t(K % 5));
        Types.push_back(K >= S / 3 ? 1 : 0);
      }
    }
    Ctx.DocSeq = S;
    Ctx.DocPos = P.packsDocuments() ? DocPos.data() : nullptr;
    Ctx.KeySpans = Spans.data();
    Ctx.TokenTypes = Types.data();
  }
  // A masked loss divides by the step's counted targets: here, these.
  Ctx.CountedTargets = 1;
  if (isCrossEntropy(I.Op) && I.In.size() > 1 &&
      P.Buffers[size_t(I.In[1])].Type == DType::I32) {
    const std::vector<char> &T = Host[I.In[1]];
    const auto *Ids = reinterpret_cast<const int32_t *>(T.data());
    Ctx.CountedTargets = 0;
    for (size_t K = 0; K < T.size() / sizeof(int32_t); ++K)
      Ctx.CountedTargets += Ids[K] != -100;
  }
  const std::string What =
      "instructions[" + std::to_string(N) + "] (" + opName(I.Op) + ")";
  Expected<size_t> CpuPrep = Cpu->prepare({CpuI});
  ASSERT_TRUE(CpuPrep.ok()) << What << ": " << CpuPrep.message();
  Status CpuRun = Cpu->run(CpuI, Ctx, hostQueue());
  ASSERT_TRUE(CpuRun.ok()) << What << ": " << CpuRun.message();
  Expected<size_t> GpuPrep = Gpu.prepare({GpuI});
  ASSERT_TRUE(GpuPrep.ok()) << What << ": " << GpuPrep.message();
  Status GpuRun = Gpu.run(GpuI, Ctx, Q);
  ASSERT_TRUE(GpuRun.ok()) << What << ": " << GpuRun.message();
  Status Sync = Q.synchronize();
  ASSERT_TRUE(Sync.ok()) << What << ": " << Sync.message();
  for (int64_t Id : I.Out) {
    const BufferSpec &S = P.Buffers[size_t(Id)];
    std::vector<char> Got(Host[Id].size());
    ASSERT_TRUE(Q.copyToHost(Got.data(), Device[Id], Got.size()).ok());
    ASSERT_TRUE(Q.synchronize().ok());
    // A NaN on both sides agrees (log or sqrt of a negative operand); a
    // NaN on one side only is the worst error.
    double Scale = 0, Worst = 0;
    size_t At = 0;
    for (int64_t K = 0; K < S.numel(); ++K)
      Scale = std::max(Scale, std::fabs(valueAt(Host[Id], S.Type, K)));
    for (int64_t K = 0; K < S.numel(); ++K) {
      const double A = valueAt(Got, S.Type, K),
                   B = valueAt(Host[Id], S.Type, K);
      const double D = std::isnan(A) && std::isnan(B) ? 0 : std::fabs(A - B);
      if (!(D <= Worst)) { // NaN counts as the worst
        Worst = D;
        At = size_t(K);
      }
    }
    double Rel = Worst / std::max(Scale, 1e-30);
    EXPECT_LE(Rel, tolerance(S.Type))
        << What << " output buffer " << Id << " (" << dtypeName(S.Type)
        << "): element " << At << " is " << valueAt(Got, S.Type, At)
        << " on the GPU, " << valueAt(Host[Id], S.Type, At)
        << " on the CPU (max-relative error " << Rel << ")";
  }
  for (auto &[Id, D] : Device)
    Gpu.release(D);
  ++Out.Compared;
  Out.Ops.insert(opName(I.Op));
}

/// Whether the CPU backend runs Op (collectives, waits and transfers are
/// the executor's).
bool backendOp(const Program &P, const Instruction &I) {
  if (isCollective(I.Op) || I.Op == OpKind::Wait || I.Op == OpKind::Slice)
    return false;
  std::unique_ptr<Backend> Cpu = createCpuBackend(P.Type);
  BoundInstruction B;
  B.Op = I.Op;
  B.Attrs = &I.Attrs;
  B.Index = 0; // the backend sizes its plans by it
  for (int64_t Id : I.In)
    B.In.push_back(refOf(P.Buffers[size_t(Id)], nullptr));
  for (int64_t Id : I.Out)
    B.Out.push_back(refOf(P.Buffers[size_t(Id)], nullptr));
  return Cpu->prepare({B}).ok();
}

TEST(CudaKernels, EveryInstructionOfEveryProgramMatchesTheCpu) {
  std::vector<std::string> Files = programFiles();
  ASSERT_FALSE(Files.empty())
      << "no .weft programs in " << programDir()
      << " (set WEFT_GPU_PROGRAMS; scripts/gpu-check.sh --prepare makes them)";
  Expected<std::unique_ptr<Backend>> Gpu = createCudaBackend(DType::F32);
  ASSERT_TRUE(Gpu.ok()) << Gpu.message();
  std::unique_ptr<Queue> Q = (*Gpu)->createQueue();
  ASSERT_NE(Q, nullptr);
  for (const std::string &F : Files) {
    Expected<Program> P = loadProgramFile(F);
    ASSERT_TRUE(P.ok()) << F << ": " << P.message();
    Outcome Out;
    std::set<std::string> Seen; // one instruction per op and operand shape
    for (size_t N = 0; N < P->Instructions.size(); ++N) {
      const Instruction &I = P->Instructions[N];
      std::string Key = opName(I.Op);
      for (int64_t Id : I.In)
        Key += " " + std::string(dtypeName(P->Buffers[Id].Type)) +
               std::to_string(P->Buffers[Id].numel());
      if (Seen.count(Key) || !backendOp(*P, I))
        continue;
      Seen.insert(Key);
      SCOPED_TRACE(F);
      compareInstruction(*P, N, **Gpu, *Q, Out);
      if (HasFatalFailure())
        return;
    }
    std::cout << F << ": " << Out.Compared << " instructions, "
              << Out.Ops.size() << " ops agree with the CPU\n";
  }
}

double asDouble(double X) { return X; }
double asDouble(float X) { return X; }
double asDouble(cuda::bf16 X) { return __bfloat162float(X); }
template <typename T> T fromFloat(float X) { return T(X); }
template <> cuda::bf16 fromFloat<cuda::bf16>(float X) {
  return __float2bfloat16_rn(X);
}

// The fused kernels against the plain reference, forward and backward, on
// shapes whose sequence is not a multiple of any tile, with grouped KV, and
// head sizes that are padded (40, 200) or take the SIMT path (200 > 128).
template <typename T> void attentionAgainstReference(double Tol) {
  struct Case {
    int64_t B, S, H, Hkv, Hd;
  };
  const Case Cases[] = {{1, 1, 1, 1, 16},    {2, 37, 4, 2, 16},
                        {1, 130, 2, 1, 64},  {2, 77, 6, 6, 64},
                        {1, 200, 4, 1, 128}, {1, 64, 2, 2, 32},
                        {1, 45, 2, 1, 40},   {1, 33, 2, 2, 200}};
  for (const Case &C : Cases) {
    SCOPED_TRACE("B=" + std::to_string(C.B) + " S=" + std::to_string(C.S) +
                 " H=" + std::to_string(C.H) + " Hkv=" + std::to_string(C.Hkv) +
                 " Hd=" + std::to_string(C.Hd));
    const int64_t NQ = C.B * C.S * C.H * C.Hd, NK = C.B * C.S * C.Hkv * C.Hd;
    std::mt19937 G(7);
    std::normal_distribution<float> D(0.f, 1.f);
    auto Make = [&](int64_t N) {
      std::vector<T> V(static_cast<size_t>(N));
      for (T &X : V)
        X = fromFloat<T>(D(G));
      return V;
    };
    std::vector<T> Q = Make(NQ), K = Make(NK), V = Make(NK), Dy = Make(NQ);
    std::vector<T *> Dev;
    auto Up = [&](const std::vector<T> &H) {
      T *P = nullptr;
      EXPECT_EQ(cudaMalloc(reinterpret_cast<void **>(&P), H.size() * sizeof(T)),
                cudaSuccess);
      EXPECT_EQ(
          cudaMemcpy(P, H.data(), H.size() * sizeof(T), cudaMemcpyHostToDevice),
          cudaSuccess);
      Dev.push_back(P);
      return P;
    };
    auto Down = [&](const T *P, int64_t N) {
      std::vector<T> H(static_cast<size_t>(N));
      EXPECT_EQ(
          cudaMemcpy(H.data(), P, H.size() * sizeof(T), cudaMemcpyDeviceToHost),
          cudaSuccess);
      return H;
    };
    T *Qd = Up(Q), *Kd = Up(K), *Vd = Up(V), *Dyd = Up(Dy);
    T *Y1 = Up(Q), *Y2 = Up(Q), *Dq1 = Up(Q), *Dq2 = Up(Q), *Dk1 = Up(K),
      *Dk2 = Up(K), *Dv1 = Up(K), *Dv2 = Up(K);
    size_t Bytes = std::max(
        cuda::attentionScratchBytes(C.B, C.S, C.H, C.Hkv, C.Hd, sizeof(T)),
        cuda::attentionReferenceScratchBytes(C.B, C.S, C.H, C.Hkv, C.Hd,
                                             sizeof(T)));
    void *Scratch = nullptr;
    ASSERT_EQ(cudaMalloc(&Scratch, std::max<size_t>(Bytes, 1)), cudaSuccess);
    ASSERT_EQ(cuda::attention(Qd, Kd, Vd, Y1, C.B, C.S, C.H, C.Hkv, C.Hd, 0.0,
                              Scratch, nullptr),
              cudaSuccess);
    ASSERT_EQ(cuda::attentionReference(Qd, Kd, Vd, Y2, C.B, C.S, C.H, C.Hkv,
                                       C.Hd, 0.0, nullptr),
              cudaSuccess);
    ASSERT_EQ(cuda::attentionGrad(Dyd, Qd, Kd, Vd, Dq1, Dk1, Dv1, C.B, C.S, C.H,
                                  C.Hkv, C.Hd, 0.0, Scratch, nullptr),
              cudaSuccess);
    ASSERT_EQ(cuda::attentionGradReference(Dyd, Qd, Kd, Vd, Dq2, Dk2, Dv2, C.B,
                                           C.S, C.H, C.Hkv, C.Hd, 0.0, Scratch,
                                           nullptr),
              cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    auto Compare = [&](const T *A, const T *B, int64_t N, const char *What) {
      std::vector<T> Ha = Down(A, N), Hb = Down(B, N);
      double Scale = 0, Worst = 0;
      for (int64_t I = 0; I < N; ++I) {
        Scale = std::max(Scale, std::fabs(asDouble(Hb[I])));
        double Dd = std::fabs(asDouble(Ha[I]) - asDouble(Hb[I]));
        if (!(Dd <= Worst))
          Worst = Dd;
      }
      EXPECT_LE(Worst / std::max(Scale, 1e-30), Tol)
          << What << ": fused against reference";
    };
    Compare(Y1, Y2, NQ, "y");
    Compare(Dq1, Dq2, NQ, "dq");
    Compare(Dk1, Dk2, NK, "dk");
    Compare(Dv1, Dv2, NK, "dv");
    for (T *P : Dev)
      cudaFree(P);
    cudaFree(Scratch);
  }
}

TEST(CudaKernels, FusedAttentionMatchesReferenceF64) {
  attentionAgainstReference<double>(1e-12);
}
TEST(CudaKernels, FusedAttentionMatchesReferenceF32) {
  attentionAgainstReference<float>(1e-5);
}
// The tensor-core path rounds P and dS to bf16 before their products, as
// FlashAttention does; the reference keeps them in f32.
TEST(CudaKernels, FusedAttentionMatchesReferenceBf16) {
  attentionAgainstReference<cuda::bf16>(3e-2);
}

TEST(CudaKernels, TokenIdOutsideTheVocabIsAnError) {
  Expected<std::unique_ptr<Backend>> Gpu = createCudaBackend(DType::F32);
  ASSERT_TRUE(Gpu.ok()) << Gpu.message();
  std::unique_ptr<Queue> Q = (*Gpu)->createQueue();
  BufferSpec Table, Ids, Y;
  Table.Dims = {8, 4};
  Ids.Dims = {3};
  Ids.Type = DType::I32;
  Y.Dims = {3, 4};
  void *Dt = (*Gpu)->allocate(Table.bytes()), *Di = (*Gpu)->allocate(12),
       *Dy = (*Gpu)->allocate(Y.bytes());
  const int32_t Host[3] = {1, 9, 2};
  ASSERT_TRUE(Q->copyToDevice(Di, Host, sizeof(Host)).ok());
  OpAttrs Attrs;
  BoundInstruction I;
  I.Op = OpKind::Embedding;
  I.Attrs = &Attrs;
  I.Index = 5;
  I.In = {refOf(Table, Dt), refOf(Ids, Di)};
  I.Out = {refOf(Y, Dy)};
  ASSERT_TRUE((*Gpu)->prepare({I}).ok());
  StepContext Ctx;
  ASSERT_TRUE((*Gpu)->run(I, Ctx, *Q).ok());
  Status S = Q->synchronize();
  ASSERT_FALSE(S.ok());
  EXPECT_NE(S.message().find("instructions[5] (embedding): id 9 at position 1 "
                             "is outside [0, 8)"),
            std::string::npos)
      << S.message();
  EXPECT_TRUE(Q->synchronize().ok()) << "the error is reported once";
}

// A padding id repeated over most of the batch: its rows are summed in
// pieces across many chunks of sorted positions (Embedding.cu), another
// id's run crosses one chunk boundary, the rest are short; every row
// agrees with the CPU's one serial sum to rounding.
TEST(CudaKernels, EmbeddingGradOfARepeatedIdMatchesTheCpu) {
  Expected<std::unique_ptr<Backend>> Gpu = createCudaBackend(DType::F64);
  ASSERT_TRUE(Gpu.ok()) << Gpu.message();
  std::unique_ptr<Queue> Q = (*Gpu)->createQueue();
  std::unique_ptr<Backend> Cpu = createCpuBackend(DType::F64);
  const int64_t N = 1000, V = 50, D = 72;
  BufferSpec Dy, Ids, Table;
  Dy.Dims = {N, D};
  Dy.Type = Table.Type = DType::F64;
  Ids.Dims = {N};
  Ids.Type = DType::I32;
  Table.Dims = {V, D};
  std::mt19937 G(7);
  std::normal_distribution<double> Normal(0.0, 1.0);
  std::vector<double> HostDy(static_cast<size_t>(N * D)),
      CpuTable(static_cast<size_t>(V * D));
  for (double &X : HostDy)
    X = Normal(G);
  std::vector<int32_t> HostIds(static_cast<size_t>(N));
  for (int64_t K = 0; K < N; ++K)
    HostIds[size_t(K)] = K % 5 == 4            ? int32_t(1 + G() % (V - 1))
                         : K >= 300 && K < 430 ? 7
                                               : 0;
  void *DDy = (*Gpu)->allocate(Dy.bytes()),
       *DIds = (*Gpu)->allocate(Ids.bytes()),
       *DTable = (*Gpu)->allocate(Table.bytes());
  ASSERT_TRUE(Q->copyToDevice(DDy, HostDy.data(), Dy.bytes()).ok());
  ASSERT_TRUE(Q->copyToDevice(DIds, HostIds.data(), Ids.bytes()).ok());
  OpAttrs Attrs;
  BoundInstruction I;
  I.Op = OpKind::EmbeddingGrad;
  I.Attrs = &Attrs;
  I.In = {refOf(Dy, DDy), refOf(Ids, DIds)};
  I.Out = {refOf(Table, DTable)};
  BoundInstruction C = I;
  C.In = {refOf(Dy, HostDy.data()), refOf(Ids, HostIds.data())};
  C.Out = {refOf(Table, CpuTable.data())};
  StepContext Ctx;
  ASSERT_TRUE(Cpu->prepare({C}).ok());
  ASSERT_TRUE(Cpu->run(C, Ctx, hostQueue()).ok());
  ASSERT_TRUE((*Gpu)->prepare({I}).ok());
  ASSERT_TRUE((*Gpu)->run(I, Ctx, *Q).ok());
  std::vector<double> Got(size_t(V * D));
  ASSERT_TRUE(Q->copyToHost(Got.data(), DTable, Table.bytes()).ok());
  ASSERT_TRUE(Q->synchronize().ok());
  for (int64_t K = 0; K < V * D; ++K)
    ASSERT_NEAR(Got[size_t(K)], CpuTable[size_t(K)],
                1e-10 * (1 + std::fabs(CpuTable[size_t(K)])))
        << "row " << K / D << ", column " << K % D;
  for (void *P : {DDy, DIds, DTable})
    (*Gpu)->release(P);
}

// Host-to-device copies go through pinned staging (CudaQueue): the bytes
// are the host buffer's at the call, whatever the caller writes there
// next, across the staging's pieces and its two buffers in turn.
TEST(CudaKernels, HostCopiesTakeTheBytesAtTheCall) {
  Expected<std::unique_ptr<Backend>> Gpu = createCudaBackend(DType::F32);
  ASSERT_TRUE(Gpu.ok()) << Gpu.message();
  std::unique_ptr<Queue> Q = (*Gpu)->createQueue();
  const size_t Sizes[] = {1, 4096, (size_t(64) << 20) + 12345, 777};
  std::vector<unsigned char> Host;
  std::vector<void *> Device;
  for (size_t K = 0; K < 4; ++K) {
    Host.assign(Sizes[K], 0);
    for (size_t I = 0; I < Sizes[K]; ++I)
      Host[I] = static_cast<unsigned char>(I * 7 + K);
    Device.push_back((*Gpu)->allocate(Sizes[K]));
    ASSERT_NE(Device.back(), nullptr);
    ASSERT_TRUE(Q->copyToDevice(Device.back(), Host.data(), Sizes[K]).ok());
    std::fill(Host.begin(), Host.end(), 0xAB); // the caller's next bytes
  }
  for (size_t K = 0; K < 4; ++K) {
    std::vector<unsigned char> Got(Sizes[K]);
    ASSERT_TRUE(Q->copyToHost(Got.data(), Device[K], Sizes[K]).ok());
    ASSERT_TRUE(Q->synchronize().ok());
    size_t Bad = Sizes[K];
    for (size_t I = 0; I < Sizes[K] && Bad == Sizes[K]; ++I)
      if (Got[I] != static_cast<unsigned char>(I * 7 + K))
        Bad = I;
    EXPECT_EQ(Bad, Sizes[K]) << "copy " << K << " of " << Sizes[K]
                             << " bytes differs at byte " << Bad;
    (*Gpu)->release(Device[K]);
  }
}

} // namespace

int main(int Argc, char **Argv) {
  int Count = 0;
  cudaError_t E = cudaGetDeviceCount(&Count);
  if (E != cudaSuccess || Count == 0) {
    std::cout << "SKIP: no CUDA device found (cudaGetDeviceCount: "
              << (E == cudaSuccess ? std::string("0 devices")
                                   : std::string(cudaGetErrorString(E)))
              << ")\n";
    return 77;
  }
  ::testing::InitGoogleTest(&Argc, Argv);
  return RUN_ALL_TESTS();
}
