//===- RobustnessTest.cpp - Mutated programs are refused or run, never crash
//===//
#include "TestPrograms.h"
#include "runtime/Executor.h"
#include "runtime/Trainer.h"
#include "runtime/checkpoint/Safetensors.h"
#include "runtime/cpu/kernels/FastMath.h"
#include "runtime/data/Data.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <future>
#include <limits>
#include <random>

using namespace weft;
using namespace weft::test;
using json = nlohmann::json;

namespace {

void integerLeaves(const json &J, const json::json_pointer &At,
                   std::vector<json::json_pointer> &Out) {
  if (J.is_number_integer()) {
    Out.push_back(At);
  } else if (J.is_object()) {
    for (auto It = J.begin(); It != J.end(); ++It)
      integerLeaves(It.value(), At / It.key(), Out);
  } else if (J.is_array()) {
    for (size_t I = 0; I < J.size(); ++I)
      integerLeaves(J[I], At / I, Out);
  }
}

// Every integer in the payload (shapes, ids, offsets, sizes, ranges) is set to
// a hostile value in turn. The loader must refuse the program or it must run
// a full step cleanly (an error Status is fine, a crash is not).
TEST(Robustness, MutatedIntegersAreRefusedOrRun) {
  GptConfig C;
  C.Llama = true;
  C.KvHeads = 1;
  const json Base = gptProgram(C).root();
  std::vector<json::json_pointer> Leaves;
  integerLeaves(Base, json::json_pointer(), Leaves);
  ASSERT_GT(Leaves.size(), 100u);
  const int64_t Values[] = {0,
                            -1,
                            1,
                            2,
                            3,
                            5,
                            64,
                            1000,
                            int64_t(1) << 31,
                            int64_t(1) << 40,
                            -(int64_t(1) << 62)};
  std::mt19937_64 Rng(42);
  std::vector<uint16_t> Tokens(1000);
  for (size_t I = 0; I < Tokens.size(); ++I)
    Tokens[I] = uint16_t(I % C.Vocab);
  int Accepted = 0;
  for (int Trial = 0; Trial < 400; ++Trial) {
    json J = Base;
    const json::json_pointer &Ptr = Leaves[Rng() % Leaves.size()];
    int64_t V = Values[Rng() % (sizeof(Values) / sizeof(Values[0]))];
    if (Rng() % 3 == 0)
      V = J[Ptr].get<int64_t>() + (Rng() % 2 ? 1 : -1);
    J[Ptr] = V;
    Expected<Program> P = parseProgram(encodeProgramContainer(programJson(J)));
    if (!P.ok()) {
      EXPECT_FALSE(P.message().empty());
      continue;
    }
    ++Accepted;
    Expected<std::unique_ptr<Executor>> E = Executor::create(P.take());
    if (!E.ok())
      continue;
    EXPECT_TRUE((*E)->initParams(1).ok());
    Expected<TokenData> D = TokenData::fromTokens(Tokens, (*E)->program().Vocab,
                                                  (*E)->program().Seq);
    if (!D.ok())
      continue;
    TrainOptions O;
    O.Steps = 1;
    (void)train(**E, *D, O); // an error is fine; a crash fails the test
  }
  // Some mutations are harmless (e.g. a different init std); most are not.
  EXPECT_GT(Accepted, 0);
  EXPECT_LT(Accepted, 400);
}

TEST(Robustness, HugeArenaFailsCleanly) {
  json J = tinyProgram().root();
  J["arena_bytes"] = int64_t(1) << 46; // 64 TiB
  Expected<Program> P = parseProgram(encodeProgramContainer(programJson(J)));
  ASSERT_TRUE(P.ok()) << P.message();
  Expected<std::unique_ptr<Executor>> E = Executor::create(P.take());
  ASSERT_FALSE(E.ok());
  EXPECT_NE(E.message().find("cannot allocate"), std::string::npos)
      << E.message();
}

// numElements never overflows (it returned a wrapped product, undefined
// behaviour): -1 when the product does not fit int64.
TEST(Robustness, NumElementsReportsOverflow) {
  EXPECT_EQ(numElements({}), 1);
  EXPECT_EQ(numElements({3, 0, 5}), 0);
  EXPECT_EQ(numElements({int64_t(1) << 31, int64_t(1) << 31}), int64_t(1)
                                                                   << 62);
  EXPECT_EQ(numElements({int64_t(1) << 32, int64_t(1) << 32}), -1);
  EXPECT_EQ(numElements({std::numeric_limits<int64_t>::max(), 2}), -1);
  EXPECT_TRUE(checkShapeSize({int64_t(1) << 24, int64_t(1) << 24}, "t").ok());
  Status S = checkShapeSize({int64_t(1) << 32, int64_t(1) << 32, 0}, "x",
                            /*AllowZero=*/true);
  ASSERT_FALSE(S.ok());
  EXPECT_NE(S.message().find("shape [4294967296,4294967296,0] of x"),
            std::string::npos)
      << S.message();
}

std::string safetensorsBytes(const std::string &Header, size_t DataBytes) {
  std::string B(8, '\0');
  for (int I = 0; I < 8; ++I)
    B[I] = char((uint64_t(Header.size()) >> (8 * I)) & 0xff);
  return B + Header + std::string(DataBytes, '\0');
}

// A safetensors shape whose product wraps to 0 matched data_offsets [0, 0]
// and was accepted (2^32 x 2^32 F32 "needs 0 bytes").
TEST(Robustness, SafetensorsShapeOverflowIsRefused) {
  Expected<SafetensorsFile> F = SafetensorsFile::parse(
      safetensorsBytes("{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,"
                       "4294967296],\"data_offsets\":[0,0]}}",
                       0),
      "big.safetensors");
  ASSERT_FALSE(F.ok());
  EXPECT_NE(F.message().find("tensor 'w'"), std::string::npos) << F.message();
  EXPECT_NE(F.message().find("more than 2^48 elements"), std::string::npos)
      << F.message();
  // A dimension past int64 is named too, not converted.
  F = SafetensorsFile::parse(
      safetensorsBytes("{\"v\":{\"dtype\":\"F32\",\"shape\":"
                       "[18446744073709551615],\"data_offsets\":[0,0]}}",
                       0),
      "big.safetensors");
  ASSERT_FALSE(F.ok());
  EXPECT_NE(F.message().find("tensor 'v' has a dimension 18446744073709551615"),
            std::string::npos)
      << F.message();
  // Zero-sized tensors stay valid.
  F = SafetensorsFile::parse(
      safetensorsBytes("{\"z\":{\"dtype\":\"F32\",\"shape\":[0,4],"
                       "\"data_offsets\":[0,0]}}",
                       0),
      "empty.safetensors");
  EXPECT_TRUE(F.ok()) << F.message();
}

// vexp on NaN shifted a negative int32 left (undefined behaviour), and
// clamped +inf to exp(88) and -inf to exp(-87).
TEST(Robustness, VexpHandlesNanAndInfinities) {
  const float Inf = std::numeric_limits<float>::infinity();
  const float NaN = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(cpu::vexp(NaN)));
  EXPECT_TRUE(std::isnan(cpu::vexp(-NaN)));
  EXPECT_EQ(cpu::vexp(Inf), Inf);
  EXPECT_EQ(cpu::vexp(-Inf), 0.0f);
  EXPECT_NEAR(cpu::vexp(1.0f), std::exp(1.0f), 1e-6f);
  EXPECT_NEAR(cpu::vexp(-100.0f), 0.0f, 1e-37f);
  EXPECT_EQ(cpu::vsigmoid(-Inf), 0.0f);
  EXPECT_EQ(cpu::vsigmoid(Inf), 1.0f);
  EXPECT_EQ(cpu::vtanh(Inf), 1.0f);
  EXPECT_EQ(cpu::vtanh(-Inf), -1.0f);
  EXPECT_TRUE(std::isnan(cpu::vtanh(NaN)));
}

// A directory was read as a file of 2^63-1 bytes; a FIFO blocked forever.
TEST(Robustness, DataFileMustBeARegularFile) {
  std::string Dir = ::testing::TempDir();
  Expected<TokenData> D = TokenData::open(Dir, 256, 4);
  ASSERT_FALSE(D.ok());
  EXPECT_NE(D.message().find("'" + Dir + "' is a directory"), std::string::npos)
      << D.message();

  std::string Fifo = Dir + "/weft-robustness-fifo-" + std::to_string(getpid());
  ::unlink(Fifo.c_str());
  ASSERT_EQ(::mkfifo(Fifo.c_str(), 0600), 0);
  auto Opened = std::async(std::launch::async,
                           [&] { return TokenData::open(Fifo, 256, 4); });
  if (Opened.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
    // Unblock the reader (a writer that closes at once) before failing.
    int Fd = ::open(Fifo.c_str(), O_WRONLY);
    if (Fd >= 0)
      ::close(Fd);
    Opened.wait();
    ::unlink(Fifo.c_str());
    FAIL() << "TokenData::open blocked on a FIFO";
  }
  D = Opened.get();
  ::unlink(Fifo.c_str());
  ASSERT_FALSE(D.ok());
  EXPECT_NE(D.message().find("is a FIFO"), std::string::npos) << D.message();
  EXPECT_NE(D.message().find(Fifo), std::string::npos) << D.message();
}

} // namespace
