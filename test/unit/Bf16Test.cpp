//===- Bf16Test.cpp - bfloat16 rounding and the kernels' bf16 forms -------===//
//
// bf16 is storage: every kernel computes in f32 on widened operands and
// rounds its bf16 outputs (docs/design.md decision 15). The conversions are
// checked bit for bit; the kernels' bf16 forms against their f32 forms on
// whole GPT-2- and Llama-shaped programs whose activations are bf16, with
// tolerances that bf16's 8-bit significand allows.
//
//===----------------------------------------------------------------------===//
#include "program/Bf16.h"
#include "HostState.h"
#include "TestPrograms.h"
#include "runtime/Trainer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace weft;
using namespace weft::test;

namespace {

float fromBits(uint32_t B) {
  float F;
  std::memcpy(&F, &B, 4);
  return F;
}

TEST(Bf16, RoundsToNearestEvenAndKeepsSpecials) {
  EXPECT_EQ(floatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(floatToBf16(-2.0f), 0xc000);
  // Ties go to the even neighbour: 1 + 2^-8 down to 1, 1 + 3*2^-8 up.
  EXPECT_EQ(floatToBf16(fromBits(0x3f808000)), 0x3f80);
  EXPECT_EQ(floatToBf16(fromBits(0x3f818000)), 0x3f82);
  // Above a tie rounds up, below rounds down.
  EXPECT_EQ(floatToBf16(fromBits(0x3f808001)), 0x3f81);
  EXPECT_EQ(floatToBf16(fromBits(0x3f807fff)), 0x3f80);
  // Past the largest bf16: infinity; infinities and NaN stay what they are.
  EXPECT_EQ(floatToBf16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(floatToBf16(INFINITY), 0x7f80);
  EXPECT_EQ(floatToBf16(-INFINITY), 0xff80);
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBf16(NAN))));
  // A NaN whose payload sits in the low half stays a NaN.
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBf16(fromBits(0x7f800001)))));
  // Widening is exact: every bf16 survives the round trip.
  for (uint32_t H = 0; H < 0x10000; ++H)
    if (!std::isnan(bf16ToFloat(uint16_t(H))))
      ASSERT_EQ(floatToBf16(bf16ToFloat(uint16_t(H))), H) << H;
}

/// P's program with every arena buffer but the loss stored as bf16.
std::string withBf16Activations(ProgramBuilder P) {
  nlohmann::json &Root = P.root();
  const int64_t Loss = Root["loss"].get<int64_t>();
  for (size_t I = 0; I < Root["buffers"].size(); ++I)
    if (Root["buffers"][I]["kind"] == "arena" && int64_t(I) != Loss)
      Root["buffers"][I]["dtype"] = "bf16";
  return P.file();
}

std::unique_ptr<Executor> load(const std::string &File) {
  Expected<Program> P = parseProgram(File);
  EXPECT_TRUE(P.ok()) << P.message();
  if (!P.ok())
    return nullptr;
  Expected<std::unique_ptr<Executor>> E = Executor::create(P.take());
  EXPECT_TRUE(E.ok()) << E.message();
  return E.ok() ? E.take() : nullptr;
}

double relativeError(const std::vector<float> &Got,
                     const std::vector<float> &Want) {
  double Num = 0, Den = 0;
  for (size_t I = 0; I < Want.size(); ++I) {
    Num += (double(Got[I]) - Want[I]) * (double(Got[I]) - Want[I]);
    Den += double(Want[I]) * Want[I];
  }
  return std::sqrt(Num / std::max(Den, 1e-30));
}

class Bf16Kernels : public ::testing::TestWithParam<bool> {};

// Every kernel of the model runs in its bf16 form; the loss and every
// gradient (f32: the weight gradients' GEMMs read bf16 operands and write
// f32) stay within bf16's rounding of the f32 program's, and a few steps of
// training track it.
TEST_P(Bf16Kernels, TrackTheF32Kernels) {
  GptConfig C;
  C.Llama = GetParam();
  C.Std = 0.2; // activations well away from zero: rounding, not underflow
  auto F32 = load(gptProgram(C).file());
  auto Bf16 = load(withBf16Activations(gptProgram(C)));
  ASSERT_TRUE(F32 && Bf16);
  size_t NumBf16 = 0;
  for (const BufferSpec &B : Bf16->program().Buffers)
    NumBf16 += B.Type == DType::BF16;
  EXPECT_GT(NumBf16, 20u);
  ASSERT_TRUE(F32->initParams(5).ok());
  ASSERT_TRUE(Bf16->initParams(5).ok());
  TokenData D = gptTokens(C);
  StepContext Ctx;
  Ctx.Optimizer = &F32->program().Optimizer;
  ASSERT_TRUE(F32->loadBatch(D, 0).ok());
  ASSERT_TRUE(Bf16->loadBatch(D, 0).ok());
  ASSERT_TRUE(F32->runGradients(Ctx).ok());
  Status S = Bf16->runGradients(Ctx);
  ASSERT_TRUE(S.ok()) << S.message();
  EXPECT_NEAR(Bf16->loss(), F32->loss(), 1e-2 * F32->loss());
  for (size_t P = 0; P < F32->program().Params.size(); ++P) {
    double Err = relativeError(hostState(*Bf16, P, BufferKind::Grad),
                               hostState(*F32, P, BufferKind::Grad));
    EXPECT_LT(Err, 5e-2) << F32->program().Params[P].Name;
  }
  TrainOptions O;
  O.Steps = 5;
  O.StartStep = 1;
  auto A = train(*F32, D, O), B = train(*Bf16, D, O);
  ASSERT_TRUE(A.ok() && B.ok());
  for (size_t K = 0; K < 5; ++K)
    EXPECT_NEAR((*B)[K].Loss, (*A)[K].Loss, 2e-2 * (*A)[K].Loss) << K;
}
INSTANTIATE_TEST_SUITE_P(Models, Bf16Kernels, ::testing::Bool(),
                         [](const auto &I) {
                           return I.param ? "Llama" : "Gpt2";
                         });

TEST(Bf16, RefusedWhereItIsNotStorage) {
  // A bf16 parameter: master weights are f32.
  ProgramBuilder P = tinyProgram();
  P.root()["buffers"][2]["dtype"] = "bf16";
  ASSERT_EQ(P.root()["buffers"][2]["kind"], "param");
  Expected<Program> Bad = parseProgram(P.file());
  ASSERT_FALSE(Bad.ok());
  EXPECT_NE(Bad.message().find("bf16 is for arena buffers of an f32 program"),
            std::string::npos)
      << Bad.message();
  // bf16 activations in an f64 program.
  Expected<Program> F64 = parseProgram(withBf16Activations(tinyProgram("f64")));
  ASSERT_FALSE(F64.ok());
  EXPECT_NE(F64.message().find("the program's float dtype is f64"),
            std::string::npos)
      << F64.message();
  // A bf16 program: its parameters would have nowhere f32 to live.
  ProgramBuilder Whole = tinyProgram();
  Whole.root()["dtype"] = "bf16";
  Expected<Program> W = parseProgram(Whole.file());
  ASSERT_FALSE(W.ok());
  EXPECT_NE(W.message().find("program dtype must be f32 or f64"),
            std::string::npos)
      << W.message();
}

} // namespace
