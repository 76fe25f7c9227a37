//===- CheckpointIntegrityTest.cpp - Manifests, durable saves, rotation ---===//
//
// Each test damages a saved checkpoint the way a crash, a careless copy or a
// crafted file would, and expects the load to refuse it naming the file.
// Before manifests every one of these loaded silently (issue 9).
//
//===----------------------------------------------------------------------===//
#include "TestPrograms.h"
#include "runtime/DurableFile.h"
#include "runtime/Trainer.h"
#include "runtime/TrainingChecks.h"
#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/checkpoint/CheckpointManifest.h"
#include "runtime/checkpoint/PeriodicCheckpoints.h"
#include "runtime/checkpoint/Safetensors.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

using namespace weft;
using namespace weft::test;
namespace fs = std::filesystem;

namespace {

std::unique_ptr<Executor> tinyExecutor(uint64_t Seed = 1234) {
  Expected<Program> P = parseProgram(tinyProgram().file());
  EXPECT_TRUE(P.ok()) << P.message();
  Expected<std::unique_ptr<Executor>> E = Executor::create(P.take());
  EXPECT_TRUE(E.ok()) << E.message();
  EXPECT_TRUE((*E)->initParams(Seed).ok());
  return E.take();
}

/// A fresh checkpoint of a tiny model at Step in a fresh directory.
std::string saved(const std::string &Name, int64_t Step = 5) {
  std::string Dir = ::testing::TempDir() + "weft_integrity_" + Name;
  fs::remove_all(Dir);
  auto E = tinyExecutor();
  Status S = saveCheckpoint(*E, Dir, Step);
  EXPECT_TRUE(S.ok()) << S.message();
  return Dir;
}

/// Rewrites the manifest to match the files as they now are, so that a test
/// reaches the checks behind the manifest's.
void reseal(const std::string &Dir, int64_t Step) {
  std::vector<std::string> Names;
  for (const char *N :
       {"model.safetensors", "optimizer.safetensors", "trainer_state.json"})
    if (fs::exists(Dir + "/" + N))
      Names.push_back(N);
  ASSERT_TRUE(writeManifest(Dir, Step, Mesh(), 1, Names, 1).ok());
}

std::string loadError(const std::string &Dir) {
  auto E = tinyExecutor(99);
  Expected<int64_t> R = loadCheckpoint(*E, Dir);
  return R.ok() ? "loaded step " + std::to_string(*R) : R.message();
}

bool has(const std::string &S, const std::string &Part) {
  return S.find(Part) != std::string::npos;
}

TEST(CheckpointIntegrity, ACompleteSaveHasAManifestAndLoads) {
  std::string Dir = saved("complete");
  EXPECT_TRUE(fs::exists(Dir + "/manifest.json"));
  EXPECT_FALSE(fs::exists(Dir + ".partial"));
  EXPECT_EQ(loadError(Dir), "loaded step 5");
  Expected<Manifest> M = verifyCheckpoint(Dir);
  ASSERT_TRUE(M.ok()) << M.message();
  EXPECT_EQ(M->Step, 5);
  EXPECT_EQ(M->Files.size(), 3u);
}

TEST(CheckpointIntegrity, ASaveOverAnOldOneReplacesItWhole) {
  std::string Dir = saved("replace", 5);
  auto E = tinyExecutor(7);
  ASSERT_TRUE(saveCheckpoint(*E, Dir, 9).ok());
  EXPECT_EQ(loadError(Dir), "loaded step 9");
  EXPECT_FALSE(fs::exists(Dir + ".partial"));
}

TEST(CheckpointIntegrity, RefusesAMissingOptimizerFile) {
  std::string Dir = saved("no_optimizer");
  fs::remove(Dir + "/optimizer.safetensors");
  std::string Msg = loadError(Dir);
  EXPECT_TRUE(has(Msg, "lacks 'optimizer.safetensors'")) << Msg;
}

TEST(CheckpointIntegrity, RefusesAMissingTrainerState) {
  std::string Dir = saved("no_state");
  fs::remove(Dir + "/trainer_state.json");
  std::string Msg = loadError(Dir);
  EXPECT_TRUE(has(Msg, "lacks 'trainer_state.json'")) << Msg;
}

TEST(CheckpointIntegrity, RefusesACheckpointWithoutManifest) {
  std::string Dir = saved("no_manifest");
  fs::remove(Dir + "/manifest.json");
  std::string Msg = loadError(Dir);
  EXPECT_TRUE(has(Msg, "is incomplete: it has no manifest.json")) << Msg;
}

TEST(CheckpointIntegrity, RefusesAChangedByte) {
  std::string Dir = saved("flipped");
  {
    std::fstream F(Dir + "/model.safetensors",
                   std::ios::in | std::ios::out | std::ios::binary);
    F.seekp(-3, std::ios::end);
    F.put('\x7f');
  }
  std::string Msg = loadError(Dir);
  EXPECT_TRUE(has(Msg, "'model.safetensors' is not the file rank 0 wrote at "
                       "step 5"))
      << Msg;
}

TEST(CheckpointIntegrity, RefusesATruncatedFile) {
  std::string Dir = saved("truncated");
  fs::resize_file(Dir + "/optimizer.safetensors", 100);
  std::string Msg = loadError(Dir);
  EXPECT_TRUE(has(Msg, "'optimizer.safetensors' is not the file")) << Msg;
  EXPECT_TRUE(has(Msg, "100 bytes")) << Msg;
}

TEST(CheckpointIntegrity, RefusesAStepTheManifestDoesNotHold) {
  std::string Dir = saved("step_mismatch", 5);
  std::ofstream(Dir + "/trainer_state.json") << "{\"step\": 10}\n";
  reseal(Dir, 5);
  std::string Msg = loadError(Dir);
  EXPECT_TRUE(has(Msg, "trainer_state.json holds step 10, manifest.json "
                       "step 5"))
      << Msg;
}

TEST(CheckpointIntegrity, RefusesAStepNearInt64Max) {
  std::string Dir = saved("huge_step");
  std::ofstream(Dir + "/trainer_state.json")
      << "{\"step\": 9223372036854775806}\n";
  reseal(Dir, 5);
  std::string Msg = loadError(Dir);
  EXPECT_TRUE(has(Msg, "must be {\"step\": <integer in 0..")) << Msg;
  // And in the manifest itself.
  std::string M = Dir + "/manifest.json";
  std::stringstream SS;
  SS << std::ifstream(M).rdbuf();
  std::string Text = SS.str();
  Text.replace(Text.find("\"step\": 5"), 9, "\"step\": 9223372036854775806");
  std::ofstream(M) << Text;
  Msg = loadError(Dir);
  EXPECT_TRUE(has(Msg, "\"step\" is 9223372036854775806, expected 0..")) << Msg;
}

TEST(CheckpointIntegrity, RefusesAnOptimizerTensorOfAnotherShape) {
  // Same element count, transposed shape: it used to load element by
  // element into the wrong places.
  std::string Dir = saved("opt_shape");
  Expected<SafetensorsFile> F =
      SafetensorsFile::read(Dir + "/optimizer.safetensors");
  ASSERT_TRUE(F.ok()) << F.message();
  std::vector<std::vector<float>> Data;
  std::vector<TensorToWrite> Out;
  for (const SafeTensor &T : F->tensors()) {
    Data.emplace_back(size_t(numElements(T.Dims)));
    ASSERT_TRUE(F->convert(T, DType::F32, Data.back().data()).ok());
    Shape D = T.Dims;
    if (T.Name == "head.weight.exp_avg")
      std::swap(D[0], D[1]);
    Out.push_back({T.Name, DType::F32, D, Data.back().data()});
  }
  ASSERT_TRUE(writeSafetensors(Dir + "/optimizer.safetensors", Out).ok());
  reseal(Dir, 5);
  std::string Msg = loadError(Dir);
  EXPECT_TRUE(has(Msg, "tensor 'head.weight.exp_avg' has shape [16,8], "
                       "expected [8,16]"))
      << Msg;
}

TEST(CheckpointIntegrity, RefusesAWeftFileTheManifestDoesNotList) {
  std::string Dir = saved("extra");
  fs::copy_file(Dir + "/model.safetensors", Dir + "/model-rank1.safetensors");
  std::string Msg = loadError(Dir);
  EXPECT_TRUE(has(Msg, "holds 'model-rank1.safetensors', which its "
                       "manifest.json does not list"))
      << Msg;
}

TEST(CheckpointIntegrity, AnInterruptedSaveLeavesThePreviousOne) {
  // What a save killed before its exchange leaves: DIR intact beside a
  // DIR.partial without a manifest. The next save clears it.
  std::string Dir = saved("interrupted", 5);
  fs::create_directories(Dir + ".partial");
  std::ofstream(Dir + ".partial/model.safetensors") << "half";
  EXPECT_EQ(loadError(Dir), "loaded step 5");
  auto E = tinyExecutor();
  ASSERT_TRUE(saveCheckpoint(*E, Dir, 6).ok());
  EXPECT_EQ(loadError(Dir), "loaded step 6");
}

TEST(CheckpointIntegrity, DurableWriteLeavesTheOldFileOnFailure) {
  std::string Path = ::testing::TempDir() + "weft_durable.txt";
  ASSERT_TRUE(writeTextDurably(Path, "old").ok());
  Status S = writeDurably(Path, [](const std::string &Tmp) {
    std::ofstream(Tmp) << "half of the new";
    return Status::error("disk full");
  });
  EXPECT_FALSE(S.ok());
  std::stringstream SS;
  SS << std::ifstream(Path).rdbuf();
  EXPECT_EQ(SS.str(), "old\n");
  for (const auto &D : fs::directory_iterator(::testing::TempDir()))
    EXPECT_EQ(D.path().filename().string().find(".weft_durable.txt.tmp"),
              std::string::npos)
        << D.path();
}

TEST(CheckpointIntegrity, ContentHashSeesEveryByte) {
  std::vector<unsigned char> B(1000, 0);
  uint64_t H0 = contentHash(B.data(), B.size());
  for (size_t I : {size_t(0), size_t(31), size_t(32), size_t(999)}) {
    B[I] = 1;
    EXPECT_NE(contentHash(B.data(), B.size()), H0) << I;
    B[I] = 0;
  }
  EXPECT_NE(contentHash(B.data(), 999), H0); // length counts
}

TEST(PeriodicCheckpoints, KeepsTheNewestNAndListsThemNewestFirst) {
  std::string Root = ::testing::TempDir() + "weft_periodic";
  fs::remove_all(Root);
  auto E = tinyExecutor();
  {
    PeriodicCheckpoints P(Root, 2, 10);
    for (int64_t Step : {2, 4, 6})
      ASSERT_TRUE(P.save(*E, Step).ok());
    ASSERT_TRUE(P.finish(*E).ok());
  }
  // An incomplete newer one (a save cut short) is not listed.
  fs::create_directories(Root + "/" + checkpointDirName(8));
  auto L = listCheckpoints(Root);
  ASSERT_EQ(L.size(), 2u);
  EXPECT_EQ(L[0].first, 6);
  EXPECT_EQ(L[1].first, 4);
  EXPECT_FALSE(fs::exists(Root + "/" + checkpointDirName(2)));
  EXPECT_EQ(loadError(L[0].second), "loaded step 6");
  // A checkpoint in Root itself (files copied there) ranks by its step:
  // older than step-6 at step 5, newest at step 9.
  for (int64_t Step : {5, 9}) {
    std::string Flat = Root + "-flat";
    fs::remove_all(Flat);
    ASSERT_TRUE(saveCheckpoint(*E, Flat, Step).ok());
    for (const auto &F : fs::directory_iterator(Flat))
      fs::copy_file(F.path(), Root + "/" + F.path().filename().string(),
                    fs::copy_options::overwrite_existing);
    L = listCheckpoints(Root);
    ASSERT_EQ(L.size(), 3u);
    EXPECT_EQ(L[Step == 5 ? 1 : 0].first, Step);
    EXPECT_EQ(L[Step == 5 ? 1 : 0].second, Root);
  }
}

} // namespace

namespace {
// tinyProgram (f64) whose head gradient overflows to infinity on purpose:
// 1e300 squared, written over the gradient before the optimizer.
std::unique_ptr<Executor> overflowingExecutor() {
  ProgramBuilder PB("f64", 2, 4, 16);
  auto Wte = PB.param("wte.weight", {16, 8}, 0.5);
  auto W = PB.param("head.weight", {8, 16}, 0.5);
  int64_t X = PB.arena({2, 4, 8}), Logits = PB.arena({2, 4, 16}),
          Loss = PB.arena({});
  PB.op("embedding", {Wte.Value, PB.Tokens}, {X});
  PB.op("matmul", {X, W.Value}, {Logits});
  PB.op("cross_entropy", {Logits, PB.Targets}, {Loss});
  PB.markForwardEnd(Loss);
  int64_t DLoss = PB.arena({}), DLogits = PB.arena({2, 4, 16}),
          Dx = PB.arena({2, 4, 8}), Big = PB.arena({8, 16});
  PB.op("fill", {}, {DLoss}, {{"value", 1.0}});
  PB.op("cross_entropy_grad", {Logits, PB.Targets, DLoss}, {DLogits});
  PB.op("matmul", {X, DLogits}, {W.Grad}, {{"transpose_a", true}});
  PB.op("matmul", {DLogits, W.Value}, {Dx}, {{"transpose_b", true}});
  PB.op("embedding_grad", {Dx, PB.Tokens}, {Wte.Grad});
  PB.op("fill", {}, {Big}, {{"value", 1e300}});
  PB.op("mul", {Big, Big}, {W.Grad});
  PB.addOptimizer();
  PB.root()["arena_bytes"] = 1 << 16;
  Expected<Program> P = parseProgram(PB.file());
  EXPECT_TRUE(P.ok()) << P.message();
  Expected<std::unique_ptr<Executor>> E = Executor::create(P.take());
  EXPECT_TRUE(E.ok()) << E.message();
  EXPECT_TRUE((*E)->initParams(3).ok());
  return E.take();
}

TokenData someTokens() {
  std::vector<uint32_t> T(256);
  for (size_t I = 0; I < T.size(); ++I)
    T[I] = uint32_t(I * 7 % 16);
  return *TokenData::fromTokens(T, 16, 4);
}

TEST(TrainingChecks, ANonFiniteGradientStopsBeforeTheUpdate) {
  auto E = overflowingExecutor();
  double Before = E->paramElement(1, 0);
  TrainOptions O;
  O.Steps = 3;
  auto R = train(*E, someTokens(), O);
  ASSERT_FALSE(R.ok());
  EXPECT_EQ(R.message(),
            "step 1: the gradient of 'head.weight' is not finite (local "
            "element 0 is inf); stopping before the update (--on-nonfinite "
            "skip skips such steps)");
  EXPECT_EQ(E->paramElement(1, 0), Before); // not updated
}

TEST(TrainingChecks, SkipLeavesTheParametersAndGoesOn) {
  auto E = overflowingExecutor();
  double Before = E->paramElement(0, 0);
  TrainOptions O;
  O.Steps = 3;
  O.SkipNonFinite = true;
  std::ostringstream Metrics;
  O.Metrics = &Metrics;
  auto R = train(*E, someTokens(), O);
  ASSERT_TRUE(R.ok()) << R.message();
  ASSERT_EQ(R->size(), 3u);
  for (const StepRecord &S : *R)
    EXPECT_NE(S.Skipped.find("'head.weight' is not finite"), std::string::npos);
  EXPECT_EQ(E->paramElement(0, 0), Before);
  EXPECT_NE(Metrics.str().find("\"skipped\": true"), std::string::npos);
}

TEST(TrainingChecks, ANonFiniteLossIsNamed) {
  auto E = tinyExecutor();
  ASSERT_TRUE(E->setParamElement(0, 0, NAN).ok());
  TrainOptions O;
  O.Steps = 1;
  auto R = train(*E, someTokens(), O);
  ASSERT_FALSE(R.ok());
  EXPECT_EQ(R.message().substr(0, 31), "step 1: the loss is not finite ")
      << R.message();
}
} // namespace

namespace {
// Found by the checkpoint fuzz target: a non-string "format" threw
// nlohmann::type_error out of the loader (a crash).
TEST(CheckpointIntegrity, ManifestOfWrongTypesIsRefusedNotThrown) {
  for (const char *Text :
       {"{\"format\": 5}", "{\"format\": [1], \"version\": 1}",
        "{\"format\": \"weft-checkpoint\", \"version\": 1, "
        "\"step\": \"7\", \"world_size\": 1, \"files\": {}}"}) {
    Expected<Manifest> M = parseManifest(Text, "m.json");
    EXPECT_FALSE(M.ok()) << Text;
  }
}

// Layout integers are integers: nlohmann converted blocks of 1.5 to 1.
TEST(CheckpointIntegrity, LayoutRefusesNonIntegerSizes) {
  std::string Mesh = "{\"mesh\": {\"axes\": [\"dp\"], \"shape\": [2]}, ";
  Expected<CheckpointLayout> L = parseCheckpointLayout(
      Mesh + "\"tensors\": {\"w\": {\"global_shape\": [4], \"sharding\": "
             "[[\"dp\"]], \"blocks\": [1.5]}}}",
      "layout.json");
  ASSERT_FALSE(L.ok());
  EXPECT_TRUE(has(L.message(), "tensor 'w' needs global_shape and blocks "
                               "(integers)"))
      << L.message();
  L = parseCheckpointLayout(
      Mesh + "\"tensors\": {\"w\": {\"global_shape\": [4], \"sharding\": "
             "[[\"dp\"]], \"blocks\": [2]}}}",
      "layout.json");
  ASSERT_TRUE(L.ok()) << L.message();
  EXPECT_EQ(L->Tensors.at("w").Blocks, std::vector<int64_t>{2});
}
} // namespace
