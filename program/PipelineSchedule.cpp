//===- PipelineSchedule.cpp - GPipe and 1F1B orders -----------------------===//
#include "program/PipelineSchedule.h"

#include <algorithm>

namespace weft {

Status parsePipelineSchedule(const std::string &Name, PipelineScheduleKind &K) {
  if (Name == "gpipe")
    K = PipelineScheduleKind::GPipe;
  else if (Name == "1f1b")
    K = PipelineScheduleKind::OneFOneB;
  else
    return Status::error("unknown pipeline schedule '" + Name +
                         "' (expected gpipe or 1f1b)");
  return Status::success();
}

const char *pipelineScheduleName(PipelineScheduleKind K) {
  return K == PipelineScheduleKind::GPipe ? "gpipe" : "1f1b";
}

std::vector<PipelineRun> pipelineOrder(PipelineScheduleKind K, int64_t S,
                                       int64_t N, int64_t M) {
  std::vector<PipelineRun> Order;
  const int64_t Warmup = K == PipelineScheduleKind::GPipe
                             ? M
                             : std::min(std::max<int64_t>(N - 1 - S, 0), M);
  int64_t F = 0, B = 0;
  for (; F < Warmup; ++F)
    Order.push_back({false, F});
  for (; F < M; ++F, ++B) {
    Order.push_back({false, F});
    Order.push_back({true, B});
  }
  for (; B < M; ++B)
    Order.push_back({true, B});
  return Order;
}

int64_t pipelineSlots(PipelineScheduleKind K, int64_t S, int64_t N, int64_t M) {
  if (K == PipelineScheduleKind::GPipe)
    return M;
  return std::max<int64_t>(1, std::min(N - S, M));
}

double pipelineBubble(int64_t N, int64_t M) {
  return double(N - 1) / double(M + N - 1);
}

} // namespace weft
