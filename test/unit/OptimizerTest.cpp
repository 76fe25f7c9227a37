//===- OptimizerTest.cpp - AdamW step and learning-rate schedule ----------===//
#include "runtime/Trainer.h"
#include "runtime/cpu/kernels/Kernels.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace weft;

namespace {

TEST(AdamW, MatchesTorchFormulaOverTwoSteps) {
  // Hand-computed torch.optim.AdamW(lr=0.1, betas=(0.9,0.999), eps=1e-8,
  // weight_decay=0.01): p -= lr*wd*p; m,v updates; bias-corrected step.
  double P[2] = {1.0, -2.0}, M[2] = {0, 0}, V[2] = {0, 0};
  const double G1[2] = {0.5, -0.25}, G2[2] = {-0.1, 0.3};
  AdamWParams Hp{0.1, 0.9, 0.999, 1e-8, 0.01, 1, true};
  cpu::adamw(P, G1, M, V, 2, Hp);
  // Step 1: m = 0.1 g, v = 0.001 g^2, mhat = g, vhat = g^2, update = sign(g).
  EXPECT_NEAR(P[0], 1.0 * (1 - 0.001) - 0.1 * 0.5 / (0.5 + 1e-8), 1e-12);
  EXPECT_NEAR(P[1], -2.0 * (1 - 0.001) + 0.1 * 0.25 / (0.25 + 1e-8), 1e-12);
  double P0 = P[0];
  Hp.Step = 2;
  cpu::adamw(P, G2, M, V, 2, Hp);
  double Mv = 0.9 * 0.05 + 0.1 * -0.1;             // -0.035... = 0.035
  double Vv = 0.999 * 0.001 * 0.25 + 0.001 * 0.01; // 0.00025975
  double Mhat = Mv / (1 - 0.81), Vhat = Vv / (1 - 0.999 * 0.999);
  EXPECT_NEAR(M[0], Mv, 1e-15);
  EXPECT_NEAR(V[0], Vv, 1e-15);
  EXPECT_NEAR(P[0], P0 * (1 - 0.001) - 0.1 * Mhat / (std::sqrt(Vhat) + 1e-8),
              1e-12);
  // Without decay the parameter is not shrunk.
  float Pf = 1.0f, Gf = 0.0f, Mf = 0.0f, Vf = 0.0f;
  AdamWParams NoDecay{0.1, 0.9, 0.999, 1e-8, 0.5, 1, false};
  cpu::adamw(&Pf, &Gf, &Mf, &Vf, 1, NoDecay);
  EXPECT_EQ(Pf, 1.0f);
}

// transformers' convention: step t uses the schedule's factor at t - 1
// (program/Hyperparams.h); test/reference/hf_reference.py compares with
// transformers' own schedulers.
TEST(LrSchedule, ConstantAndCosine) {
  OptimizerSpec O;
  O.Lr = 1e-3;
  EXPECT_EQ(learningRate(O, 1), 1e-3);
  EXPECT_EQ(learningRate(O, 1000), 1e-3);
  O.WarmupSteps = 4; // constant with warmup
  EXPECT_EQ(learningRate(O, 1), 0.0);
  EXPECT_NEAR(learningRate(O, 3), 5e-4, 1e-15);
  EXPECT_EQ(learningRate(O, 5), 1e-3);
  O.Schedule = "cosine";
  O.WarmupSteps = 10;
  O.TotalSteps = 110;
  O.MinLr = 1e-4;
  EXPECT_EQ(learningRate(O, 1), 0.0);
  EXPECT_NEAR(learningRate(O, 6), 5e-4, 1e-15);
  EXPECT_NEAR(learningRate(O, 11), 1e-3, 1e-15);
  EXPECT_NEAR(learningRate(O, 61), 1e-4 + 0.5 * 9e-4, 1e-15); // halfway
  EXPECT_NEAR(learningRate(O, 111), 1e-4, 1e-15);
  EXPECT_NEAR(learningRate(O, 500), 1e-4, 1e-15); // held at min_lr
  O.WarmupSteps = 0;
  O.TotalSteps = 1; // max(1, total - warmup) = 1
  EXPECT_NEAR(learningRate(O, 1), 1e-3, 1e-15);
  EXPECT_NEAR(learningRate(O, 2), 1e-4, 1e-15);
}

TEST(LrSchedule, RefusesValuesOutsideTheirDomain) {
  auto refused = [](auto Edit) {
    Hyperparams H;
    Edit(H);
    return checkHyperparams(H);
  };
  EXPECT_EQ(refused([](Hyperparams &) {}), "");
  EXPECT_NE(refused([](Hyperparams &H) { H.Lr = NAN; }).find("lr=nan"),
            std::string::npos);
  EXPECT_NE(refused([](Hyperparams &H) { H.Eps = 0; }).find("eps=0"),
            std::string::npos);
  EXPECT_NE(refused([](Hyperparams &H) { H.Beta2 = 1; }).find("beta2=1"),
            std::string::npos);
  EXPECT_NE(refused([](Hyperparams &H) {
              H.WeightDecay = -1;
            }).find("weight_decay=-1"),
            std::string::npos);
  EXPECT_NE(refused([](Hyperparams &H) {
              H.WarmupSteps = -1;
            }).find("warmup_steps=-1"),
            std::string::npos);
  EXPECT_NE(refused([](Hyperparams &H) {
              H.Schedule = "cosine";
              H.TotalSteps = 10;
              H.MinLr = -1;
            }).find("min_lr=-1"),
            std::string::npos);
  EXPECT_NE(refused([](Hyperparams &H) {
              H.Schedule = "cosine";
              H.WarmupSteps = 5;
              H.TotalSteps = 4;
            }).find("total_steps=4"),
            std::string::npos);
}

} // namespace
