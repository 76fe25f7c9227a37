//===- KernelForwardTest.cpp - f32 kernels against naive f64 loops --------===//
#include "runtime/Backend.h"
#include "runtime/KernelTable.h"
#include "runtime/cpu/kernels/FastMath.h"
#include "runtime/cpu/kernels/Kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

using namespace weft;
using namespace weft::cpu;

namespace {

std::vector<float> randomF(size_t N, unsigned Seed, float Scale = 1.0f) {
  std::mt19937 G(Seed);
  std::normal_distribution<float> D(0.0f, Scale);
  std::vector<float> V(N);
  for (float &X : V)
    X = D(G);
  return V;
}

void expectNear(const std::vector<float> &Got, const std::vector<double> &Want,
                double Tol, const char *What) {
  ASSERT_EQ(Got.size(), Want.size());
  for (size_t I = 0; I < Got.size(); ++I)
    if (std::fabs(Got[I] - Want[I]) > Tol * std::max(1.0, std::fabs(Want[I]))) {
      ADD_FAILURE() << What << "[" << I << "]: got " << Got[I] << ", want "
                    << Want[I];
      return;
    }
}

TEST(KernelForward, VexpAccuracy) {
  double Worst = 0;
  for (float X = -80.0f; X < 80.0f; X += 0.0137f) {
    double Want = std::exp(double(X));
    Worst = std::max(Worst, std::fabs(vexp(X) - Want) / Want);
  }
  EXPECT_LT(Worst, 4e-7);
  EXPECT_EQ(vexp(-1e30f) < 1e-37f, true);
  EXPECT_TRUE(std::isfinite(vexp(1e30f)));
}

TEST(KernelForward, MatmulAllTransposes) {
  const int64_t M = 17, N = 13, K = 29;
  auto A = randomF(M * K, 1), B = randomF(K * N, 2);
  for (bool TA : {false, true})
    for (bool TB : {false, true}) {
      std::vector<float> C(M * N);
      matmul(A.data(), B.data(), C.data(), M, N, K, TA, TB);
      std::vector<double> Want(M * N);
      for (int64_t I = 0; I < M; ++I)
        for (int64_t J = 0; J < N; ++J) {
          double S = 0;
          for (int64_t P = 0; P < K; ++P)
            S += double(TA ? A[P * M + I] : A[I * K + P]) *
                 double(TB ? B[J * K + P] : B[P * N + J]);
          Want[I * N + J] = S;
        }
      expectNear(C, Want, 1e-5, "matmul");
    }
}

// A fused bias (weft-fuse-bias): the product starts from the bias rows.
// Against the naive loop, at 1 and 2 threads (2: blocks of rows when M >= N,
// of columns otherwise), and an empty contraction (the bias alone).
TEST(KernelForward, MatmulWithBias) {
  int Saved = numThreads();
  for (auto [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{160, 96, 160},
                         {48, 200, 300},
                         {5, 7, 0}})
    for (int Threads : {1, 2}) {
      setNumThreads(Threads);
      auto A = randomF(M * K, 3), B = randomF(K * N, 4), Bias = randomF(N, 5);
      std::vector<float> C(M * N, 7.0f); // stale values are overwritten
      matmul(A.data(), B.data(), C.data(), M, N, K, false, true, Bias.data());
      std::vector<double> Want(M * N);
      for (int64_t I = 0; I < M; ++I)
        for (int64_t J = 0; J < N; ++J) {
          double S = Bias[J];
          for (int64_t P = 0; P < K; ++P)
            S += double(A[I * K + P]) * double(B[J * K + P]);
          Want[I * N + J] = S;
        }
      expectNear(C, Want, 1e-4, "matmul with bias");
    }
  setNumThreads(Saved);
}

// Causal and bidirectional (no mask, an encoder's): against a plain loop.
TEST(KernelForward, Attention) {
  const int64_t B = 2, S = 67, H = 4, Hkv = 2, Hd = 8;
  auto Q = randomF(B * S * H * Hd, 1), K = randomF(B * S * Hkv * Hd, 2),
       V = randomF(B * S * Hkv * Hd, 3);
  for (bool Causal : {true, false}) {
    std::vector<float> Y(Q.size());
    std::vector<char> Scratch(attentionScratchBytes(S, S, Hd, 4, numThreads()));
    const QueryRun Whole{0, 0, S};
    attention(Q.data(), K.data(), V.data(), Y.data(), B, S, S,
              QueryRuns{&Whole, 1}, H, Hkv, Hd, Scratch.data(), 0, Causal);
    std::vector<double> Want(Q.size());
    double Scale = 1.0 / std::sqrt(double(Hd));
    for (int64_t Bi = 0; Bi < B; ++Bi)
      for (int64_t Hh = 0; Hh < H; ++Hh) {
        int64_t Kh = Hh / (H / Hkv);
        for (int64_t I = 0; I < S; ++I) {
          const int64_t Keys = Causal ? I + 1 : S;
          std::vector<double> P(static_cast<size_t>(Keys));
          double M = -1e300, Sum = 0;
          for (int64_t J = 0; J < Keys; ++J) {
            double D = 0;
            for (int64_t C = 0; C < Hd; ++C)
              D += double(Q[((Bi * S + I) * H + Hh) * Hd + C]) *
                   K[((Bi * S + J) * Hkv + Kh) * Hd + C];
            P[J] = D * Scale;
            M = std::max(M, P[J]);
          }
          for (double &X : P)
            Sum += (X = std::exp(X - M));
          for (int64_t C = 0; C < Hd; ++C) {
            double Acc = 0;
            for (int64_t J = 0; J < Keys; ++J)
              Acc += P[J] / Sum * V[((Bi * S + J) * Hkv + Kh) * Hd + C];
            Want[((Bi * S + I) * H + Hh) * Hd + C] = Acc;
          }
        }
      }
    expectNear(Y, Want, 2e-5,
               Causal ? "causal attention" : "bidirectional attention");
  }
}

TEST(KernelForward, CrossEntropyLargeVocab) {
  const int64_t R = 6, V = 50257;
  auto L = randomF(R * V, 1, 3.0f);
  std::vector<int32_t> T = {0, 50256, 17, 1234, 9, 42};
  float Loss = 0;
  ASSERT_TRUE(crossEntropy(L.data(), T.data(), R, V, &Loss).ok());
  double Want = 0;
  for (int64_t Rr = 0; Rr < R; ++Rr) {
    double M = -1e300, S = 0;
    for (int64_t J = 0; J < V; ++J)
      M = std::max(M, double(L[Rr * V + J]));
    for (int64_t J = 0; J < V; ++J)
      S += std::exp(L[Rr * V + J] - M);
    Want += M + std::log(S) - L[Rr * V + T[Rr]];
  }
  Want /= R;
  EXPECT_NEAR(Loss, Want, 1e-5 * Want);
  // Stable for huge logits.
  std::vector<float> Big = {1000.0f, 0.0f, -1000.0f};
  int32_t T0 = 1;
  ASSERT_TRUE(crossEntropy(Big.data(), &T0, 1, 3, &Loss).ok());
  EXPECT_NEAR(Loss, 1000.0f, 1e-3);
}

TEST(KernelForward, NormsAndActivations) {
  const int64_t R = 5, D = 96;
  auto X = randomF(R * D, 1, 2.0f), G = randomF(D, 2), Bt = randomF(D, 3);
  std::vector<float> Y(R * D);
  std::vector<double> Want(R * D);
  layerNorm(X.data(), G.data(), Bt.data(), Y.data(), R, D, 1e-5);
  for (int64_t Rr = 0; Rr < R; ++Rr) {
    double M = 0, V = 0;
    for (int64_t C = 0; C < D; ++C)
      M += X[Rr * D + C];
    M /= D;
    for (int64_t C = 0; C < D; ++C)
      V += (X[Rr * D + C] - M) * (X[Rr * D + C] - M);
    V /= D;
    for (int64_t C = 0; C < D; ++C)
      Want[Rr * D + C] =
          (X[Rr * D + C] - M) / std::sqrt(V + 1e-5) * G[C] + Bt[C];
  }
  expectNear(Y, Want, 1e-5, "layer_norm");
  rmsNorm(X.data(), G.data(), Y.data(), R, D, 1e-5);
  for (int64_t Rr = 0; Rr < R; ++Rr) {
    double S = 0;
    for (int64_t C = 0; C < D; ++C)
      S += double(X[Rr * D + C]) * X[Rr * D + C];
    for (int64_t C = 0; C < D; ++C)
      Want[Rr * D + C] = X[Rr * D + C] / std::sqrt(S / D + 1e-5) * G[C];
  }
  expectNear(Y, Want, 1e-5, "rms_norm");
  gelu(X.data(), Y.data(), R * D);
  for (int64_t I = 0; I < R * D; ++I) {
    double V = X[I];
    Want[I] = 0.5 * V *
              (1 + std::tanh(std::sqrt(2 / M_PI) * (V + 0.044715 * V * V * V)));
  }
  expectNear(Y, Want, 1e-6, "gelu");
  silu(X.data(), Y.data(), R * D);
  for (int64_t I = 0; I < R * D; ++I)
    Want[I] = X[I] / (1 + std::exp(-double(X[I])));
  expectNear(Y, Want, 1e-6, "silu");
}

TEST(KernelForward, RopeMatchesRotateHalf) {
  const int64_t B = 1, S = 3, H = 2, Hd = 4;
  auto X = randomF(B * S * H * Hd, 1);
  std::vector<float> Y(X.size());
  rope(X.data(), Y.data(), B, S, H, Hd, 10000.0, false);
  std::vector<double> Want(X.size());
  for (int64_t Pos = 0; Pos < S; ++Pos)
    for (int64_t Hh = 0; Hh < H; ++Hh)
      for (int64_t I = 0; I < Hd; ++I) {
        int64_t Base = (Pos * H + Hh) * Hd;
        int64_t Fi = I % (Hd / 2);
        double A = Pos * std::pow(10000.0, -2.0 * Fi / Hd);
        // HF: q*cos + rotate_half(q)*sin, rotate_half = [-x2, x1].
        double Rot = I < Hd / 2 ? -X[Base + I + Hd / 2] : X[Base + I - Hd / 2];
        Want[Base + I] = X[Base + I] * std::cos(A) + Rot * std::sin(A);
      }
  expectNear(Y, Want, 1e-6, "rope");
}

TEST(KernelForward, ThreadCountDoesNotChangeResults) {
  const int64_t R = 300, D = 200;
  auto X = randomF(R * D, 1);
  std::vector<float> A(D), B(D);
  int Saved = numThreads();
  setNumThreads(1);
  reduceRows(X.data(), A.data(), R, D);
  setNumThreads(2);
  reduceRows(X.data(), B.data(), R, D);
  setNumThreads(Saved);
  EXPECT_EQ(A, B);
}

// The scan runs in one range per thread: the index is the first bad value's
// whichever range holds it, and one in a later range never hides an earlier.
TEST(KernelForward, FirstNonFiniteIsTheFirstAtEveryThreadCount) {
  const int64_t N = int64_t(1) << 20;
  std::vector<float> X(size_t(N), 1.0f);
  int Saved = numThreads();
  for (int Threads : {1, 2, 3}) {
    setNumThreads(Threads);
    std::fill(X.begin(), X.end(), 1.0f);
    EXPECT_EQ(firstNonFinite(X.data(), N), -1) << Threads << " threads";
    X[size_t(N - 1)] = INFINITY;
    EXPECT_EQ(firstNonFinite(X.data(), N), N - 1) << Threads << " threads";
    X[size_t(N / 2 + 5)] = -INFINITY;
    EXPECT_EQ(firstNonFinite(X.data(), N), N / 2 + 5) << Threads << " threads";
    X[100] = NAN;
    EXPECT_EQ(firstNonFinite(X.data(), N), 100) << Threads << " threads";
  }
  setNumThreads(Saved);
}

} // namespace

// OpenBLAS on a VM with a masked CPU model falls back to pre-AVX kernels,
// and a machine image may preset AVX2 ones on an AVX-512 CPU; weft-run
// warns, naming the core, the setting and the OPENBLAS_CORETYPE that fixes
// it.
TEST(Blas, WarnsWhenOpenBlasRunsKernelsOlderThanTheCpu) {
  using weft::cpu::blasKernelWarning;
  std::string W = blasKernelWarning("Prescott", true, true, nullptr);
  EXPECT_NE(W.find("OpenBLAS runs its 'Prescott' kernels on a CPU with "
                   "AVX-512 (the CPU model is probably masked by a VM)"),
            std::string::npos)
      << W;
  EXPECT_NE(W.find("OPENBLAS_CORETYPE=SkylakeX"), std::string::npos) << W;
  W = blasKernelWarning("Haswell", true, true, "haswell");
  EXPECT_NE(W.find("OpenBLAS runs its 'Haswell' kernels on a CPU with "
                   "AVX-512 (OPENBLAS_CORETYPE=haswell)"),
            std::string::npos)
      << W;
  EXPECT_NE(blasKernelWarning("Nehalem", false, true, nullptr)
                .find("OPENBLAS_CORETYPE=Haswell"),
            std::string::npos);
  EXPECT_EQ(blasKernelWarning("SkylakeX", true, true, nullptr), "");
  EXPECT_EQ(blasKernelWarning("Cooperlake", true, true, "Cooperlake"), "");
  EXPECT_EQ(blasKernelWarning("Haswell", false, true, "Haswell"), "");
  EXPECT_EQ(blasKernelWarning("Prescott", false, false, nullptr), "");
}

// weft-run restarts itself with the core cpuid allows (tools/weft-run):
// AVX-512's over any older one, AVX2's over pre-AVX2 ones; a core it does
// not know is left alone.
TEST(Blas, CoreToForceFollowsCpuidNotTheModelName) {
  using weft::cpu::blasCoreToForce;
  EXPECT_EQ(blasCoreToForce("Prescott", true, true), "SkylakeX");
  EXPECT_EQ(blasCoreToForce("Haswell", true, true), "SkylakeX");
  EXPECT_EQ(blasCoreToForce("Zen", true, true), "SkylakeX");
  EXPECT_EQ(blasCoreToForce("Nehalem", false, true), "Haswell");
  EXPECT_EQ(blasCoreToForce("Core2", false, true), "Haswell");
  EXPECT_EQ(blasCoreToForce("Sandybridge", false, true), "Haswell");
  EXPECT_EQ(blasCoreToForce("SkylakeX", true, true), "");
  EXPECT_EQ(blasCoreToForce("Cooperlake", true, true), "");
  EXPECT_EQ(blasCoreToForce("SapphireRapids", true, true), "");
  EXPECT_EQ(blasCoreToForce("Zen", false, true), "");
  EXPECT_EQ(blasCoreToForce("Haswell", false, true), "");
  EXPECT_EQ(blasCoreToForce("Prescott", false, false), ""); // no AVX2
}

// Threads per rank share the node's cores: 4 ranks unbound on 2 cores take
// one each (each taking both ran 33x slower); a rank bound to its own
// cores uses them; one rank alone takes them all.
TEST(Threads, EachRankTakesItsShareOfTheNode) {
  EXPECT_EQ(weft::cpu::threadsThatFit(2, 2, 4), 1);
  EXPECT_EQ(weft::cpu::threadsThatFit(2, 2, 1), 2);
  EXPECT_EQ(weft::cpu::threadsThatFit(16, 16, 4), 4);
  EXPECT_EQ(weft::cpu::threadsThatFit(1, 16, 4), 1); // bound to one core
  EXPECT_EQ(weft::cpu::threadsThatFit(16, 16, 32), 1);
  EXPECT_EQ(weft::cpu::threadsThatFit(16, 16, 0), 16); // no launcher count
}

TEST(Threads, OversubscriptionIsWarnedAboutNamingTheCount) {
  EXPECT_EQ(weft::cpu::oversubscriptionWarning(1, 2, 4), "");
  EXPECT_EQ(weft::cpu::oversubscriptionWarning(2, 4, 2), "");
  std::string W = weft::cpu::oversubscriptionWarning(2, 2, 4);
  EXPECT_NE(W.find("--threads 2 x 4 ranks on this node = 8 threads on 2 "
                   "cores"),
            std::string::npos)
      << W;
  EXPECT_NE(W.find("each rank takes 1 thread"), std::string::npos) << W;
}

// The one op-to-kernel table: the CPU backend runs every op the program
// format has but the communicator's collectives, in f32 and f64; what a
// table lacks is listed in the op table's order, and a refusal names the
// op and every other one the backend lacks.
TEST(KernelTable, TheCpuBackendLacksNoOp) {
  for (weft::DType T : {weft::DType::F32, weft::DType::F64}) {
    std::unique_ptr<weft::Backend> B = weft::createCpuBackend(T);
    EXPECT_TRUE(B->missingKernels(T).empty());
  }
}

// The CUDA backend's gaps, read from its plugin (no device needed): a new
// op without a CUDA kernel fails here, on every machine that builds CUDA.
TEST(KernelTable, TheCudaBackendLacksNoOp) {
  if (!weft::haveCuda())
    GTEST_SKIP() << "this weft was built without CUDA";
  const std::set<std::string> Want = {};
  for (weft::DType T :
       {weft::DType::F32, weft::DType::F64, weft::DType::BF16}) {
    weft::Expected<std::vector<weft::OpKind>> Missing =
        weft::cudaMissingKernels(T);
    ASSERT_TRUE(Missing.ok()) << Missing.message();
    std::set<std::string> Got;
    for (weft::OpKind K : *Missing)
      Got.insert(weft::opName(K));
    EXPECT_EQ(Got, Want) << weft::dtypeName(T);
  }
}

TEST(KernelTable, MissingOpsAreListedAndNamedInTheRefusal) {
  using Fn = int (*)();
  weft::KernelTable<Fn> Table;
  Fn One = [] { return 1; };
  for (int K = 0; K < weft::NumOpKinds; ++K)
    if (weft::OpKind(K) != weft::OpKind::Softmax &&
        weft::OpKind(K) != weft::OpKind::MseLoss)
      Table.set(weft::OpKind(K), One);
  std::vector<weft::OpKind> Missing = Table.missing();
  ASSERT_EQ(Missing.size(), 2u);
  std::string M = weft::missingKernelMessage("instructions[7] (softmax)",
                                             "CUDA", "f32", Missing);
  EXPECT_NE(M.find("instructions[7] (softmax) has no CUDA kernel for f32 (the "
                   "CUDA backend lacks: "),
            std::string::npos)
      << M;
  EXPECT_NE(M.find("softmax"), std::string::npos);
  EXPECT_NE(M.find("mse_loss"), std::string::npos);
  EXPECT_FALSE(Table[weft::OpKind::Softmax]);
  EXPECT_FALSE(weft::backendRunsOp(weft::OpKind::AllReduce));
}
