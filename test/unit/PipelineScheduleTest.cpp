//===- PipelineScheduleTest.cpp - Pipeline orders as data -----------------===//
#include "program/PipelineSchedule.h"

#include <gtest/gtest.h>

using namespace weft;

namespace {

std::string orders(const std::string &Spec, int64_t N, int64_t M) {
  PipelineSchedule S;
  EXPECT_TRUE(parsePipelineSchedule(Spec, S).ok()) << Spec;
  PipelineSchedule Written;
  Written.Kind = PipelineScheduleKind::Custom;
  for (int64_t St = 0; St < N; ++St)
    Written.Orders.push_back(pipelineOrder(S, St, N, M));
  return pipelineOrdersText(Written);
}

std::vector<int64_t> slots(const std::string &Spec, int64_t N, int64_t M) {
  PipelineSchedule S;
  EXPECT_TRUE(parsePipelineSchedule(Spec, S).ok()) << Spec;
  std::vector<int64_t> R;
  for (int64_t St = 0; St < N; ++St)
    R.push_back(pipelineSlots(S, St, N, M));
  return R;
}

TEST(PipelineSchedule, GPipeAndOneFOneB) {
  EXPECT_EQ(orders("gpipe", 2, 3), "F0 F1 F2 B0 B1 B2|F0 F1 F2 B0 B1 B2");
  EXPECT_EQ(orders("1f1b", 3, 4), "F0 F1 F2 B0 F3 B1 B2 B3|"
                                  "F0 F1 B0 F2 B1 F3 B2 B3|"
                                  "F0 B0 F1 B1 F2 B2 F3 B3");
  EXPECT_EQ(slots("gpipe", 2, 4), (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(slots("1f1b", 3, 4), (std::vector<int64_t>{3, 2, 1}));
}

// Megatron-LM's interleaved order (schedules.py,
// forward_backward_pipelining_with_interleaving): rounds of N micro-batches
// per chunk, rank r warming up with (N-1-r)*2 + (V-1)*N forwards.
TEST(PipelineSchedule, Interleaved) {
  EXPECT_EQ(orders("interleaved:2", 2, 4),
            "F0 F1 F0.1 F1.1 F2 B0.1 F3 B1.1 F2.1 B0 F3.1 B1 B2.1 B3.1 B2 B3|"
            "F0 F1 F0.1 B0.1 F1.1 B1.1 F2 B0 F3 B1 F2.1 B2.1 F3.1 B3.1 B2 "
            "B3");
  // M = N: every forward, then every backward.
  EXPECT_EQ(orders("interleaved:2", 2, 2),
            "F0 F1 F0.1 F1.1 B0.1 B1.1 B0 B1|F0 F1 F0.1 F1.1 B0.1 B1.1 B0 B1");
  EXPECT_EQ(slots("interleaved:2", 2, 4), (std::vector<int64_t>{4, 3}));
  // The bubble shrinks V-fold: (N-1)/(V M + N-1).
  EXPECT_DOUBLE_EQ(pipelineBubble(4, 8), 3.0 / 11.0);
  EXPECT_DOUBLE_EQ(pipelineBubble(4, 8, 2), 3.0 / 19.0);
}

// ZB-H1: 1F1B's F and B, stage s running W of micro-batch k after B of k+s.
TEST(PipelineSchedule, ZeroBubbleH1) {
  EXPECT_EQ(orders("zb-h1", 3, 4), "F0 F1 F2 B0 W0 F3 B1 W1 B2 W2 B3 W3|"
                                   "F0 F1 B0 F2 B1 W0 F3 B2 W1 B3 W2 W3|"
                                   "F0 B0 F1 B1 F2 B2 W0 F3 B3 W1 W2 W3");
  // Stage s holds micro-batches until their W, s later: 3 each, as 1F1B's
  // first stage; after the first, the receive for the next forward goes
  // before the W before it (transfers rendezvous: the sender must not wait
  // for this stage's weight gradients), which takes one more slot.
  EXPECT_EQ(slots("zb-h1", 3, 4), (std::vector<int64_t>{3, 4, 4}));
  EXPECT_DOUBLE_EQ(zeroBubbleH1Bubble(3, 4), 2.0 / 14.0);
  PipelineSchedule S;
  ASSERT_TRUE(parsePipelineSchedule("zb-h1", S).ok());
  EXPECT_TRUE(S.SplitBackward);
  EXPECT_EQ(pipelineScheduleSpec(S), "zb-h1");
}

TEST(PipelineSchedule, SpecsRoundTrip) {
  for (const char *Spec : {"gpipe", "1f1b", "interleaved:3",
                           "custom:F0 F0.1 B0.1 B0|F0 F0.1 B0.1 B0"}) {
    PipelineSchedule S;
    ASSERT_TRUE(parsePipelineSchedule(Spec, S).ok()) << Spec;
    EXPECT_EQ(pipelineScheduleSpec(S), Spec);
  }
  PipelineSchedule S;
  ASSERT_TRUE(parsePipelineSchedule("custom:F0 F0.1 B0.1 B0", S).ok());
  EXPECT_EQ(S.VirtualStages, 2);
  for (const char *Bad : {"interleaved", "interleaved:1", "interleaved:x", "zb",
                          "custom:F0 X1", "custom:F0.", "custom:F.1"})
    EXPECT_FALSE(parsePipelineSchedule(Bad, S).ok()) << Bad;
}

TEST(PipelineSchedule, HandWrittenOrdersAreChecked) {
  PipelineSchedule S;
  EXPECT_TRUE(parsePipelineScheduleJson(
                  R"({"stages": [["F0", "F0.1", "B0.1", "B0"],
                                 ["F0", "F0.1", "B0.1", "B0"]]})",
                  2, 1, 2, S)
                  .ok());
  EXPECT_EQ(S.VirtualStages, 2);
  auto refused = [&](const std::string &Json, int64_t V) {
    Status R = parsePipelineScheduleJson(Json, 2, 1, V, S);
    EXPECT_FALSE(R.ok()) << Json;
    return R.message();
  };
  EXPECT_EQ(refused(R"({"stages": [["F0", "B0"], ["B0", "F0"]]})", 1),
            "stages[1][0] runs B0 before F0 (a micro-batch runs its forwards "
            "in chunk order, then its backwards in reverse)");
  EXPECT_EQ(refused(R"({"stages": [["F0", "F0.1", "B0", "B0.1"],
                                   ["F0", "F0.1", "B0.1", "B0"]]})",
                    2),
            "stages[0][2] runs B0 before B0.1 (a micro-batch runs its "
            "forwards in chunk order, then its backwards in reverse)");
  EXPECT_EQ(refused(R"({"stages": [["F0", "F0.1", "B0.1"],
                                   ["F0", "F0.1", "B0.1", "B0"]]})",
                    2),
            "stages[0] never runs B0");
  // W runs split every micro-batch's backward, after its B.
  EXPECT_TRUE(
      parsePipelineScheduleJson(
          R"({"stages": [["F0", "B0", "W0"], ["F0", "B0", "W0"]]})", 2, 1, 1, S)
          .ok());
  EXPECT_TRUE(S.SplitBackward);
  EXPECT_EQ(
      refused(R"({"stages": [["F0", "W0", "B0"], ["F0", "B0", "W0"]]})", 1),
      "stages[0][1] runs W0 before B0 (a micro-batch runs its forwards "
      "in chunk order, then its backwards in reverse, then its weight "
      "gradients)");
  EXPECT_EQ(refused(R"({"stages": [["F0", "B0", "W0"], ["F0", "B0"]]})", 1),
            "stages[1] never runs W0");
  EXPECT_EQ(refused(R"({"stages": [["F0", "F0.1", "B0.1", "B0", "W0"],
                                   ["F0", "F0.1", "B0.1", "B0", "W0"]]})",
                    2),
            "W runs split the backwards of one chunk per stage, not of 2");
  EXPECT_EQ(refused(R"({"stages": [["F0", "F0.1", "B0.1", "B0"],
                                   ["F0", "B0"]]})",
                    1),
            "stages[0][1] is \"F0.1\", expected F<k> or B<k> with k < 1 (the "
            "micro-batches)");
}

} // namespace
