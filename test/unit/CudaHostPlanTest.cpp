//===- CudaHostPlanTest.cpp - The CUDA backend's host decisions -----------===//
//
// What the CUDA backend decides without a GPU (runtime/cuda/HostPlans.h),
// checked on any machine: the dtype each instruction's kernel runs in, the
// row-major to column-major GEMM mapping (applied by a plain column-major
// GEMM written here, against a row-major one), and the pieces of an
// overlapping device copy (against memmove).
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/HostPlans.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

using namespace weft;

namespace {

struct Operands {
  std::vector<BufferSpec> Specs;
  BoundInstruction I;
};

/// An instruction of Op whose inputs and outputs have these dtypes.
Operands make(OpKind Op, std::vector<DType> In, std::vector<DType> Out) {
  Operands O;
  O.Specs.resize(In.size() + Out.size());
  O.I.Op = Op;
  O.I.Index = 7;
  for (size_t K = 0; K < In.size() + Out.size(); ++K) {
    O.Specs[K].Type = K < In.size() ? In[K] : Out[K - In.size()];
    O.Specs[K].Dims = {4};
  }
  for (size_t K = 0; K < In.size() + Out.size(); ++K) {
    TensorRef R;
    R.Spec = &O.Specs[K];
    (K < In.size() ? O.I.In : O.I.Out).push_back(R);
  }
  return O;
}

KernelChoice choose(OpKind Op, std::vector<DType> In, std::vector<DType> Out) {
  Operands O = make(Op, In, Out);
  Expected<KernelChoice> C = chooseKernel(O.I);
  EXPECT_TRUE(C.ok()) << C.message();
  return C.ok() ? *C : KernelChoice{};
}

constexpr DType F32 = DType::F32, F64 = DType::F64, BF16 = DType::BF16,
                I32 = DType::I32;

TEST(CudaHostPlan, OneDtypeRunsNatively) {
  KernelChoice C = choose(OpKind::Matmul, {F32, F32}, {F32});
  EXPECT_EQ(C.How, KernelChoice::Native);
  EXPECT_EQ(C.Type, F32);
  C = choose(OpKind::Matmul, {BF16, BF16}, {BF16});
  EXPECT_EQ(C.How, KernelChoice::Native);
  EXPECT_EQ(C.Type, BF16);
  C = choose(OpKind::LayerNorm, {F64, F64, F64}, {F64});
  EXPECT_EQ(C.Type, F64);
  C = choose(OpKind::Embedding, {BF16, I32}, {BF16});
  EXPECT_EQ(C.How, KernelChoice::Native);
  EXPECT_EQ(C.Type, BF16);
  C = choose(OpKind::Fill, {}, {I32}); // an i32 fill
  EXPECT_EQ(C.How, KernelChoice::Native);
}

TEST(CudaHostPlan, Bf16CrossEntropyHasAnF32Loss) {
  KernelChoice C = choose(OpKind::CrossEntropy, {BF16, I32}, {F32});
  EXPECT_EQ(C.How, KernelChoice::Native);
  EXPECT_EQ(C.Type, BF16);
  C = choose(OpKind::CrossEntropyGrad, {BF16, I32, F32}, {BF16});
  EXPECT_EQ(C.How, KernelChoice::Native);
  EXPECT_EQ(C.Type, BF16);
  C = choose(OpKind::CrossEntropyStatsGrad, {BF16, I32, F32, F32}, {BF16});
  EXPECT_EQ(C.How, KernelChoice::Native);
  EXPECT_EQ(C.Type, BF16);
  C = choose(OpKind::CrossEntropyFromStats, {F32}, {F32});
  EXPECT_EQ(C.How, KernelChoice::Native);
  EXPECT_EQ(C.Type, F32);
  // A bf16 loss has no native kernel: the CPU's widening applies.
  C = choose(OpKind::CrossEntropy, {BF16, I32}, {BF16});
  EXPECT_EQ(C.How, KernelChoice::Widen);
  // f32 logits with an f32 loss are plain f32.
  C = choose(OpKind::CrossEntropy, {F32, I32}, {F32});
  EXPECT_EQ(C.How, KernelChoice::Native);
  EXPECT_EQ(C.Type, F32);
}

TEST(CudaHostPlan, MixesWidenOrAreRefused) {
  KernelChoice C = choose(OpKind::Matmul, {BF16, F32}, {F32});
  EXPECT_EQ(C.How, KernelChoice::Widen);
  EXPECT_EQ(C.Type, F32);
  C = choose(OpKind::Accumulate, {BF16}, {F32});
  EXPECT_EQ(C.How, KernelChoice::Widen);
  Operands O = make(OpKind::Add, {F64, BF16}, {F64});
  Expected<KernelChoice> E = chooseKernel(O.I);
  ASSERT_FALSE(E.ok());
  EXPECT_EQ(E.message(),
            "instructions[7] (add) mixes dtypes no CUDA kernel takes");
}

TEST(CudaHostPlan, ByteMovesTakeAnyDtype) {
  for (OpKind K : {OpKind::Copy, OpKind::Pack, OpKind::Unpack, OpKind::Split,
                   OpKind::Concat, OpKind::BlockTranspose, OpKind::Cast})
    EXPECT_EQ(choose(K, {BF16}, {F32}).How, KernelChoice::Bytes) << opName(K);
}

/// Column-major C (ldc) = op(X) op(Y), X stored XRows x XCols (ldx).
void columnMajorGemmRef(const ColumnMajorGemm &G, const double *First,
                        const double *Second, double *C) {
  for (int64_t J = 0; J < G.N; ++J)
    for (int64_t I = 0; I < G.M; ++I) {
      double S = 0;
      for (int64_t P = 0; P < G.K; ++P) {
        // op(First)[I, P] and op(Second)[P, J], column-major storage.
        double F =
            G.TransFirst ? First[I * G.LdFirst + P] : First[P * G.LdFirst + I];
        double Sv = G.TransSecond ? Second[P * G.LdSecond + J]
                                  : Second[J * G.LdSecond + P];
        S += F * Sv;
      }
      C[J * G.LdC + I] = S;
    }
}

TEST(CudaHostPlan, RowMajorGemmAsColumnMajor) {
  const int64_t M = 5, N = 3, K = 7;
  std::mt19937 Gen(3);
  std::uniform_real_distribution<double> D(-1, 1);
  std::vector<double> A(M * K), B(K * N);
  for (double &X : A)
    X = D(Gen);
  for (double &X : B)
    X = D(Gen);
  for (bool TA : {false, true})
    for (bool TB : {false, true}) {
      ColumnMajorGemm G = columnMajorGemm(M, N, K, TA, TB);
      EXPECT_EQ(G.FirstRows * G.FirstCols, K * N);
      EXPECT_EQ(G.SecondRows * G.SecondCols, M * K);
      std::vector<double> C(M * N, 0.0);
      columnMajorGemmRef(G, B.data(), A.data(), C.data());
      for (int64_t I = 0; I < M; ++I)
        for (int64_t J = 0; J < N; ++J) {
          double Want = 0;
          for (int64_t P = 0; P < K; ++P)
            Want += (TA ? A[P * M + I] : A[I * K + P]) *
                    (TB ? B[J * K + P] : B[P * N + J]);
          EXPECT_NEAR(C[I * N + J], Want, 1e-12)
              << "TransA " << TA << " TransB " << TB << " at " << I << "," << J;
        }
    }
}

TEST(CudaHostPlan, OverlappingCopiesAreMemmove) {
  std::mt19937 Gen(5);
  for (int Trial = 0; Trial < 200; ++Trial) {
    const size_t Size = 64;
    std::vector<char> Want(Size), Got(Size);
    for (size_t I = 0; I < Size; ++I)
      Want[I] = Got[I] = char(Gen());
    size_t Src = Gen() % Size, Dst = Gen() % Size;
    size_t Bytes = Gen() % (Size - std::max(Src, Dst) + 1);
    std::memmove(Want.data() + Dst, Want.data() + Src, Bytes);
    for (const CopyPiece &P : memmovePieces(Dst, Src, Bytes)) {
      // Each piece is a legal cudaMemcpy: its ranges do not overlap.
      size_t S = Src + P.Offset, D = Dst + P.Offset;
      ASSERT_TRUE(S + P.Bytes <= D || D + P.Bytes <= S)
          << "piece " << P.Offset << "+" << P.Bytes << " overlaps";
      std::memcpy(Got.data() + D, Got.data() + S, P.Bytes);
    }
    ASSERT_EQ(Got, Want) << "src " << Src << " dst " << Dst << " bytes "
                         << Bytes;
  }
}

} // namespace
