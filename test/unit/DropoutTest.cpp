//===- DropoutTest.cpp - dropout masks: Philox, rate, any sharding --------===//
#include "program/Dropout.h"
#include "runtime/cpu/kernels/Kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

using namespace weft;

// Random123's known-answer vectors for philox4x32_10 (kat_vectors).
TEST(Dropout, PhiloxKnownAnswers) {
  const uint32_t Zero[4] = {0, 0, 0, 0}, ZeroKey[2] = {0, 0};
  Philox4x32 A = philox4x32(Zero, ZeroKey);
  EXPECT_EQ(A.V[0], 0x6627e8d5u);
  EXPECT_EQ(A.V[1], 0xe169c58du);
  EXPECT_EQ(A.V[2], 0xbc57ac4cu);
  EXPECT_EQ(A.V[3], 0x9b00dbd8u);
  const uint32_t Pi[4] = {0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u};
  const uint32_t PiKey[2] = {0xa4093822u, 0x299f31d0u};
  Philox4x32 B = philox4x32(Pi, PiKey);
  EXPECT_EQ(B.V[0], 0xd16cfe09u);
  EXPECT_EQ(B.V[1], 0x94fdccebu);
  EXPECT_EQ(B.V[2], 0x5001e420u);
  EXPECT_EQ(B.V[3], 0x24126ea1u);
}

// Over 2^20 elements the dropped share is p within 3 standard deviations,
// and the kept ones are scaled by 1 / (1 - p).
TEST(Dropout, DropsShareP) {
  for (double P : {0.1, 0.5}) {
    DropoutKey K;
    K.Seed = 1234;
    K.Step = 7;
    K.Site = 3;
    K.Threshold = dropoutThreshold(P);
    K.Scale = 1.0 / (1.0 - P);
    const int64_t N = int64_t(1) << 20;
    std::vector<double> X(static_cast<size_t>(N), 1.0);
    std::vector<double> Y(X.size());
    cpu::dropout(X.data(), Y.data(), {N}, {0}, {N}, K);
    int64_t Dropped = 0;
    for (double V : Y) {
      if (V == 0.0)
        ++Dropped;
      else
        ASSERT_DOUBLE_EQ(V, 1.0 / (1.0 - P));
    }
    double Sigma = std::sqrt(P * (1 - P) / double(N));
    EXPECT_NEAR(double(Dropped) / double(N), P, 3 * Sigma) << "p=" << P;
  }
}

// A rank's block of a [4, 6, 8] tensor (rows 2-3, positions 3-5, features
// 4-7) drops exactly the whole tensor's elements there; another step, site
// or seed draws another mask.
TEST(Dropout, BlockDrawsTheWholeTensorsMask) {
  DropoutKey K;
  K.Seed = 99;
  K.Step = 2;
  K.Site = 5;
  K.Threshold = dropoutThreshold(0.3);
  K.Scale = 1.0 / 0.7;
  std::vector<double> X(4 * 6 * 8), Whole(X.size());
  for (size_t I = 0; I < X.size(); ++I)
    X[I] = double(I + 1);
  cpu::dropout(X.data(), Whole.data(), {4, 6, 8}, {0, 0, 0}, {4, 6, 8}, K);
  std::vector<double> Block(2 * 3 * 4), Out(Block.size());
  for (int64_t B = 0; B < 2; ++B)
    for (int64_t S = 0; S < 3; ++S)
      for (int64_t D = 0; D < 4; ++D)
        Block[size_t((B * 3 + S) * 4 + D)] =
            X[size_t(((B + 2) * 6 + S + 3) * 8 + D + 4)];
  cpu::dropout(Block.data(), Out.data(), {2, 3, 4}, {2, 3, 4}, {4, 6, 8}, K);
  for (int64_t B = 0; B < 2; ++B)
    for (int64_t S = 0; S < 3; ++S)
      for (int64_t D = 0; D < 4; ++D)
        EXPECT_EQ(Out[size_t((B * 3 + S) * 4 + D)],
                  Whole[size_t(((B + 2) * 6 + S + 3) * 8 + D + 4)]);
  for (int Change = 0; Change < 3; ++Change) {
    DropoutKey Other = K;
    if (Change == 0)
      ++Other.Step;
    else if (Change == 1)
      ++Other.Site;
    else
      ++Other.Seed;
    std::vector<double> Y(X.size());
    cpu::dropout(X.data(), Y.data(), {4, 6, 8}, {0, 0, 0}, {4, 6, 8}, Other);
    EXPECT_NE(Y, Whole) << "change " << Change;
  }
}

// A run of consecutive indices (cpu::dropoutRun: four elements to a Philox
// call, in the SIMD clones) scales each element by exactly factor(), for
// runs that start and end off a block of four and past 2^32 (the
// counter's high word), in f32 and in place.
TEST(Dropout, RunsMatchTheFactorOfEachElement) {
  DropoutKey K;
  K.Seed = 0x123456789abcull;
  K.Step = 7;
  K.Site = 3;
  K.Threshold = dropoutThreshold(0.1);
  K.Scale = 1.0 / 0.9;
  std::vector<float> X(1000);
  for (size_t I = 0; I < X.size(); ++I)
    X[I] = float(std::sin(double(I))) + 2.0f;
  for (uint64_t Index :
       {uint64_t(0), uint64_t(3), uint64_t(4097), (uint64_t(1) << 34) + 2})
    for (int64_t N : {int64_t(1), int64_t(6), int64_t(997)}) {
      std::vector<float> Y(size_t(N), -1.0f), Z(X.begin(), X.begin() + N);
      cpu::dropoutRun(X.data(), Y.data(), N, Index, K);
      cpu::dropoutRun(Z.data(), Z.data(), N, Index, K);
      int Dropped = 0;
      for (int64_t J = 0; J < N; ++J) {
        const float Want = X[size_t(J)] * float(K.factor(Index + uint64_t(J)));
        EXPECT_EQ(Y[size_t(J)], Want) << Index << " + " << J;
        EXPECT_EQ(Z[size_t(J)], Want) << Index << " + " << J << " in place";
        Dropped += Want == 0.0f;
      }
      if (N == 997)
        EXPECT_GT(Dropped, 50) << Index; // about 100 of 997 at p = 0.1
    }
}
