//===- ExecutorTest.cpp - End-to-end runs of hand-built programs ----------===//
#include "runtime/Executor.h"
#include "TestPrograms.h"
#include "runtime/Trainer.h"
#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/checkpoint/Safetensors.h"

#include <gtest/gtest.h>

#include <filesystem>

using namespace weft;
using namespace weft::test;

namespace {

std::unique_ptr<Executor> makeExecutor(const ProgramBuilder &PB,
                                       uint64_t Seed = 1234) {
  Expected<Program> P = parseProgram(PB.file());
  EXPECT_TRUE(P.ok()) << P.message();
  if (!P.ok())
    return nullptr;
  Expected<std::unique_ptr<Executor>> E = Executor::create(P.take());
  EXPECT_TRUE(E.ok()) << E.message();
  if (!E.ok())
    return nullptr;
  EXPECT_TRUE((*E)->initParams(Seed).ok());
  return E.take();
}

TokenData patternData(int64_t Vocab, int64_t Seq, size_t N = 4096) {
  // A learnable sequence: t[i+1] = (3 t[i] + 1) mod vocab.
  std::vector<uint16_t> T(N);
  for (size_t I = 1; I < N; ++I)
    T[I] = uint16_t((3 * T[I - 1] + 1) % Vocab);
  return TokenData::fromTokens(T, Vocab, Seq).take();
}

TEST(Executor, TinyProgramLossDecreases) {
  ProgramBuilder PB = tinyProgram("f32", 4, 8, 16, 8);
  auto E = makeExecutor(PB);
  ASSERT_TRUE(E);
  TokenData D = patternData(16, 8);
  TrainOptions O;
  O.Steps = 60;
  auto R = train(*E, D, O);
  ASSERT_TRUE(R.ok()) << R.message();
  EXPECT_NEAR(R->front().Loss, std::log(16.0), 1.0);
  EXPECT_LT(R->back().Loss, 0.5 * R->front().Loss);
  EXPECT_EQ(R->back().Step, 60);
}

TEST(Executor, TinyProgramGradCheckF64) {
  auto E = makeExecutor(tinyProgram("f64"));
  ASSERT_TRUE(E);
  TokenData D = patternData(16, 4);
  GradCheckOptions G;
  G.PerParam = 1000; // every element
  auto R = gradCheck(*E, D, G);
  ASSERT_TRUE(R.ok()) << R.message();
  ASSERT_EQ(R->Params.size(), 2u);
  for (const GradCheckEntry &P : R->Params)
    EXPECT_LE(P.MaxErr, 1e-7) << P.Name << " at " << P.WorstIndex;
  EXPECT_TRUE(R->passed());
}

TEST(Executor, GradCheckCatchesAWrongGradient) {
  ProgramBuilder PB = tinyProgram("f64");
  // Scale the loss gradient by 2: every analytic gradient doubles.
  PB.root()["instructions"][3]["attrs"]["value"] = 2.0;
  auto E = makeExecutor(PB);
  ASSERT_TRUE(E);
  auto R = gradCheck(*E, patternData(16, 4), GradCheckOptions());
  ASSERT_TRUE(R.ok()) << R.message();
  EXPECT_FALSE(R->passed());
  EXPECT_NEAR(R->Params[0].MaxErr, 0.5, 1e-3);
}

class GptGradCheck : public ::testing::TestWithParam<bool> {};

TEST_P(GptGradCheck, AllParametersF64) {
  GptConfig C;
  C.DType = "f64";
  C.Llama = GetParam();
  C.Heads = 4;
  C.KvHeads = C.Llama ? 2 : 0; // GQA in the Llama variant
  C.Std = 0.3;
  C.Seq = 6;
  auto E = makeExecutor(gptProgram(C));
  ASSERT_TRUE(E);
  GradCheckOptions G;
  G.PerParam = 6;
  auto R = gradCheck(*E, patternData(C.Vocab, C.Seq), G);
  ASSERT_TRUE(R.ok()) << R.message();
  for (const GradCheckEntry &P : R->Params)
    EXPECT_LE(P.MaxErr, 1e-5)
        << P.Name << " at " << P.WorstIndex << ": analytic " << P.Analytic
        << ", numeric " << P.Numeric;
}

INSTANTIATE_TEST_SUITE_P(Models, GptGradCheck, ::testing::Values(false, true),
                         [](const auto &Info) {
                           return Info.param ? "Llama" : "Gpt2";
                         });

TEST(Executor, GptF32Trains) {
  GptConfig C;
  C.Seq = 16;
  C.Std = 0.1;
  auto E = makeExecutor(gptProgram(C));
  ASSERT_TRUE(E);
  TrainOptions O;
  O.Steps = 30;
  auto R = train(*E, patternData(C.Vocab, C.Seq), O);
  ASSERT_TRUE(R.ok()) << R.message();
  EXPECT_LT(R->back().Loss, 0.7 * R->front().Loss);
}

std::vector<double> allParams(const Executor &E) {
  std::vector<double> V;
  for (size_t P = 0; P < E.program().Params.size(); ++P)
    for (int64_t I = 0; I < numElements(E.program().Params[P].Dims); ++I)
      V.push_back(E.paramElement(P, I));
  return V;
}

TEST(Executor, CheckpointResumeIsExact) {
  GptConfig C;
  C.Seq = 8;
  ProgramBuilder PB = gptProgram(C);
  TokenData D = patternData(C.Vocab, C.Seq);
  TrainOptions O;
  O.Steps = 4;
  auto Straight = makeExecutor(PB);
  ASSERT_TRUE(train(*Straight, D, O).ok());

  std::string Dir = ::testing::TempDir() + "weft_ckpt";
  std::filesystem::remove_all(Dir);
  O.Steps = 2;
  auto First = makeExecutor(PB);
  ASSERT_TRUE(train(*First, D, O).ok());
  ASSERT_TRUE(saveCheckpoint(*First, Dir, 2).ok());
  auto Second = makeExecutor(PB, /*Seed=*/999); // load overrides the init
  Expected<int64_t> Step = loadCheckpoint(*Second, Dir);
  ASSERT_TRUE(Step.ok()) << Step.message();
  EXPECT_EQ(*Step, 2);
  O.StartStep = *Step;
  auto R = train(*Second, D, O);
  ASSERT_TRUE(R.ok());
  EXPECT_EQ(R->back().Step, 4);
  EXPECT_EQ(allParams(*Straight), allParams(*Second));
}

TEST(Executor, LoadRefusesMissingAndMisshapenTensors) {
  ProgramBuilder PB = tinyProgram();
  auto E = makeExecutor(PB);
  ASSERT_TRUE(E);
  std::string Path = ::testing::TempDir() + "partial.safetensors";
  std::vector<float> W(16 * 8);
  ASSERT_TRUE(
      writeSafetensors(Path, {{"wte.weight", DType::F32, {16, 8}, W.data()}})
          .ok());
  Expected<int64_t> R = loadCheckpoint(*E, Path);
  ASSERT_FALSE(R.ok());
  EXPECT_NE(R.message().find("no tensor for parameter 'head.weight'"),
            std::string::npos)
      << R.message();
  ASSERT_TRUE(
      writeSafetensors(
          Path, {{"transformer.wte.weight", DType::F32, {16, 8}, W.data()},
                 {"head.weight", DType::F32, {8, 15}, W.data()}})
          .ok());
  R = loadCheckpoint(*E, Path);
  ASSERT_FALSE(R.ok());
  EXPECT_NE(R.message().find("tensor 'head.weight' has shape [8,15], expected "
                             "[8,16]"),
            std::string::npos)
      << R.message();
}

TEST(Executor, SaveGradsWritesTheGradBuffers) {
  auto E = makeExecutor(tinyProgram());
  ASSERT_TRUE(E);
  TrainOptions O;
  O.Steps = 1;
  ASSERT_TRUE(train(*E, patternData(16, 4), O).ok());
  std::string Dir = ::testing::TempDir() + "weft_grads";
  ASSERT_TRUE(saveGradients(*E, Dir).ok());
  auto F = SafetensorsFile::read(Dir + "/grads.safetensors");
  ASSERT_TRUE(F.ok()) << F.message();
  std::vector<float> G(8 * 16);
  ASSERT_TRUE(F->convert(*F->find("head.weight"), DType::F32, G.data()).ok());
  EXPECT_EQ(G[5], float(E->gradElement(1, 5)));
  EXPECT_NE(G[5], 0.0f);
}

} // namespace

namespace {
// The op kinds neither test model uses still dispatch to a kernel.
TEST(Executor, RemainingOpsRun) {
  ProgramBuilder PB = tinyProgram("f64", 2, 4, 16, 8);
  int64_t A = PB.arena({2, 4, 8}), B = PB.arena({2, 4, 8}),
          Y = PB.arena({2, 4, 8}), Dx = PB.arena({2, 4, 8});
  PB.op("fill", {}, {A}, {{"value", 0.5}});
  PB.op("fill", {}, {B}, {{"value", -2.0}});
  PB.op("mul", {A, B}, {Y});
  PB.op("copy", {Y}, {Dx});
  PB.op("silu", {Dx}, {Y});
  PB.op("silu_grad", {A, B}, {Dx});
  PB.root()["arena_bytes"] = 1 << 16;
  auto E = makeExecutor(PB);
  ASSERT_TRUE(E);
  TrainOptions O;
  O.Steps = 1;
  ASSERT_TRUE(train(*E, patternData(16, 4), O).ok());
}
} // namespace

namespace {
TEST(Executor, SaveGradsInTheCheckpointDirIsNotLoadedAsParams) {
  auto E = makeExecutor(tinyProgram());
  ASSERT_TRUE(E);
  TrainOptions O;
  O.Steps = 1;
  ASSERT_TRUE(train(*E, patternData(16, 4), O).ok());
  std::string Dir = ::testing::TempDir() + "weft_ckpt_grads";
  std::filesystem::remove_all(Dir);
  // Gradients written into a checkpoint's folder after it (a save into a
  // folder holding them is refused: it would delete them).
  ASSERT_TRUE(saveCheckpoint(*E, Dir, 1).ok());
  ASSERT_TRUE(saveGradients(*E, Dir).ok());
  EXPECT_FALSE(saveCheckpoint(*E, Dir, 1).ok());
  auto F = makeExecutor(tinyProgram(), 77);
  ASSERT_TRUE(loadCheckpoint(*F, Dir).ok());
  EXPECT_EQ(allParams(*E), allParams(*F));
}
} // namespace
