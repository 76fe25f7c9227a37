//===- KernelGradTest.cpp - Every *_grad kernel against finite differences ===//
//
// In f64: the loss is L = sum(w * forward(inputs)) for fixed random w; the
// analytic gradient is the grad kernel applied to dy = w; the numeric one is
// a central difference of L with h = 1e-6.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/kernels/Kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

using namespace weft;
using namespace weft::cpu;

namespace {

using Vec = std::vector<double>;

Vec randomVec(size_t N, unsigned Seed, double Scale = 1.0) {
  std::mt19937_64 G(Seed);
  std::normal_distribution<double> D(0.0, Scale);
  Vec V(N);
  for (double &X : V)
    X = D(G);
  return V;
}

double dot(const Vec &A, const Vec &B) {
  double S = 0;
  for (size_t I = 0; I < A.size(); ++I)
    S += A[I] * B[I];
  return S;
}

/// Perturbs every element of X and compares d loss / d X[i] with Analytic.
/// Gradients below 1e-2 are compared absolutely (the FD noise is ~1e-9).
void expectGrad(const char *What, Vec &X, const Vec &Analytic,
                const std::function<double()> &Loss, double Tol = 1e-6) {
  ASSERT_EQ(X.size(), Analytic.size());
  const double H = 1e-6;
  double Worst = 0;
  for (size_t I = 0; I < X.size(); ++I) {
    double Orig = X[I];
    X[I] = Orig + H;
    double Lp = Loss();
    X[I] = Orig - H;
    double Lm = Loss();
    X[I] = Orig;
    double N = (Lp - Lm) / (2 * H);
    double Err = std::fabs(N - Analytic[I]) /
                 std::max({std::fabs(N), std::fabs(Analytic[I]), 1e-2});
    Worst = std::max(Worst, Err);
    if (Err > Tol) {
      ADD_FAILURE() << What << "[" << I << "]: analytic " << Analytic[I]
                    << ", numeric " << N << ", error " << Err;
      return;
    }
  }
  EXPECT_LE(Worst, Tol) << What;
}

TEST(KernelGrad, Matmul) {
  const int64_t M = 3, N = 4, K = 5;
  for (bool TA : {false, true})
    for (bool TB : {false, true}) {
      Vec A = randomVec(M * K, 1), B = randomVec(K * N, 2),
          W = randomVec(M * N, 3), C(M * N);
      auto Loss = [&] {
        matmul(A.data(), B.data(), C.data(), M, N, K, TA, TB);
        return dot(C, W);
      };
      // dA = W op(B)^T (as stored: transposed when TA); dB likewise.
      Vec DA(M * K), DB(K * N);
      if (!TA)
        matmul(W.data(), B.data(), DA.data(), M, K, N, false, !TB);
      else
        matmul(B.data(), W.data(), DA.data(), K, M, N, TB, true);
      if (!TB)
        matmul(A.data(), W.data(), DB.data(), K, N, M, !TA, false);
      else
        matmul(W.data(), A.data(), DB.data(), N, K, M, true, TA);
      std::string Tag = std::string("matmul ta=") + (TA ? "1" : "0") +
                        " tb=" + (TB ? "1" : "0");
      expectGrad((Tag + " a").c_str(), A, DA, Loss);
      expectGrad((Tag + " b").c_str(), B, DB, Loss);
    }
}

TEST(KernelGrad, BiasAddAndReduceRows) {
  const int64_t R = 5, N = 7;
  Vec X = randomVec(R * N, 1), Bias = randomVec(N, 2), W = randomVec(R * N, 3),
      Y(R * N);
  auto Loss = [&] {
    biasAdd(X.data(), Bias.data(), Y.data(), R, N);
    return dot(Y, W);
  };
  Vec DB(N);
  reduceRows(W.data(), DB.data(), R, N);
  expectGrad("bias_add bias", Bias, DB, Loss);
  expectGrad("bias_add x", X, W, Loss);
}

TEST(KernelGrad, AddMul) {
  const int64_t N = 11;
  Vec A = randomVec(N, 1), B = randomVec(N, 2), W = randomVec(N, 3), Y(N);
  auto Loss = [&] {
    mul(A.data(), B.data(), Y.data(), N);
    return dot(Y, W);
  };
  Vec DA(N), DB(N);
  mul(W.data(), B.data(), DA.data(), N);
  mul(W.data(), A.data(), DB.data(), N);
  expectGrad("mul a", A, DA, Loss);
  expectGrad("mul b", B, DB, Loss);
  auto LossAdd = [&] {
    add(A.data(), B.data(), Y.data(), N);
    return dot(Y, W);
  };
  expectGrad("add a", A, W, LossAdd);
}

TEST(KernelGrad, SplitConcat) {
  const int64_t R = 3, N = 9;
  const int64_t Sizes[3] = {2, 3, 4};
  Vec X = randomVec(R * N, 1), W0 = randomVec(R * 2, 2),
      W1 = randomVec(R * 3, 3), W2 = randomVec(R * 4, 4);
  Vec Y0(R * 2), Y1(R * 3), Y2(R * 4);
  double *Parts[3] = {Y0.data(), Y1.data(), Y2.data()};
  auto Loss = [&] {
    split(X.data(), R, N, Parts, Sizes, 3);
    return dot(Y0, W0) + dot(Y1, W1) + dot(Y2, W2);
  };
  const double *WParts[3] = {W0.data(), W1.data(), W2.data()};
  Vec DX(R * N);
  concat(WParts, Sizes, 3, R, N, DX.data());
  expectGrad("split", X, DX, Loss);
}

TEST(KernelGrad, Embedding) {
  const int64_t V = 6, D = 4, N = 7;
  std::vector<int32_t> Ids = {0, 3, 3, 5, 1, 0, 3};
  Vec Table = randomVec(V * D, 1), W = randomVec(N * D, 2), Y(N * D);
  auto Loss = [&] {
    EXPECT_TRUE(
        embedding(Table.data(), V, D, Ids.data(), N, Y.data(), 0, V).ok());
    return dot(Y, W);
  };
  Vec DT(V * D, 99.0); // embedding_grad must zero first
  ASSERT_TRUE(
      embeddingGrad(W.data(), Ids.data(), N, V, D, DT.data(), 0, V).ok());
  expectGrad("embedding table", Table, DT, Loss);
  std::vector<int32_t> Bad = {0, 6};
  Status S = embedding(Table.data(), V, D, Bad.data(), 2, Y.data(), 0, V);
  ASSERT_FALSE(S.ok());
  EXPECT_NE(S.message().find("id 6 at position 1"), std::string::npos)
      << S.message();
}

// A vocab split in two shards: the shards' lookups sum to the whole lookup,
// and each shard's gradient is its rows of the whole gradient.
TEST(KernelGrad, VocabParallelEmbedding) {
  const int64_t V = 6, D = 4, N = 7, Half = V / 2;
  std::vector<int32_t> Ids = {0, 3, 3, 5, 1, 0, 4};
  Vec Table = randomVec(V * D, 1), W = randomVec(N * D, 2), Y(N * D);
  ASSERT_TRUE(
      embedding(Table.data(), V, D, Ids.data(), N, Y.data(), 0, V).ok());
  Vec DT(V * D);
  ASSERT_TRUE(
      embeddingGrad(W.data(), Ids.data(), N, V, D, DT.data(), 0, V).ok());
  Vec Sum(N * D, 0.0);
  for (int64_t Shard = 0; Shard < 2; ++Shard) {
    const double *Part = Table.data() + Shard * Half * D;
    Vec YS(N * D, 5.0), DS(Half * D, 5.0);
    ASSERT_TRUE(
        embedding(Part, Half, D, Ids.data(), N, YS.data(), Shard * Half, V)
            .ok());
    for (int64_t I = 0; I < N * D; ++I)
      Sum[I] += YS[I];
    ASSERT_TRUE(embeddingGrad(W.data(), Ids.data(), N, Half, D, DS.data(),
                              Shard * Half, V)
                    .ok());
    for (int64_t I = 0; I < Half * D; ++I)
      EXPECT_EQ(DS[I], DT[Shard * Half * D + I]) << "shard " << Shard;
  }
  EXPECT_EQ(Sum, Y);
  std::vector<int32_t> Bad = {0, 6};
  Status S = embedding(Table.data(), Half, D, Bad.data(), 2, Y.data(), 3, V);
  ASSERT_FALSE(S.ok());
  EXPECT_NE(S.message().find("id 6 at position 1"), std::string::npos)
      << S.message();
}

// A tied table's gradient (weft-fuse-table-grad): embedding_grad onto a
// base is bit for bit the base plus the zeroed table's scatter, on a whole
// table and on a vocabulary shard (ids outside it add nothing), with ids
// repeated and a row whose base is -0 (base + 0 on rows no id touches).
TEST(KernelGrad, EmbeddingGradOntoBase) {
  const int64_t V = 70, D = 80, N = 600; // past the kernels' parallel grains
  std::vector<int32_t> Ids(N);
  for (int64_t R = 0; R < N; ++R)
    Ids[size_t(R)] = int32_t((R * 37) % 61); // rows 61..69 untouched
  std::vector<float> W(N * D), Base(V * D);
  for (int64_t I = 0; I < N * D; ++I)
    W[size_t(I)] = float(std::sin(double(I))) * 0.3f;
  for (int64_t I = 0; I < V * D; ++I)
    Base[size_t(I)] = float(std::cos(double(I))) * 1e3f;
  Base[size_t(65 * D)] = -0.0f;
  int Saved = numThreads();
  for (int Threads : {1, 2})
    for (auto [Rows, First] : {std::pair<int64_t, int64_t>{V, 0}, {35, 35}}) {
      setNumThreads(Threads);
      const float *B = Base.data() + First * D;
      std::vector<float> Scatter(Rows * D), Want(Rows * D), Got(Rows * D, 7.0f);
      ASSERT_TRUE(embeddingGrad(W.data(), Ids.data(), N, Rows, D,
                                Scatter.data(), First, V)
                      .ok());
      for (int64_t I = 0; I < Rows * D; ++I)
        Want[size_t(I)] = B[I] + Scatter[size_t(I)];
      ASSERT_TRUE(embeddingGrad(W.data(), Ids.data(), N, Rows, D, Got.data(),
                                First, V, B)
                      .ok());
      EXPECT_EQ(std::memcmp(Got.data(), Want.data(), Got.size() * 4), 0)
          << Threads << " threads, rows from " << First;
    }
  setNumThreads(Saved);
}

TEST(KernelGrad, PositionEmbedding) {
  const int64_t B = 2, S = 3, P = 5, D = 4;
  Vec X = randomVec(B * S * D, 1), Table = randomVec(P * D, 2),
      W = randomVec(B * S * D, 3), Y(B * S * D);
  auto Loss = [&] {
    positionEmbedding(X.data(), Table.data(), Y.data(), B, S, D);
    return dot(Y, W);
  };
  Vec DT(P * D, 7.0);
  positionEmbeddingGrad(W.data(), DT.data(), B, S, P, D);
  expectGrad("position_embedding table", Table, DT, Loss);
  expectGrad("position_embedding x", X, W, Loss);
}

TEST(KernelGrad, LayerNorm) {
  const int64_t R = 4, D = 6;
  Vec X = randomVec(R * D, 1), G = randomVec(D, 2), Bt = randomVec(D, 3),
      W = randomVec(R * D, 4), Y(R * D);
  auto Loss = [&] {
    layerNorm(X.data(), G.data(), Bt.data(), Y.data(), R, D, 1e-5);
    return dot(Y, W);
  };
  Vec DX(R * D), DG(D), DB(D);
  std::vector<char> Scratch(normGradScratchBytes(R));
  layerNormGrad(W.data(), X.data(), G.data(), DX.data(), DG.data(), DB.data(),
                R, D, 1e-5, Scratch.data());
  expectGrad("layer_norm x", X, DX, Loss);
  expectGrad("layer_norm gamma", G, DG, Loss);
  expectGrad("layer_norm beta", Bt, DB, Loss);
}

TEST(KernelGrad, RmsNorm) {
  const int64_t R = 4, D = 6;
  Vec X = randomVec(R * D, 1), G = randomVec(D, 2), W = randomVec(R * D, 4),
      Y(R * D);
  auto Loss = [&] {
    rmsNorm(X.data(), G.data(), Y.data(), R, D, 1e-5);
    return dot(Y, W);
  };
  Vec DX(R * D), DG(D);
  std::vector<char> Scratch(normGradScratchBytes(R));
  rmsNormGrad(W.data(), X.data(), G.data(), DX.data(), DG.data(), R, D, 1e-5,
              Scratch.data());
  expectGrad("rms_norm x", X, DX, Loss);
  expectGrad("rms_norm gamma", G, DG, Loss);
}

TEST(KernelGrad, Activations) {
  const int64_t N = 40;
  Vec X = randomVec(N, 1, 2.0), U = randomVec(N, 2), W = randomVec(N, 3), Y(N),
      DX(N), DU(N);
  auto GeluLoss = [&] {
    gelu(X.data(), Y.data(), N);
    return dot(Y, W);
  };
  geluGrad(W.data(), X.data(), DX.data(), N);
  expectGrad("gelu", X, DX, GeluLoss);
  auto SiluLoss = [&] {
    silu(X.data(), Y.data(), N);
    return dot(Y, W);
  };
  siluGrad(W.data(), X.data(), DX.data(), N);
  expectGrad("silu", X, DX, SiluLoss);
  auto SwigluLoss = [&] {
    swiglu(X.data(), U.data(), Y.data(), N);
    return dot(Y, W);
  };
  swigluGrad(W.data(), X.data(), U.data(), DX.data(), DU.data(), N);
  expectGrad("swiglu gate", X, DX, SwigluLoss);
  expectGrad("swiglu up", U, DU, SwigluLoss);
}

TEST(KernelGrad, RopeInverseIsVjp) {
  const int64_t B = 2, S = 5, H = 3, Hd = 4, N = B * S * H * Hd;
  Vec X = randomVec(N, 1), W = randomVec(N, 2), Y(N), DX(N);
  auto Loss = [&] {
    rope(X.data(), Y.data(), B, S, H, Hd, 10000.0, false);
    return dot(Y, W);
  };
  rope(W.data(), DX.data(), B, S, H, Hd, 10000.0, true);
  expectGrad("rope", X, DX, Loss);
}

// Causal, and bidirectional (no mask: an encoder's).
class AttentionGrad : public ::testing::TestWithParam<bool> {};
INSTANTIATE_TEST_SUITE_P(Mask, AttentionGrad, ::testing::Values(true, false),
                         [](const auto &Info) {
                           return Info.param ? "Causal" : "Bidirectional";
                         });

// Queries in one run of positions.
struct OneRun {
  QueryRun Run;
  operator QueryRuns() const { return {&Run, 1}; }
};

TEST_P(AttentionGrad, Gqa) {
  const bool Causal = GetParam();
  const int64_t B = 2, S = 5, H = 4, Hkv = 2, Hd = 3;
  Vec Q = randomVec(B * S * H * Hd, 1), K = randomVec(B * S * Hkv * Hd, 2),
      V = randomVec(B * S * Hkv * Hd, 3), W = randomVec(B * S * H * Hd, 4),
      Y(B * S * H * Hd);
  std::vector<char> Scratch(attentionScratchBytes(S, S, Hd, 8, numThreads()));
  auto Loss = [&] {
    attention(Q.data(), K.data(), V.data(), Y.data(), B, S, S,
              OneRun{{0, 0, S}}, H, Hkv, Hd, Scratch.data(), 0, Causal);
    return dot(Y, W);
  };
  Vec DQ(Q.size()), DK(K.size(), 5.0), DV(V.size(), 5.0);
  attentionGrad(W.data(), Q.data(), K.data(), V.data(), DQ.data(), DK.data(),
                DV.data(), B, S, S, OneRun{{0, 0, S}}, H, Hkv, Hd,
                Scratch.data(), 0, Causal);
  expectGrad("attention q", Q, DQ, Loss);
  expectGrad("attention k", K, DK, Loss);
  expectGrad("attention v", V, DV, Loss);
}

TEST_P(AttentionGrad, LongerThanOneBlock) {
  // S > 64 exercises the row blocks.
  const bool Causal = GetParam();
  const int64_t B = 1, S = 70, H = 2, Hkv = 1, Hd = 2;
  Vec Q = randomVec(B * S * H * Hd, 1), K = randomVec(B * S * Hkv * Hd, 2),
      V = randomVec(B * S * Hkv * Hd, 3), W = randomVec(B * S * H * Hd, 4),
      Y(B * S * H * Hd);
  std::vector<char> Scratch(attentionScratchBytes(S, S, Hd, 8, numThreads()));
  auto Loss = [&] {
    attention(Q.data(), K.data(), V.data(), Y.data(), B, S, S,
              OneRun{{0, 0, S}}, H, Hkv, Hd, Scratch.data(), 0, Causal);
    return dot(Y, W);
  };
  Vec DQ(Q.size()), DK(K.size()), DV(V.size());
  attentionGrad(W.data(), Q.data(), K.data(), V.data(), DQ.data(), DK.data(),
                DV.data(), B, S, S, OneRun{{0, 0, S}}, H, Hkv, Hd,
                Scratch.data(), 0, Causal);
  expectGrad("attention q", Q, DQ, Loss);
  expectGrad("attention k", K, DK, Loss);
  expectGrad("attention v", V, DV, Loss);
}

// Context parallelism: a rank's queries, runs of rows of the sequence,
// against every key give the whole attention's rows of Y and dQ, and the
// ranks' dK and dV sum to the whole's (what the partitioner's reduce-scatter
// adds up). B = 2 samples of S keys, 4 query heads on 2 kv heads.
struct QueryRunsAgainstTheWhole {
  static constexpr int64_t B = 2, H = 4, Hkv = 2, Hd = 3, Wq = H * Hd,
                           Wk = Hkv * Hd;
  int64_t S;
  bool Causal;
  Vec Q, K, V, W, Y, DQ, DK, DV, SumDK, SumDV;
  std::vector<char> Scratch;
  QueryRunsAgainstTheWhole(int64_t S, bool Causal)
      : S(S), Causal(Causal), Q(randomVec(B * S * Wq, 1)),
        K(randomVec(B * S * Wk, 2)), V(randomVec(B * S * Wk, 3)),
        W(randomVec(B * S * Wq, 4)), Y(Q.size()), DQ(Q.size()), DK(K.size()),
        DV(V.size()), SumDK(K.size(), 0.0), SumDV(V.size(), 0.0),
        Scratch(attentionScratchBytes(S, S, Hd, 8, numThreads())) {
    attention(Q.data(), K.data(), V.data(), Y.data(), B, S, S,
              OneRun{{0, 0, S}}, H, Hkv, Hd, Scratch.data(), 0, Causal);
    attentionGrad(W.data(), Q.data(), K.data(), V.data(), DQ.data(), DK.data(),
                  DV.data(), B, S, S, OneRun{{0, 0, S}}, H, Hkv, Hd,
                  Scratch.data(), 0, Causal);
  }
  // The runs' rows of every sample of X, as a [B, rows, Width] block.
  Vec rows(const Vec &X, int64_t Width, const std::vector<QueryRun> &Runs) {
    int64_t N = 0;
    for (const QueryRun &R : Runs)
      N += R.Rows;
    Vec Out(B * N * Width);
    for (int64_t Bi = 0; Bi < B; ++Bi)
      for (const QueryRun &R : Runs)
        std::copy_n(X.begin() + (Bi * S + R.Global) * Width, R.Rows * Width,
                    Out.begin() + (Bi * N + R.Local) * Width);
    return Out;
  }
  static void expectRowsNear(const Vec &Got, const Vec &Want,
                             const std::string &Name) {
    ASSERT_EQ(Got.size(), Want.size()) << Name;
    for (size_t I = 0; I < Got.size(); ++I)
      EXPECT_NEAR(Got[I], Want[I], 1e-13) << Name << " element " << I;
  }
  // One rank: its rows of Y and dQ are the whole's; its dK, dV are summed.
  void rank(const std::vector<QueryRun> &Runs, const std::string &Name) {
    Vec Qb = rows(Q, Wq, Runs), Wb = rows(W, Wq, Runs);
    const int64_t Sq = int64_t(Qb.size()) / (B * Wq);
    const QueryRuns R{Runs.data(), Runs.size()};
    Vec Yb(Qb.size()), DQb(Qb.size()), DKb(K.size()), DVb(V.size());
    attention(Qb.data(), K.data(), V.data(), Yb.data(), B, Sq, S, R, H, Hkv, Hd,
              Scratch.data(), 0, Causal);
    attentionGrad(Wb.data(), Qb.data(), K.data(), V.data(), DQb.data(),
                  DKb.data(), DVb.data(), B, Sq, S, R, H, Hkv, Hd,
                  Scratch.data(), 0, Causal);
    // The same sums, in an order that may differ: a BLAS's kernels may
    // order a dot product by the block's rows (OpenBLAS's SkylakeX and
    // pre-AVX dgemm do; its Haswell one does not).
    expectRowsNear(Yb, rows(Y, Wq, Runs), Name + " y");
    expectRowsNear(DQb, rows(DQ, Wq, Runs), Name + " dq");
    for (size_t I = 0; I < K.size(); ++I) {
      SumDK[I] += DKb[I];
      SumDV[I] += DVb[I];
    }
  }
  void expectSums() {
    for (size_t I = 0; I < K.size(); ++I) {
      EXPECT_NEAR(SumDK[I], DK[I], 1e-13) << "dk element " << I;
      EXPECT_NEAR(SumDV[I], DV[I], 1e-13) << "dv element " << I;
    }
  }
};

// Contiguous blocks: rank r of 4 holds rows [35r, 35r + 35).
TEST_P(AttentionGrad, QueryBlocksMatchTheWhole) {
  QueryRunsAgainstTheWhole T(140, GetParam());
  for (int64_t R = 0; R < 4; ++R)
    T.rank({{0, R * 35, 35}}, "block " + std::to_string(R));
  T.expectSums();
}

// Head-tail load balancing: rank r of 4 holds chunks r and 7-r of 8, its
// queries in two runs of positions.
TEST_P(AttentionGrad, HeadTailRunsMatchTheWhole) {
  const int64_t Len = 18;
  QueryRunsAgainstTheWhole T(8 * Len, GetParam());
  for (int64_t R = 0; R < 4; ++R)
    T.rank({{0, R * Len, Len}, {Len, (7 - R) * Len, Len}},
           "rank " + std::to_string(R));
  T.expectSums();
}

TEST(KernelGrad, CrossEntropy) {
  const int64_t R = 4, V = 7;
  Vec L = randomVec(R * V, 1, 2.0);
  std::vector<int32_t> T = {0, 6, 3, 3};
  double Out = 0, DLoss = 1.7;
  auto Loss = [&] {
    EXPECT_TRUE(crossEntropy(L.data(), T.data(), R, V, &Out).ok());
    return DLoss * Out;
  };
  Vec DL(R * V);
  ASSERT_TRUE(
      crossEntropyGrad(L.data(), T.data(), &DLoss, DL.data(), R, V).ok());
  expectGrad("cross_entropy logits", L, DL, Loss);
  std::vector<int32_t> Bad = {0, 7, 0, 0};
  Status S = crossEntropy(L.data(), Bad.data(), R, V, &Out);
  ASSERT_FALSE(S.ok());
  EXPECT_NE(S.message().find("target 7 at row 1"), std::string::npos);
}

// Logits [R, V] widened to [R, Vp], the new columns Fill (a vocabulary
// padded for tp).
Vec padColumns(const Vec &L, int64_t R, int64_t V, int64_t Vp, double Fill) {
  Vec Lp(size_t(R * Vp), Fill);
  for (int64_t Row = 0; Row < R; ++Row)
    for (int64_t J = 0; J < V; ++J)
      Lp[size_t(Row * Vp + J)] = L[size_t(Row * V + J)];
  return Lp;
}

// Logits [R, Vp] as K vocab shards [R, Vp / K], shard Q holding the
// columns [Q * Vp / K, (Q + 1) * Vp / K).
std::vector<Vec> vocabShards(const Vec &Lp, int64_t R, int64_t Vp, int64_t K) {
  const int64_t Vs = Vp / K;
  std::vector<Vec> Shards(size_t(K), Vec(size_t(R * Vs)));
  for (int64_t Q = 0; Q < K; ++Q)
    for (int64_t Row = 0; Row < R; ++Row)
      for (int64_t J = 0; J < Vs; ++J)
        Shards[size_t(Q)][size_t(Row * Vs + J)] =
            Lp[size_t(Row * Vp + Q * Vs + J)];
  return Shards;
}

// A masked loss: ignored rows (-100) add nothing and get zero gradient; the
// mean divides by the step's count (here 5: other ranks hold 3 more), so the
// loss is the counted rows' sum / 5 and the gradient its derivative. More
// counted rows than the count, or another negative target, is refused.
TEST(KernelGrad, MaskedCrossEntropy) {
  const int64_t R = 4, V = 7, Count = 5;
  Vec L = randomVec(R * V, 3, 2.0);
  std::vector<int32_t> T = {2, -100, 6, -100};
  double Out = 0, DLoss = 1.7;
  auto Loss = [&] {
    EXPECT_TRUE(crossEntropy(L.data(), T.data(), R, V, &Out, Count, true).ok());
    return DLoss * Out;
  };
  Loss();
  double Sum = 0, Unmasked = 0;
  for (int64_t Row : {0, 2}) {
    std::vector<int32_t> One = {T[Row]};
    ASSERT_TRUE(
        crossEntropy(L.data() + Row * V, One.data(), 1, V, &Unmasked).ok());
    Sum += Unmasked;
  }
  EXPECT_NEAR(Out, Sum / Count, 1e-15);
  Vec DL(R * V, 9.0);
  ASSERT_TRUE(
      crossEntropyGrad(L.data(), T.data(), &DLoss, DL.data(), R, V, Count, true)
          .ok());
  expectGrad("masked cross_entropy logits", L, DL, Loss);
  for (int64_t J = 0; J < V; ++J)
    EXPECT_EQ(DL[1 * V + J], 0.0);
  // The vocab-parallel path: two shards' statistics give the same loss and
  // the same gradient columns.
  const int64_t K = 2, Vs = 4, Vp = K * Vs; // V padded to 8 with -30s
  Vec Lp = padColumns(L, R, V, Vp, -30.0);
  double Padded = 0;
  ASSERT_TRUE(
      crossEntropy(Lp.data(), T.data(), R, Vp, &Padded, Count, true).ok());
  Vec Stats(K * R * 3);
  std::vector<Vec> Shards = vocabShards(Lp, R, Vp, K);
  for (int64_t Q = 0; Q < K; ++Q)
    ASSERT_TRUE(crossEntropyStats(Shards[Q].data(), T.data(), R, Vs, Q * Vs, Vp,
                                  Stats.data() + Q * R * 3, true)
                    .ok());
  double FromStats = 0;
  crossEntropyFromStats(Stats.data(), K, R, Count, &FromStats, true);
  EXPECT_NEAR(FromStats, Padded, 1e-14);
  Vec DPadded(R * Vp);
  ASSERT_TRUE(crossEntropyGrad(Lp.data(), T.data(), &DLoss, DPadded.data(), R,
                               Vp, Count, true)
                  .ok());
  for (int64_t Q = 0; Q < K; ++Q) {
    Vec D(R * Vs, 9.0);
    ASSERT_TRUE(crossEntropyStatsGrad(Shards[Q].data(), T.data(), Stats.data(),
                                      K, &DLoss, D.data(), R, Vs, Q * Vs, Vp,
                                      Count, true)
                    .ok());
    for (int64_t Row = 0; Row < R; ++Row)
      for (int64_t J = 0; J < Vs; ++J)
        EXPECT_NEAR(D[Row * Vs + J], DPadded[Row * Vp + Q * Vs + J], 1e-15);
  }
  Status S = crossEntropy(L.data(), T.data(), R, V, &Out, 1, true);
  ASSERT_FALSE(S.ok());
  EXPECT_NE(S.message().find("2 rows here have a target, more than the "
                             "step's 1 counted targets"),
            std::string::npos)
      << S.message();
  std::vector<int32_t> Bad = {2, -1, 6, -100};
  S = crossEntropy(L.data(), Bad.data(), R, V, &Out, Count, true);
  ASSERT_FALSE(S.ok());
  EXPECT_NE(S.message().find("target -1 at row 1 is outside [0, 7) and is "
                             "not -100 (ignored)"),
            std::string::npos)
      << S.message();
  // No counted target in the step: a loss of 0, not 0/0.
  std::vector<int32_t> None(R, -100);
  ASSERT_TRUE(crossEntropy(L.data(), None.data(), R, V, &Out, 0, true).ok());
  EXPECT_EQ(Out, 0.0);
}

// A vocabulary padded for tp (weft-pad-vocab): with Classes = 7 of 8
// columns, the padding column (+50 here, which would dominate a softmax
// over it) is outside the loss and gets a zero gradient, alone and split
// over two vocab shards; a target in the padding, or a shard of padding
// alone, is refused.
TEST(KernelGrad, PaddedVocabularyClasses) {
  const int64_t R = 3, V = 7, Vp = 8, K = 2, Vs = 4;
  Vec L = randomVec(R * V, 5, 2.0);
  Vec Lp = padColumns(L, R, V, Vp, 50.0);
  std::vector<int32_t> T = {0, 6, 3};
  double Plain = 0, Padded = 0, DLoss = 1.3;
  ASSERT_TRUE(crossEntropy(L.data(), T.data(), R, V, &Plain).ok());
  ASSERT_TRUE(
      crossEntropy(Lp.data(), T.data(), R, Vp, &Padded, 0, false, V).ok());
  EXPECT_NEAR(Padded, Plain, 1e-14);
  Vec D(R * V), Dp(R * Vp, 9.0);
  ASSERT_TRUE(
      crossEntropyGrad(L.data(), T.data(), &DLoss, D.data(), R, V).ok());
  ASSERT_TRUE(crossEntropyGrad(Lp.data(), T.data(), &DLoss, Dp.data(), R, Vp, 0,
                               false, V)
                  .ok());
  for (int64_t Row = 0; Row < R; ++Row) {
    for (int64_t J = 0; J < V; ++J)
      EXPECT_NEAR(Dp[Row * Vp + J], D[Row * V + J], 1e-15);
    EXPECT_EQ(Dp[Row * Vp + V], 0.0);
  }
  // Two shards of 4: the second holds ids 4-6 and the padding column.
  Vec Stats(K * R * 3);
  std::vector<Vec> Shards = vocabShards(Lp, R, Vp, K);
  for (int64_t Q = 0; Q < K; ++Q)
    ASSERT_TRUE(crossEntropyStats(Shards[Q].data(), T.data(), R, Vs, Q * Vs, Vp,
                                  Stats.data() + Q * R * 3, false, V)
                    .ok());
  double FromStats = 0;
  crossEntropyFromStats(Stats.data(), K, R, 0, &FromStats);
  EXPECT_NEAR(FromStats, Plain, 1e-14);
  for (int64_t Q = 0; Q < K; ++Q) {
    Vec Ds(R * Vs, 9.0);
    ASSERT_TRUE(crossEntropyStatsGrad(Shards[Q].data(), T.data(), Stats.data(),
                                      K, &DLoss, Ds.data(), R, Vs, Q * Vs, Vp,
                                      0, false, V)
                    .ok());
    for (int64_t Row = 0; Row < R; ++Row)
      for (int64_t J = 0; J < Vs; ++J)
        EXPECT_NEAR(Ds[Row * Vs + J], Dp[Row * Vp + Q * Vs + J], 1e-15);
  }
  std::vector<int32_t> Bad = {0, 7, 3};
  Status S = crossEntropy(Lp.data(), Bad.data(), R, Vp, &Padded, 0, false, V);
  ASSERT_FALSE(S.ok());
  EXPECT_NE(S.message().find("target 7 at row 1 is outside [0, 7)"),
            std::string::npos)
      << S.message();
  // Classes = 4 of 8 in shards of 2: the shard [4, 6) holds no class.
  S = crossEntropyStats(Shards[1].data(), T.data(), R, 2, 4, Vp, Stats.data(),
                        false, 4);
  ASSERT_FALSE(S.ok());
  EXPECT_NE(S.message().find("the vocab shard [4, 6) holds no class of 4"),
            std::string::npos)
      << S.message();
  // More classes than the whole vocabulary's columns.
  S = crossEntropyStats(Shards[0].data(), T.data(), R, Vs, 0, Vp, Stats.data(),
                        false, Vp + 1);
  ASSERT_FALSE(S.ok());
  EXPECT_NE(S.message().find("classes=9 exceeds the logits' 8 columns"),
            std::string::npos)
      << S.message();
}

// Three vocab shards: the loss from the gathered statistics equals the
// whole-vocab loss, and each shard's gradient is its columns of the whole
// gradient.
TEST(KernelGrad, VocabParallelCrossEntropy) {
  const int64_t R = 4, V = 9, K = 3, Vs = V / K;
  Vec L = randomVec(R * V, 1, 3.0);
  std::vector<int32_t> T = {0, 8, 4, 3};
  double Whole = 0, DLoss = 1.7;
  ASSERT_TRUE(crossEntropy(L.data(), T.data(), R, V, &Whole).ok());
  Vec DWhole(R * V);
  ASSERT_TRUE(
      crossEntropyGrad(L.data(), T.data(), &DLoss, DWhole.data(), R, V).ok());
  std::vector<Vec> Shards(K, Vec(R * Vs));
  Vec Stats(K * R * 3); // what the all_gather along dim 0 leaves
  for (int64_t Q = 0; Q < K; ++Q) {
    for (int64_t Row = 0; Row < R; ++Row)
      for (int64_t J = 0; J < Vs; ++J)
        Shards[Q][Row * Vs + J] = L[Row * V + Q * Vs + J];
    ASSERT_TRUE(crossEntropyStats(Shards[Q].data(), T.data(), R, Vs, Q * Vs, V,
                                  Stats.data() + Q * R * 3)
                    .ok());
  }
  double Loss = 0;
  crossEntropyFromStats(Stats.data(), K, R, R, &Loss);
  EXPECT_NEAR(Loss, Whole, 1e-13);
  for (int64_t Q = 0; Q < K; ++Q) {
    Vec D(R * Vs);
    ASSERT_TRUE(crossEntropyStatsGrad(Shards[Q].data(), T.data(), Stats.data(),
                                      K, &DLoss, D.data(), R, Vs, Q * Vs, V, R)
                    .ok());
    for (int64_t Row = 0; Row < R; ++Row)
      for (int64_t J = 0; J < Vs; ++J)
        EXPECT_NEAR(D[Row * Vs + J], DWhole[Row * V + Q * Vs + J], 1e-15)
            << "shard " << Q << " row " << Row << " column " << J;
  }
  std::vector<int32_t> Bad = {0, 9, 0, 0};
  Status S = crossEntropyStats(Shards[0].data(), Bad.data(), R, Vs, 0, V,
                               Stats.data());
  ASSERT_FALSE(S.ok());
  EXPECT_NE(S.message().find("target 9 at row 1"), std::string::npos);
}

} // namespace
