//===- Avx512KernelTest.cpp - the AVX-512 kernels against their originals -===//
//
// Avx512.h's kernels run only on CPUs with AVX-512F; elsewhere these tests
// skip, saying so.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/kernels/Avx512.h"
#include "runtime/cpu/kernels/FastMath.h"
#include "runtime/cpu/kernels/Kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <tuple>
#include <vector>

namespace {

/// Attention's inputs q, k, v and dy drawn from N(0, 1) in f64, and their
/// f32 copies.
struct AttentionInputs {
  std::vector<double> Q, K, V, Dy;
  std::vector<float> Qf, Kf, Vf, Dyf;
  AttentionInputs(size_t NQ, size_t NK, std::mt19937 &Rng)
      : Q(NQ), K(NK), V(NK), Dy(NQ) {
    std::normal_distribution<double> Normal(0.0, 1.0);
    for (std::vector<double> *X : {&Q, &K, &V, &Dy})
      for (double &E : *X)
        E = Normal(Rng);
    Qf.assign(Q.begin(), Q.end());
    Kf.assign(K.begin(), K.end());
    Vf.assign(V.begin(), V.end());
    Dyf.assign(Dy.begin(), Dy.end());
  }
};

/// Every f32 output within 2e-5 of its f64 twin (relative past 1), an
/// infinity exactly.
testing::AssertionResult nearF64(const char *Name,
                                 const std::vector<double> &Want,
                                 const std::vector<float> &Got) {
  for (size_t I = 0; I < Want.size(); ++I) {
    const double W = Want[I], G = Got[I];
    const bool Ok =
        std::isinf(W) ? G == W
                      : std::fabs(G - W) <= 2e-5 * std::max(1.0, std::fabs(W));
    if (!Ok)
      return testing::AssertionFailure() << Name << "[" << I << "] = " << G
                                         << " in f32, " << W << " in f64";
  }
  return testing::AssertionSuccess();
}
// The AVX-512 softmax rows (attention's and weft.softmax's on such CPUs)
// give FastMath's generic rows' bits, which every SIMD clone gives: rows of
// 1 to 300 keys and two chunks' worth (laneSum's 256), masked keys past N
// zeroed up to KEnd, in place and not, with values that reach vexp's clamps,
// -inf keys, signed zeros and rows of one value. A row with a NaN is NaN
// throughout in both (its maximum may differ; see SoftmaxAvx512.cpp).
TEST(Avx512Kernels, SoftmaxRowsMatchTheGenericRows) {
  if (!weft::cpu::cpuHasAvx512())
    GTEST_SKIP() << "this CPU has no AVX-512F: the generic rows run instead";
  const float Inf = std::numeric_limits<float>::infinity();
  const float NaN = std::numeric_limits<float>::quiet_NaN();
  std::mt19937 Rng{7};
  std::uniform_real_distribution<float> U(-4.0f, 4.0f), Wide(-150.0f, 150.0f);
  std::vector<int64_t> Lengths;
  for (int64_t N = 1; N <= 300; ++N)
    Lengths.push_back(N);
  Lengths.push_back(600);
  for (int64_t N : Lengths)
    for (int Kind = 0; Kind < 6; ++Kind) {
      const int64_t KEnd = N + (N % 7) * 3;
      std::vector<float> X(static_cast<size_t>(KEnd), 0.0f), D = X;
      for (int64_t J = 0; J < KEnd; ++J) {
        X[size_t(J)] = Kind == 1 ? Wide(Rng) : U(Rng);
        D[size_t(J)] = U(Rng);
      }
      if (Kind == 2)
        for (int64_t J = 0; J < N; J += 3)
          X[size_t(J)] = -Inf;
      if (Kind == 3)
        for (int64_t J = 0; J < N; ++J)
          X[size_t(J)] = J % 2 ? 0.0f : -0.0f;
      if (Kind == 4)
        X[size_t(N / 2)] = Inf;
      if (Kind == 5)
        X[size_t(N / 3)] = NaN;
      std::vector<float> Want(size_t(KEnd), 7.0f), Got(size_t(KEnd), 7.0f);
      weft::cpu::softmaxRow(X.data(), Want.data(), N);
      for (int64_t J = N; J < KEnd; ++J)
        Want[size_t(J)] = 0.0f;
      weft::cpu::softmaxRowAvx512(X.data(), Got.data(), N, KEnd);
      std::vector<float> InPlace = X;
      weft::cpu::softmaxRowAvx512(InPlace.data(), InPlace.data(), N, KEnd);
      if (Kind == 4 || Kind == 5) {
        for (int64_t J = 0; J < N; ++J) {
          ASSERT_TRUE(std::isnan(Want[size_t(J)])) << "N " << N << " J " << J;
          ASSERT_TRUE(std::isnan(Got[size_t(J)])) << "N " << N << " J " << J;
        }
        continue;
      }
      ASSERT_EQ(std::memcmp(Want.data(), Got.data(), Got.size() * 4), 0)
          << "softmax row of " << N << " keys, kind " << Kind;
      ASSERT_EQ(std::memcmp(Want.data(), InPlace.data(), Got.size() * 4), 0)
          << "in place, " << N << " keys, kind " << Kind;
      // The gradient through these probabilities (0 past N).
      std::vector<float> GradWant(static_cast<size_t>(KEnd), 0.0f),
          GradGot = GradWant;
      weft::cpu::softmaxGradRow(Want.data(), D.data(), GradWant.data(), N,
                                KEnd);
      weft::cpu::softmaxGradRowAvx512(Want.data(), D.data(), GradGot.data(), N,
                                      KEnd);
      ASSERT_EQ(std::memcmp(GradWant.data(), GradGot.data(), KEnd * 4), 0)
          << "softmax gradient row of " << N << " keys, kind " << Kind;
      weft::cpu::softmaxGradRowAvx512(Want.data(), D.data(), D.data(), N, KEnd);
      ASSERT_EQ(std::memcmp(GradWant.data(), D.data(), KEnd * 4), 0)
          << "gradient in place, " << N << " keys, kind " << Kind;
    }
}

// The small GEMMs against a double loop, in their three uses (A, and A
// transposed through its strides; C written, and accumulated): tile edges
// in rows (M mod 6) and columns (N mod 64, N mod 16), K from 1, strides
// wider than the rows. The values are small integers, so every product and
// sum is exact in float and the comparison is equality. Nothing outside the
// operands' ranges is read (the padding holds NaN) or written (it stays
// NaN).
TEST(Avx512Kernels, SmallGemmMatchesALoop) {
  if (!weft::cpu::cpuHasAvx512())
    GTEST_SKIP() << "this CPU has no AVX-512F: attention runs on BLAS";
  const float NaN = std::numeric_limits<float>::quiet_NaN();
  std::mt19937 Rng{3};
  std::uniform_int_distribution<int> Small(-3, 3);
  for (int64_t M : {1, 5, 6, 7, 13, 64})
    for (int64_t N : {1, 15, 16, 17, 64, 65, 130})
      for (int64_t K : {1, 3, 64, 70})
        for (bool TransA : {false, true})
          for (bool Accumulate : {false, true}) {
            // A is M x K (or K x M when TransA), leading dimension + 3.
            const int64_t ARows = TransA ? K : M, ACols = TransA ? M : K;
            const int64_t Lda = ACols + 3, Ldb = N + 5, Ldc = N + 7;
            std::vector<float> A(size_t(ARows * Lda), NaN),
                B(size_t(K * Ldb), NaN), C(size_t(M * Ldc), NaN);
            for (int64_t R = 0; R < ARows; ++R)
              for (int64_t X = 0; X < ACols; ++X)
                A[size_t(R * Lda + X)] = float(Small(Rng));
            for (int64_t R = 0; R < K; ++R)
              for (int64_t X = 0; X < N; ++X)
                B[size_t(R * Ldb + X)] = float(Small(Rng));
            for (int64_t R = 0; R < M; ++R)
              for (int64_t X = 0; X < N; ++X)
                C[size_t(R * Ldc + X)] = float(Small(Rng));
            std::vector<float> Want = C;
            for (int64_t R = 0; R < M; ++R)
              for (int64_t X = 0; X < N; ++X) {
                double Sum = 0;
                for (int64_t Kk = 0; Kk < K; ++Kk)
                  Sum += double(TransA ? A[size_t(Kk * Lda + R)]
                                       : A[size_t(R * Lda + Kk)]) *
                         B[size_t(Kk * Ldb + X)];
                float &W = Want[size_t(R * Ldc + X)];
                W = float(0.5 * Sum + (Accumulate ? W : 0.0));
              }
            weft::cpu::smallGemmAvx512(
                M, N, K, 0.5f, A.data(), TransA ? 1 : Lda, TransA ? Lda : 1,
                B.data(), Ldb, Accumulate, C.data(), Ldc);
            for (size_t I = 0; I < C.size(); ++I) {
              if (std::isnan(Want[I])) {
                ASSERT_TRUE(std::isnan(C[I])) << "wrote past the rows at " << I;
                continue;
              }
              ASSERT_EQ(C[I], Want[I])
                  << "M " << M << " N " << N << " K " << K << " TransA "
                  << TransA << " Accumulate " << Accumulate << " element " << I;
            }
          }
}

// The transpose, 16 x 16 blocks and their edges.
TEST(Avx512Kernels, TransposeMatchesALoop) {
  if (!weft::cpu::cpuHasAvx512())
    GTEST_SKIP() << "this CPU has no AVX-512F: attention runs on BLAS";
  for (int64_t Rows : {1, 16, 17, 40, 256})
    for (int64_t Cols : {1, 15, 16, 33, 64}) {
      const int64_t Ldb = Cols + 2, Ldt = Rows + 16;
      std::vector<float> B(size_t(Rows * Ldb)), Bt(size_t(Cols * Ldt), -1.0f);
      for (size_t I = 0; I < B.size(); ++I)
        B[I] = float(I);
      weft::cpu::transposeAvx512(B.data(), Ldb, Rows, Cols, Bt.data(), Ldt);
      for (int64_t C = 0; C < Cols; ++C)
        for (int64_t R = 0; R < Ldt; ++R)
          ASSERT_EQ(Bt[size_t(C * Ldt + R)],
                    R < Rows ? B[size_t(R * Ldb + C)] : -1.0f)
              << Rows << " x " << Cols << ": row " << R << " column " << C;
    }
}

// Attention and its gradient in f32 through the AVX-512 products (heads of
// 32 and more) against f64 through BLAS: grouped heads, causal and not,
// blocks of 64 queries and a partial one, head widths that fill a tile
// (64) or not (48), a rank's queries as two runs of the sequence (as under
// load-balanced context parallelism), dropout of the probabilities, and two
// packed documents a row.
TEST(Avx512Kernels, AttentionAndItsGradientMatchF64) {
  if (!weft::cpu::cpuHasAvx512())
    GTEST_SKIP() << "this CPU has no AVX-512F: attention runs on BLAS";
  using weft::cpu::QueryRun;
  const int64_t B = 2, Sk = 70, H = 4, Hkv = 2;
  std::mt19937 Rng{11};
  for (int64_t Hd : {48, 64})
    for (bool Causal : {true, false})
      for (int Case = 0; Case < 4; ++Case) {
        // 0: the whole sequence; 1: two runs of it; 2: with dropout of the
        // probabilities; 3: two packed documents a row.
        const bool Split = Case == 1;
        std::vector<QueryRun> Runs =
            Split ? std::vector<QueryRun>{{0, 0, 20}, {20, 50, 15}}
                  : std::vector<QueryRun>{{0, 0, Sk}};
        const int64_t Sq = Split ? 35 : Sk;
        const size_t NQ = size_t(B * Sq * H * Hd),
                     NK = size_t(B * Sk * Hkv * Hd);
        const AttentionInputs In(NQ, NK, Rng);
        const weft::cpu::QueryRuns R{Runs.data(), Runs.size()};
        const int Threads = weft::cpu::numThreads();
        std::vector<char> Scratch(
            weft::cpu::attentionScratchBytes(Sq, Sk, Hd, 8, Threads));
        weft::cpu::AttentionDropout Dropout;
        Dropout.Key.Seed = 5;
        Dropout.Key.Threshold = uint32_t(0.1 * 4294967296.0);
        Dropout.Key.Scale = 1.0 / 0.9;
        Dropout.Heads = H;
        std::vector<int32_t> Pos(size_t(B * Sq));
        for (size_t I = 0; I < Pos.size(); ++I)
          Pos[I] = int32_t(int64_t(I) % Sq < 30 ? int64_t(I) % Sq
                                                : int64_t(I) % Sq - 30);
        weft::cpu::AttentionDocuments Documents;
        Documents.Pos = Pos.data();
        Documents.Stride = Sq;
        const weft::cpu::AttentionDropout *Drop =
            Case == 2 ? &Dropout : nullptr;
        const weft::cpu::AttentionDocuments *Docs =
            Case == 3 ? &Documents : nullptr;
        std::vector<double> Y(NQ), Dq(NQ), Dk(NK), Dv(NK);
        weft::cpu::attention(In.Q.data(), In.K.data(), In.V.data(), Y.data(), B,
                             Sq, Sk, R, H, Hkv, Hd, Scratch.data(), 0, Causal,
                             Drop, Docs);
        weft::cpu::attentionGrad(In.Dy.data(), In.Q.data(), In.K.data(),
                                 In.V.data(), Dq.data(), Dk.data(), Dv.data(),
                                 B, Sq, Sk, R, H, Hkv, Hd, Scratch.data(), 0,
                                 Causal, Drop, Docs);
        std::vector<float> Yf(NQ), Dqf(NQ), Dkf(NK), Dvf(NK);
        weft::cpu::attention(In.Qf.data(), In.Kf.data(), In.Vf.data(),
                             Yf.data(), B, Sq, Sk, R, H, Hkv, Hd,
                             Scratch.data(), 0, Causal, Drop, Docs);
        weft::cpu::attentionGrad(In.Dyf.data(), In.Qf.data(), In.Kf.data(),
                                 In.Vf.data(), Dqf.data(), Dkf.data(),
                                 Dvf.data(), B, Sq, Sk, R, H, Hkv, Hd,
                                 Scratch.data(), 0, Causal, Drop, Docs);
        for (const auto &[Name, Want, Got] :
             {std::tuple{"y", &Y, &Yf}, std::tuple{"dq", &Dq, &Dqf},
              std::tuple{"dk", &Dk, &Dkf}, std::tuple{"dv", &Dv, &Dvf}})
          ASSERT_TRUE(nearF64(Name, *Want, *Got))
              << "head dim " << Hd << ", causal " << Causal << ", case "
              << Case;
      }
}

// Ring attention's blocks in f32 through the AVX-512 products against f64
// through BLAS: a rank's 70 queries at positions 70-139 against the block
// before them (every key seen) and against their own (causal), and a
// sliding window; the gradient from the forward's own output and lse.
TEST(Avx512Kernels, RingAttentionBlocksMatchF64) {
  if (!weft::cpu::cpuHasAvx512())
    GTEST_SKIP() << "this CPU has no AVX-512F: attention runs on BLAS";
  const int64_t B = 2, S = 70, H = 4, Hkv = 2, Hd = 64;
  std::mt19937 Rng{13};
  std::vector<int32_t> QPos(S), Before(S), Own(S);
  for (int64_t I = 0; I < S; ++I) {
    QPos[size_t(I)] = Own[size_t(I)] = int32_t(S + I);
    Before[size_t(I)] = int32_t(I);
  }
  const size_t NQ = size_t(B * S * H * Hd), NK = size_t(B * S * Hkv * Hd),
               NL = size_t(B * H * S);
  for (const std::vector<int32_t> *KPos : {&Before, &Own})
    for (int64_t Window : {int64_t(0), int64_t(40)}) {
      const AttentionInputs In(NQ, NK, Rng);
      std::vector<char> Scratch(
          weft::cpu::ringScratchBytes(S, Hd, 8, weft::cpu::numThreads()));
      std::vector<double> O(NQ), L(NL), Dq(NQ), Dk(NK), Dv(NK);
      std::vector<float> Of(NQ), Lf(NL), Dqf(NQ), Dkf(NK), Dvf(NK);
      weft::cpu::attentionBlock(In.Q.data(), In.K.data(), In.V.data(), O.data(),
                                L.data(), B, S, S, QPos.data(), KPos->data(), H,
                                Hkv, Hd, Scratch.data(), 0, true, Window);
      weft::cpu::attentionBlockGrad(
          In.Dy.data(), In.Q.data(), In.K.data(), In.V.data(), O.data(),
          L.data(), Dq.data(), Dk.data(), Dv.data(), B, S, S, QPos.data(),
          KPos->data(), H, Hkv, Hd, Scratch.data(), 0, true, Window);
      weft::cpu::attentionBlock(In.Qf.data(), In.Kf.data(), In.Vf.data(),
                                Of.data(), Lf.data(), B, S, S, QPos.data(),
                                KPos->data(), H, Hkv, Hd, Scratch.data(), 0,
                                true, Window);
      weft::cpu::attentionBlockGrad(
          In.Dyf.data(), In.Qf.data(), In.Kf.data(), In.Vf.data(), Of.data(),
          Lf.data(), Dqf.data(), Dkf.data(), Dvf.data(), B, S, S, QPos.data(),
          KPos->data(), H, Hkv, Hd, Scratch.data(), 0, true, Window);
      for (const auto &[Name, Want, Got] :
           {std::tuple{"o", &O, &Of}, std::tuple{"lse", &L, &Lf},
            std::tuple{"dq", &Dq, &Dqf}, std::tuple{"dk", &Dk, &Dkf},
            std::tuple{"dv", &Dv, &Dvf}})
        ASSERT_TRUE(nearF64(Name, *Want, *Got))
            << "keys " << (KPos == &Own ? "own" : "before") << ", window "
            << Window;
    }
}

} // namespace
