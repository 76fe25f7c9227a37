//===- RobustnessTest.cpp - Mutated programs are refused or run, never crash
//===//
#include "TestPrograms.h"
#include "runtime/Executor.h"
#include "runtime/Trainer.h"

#include <gtest/gtest.h>

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
    Expected<Program> P = parseProgram(encodeProgramContainer(J.dump()));
    if (!P.ok()) {
      EXPECT_FALSE(P.message().empty());
      continue;
    }
    ++Accepted;
    Expected<std::unique_ptr<Executor>> E = Executor::create(P.take());
    if (!E.ok())
      continue;
    (*E)->initParams(1);
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
  Expected<Program> P = parseProgram(encodeProgramContainer(J.dump()));
  ASSERT_TRUE(P.ok()) << P.message();
  Expected<std::unique_ptr<Executor>> E = Executor::create(P.take());
  ASSERT_FALSE(E.ok());
  EXPECT_NE(E.message().find("cannot allocate"), std::string::npos)
      << E.message();
}

} // namespace
