//===- SamplingTest.cpp - how --data's windows are drawn ------------------===//
#include "runtime/data/Data.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

using namespace weft;

namespace {
TokenData tokens(int64_t N, int64_t Seq, Sampling S) {
  std::vector<uint32_t> T(static_cast<size_t>(N));
  for (int64_t I = 0; I < N; ++I)
    T[size_t(I)] = uint32_t(I % 50);
  Expected<TokenData> D = TokenData::fromTokens(T, 50, Seq);
  EXPECT_TRUE(D.ok()) << D.message();
  D->setSampling(S);
  return std::move(*D);
}
} // namespace

// Shuffled: each epoch visits every one of the (N - 1) / Seq disjoint
// windows once, epochs in different orders; another seed, another order.
TEST(Sampling, ShuffledEpochsVisitEveryWindowOnce) {
  const int64_t N = 1000, Seq = 16, Windows = (N - 1) / Seq;
  TokenData D = tokens(N, Seq, {Sampling::Shuffled, 7});
  std::vector<uint64_t> Epoch0, Epoch1;
  for (int64_t G = 0; G < 2 * Windows; ++G) {
    uint64_t Start = D.windowStart(uint64_t(G), Seq);
    ASSERT_EQ(Start % Seq, 0u);
    ASSERT_LE(Start + Seq, uint64_t(N - 1));
    (G < Windows ? Epoch0 : Epoch1).push_back(Start);
  }
  EXPECT_EQ(std::set<uint64_t>(Epoch0.begin(), Epoch0.end()).size(),
            size_t(Windows));
  EXPECT_EQ(std::set<uint64_t>(Epoch1.begin(), Epoch1.end()).size(),
            size_t(Windows));
  EXPECT_NE(Epoch0, Epoch1);
  TokenData Other = tokens(N, Seq, {Sampling::Shuffled, 8});
  EXPECT_NE(Other.windowStart(0, Seq) + Other.windowStart(1, Seq) * 1000,
            D.windowStart(0, Seq) + D.windowStart(1, Seq) * 1000);
}

// Random: every start in [0, N - Seq - 1] (inputs and targets inside the
// file), all of them reached, the same for the same seed.
TEST(Sampling, RandomStartsCoverTheFile) {
  const int64_t N = 100, Seq = 10;
  TokenData D = tokens(N, Seq, {Sampling::Random, 3});
  TokenData Again = tokens(N, Seq, {Sampling::Random, 3});
  std::set<uint64_t> Seen;
  for (uint64_t G = 0; G < 5000; ++G) {
    uint64_t Start = D.windowStart(G, Seq);
    ASSERT_LE(Start, uint64_t(N - Seq - 1));
    ASSERT_EQ(Start, Again.windowStart(G, Seq));
    Seen.insert(Start);
  }
  EXPECT_EQ(Seen.size(), size_t(N - Seq));
}

// Contiguous: today's order, g * Seq wrapping.
TEST(Sampling, ContiguousIsFileOrder) {
  TokenData D = tokens(100, 10, {});
  EXPECT_EQ(D.windowStart(3, 10), 30u);
  EXPECT_EQ(D.windowStart(12, 10), 20u);
  EXPECT_EQ(D.describe(), "contiguous over 100 tokens");
  D.setSampling({Sampling::Shuffled, 5});
  EXPECT_EQ(D.describe(), "shuffled seed 5 over 100 tokens");
}
