//===- ProgramTest.cpp - Program container, JSON and validation -----------===//
#include "program/Program.h"
#include "TestPrograms.h"
#include "program/Base64.h"
#include "program/Hash.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace weft;
using namespace weft::test;

namespace {

std::string errorOf(const std::string &File) {
  Expected<Program> P = parseProgram(File);
  EXPECT_FALSE(P.ok()) << "program unexpectedly loaded";
  return P.ok() ? "" : P.message();
}

std::string errorOfJson(const nlohmann::json &J) {
  return errorOf(encodeProgramContainer(programJson(J)));
}

#define EXPECT_MSG(Msg, Needle)                                                \
  EXPECT_NE((Msg).find(Needle), std::string::npos) << "message: " << (Msg)

TEST(Hash, Fnv1aKnownValues) {
  EXPECT_EQ(fnv1a64("", 0), 0xcbf29ce484222325ULL);
  EXPECT_EQ(fnv1a64("a", 1), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(fnv1a64(std::string_view("foobar")), 0x85944171f73967e8ULL);
}

// RFC 4648's test vectors, both ways; every byte value round-trips; a
// text that is not canonical base64 is refused.
TEST(Base64, Rfc4648VectorsAndRefusals) {
  const std::pair<const char *, const char *> Vectors[] = {
      {"", ""},
      {"f", "Zg=="},
      {"fo", "Zm8="},
      {"foo", "Zm9v"},
      {"foob", "Zm9vYg=="},
      {"fooba", "Zm9vYmE="},
      {"foobar", "Zm9vYmFy"}};
  for (auto [Plain, Coded] : Vectors) {
    EXPECT_EQ(base64Encode(Plain, std::strlen(Plain)), Coded);
    std::optional<std::vector<char>> Back = base64Decode(Coded);
    ASSERT_TRUE(Back) << Coded;
    EXPECT_EQ(std::string(Back->begin(), Back->end()), Plain);
  }
  std::string All;
  for (int C = 0; C < 256; ++C)
    All.push_back(char(C));
  std::optional<std::vector<char>> Back =
      base64Decode(base64Encode(All.data(), All.size()));
  ASSERT_TRUE(Back);
  EXPECT_EQ(std::string(Back->begin(), Back->end()), All);
  for (const char *Bad : {"Zg=", "Zg", "Z===", "Zh==", "Zm9=", "Zm=v",
                          "Zg==Zg==", "Zm9v!A==", "Zm 9"})
    EXPECT_FALSE(base64Decode(Bad)) << Bad;
}

TEST(ProgramLoader, ValidTinyProgramLoads) {
  ProgramBuilder PB = tinyProgram();
  Expected<Program> P = parseProgram(PB.file());
  ASSERT_TRUE(P.ok()) << P.message();
  EXPECT_EQ(P->Batch, 2);
  EXPECT_EQ(P->Params.size(), 2u);
  EXPECT_EQ(P->Instructions[1].Op, OpKind::Matmul);
  EXPECT_EQ(P->ForwardEnd, 3);
  EXPECT_EQ(P->OptimizerBegin, 8);
  EXPECT_NE(
      dumpProgram(*P).find("   6  matmul  in=[14,6] out=[15]  transpose_b=true "
                           " : [2,4,16] x [8,16] -> [2,4,8]"),
      std::string::npos)
      << dumpProgram(*P);
}

TEST(ProgramLoader, GptProgramsLoad) {
  for (bool Llama : {false, true}) {
    GptConfig C;
    C.Llama = Llama;
    C.KvHeads = Llama ? 1 : 0;
    Expected<Program> P = parseProgram(gptProgram(C).file());
    EXPECT_TRUE(P.ok()) << P.message();
  }
}

TEST(ProgramLoader, RefusesTruncatedHeader) {
  EXPECT_MSG(errorOf("WEFTPRO"), "truncated");
}

TEST(ProgramLoader, RefusesTruncatedPayload) {
  std::string F = tinyProgram().file();
  std::string Msg = errorOf(F.substr(0, F.size() - 10));
  EXPECT_MSG(Msg, "truncated: expected " + std::to_string(F.size() - 28) +
                      " payload bytes, found " + std::to_string(F.size() - 38));
}

TEST(ProgramLoader, RefusesBadMagic) {
  std::string F = tinyProgram().file();
  F[0] = 'X';
  EXPECT_MSG(errorOf(F), "not a weft program");
}

TEST(ProgramLoader, RefusesOtherVersion) {
  std::string F = encodeProgramContainer(tinyProgram().payload(), 18);
  EXPECT_MSG(errorOf(F), "format version 18, this runtime reads version 17");
  // An older file (the flat format of versions 1 and 2; version 3, without
  // mesh.groups and per-buffer bf16; version 4, of one stage) asks to be
  // recompiled.
  for (uint32_t Old : {1u, 2u, 3u, 4u})
    EXPECT_MSG(errorOf(encodeProgramContainer(tinyProgram().payload(), Old)),
               "recompile the model with this release's weft-compile");
  // Version 5 differs only by lacking pack's and unpack's blocks: it loads.
  Expected<Program> V5 =
      parseProgram(encodeProgramContainer(tinyProgram().payload(), 5));
  EXPECT_TRUE(V5.ok()) << V5.message();
}

TEST(ProgramLoader, RefusesBadHash) {
  std::string F = tinyProgram().file();
  F[20] ^= 1;
  EXPECT_MSG(errorOf(F), "hash mismatch");
}

TEST(ProgramLoader, RefusesMalformedJson) {
  EXPECT_MSG(errorOf(encodeProgramContainer("{\"model\": ")), "malformed JSON");
}

TEST(ProgramLoader, RefusesMissingField) {
  nlohmann::json J = tinyProgram().root();
  J.erase("arena_bytes");
  EXPECT_MSG(errorOfJson(J), "missing field 'arena_bytes'");
  J = tinyProgram().root();
  J["params"][0]["init"].erase("std");
  EXPECT_MSG(errorOfJson(J), "missing field 'std' in params[0].init");
}

TEST(ProgramLoader, RefusesWrongFieldType) {
  nlohmann::json J = tinyProgram().root();
  J["batch"] = "two";
  EXPECT_MSG(errorOfJson(J), "field 'batch' in program must be an integer");
}

// A padded vocabulary (version 15) is one: its parameters' model rows are
// the token ids' bound and every cross-entropy's classes; classes with no
// padded parameter would drop real columns from the softmax.
TEST(ProgramLoader, RefusesAnInconsistentPaddedVocabulary) {
  nlohmann::json J = tinyProgram().root();
  J["params"][0]["logical_rows"] = 15;
  EXPECT_MSG(errorOfJson(J),
             "vocab=16, but the padded parameters have logical_rows=15");
  J["vocab"] = 15;
  EXPECT_MSG(errorOfJson(J), "instructions[2] (cross_entropy) has classes=0, "
                             "expected 15 (the padded vocabulary's "
                             "logical_rows)");
  J = tinyProgram().root();
  J["instructions"][2]["attrs"]["classes"] = 15;
  EXPECT_MSG(errorOfJson(J), "instructions[2] (cross_entropy) has classes=15, "
                             "expected 0 (none: no parameter is padded)");
  J = tinyProgram().root();
  J["params"][0]["logical_rows"] = 17;
  EXPECT_MSG(errorOfJson(J), "params[0].logical_rows=17 is not in [1, 16]");
}

TEST(ProgramLoader, RefusesBufferIdOutOfRange) {
  nlohmann::json J = tinyProgram().root();
  J["instructions"][1]["in"][1] = 999;
  std::string Msg = errorOfJson(J);
  EXPECT_MSG(Msg, "instructions[1] (matmul)");
  EXPECT_MSG(Msg, "buffer id 999 out of range");
}

TEST(ProgramLoader, RefusesArenaOverflow) {
  nlohmann::json J = tinyProgram().root();
  J["arena_bytes"] = 64;
  std::string Msg = errorOfJson(J);
  EXPECT_MSG(Msg, "past arena_bytes=64");
}

TEST(ProgramLoader, RefusesUnalignedArenaOffset) {
  nlohmann::json J = tinyProgram().root();
  J["buffers"][10]["offset"] = 4;
  EXPECT_MSG(errorOfJson(J), "offset 4 is not a non-negative multiple of 64");
}

TEST(ProgramLoader, RefusesMatmulShapeMismatch) {
  nlohmann::json J = tinyProgram().root();
  J["instructions"][1]["attrs"]["transpose_b"] = true; // [.,8] x [8,16]^T
  std::string Msg = errorOfJson(J);
  EXPECT_MSG(Msg, "instructions[1] (matmul)");
  EXPECT_MSG(Msg, "inner dimensions differ");
  EXPECT_MSG(Msg, "K=8");
  EXPECT_MSG(Msg, "K=16");
}

TEST(ProgramLoader, RefusesMatmulOutputShape) {
  ProgramBuilder PB = tinyProgram();
  nlohmann::json J = PB.root();
  J["buffers"][11]["shape"] = {2, 4, 15}; // logits should be [2,4,16]
  std::string Msg = errorOfJson(J);
  EXPECT_MSG(Msg, "expected a 2-D view [8,16]");
}

TEST(ProgramLoader, RefusesUnknownOp) {
  nlohmann::json J = tinyProgram().root();
  J["instructions"][0]["op"] = "conv2d";
  EXPECT_MSG(errorOfJson(J), "unknown op 'conv2d' in instructions[0]");
}

TEST(ProgramLoader, RefusesWrongOperandCount) {
  nlohmann::json J = tinyProgram().root();
  J["instructions"][2]["in"] = {11};
  EXPECT_MSG(errorOfJson(J), "expected 2 inputs, got 1");
}

TEST(ProgramLoader, RefusesParamShapeMismatch) {
  nlohmann::json J = tinyProgram().root();
  J["buffers"][3]["shape"] = {16, 9};
  EXPECT_MSG(errorOfJson(J),
             "of param 'wte.weight' is f32 [16,9], expected f32 [16,8]");
}

TEST(ProgramLoader, RefusesAttentionHeadMismatch) {
  GptConfig C;
  nlohmann::json J = gptProgram(C).root();
  for (auto &I : J["instructions"])
    if (I["op"] == "attention")
      I["attrs"]["num_kv_heads"] = 3;
  EXPECT_MSG(errorOfJson(J), "num_kv_heads=3 must be positive and divide "
                             "num_heads=2");
}

TEST(ProgramLoader, RefusesABadLossBuffer) {
  nlohmann::json J = tinyProgram().root();
  J["loss"] = 3;
  EXPECT_MSG(errorOfJson(J), "expected a f32 scalar []");
}

// The tiny program in format version 4, to break its stage.
nlohmann::json tinyStages() {
  return nlohmann::json::parse(tinyProgram().payload());
}

TEST(ProgramSchedule, LoadsTheOneStageSchedule) {
  Expected<Program> P = parseProgramJson(tinyProgram().payload());
  ASSERT_TRUE(P.ok()) << P.status().message();
  ASSERT_EQ(P->Stages.size(), 1u);
  EXPECT_EQ(P->Stages[0].Fragments.size(), 3u);
  EXPECT_EQ(P->ForwardEnd, 3);
  EXPECT_EQ(P->Microbatches, 1);
}

TEST(ProgramSchedule, RefusesFragmentsOutOfOrder) {
  nlohmann::json J = tinyStages();
  std::swap(J["stages"][0]["fragments"][0], J["stages"][0]["fragments"][1]);
  EXPECT_MSG(errorOfJson(J), "stages[0].fragments[0] ('backward') is not "
                             "expected here");
  J = tinyStages();
  J["stages"][0]["fragments"][2]["name"] = "backward";
  EXPECT_MSG(errorOfJson(J), "repeats the name 'backward'");
  J = tinyStages();
  J["stages"][0]["fragments"].erase(2);
  J["stages"][0]["schedule"].erase(2);
  EXPECT_MSG(errorOfJson(J), "stages[0] has no 'optimizer' fragment");
}

TEST(ProgramSchedule, RefusesAScheduleThatIsNotOneStep) {
  nlohmann::json J = tinyStages();
  nlohmann::json &S = J["stages"][0]["schedule"];
  S.erase(1); // no backward
  EXPECT_MSG(errorOfJson(J), "schedule[1] (optimizer) runs before every "
                             "micro-batch's backward has");
  J = tinyStages();
  J["stages"][0]["schedule"][0]["microbatch"] = 1;
  EXPECT_MSG(errorOfJson(J), "micro-batch out of range [0, 1)");
  J = tinyStages();
  J["stages"][0]["schedule"][2]["microbatch"] = 0;
  EXPECT_MSG(errorOfJson(J), "runs once per step: no micro-batch");
  J = tinyStages();
  J["stages"][0]["schedule"][0]["run"] = "fwd";
  EXPECT_MSG(errorOfJson(J), "runs 'fwd', which is no fragment of stages[0]");
  J = tinyStages();
  J["stages"].push_back(J["stages"][0]);
  EXPECT_MSG(errorOfJson(J), "the program has 2 stages");
}

TEST(ProgramSchedule, RefusesTwoMicrobatchesInFlight) {
  // Two micro-batches of one row each; forward 1 before backward 0 would
  // overwrite micro-batch 0's activations.
  nlohmann::json J = nlohmann::json::parse(tinyProgram("f32", 1).payload());
  J["batch"] = 2;
  J["microbatches"] = 2;
  nlohmann::json &Fr = J["stages"][0]["fragments"];
  Fr.insert(Fr.begin(), nlohmann::json::object(
                            {{"name", "prologue"},
                             {"instructions", nlohmann::json::array()}}));
  auto Run = [](const char *F, int K) {
    return nlohmann::json{{"run", F}, {"microbatch", K}};
  };
  J["stages"][0]["schedule"] = {{{"run", "prologue"}}, Run("forward", 0),
                                Run("forward", 1),     Run("backward", 0),
                                Run("backward", 1),    {{"run", "optimizer"}}};
  EXPECT_MSG(errorOfJson(J),
             "stages[0].schedule[2] (forward on micro-batch 1) needs arena "
             "slot 0, which micro-batch 0 still holds (slots=1");
  // With two slots the arena holds both micro-batches' activations (and
  // the cross-entropy means over the step's rows).
  nlohmann::json Two = J;
  Two["stages"][0]["slots"] = 2;
  for (auto &F : Two["stages"][0]["fragments"])
    for (auto &I : F["instructions"])
      if (I["op"].get<std::string>().rfind("cross_entropy", 0) == 0)
        I["attrs"]["denominator"] = 8;
  EXPECT_TRUE(parseProgramJson(Two.dump()).ok())
      << parseProgramJson(Two.dump()).status().message();
  J["stages"][0]["schedule"] = {{{"run", "prologue"}},
                                Run("forward", 0),
                                Run("backward", 0),
                                {{"run", "optimizer"}}};
  EXPECT_MSG(errorOfJson(J), "schedule[3] (optimizer) runs before every "
                             "micro-batch's backward has");
  J["stages"][0]["schedule"].erase(3);
  EXPECT_MSG(errorOfJson(J), "the schedule never runs forward on "
                             "micro-batch 1");
  Fr.erase(0);
  J["stages"][0]["schedule"].erase(0);
  EXPECT_MSG(errorOfJson(J), "no prologue fragment");
}

} // namespace

namespace {
TEST(OpTable, EveryOpNameRoundTrips) {
  for (int I = 0; I < NumOpKinds; ++I) {
    OpKind K = OpKind::Fill;
    ASSERT_TRUE(parseOpName(opName(OpKind(I)), K)) << opName(OpKind(I));
    EXPECT_EQ(int(K), I) << opName(OpKind(I));
  }
  OpKind K;
  EXPECT_FALSE(parseOpName("hardmax", K));
}
} // namespace

namespace {
// The tiny program's JSON payload, to be broken one way at a time.
nlohmann::json tinyJson() { return tinyProgram().root(); }

int64_t instWithOp(const nlohmann::json &J, const std::string &Op) {
  for (size_t I = 0; I < J["instructions"].size(); ++I)
    if (J["instructions"][I]["op"] == Op)
      return int64_t(I);
  return -1;
}

TEST(ProgramDataflow, RefusesAnEmptyProgram) {
  nlohmann::json J = tinyJson();
  J["instructions"] = nlohmann::json::array();
  J["forward_end"] = 0;
  J["optimizer_begin"] = 0;
  EXPECT_MSG(errorOfJson(J), "the program has no instructions");
}

TEST(ProgramDataflow, RefusesALossNothingWrites) {
  nlohmann::json J = tinyJson();
  // The loss now names a fresh scalar no instruction writes.
  nlohmann::json Fresh = J["buffers"][size_t(J["loss"].get<int64_t>())];
  Fresh["offset"] = J["arena_bytes"];
  J["arena_bytes"] = J["arena_bytes"].get<int64_t>() + 64;
  J["buffers"].push_back(Fresh);
  J["loss"] = J["buffers"].size() - 1;
  EXPECT_MSG(errorOfJson(J),
             "no instruction before forward_end=3 writes the loss");
}

TEST(ProgramDataflow, RefusesSwappedTokensAndTargets) {
  nlohmann::json J = tinyJson();
  for (auto &B : J["buffers"])
    if (B["kind"] == "input")
      B["name"] = B["name"] == "tokens" ? "targets" : "tokens";
  EXPECT_MSG(errorOfJson(J),
             "instructions[0] (embedding) reads the 'targets' input where it "
             "needs 'tokens'");
}

TEST(ProgramDataflow, RefusesOverlappingLiveArenaBuffers) {
  nlohmann::json J = tinyJson();
  // The logits move onto the embedding output's bytes, both live at once.
  int64_t Matmul = instWithOp(J, "matmul");
  int64_t X = J["instructions"][size_t(Matmul)]["in"][0];
  int64_t Logits = J["instructions"][size_t(Matmul)]["out"][0];
  J["buffers"][size_t(Logits)]["offset"] = J["buffers"][size_t(X)]["offset"];
  EXPECT_MSG(errorOfJson(J), "share bytes while both are live");
}

TEST(ProgramDataflow, RefusesAnOutputThatIsAnInput) {
  nlohmann::json J = tinyJson();
  int64_t Grad = instWithOp(J, "cross_entropy_grad");
  J["instructions"][size_t(Grad)]["out"][0] =
      J["instructions"][size_t(Grad)]["in"][0];
  EXPECT_MSG(errorOfJson(J), "which it also reads: cross_entropy_grad does "
                             "not work in place");
}

TEST(ProgramDataflow, RefusesAReadBeforeAnyWrite) {
  nlohmann::json J = tinyJson();
  // Drop the fill: cross_entropy_grad reads dloss that nothing wrote.
  int64_t Fill = instWithOp(J, "fill");
  J["instructions"].erase(size_t(Fill));
  J["optimizer_begin"] = J["optimizer_begin"].get<int64_t>() - 1;
  EXPECT_MSG(errorOfJson(J), "before any instruction writes it");
}

TEST(ProgramDataflow, RefusesAWrongCrossEntropyDenominator) {
  nlohmann::json J = tinyJson();
  int64_t Ce = instWithOp(J, "cross_entropy");
  J["instructions"][size_t(Ce)]["attrs"]["denominator"] = 4;
  EXPECT_MSG(errorOfJson(J), "instructions[2] (cross_entropy) has denominator "
                             "4, expected 8 (batch 2 x seq 4 rows)");
}

TEST(ProgramDataflow, RefusesOptimizerValuesOutsideTheirDomain) {
  nlohmann::json J = tinyJson();
  J["optimizer"]["eps"] = 0.0;
  EXPECT_MSG(errorOfJson(J), "optimizer: eps=0 is out of range");
  J = tinyJson();
  J["optimizer"]["beta2"] = 1.0;
  EXPECT_MSG(errorOfJson(J), "optimizer: beta2=1 is out of range");
}
} // namespace
