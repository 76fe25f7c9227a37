//===- InitDataTest.cpp - Deterministic init and the token data loader ----===//
#include "program/Hash.h"
#include "runtime/Init.h"
#include "runtime/data/Data.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>

using namespace weft;

namespace {

TEST(Init, MatchesTheDocumentedFormula) {
  // Recompute by hand from the doc for one element.
  uint64_t Key = fnv1a64(std::string_view("w")) ^ splitmix64(7);
  double U1 =
      (double(splitmix64(Key + 2 * 5) >> 11) + 0.5) * std::ldexp(1, -53);
  double U2 =
      (double(splitmix64(Key + 2 * 5 + 1) >> 11) + 0.5) * std::ldexp(1, -53);
  double Want = std::sqrt(-2 * std::log(U1)) * std::cos(2 * M_PI * U2);
  EXPECT_EQ(initNormal(7, "w", 5), Want);
}

// A vocabulary padded for tp (weft-pad-vocab): the model's rows take the
// unpadded tensor's values, the padding row is 0, wherever a shard begins.
TEST(Init, PaddedRowsAreZeroAndTheRestUnchanged) {
  ParamSpec Model{"wte", {3, 4}, {InitSpec::Normal, 0.02}, true};
  ParamSpec Padded = Model;
  Padded.Dims = {4, 4};
  Padded.Place = Layout::replicated({4, 4});
  Padded.LogicalRows = 3;
  std::vector<double> Want(12), Got(16, 9.0), Tail(6, 9.0);
  initParam(Model, 5, DType::F64, Want.data(), 0, Want.size());
  initParam(Padded, 5, DType::F64, Got.data(), 0, Got.size());
  for (size_t I = 0; I < 12; ++I)
    EXPECT_EQ(Got[I], Want[I]) << I;
  for (size_t I = 12; I < 16; ++I)
    EXPECT_EQ(Got[I], 0.0) << I;
  // A shard of elements 10..15: two model values, then the padding.
  initParam(Padded, 5, DType::F64, Tail.data(), 10, Tail.size());
  EXPECT_EQ(Tail, std::vector<double>({Want[10], Want[11], 0, 0, 0, 0}));
}

TEST(Init, DeterministicAndLayoutIndependent) {
  ParamSpec P{
      "h.0.attn.c_attn.weight", {64, 48}, {InitSpec::Normal, 0.02}, true};
  std::vector<double> Whole(64 * 48), Again(64 * 48), Shard(1000);
  initParam(P, 1234, DType::F64, Whole.data(), 0, Whole.size());
  initParam(P, 1234, DType::F64, Again.data(), 0, Again.size());
  EXPECT_EQ(Whole, Again);
  // A shard starting mid-tensor sees the same values at the same indices.
  initParam(P, 1234, DType::F64, Shard.data(), 777, Shard.size());
  for (size_t I = 0; I < Shard.size(); ++I)
    ASSERT_EQ(Shard[I], Whole[777 + I]) << I;
  // f32 is the rounded f64 value.
  std::vector<float> F(10);
  initParam(P, 1234, DType::F32, F.data(), 0, 10);
  for (size_t I = 0; I < 10; ++I)
    EXPECT_EQ(F[I], float(Whole[I]));
  // Other seed or name: other values.
  std::vector<double> Other(10);
  initParam(P, 1235, DType::F64, Other.data(), 0, 10);
  EXPECT_NE(Other[0], Whole[0]);
  P.Name = "h.1.attn.c_attn.weight";
  initParam(P, 1234, DType::F64, Other.data(), 0, 10);
  EXPECT_NE(Other[0], Whole[0]);
}

TEST(Init, NormalStatistics) {
  ParamSpec P{"x", {100000}, {InitSpec::Normal, 0.5}, false};
  std::vector<double> V(100000);
  initParam(P, 1, DType::F64, V.data(), 0, V.size());
  double Mean = 0, Sq = 0;
  for (double X : V)
    Mean += X;
  Mean /= V.size();
  for (double X : V)
    Sq += (X - Mean) * (X - Mean);
  double Std = std::sqrt(Sq / V.size());
  EXPECT_NEAR(Mean, 0.0, 0.01); // 5 sigma of the mean is ~0.008
  EXPECT_NEAR(Std, 0.5, 0.01);
  ParamSpec Ones{"g", {3}, {InitSpec::Ones, 0}, false};
  std::vector<float> O(3);
  initParam(Ones, 1, DType::F32, O.data(), 0, 3);
  EXPECT_EQ(O, std::vector<float>({1, 1, 1}));
}

std::string writeTokens(const std::vector<uint16_t> &T, const char *Name) {
  std::string Path = ::testing::TempDir() + Name;
  std::ofstream Out(Path, std::ios::binary);
  for (uint16_t V : T) {
    char B[2] = {char(V & 0xff), char(V >> 8)};
    Out.write(B, 2);
  }
  return Path;
}

TEST(Data, SampleOffsetsAndWrap) {
  std::vector<uint16_t> T(10);
  for (size_t I = 0; I < T.size(); ++I)
    T[I] = uint16_t(100 + I);
  std::string Path = writeTokens(T, "data_wrap.bin");
  Expected<TokenData> D = TokenData::open(Path, 300, 3);
  ASSERT_TRUE(D.ok()) << D.message();
  const int64_t B = 2, S = 3;
  int32_t In[6], Tg[6];
  D->fillBatch(0, B, S, In, Tg);
  EXPECT_EQ(std::vector<int32_t>(In, In + 6),
            std::vector<int32_t>({100, 101, 102, 103, 104, 105}));
  EXPECT_EQ(std::vector<int32_t>(Tg, Tg + 6),
            std::vector<int32_t>({101, 102, 103, 104, 105, 106}));
  // Step 1: samples start at (1*2+0)*3 = 6 and 9; both wrap modulo 10.
  D->fillBatch(1, B, S, In, Tg);
  EXPECT_EQ(std::vector<int32_t>(In, In + 6),
            std::vector<int32_t>({106, 107, 108, 109, 100, 101}));
  EXPECT_EQ(std::vector<int32_t>(Tg, Tg + 6),
            std::vector<int32_t>({107, 108, 109, 100, 101, 102}));
}

// The masked-LM recipe of docs/program-format.md: the values
// test/e2e/masked_lm_batch.py computes (masked_batch(range(100), step 3,
// batch 4, seq 8, mask 7, vocab 50, prob 0.5, seed 9)): masks (7), random
// ids (40, 0, 1...) and kept tokens all occur.
TEST(Data, MaskedBatchIsTheDocumentedRecipe) {
  std::vector<uint32_t> T(100);
  for (size_t I = 0; I < T.size(); ++I)
    T[I] = uint32_t(I);
  Expected<TokenData> D = TokenData::fromTokens(T, 100, 8);
  ASSERT_TRUE(D.ok()) << D.message();
  MaskedLmSpec M;
  M.MaskToken = 7;
  M.MaskProb = 0.5;
  M.Seed = 9;
  const int64_t B = 4, S = 8;
  std::vector<int32_t> In(B * S), Tg(B * S);
  D->fillMaskedBlock(3, B, S, 0, B, 0, S, M, 50, In.data(), Tg.data());
  EXPECT_EQ(In, std::vector<int32_t>({96, 97, 7, 99, 0, 1,  2,  3,  4,  7,  7,
                                      7,  8,  9, 40, 7, 6,  7,  7,  15, 16, 17,
                                      18, 19, 7, 21, 7, 23, 24, 25, 26, 27}));
  const int32_t X = -100;
  EXPECT_EQ(Tg, std::vector<int32_t>({X,  X, 98, X,  X,  X,  X,  X,  X, 5, 6,
                                      X,  X, X,  10, 11, 12, 13, 14, X, X, X,
                                      18, X, 20, X,  22, X,  X,  X,  X, X}));
  EXPECT_EQ(countMaskedTargets(3, B, S, M), 11);
  // A rank's block (rows 1-2, columns 3-6) is the batch's, as fillBlock's.
  std::vector<int32_t> BIn(2 * 4), BTg(2 * 4);
  D->fillMaskedBlock(3, B, S, 1, 2, 3, 4, M, 50, BIn.data(), BTg.data());
  for (int64_t R = 0; R < 2; ++R)
    for (int64_t C = 0; C < 4; ++C) {
      EXPECT_EQ(BIn[R * 4 + C], In[(1 + R) * S + 3 + C]);
      EXPECT_EQ(BTg[R * 4 + C], Tg[(1 + R) * S + 3 + C]);
    }
  // Probability 1 hides every position.
  M.MaskProb = 1;
  EXPECT_EQ(countMaskedTargets(0, B, S, M), B * S);
}

// Whole samples: step k's sample i is row (k*B + i) mod N; a block takes
// its rows' columns; the count skips -100s; bad ids are named.
TEST(Data, SamplesByRowAndCount) {
  const int64_t S = 3;
  std::vector<int32_t> Tok = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  std::vector<int32_t> Tgt = {-100, 2, -100, 4, 5, 6, -100, -100, -100};
  Expected<SampleData> D = SampleData::fromRows(Tok, Tgt, S, 10, 10, false);
  ASSERT_TRUE(D.ok()) << D.message();
  EXPECT_EQ(D->rows(), 3);
  int32_t In[4], Tg[4];
  // Step 1 of batch 2: rows 2 and 0 (wrapping); columns 1-2.
  D->fillStepBlock(1, 2, S, 0, 2, 1, 2, nullptr, 10, In, Tg);
  EXPECT_EQ(std::vector<int32_t>(In, In + 4),
            std::vector<int32_t>({8, 9, 2, 3}));
  EXPECT_EQ(std::vector<int32_t>(Tg, Tg + 4),
            std::vector<int32_t>({-100, -100, 2, -100}));
  EXPECT_EQ(D->countedTargets(1, 2, S, nullptr), 1);
  EXPECT_EQ(D->countedTargets(0, 2, S, nullptr), 4);
  Tgt[4] = -3;
  Expected<SampleData> Bad = SampleData::fromRows(Tok, Tgt, S, 10, 10, false);
  ASSERT_FALSE(Bad.ok());
  EXPECT_NE(Bad.message().find("target -3 at [1, 1] is outside [0, 10) and is "
                               "not -100"),
            std::string::npos)
      << Bad.message();
  Tok.pop_back();
  EXPECT_FALSE(SampleData::fromRows(Tok, Tgt, S, 10, 10, false).ok());
}

// One target per sample (a classifier's labels): a block's rows take their
// sample's label whatever its columns; bounded by the classes, not the
// vocabulary.
TEST(Data, SampleTargetsPerRow) {
  const int64_t S = 3;
  std::vector<int32_t> Tok = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  std::vector<int32_t> Tgt = {1, -100, 0};
  Expected<SampleData> D = SampleData::fromRows(Tok, Tgt, S, 10, 2, true);
  ASSERT_TRUE(D.ok()) << D.message();
  EXPECT_TRUE(D->sampleTargets());
  int32_t In[4], Tg[2] = {7, 7};
  // Step 1 of batch 2: rows 2 and 0; columns 1-2 of the tokens.
  D->fillStepBlock(1, 2, S, 0, 2, 1, 2, nullptr, 10, In, Tg);
  EXPECT_EQ(std::vector<int32_t>(In, In + 4),
            std::vector<int32_t>({8, 9, 2, 3}));
  EXPECT_EQ(std::vector<int32_t>(Tg, Tg + 2), std::vector<int32_t>({0, 1}));
  EXPECT_EQ(D->countedTargets(1, 2, S, nullptr), 2);
  EXPECT_EQ(D->countedTargets(0, 2, S, nullptr), 1);
  Tgt[2] = 2; // a token id, but not a class
  Expected<SampleData> Bad = SampleData::fromRows(Tok, Tgt, S, 10, 2, true);
  ASSERT_FALSE(Bad.ok());
  EXPECT_NE(Bad.message().find("target 2 at [2] is outside [0, 2)"),
            std::string::npos)
      << Bad.message();
  Tgt.pop_back();
  Bad = SampleData::fromRows(Tok, Tgt, S, 10, 2, true);
  ASSERT_FALSE(Bad.ok());
  EXPECT_NE(Bad.message().find("2 targets for 9 token ids in 3 samples"),
            std::string::npos)
      << Bad.message();
}

// Float targets (a regression's): a block's rows take their sample's
// bytes; the tokens as ever; rows that are not whole samples are refused.
TEST(Data, FloatTargetsPerRow) {
  const int64_t S = 2;
  std::vector<int32_t> Tok = {1, 2, 3, 4, 5, 6};
  std::vector<float> Y = {0.5f, -1.f, 2.f, 3.f, -4.f, 8.f}; // [3, 2]
  std::vector<char> Bytes(reinterpret_cast<char *>(Y.data()),
                          reinterpret_cast<char *>(Y.data() + Y.size()));
  Expected<SampleData> D =
      SampleData::fromFloatRows(Tok, Bytes, 2 * sizeof(float), S, 10, "y");
  ASSERT_TRUE(D.ok()) << D.message();
  EXPECT_EQ(D->floatTargetRowBytes(), 2 * sizeof(float));
  EXPECT_FALSE(D->sampleTargets());
  int32_t In[4];
  float Out[4];
  // Step 1 of batch 2: rows 2 and 0.
  D->fillStepBlock(1, 2, S, 0, 2, 0, 2, nullptr, 10, In, nullptr);
  D->fillFloatTargets(1, 2, 0, 2, Out);
  EXPECT_EQ(std::vector<int32_t>(In, In + 4),
            std::vector<int32_t>({5, 6, 1, 2}));
  EXPECT_EQ(std::vector<float>(Out, Out + 4),
            std::vector<float>({-4.f, 8.f, 0.5f, -1.f}));
  Bytes.pop_back();
  Expected<SampleData> Bad =
      SampleData::fromFloatRows(Tok, Bytes, 2 * sizeof(float), S, 10, "y");
  ASSERT_FALSE(Bad.ok());
  EXPECT_NE(Bad.message().find("23 bytes of targets for 3 samples of 8 bytes"),
            std::string::npos)
      << Bad.message();
}

TEST(Data, RefusesIdAtOrAboveVocab) {
  std::string Path = writeTokens({1, 2, 3, 256, 4, 5}, "data_vocab.bin");
  Expected<TokenData> D = TokenData::open(Path, 256, 2);
  ASSERT_FALSE(D.ok());
  EXPECT_NE(D.message().find("token id 256 at position 3"), std::string::npos)
      << D.message();
}

TEST(Data, RefusesShortAndMissingFiles) {
  std::string Path = writeTokens({1, 2, 3}, "data_short.bin");
  Expected<TokenData> D = TokenData::open(Path, 256, 3);
  ASSERT_FALSE(D.ok());
  EXPECT_NE(D.message().find("need at least seq+1 = 4"), std::string::npos)
      << D.message();
  Expected<TokenData> M = TokenData::open("/nonexistent/x.bin", 256, 3);
  ASSERT_FALSE(M.ok());
  EXPECT_NE(M.message().find("cannot open data file"), std::string::npos);
}

} // namespace
