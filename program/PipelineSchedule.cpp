//===- PipelineSchedule.cpp - GPipe, 1F1B and hand-written orders ---------===//
#include "program/PipelineSchedule.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <sstream>

namespace weft {

namespace {

/// "F3" or "B0": a run of micro-batch k < M.
bool parseRun(const std::string &T, int64_t M, PipelineRun &R) {
  if (T.size() < 2 || (T[0] != 'F' && T[0] != 'B') ||
      !std::all_of(T.begin() + 1, T.end(), ::isdigit) || T.size() > 9)
    return false;
  R.Backward = T[0] == 'B';
  R.Microbatch = std::stoll(T.substr(1));
  return R.Microbatch < M;
}

std::string runName(const PipelineRun &R) {
  return (R.Backward ? "B" : "F") + std::to_string(R.Microbatch);
}

/// Every micro-batch's forward and backward once, the forward first.
Status checkOrder(const std::vector<PipelineRun> &Order, int64_t M,
                  const std::string &Where) {
  std::vector<int> F(size_t(M), 0), B(size_t(M), 0);
  for (size_t I = 0; I < Order.size(); ++I) {
    const PipelineRun &R = Order[I];
    int &Seen = (R.Backward ? B : F)[size_t(R.Microbatch)];
    if (Seen)
      return Status::error(Where + "[" + std::to_string(I) + "] repeats " +
                           runName(R));
    if (R.Backward && !F[size_t(R.Microbatch)])
      return Status::error(Where + "[" + std::to_string(I) + "] runs " +
                           runName(R) + " before F" +
                           std::to_string(R.Microbatch));
    Seen = 1;
  }
  for (int64_t K = 0; K < M; ++K)
    if (!F[size_t(K)] || !B[size_t(K)])
      return Status::error(Where + " never runs " +
                           std::string(F[size_t(K)] ? "B" : "F") +
                           std::to_string(K));
  return Status::success();
}

} // namespace

Status parsePipelineSchedule(const std::string &Name, PipelineSchedule &S) {
  S.Orders.clear();
  if (Name == "gpipe") {
    S.Kind = PipelineScheduleKind::GPipe;
  } else if (Name == "1f1b") {
    S.Kind = PipelineScheduleKind::OneFOneB;
  } else if (Name.rfind("custom:", 0) == 0) {
    S.Kind = PipelineScheduleKind::Custom;
    std::stringstream Stages(Name.substr(7));
    std::string Stage;
    while (std::getline(Stages, Stage, '|')) {
      S.Orders.emplace_back();
      std::stringstream Runs(Stage);
      std::string T;
      while (Runs >> T) {
        PipelineRun R;
        if (!parseRun(T, INT64_MAX, R))
          return Status::error("malformed pipeline run '" + T + "'");
        S.Orders.back().push_back(R);
      }
    }
  } else {
    return Status::error("unknown pipeline schedule '" + Name +
                         "' (expected gpipe, 1f1b or a .json file)");
  }
  return Status::success();
}

const char *pipelineScheduleName(PipelineScheduleKind K) {
  return K == PipelineScheduleKind::GPipe      ? "gpipe"
         : K == PipelineScheduleKind::OneFOneB ? "1f1b"
                                               : "custom";
}

Status parsePipelineScheduleJson(const std::string &Text, int64_t N, int64_t M,
                                 PipelineSchedule &S) {
  nlohmann::json J =
      nlohmann::json::parse(Text, nullptr, /*allow_exceptions=*/false);
  if (J.is_discarded() || !J.is_object() || !J.contains("stages") ||
      !J["stages"].is_array())
    return Status::error("expected {\"stages\": [[\"F0\", \"B0\", ...], "
                         "...]}, one list of runs per stage");
  const nlohmann::json &Stages = J["stages"];
  if (int64_t(Stages.size()) != N)
    return Status::error("'stages' lists " + std::to_string(Stages.size()) +
                         " stages, the mesh's pipeline axis has " +
                         std::to_string(N));
  S.Kind = PipelineScheduleKind::Custom;
  S.Orders.assign(size_t(N), {});
  for (int64_t St = 0; St < N; ++St) {
    const std::string Where = "stages[" + std::to_string(St) + "]";
    if (!Stages[size_t(St)].is_array())
      return Status::error(Where + " is not a list of runs");
    for (size_t I = 0; I < Stages[size_t(St)].size(); ++I) {
      const nlohmann::json &T = Stages[size_t(St)][I];
      PipelineRun R;
      if (!T.is_string() || !parseRun(T.get<std::string>(), M, R))
        return Status::error(Where + "[" + std::to_string(I) + "] is " +
                             T.dump() + ", expected F<k> or B<k> with k < " +
                             std::to_string(M) + " (the micro-batches)");
      S.Orders[size_t(St)].push_back(R);
    }
    Status C = checkOrder(S.Orders[size_t(St)], M, Where);
    if (!C.ok())
      return C;
  }
  return Status::success();
}

std::string pipelineOrdersText(const PipelineSchedule &S) {
  std::string R;
  for (size_t St = 0; St < S.Orders.size(); ++St) {
    if (St)
      R += "|";
    for (size_t I = 0; I < S.Orders[St].size(); ++I)
      R += (I ? " " : "") + runName(S.Orders[St][I]);
  }
  return R;
}

std::vector<PipelineRun> pipelineOrder(const PipelineSchedule &P, int64_t S,
                                       int64_t N, int64_t M) {
  if (P.Kind == PipelineScheduleKind::Custom)
    return S < int64_t(P.Orders.size()) ? P.Orders[size_t(S)]
                                        : std::vector<PipelineRun>();
  std::vector<PipelineRun> Order;
  const int64_t Warmup = P.Kind == PipelineScheduleKind::GPipe
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

int64_t pipelineSlots(const PipelineSchedule &P, int64_t S, int64_t N,
                      int64_t M) {
  // The fewest slots with which micro-batch k's slot, k mod slots, is free
  // at its forward (at least the most in flight at once; more when a
  // hand-written order finishes micro-batches out of order).
  const std::vector<PipelineRun> Order = pipelineOrder(P, S, N, M);
  for (int64_t Slots = 1; Slots < M; ++Slots) {
    std::vector<int64_t> Holder(size_t(Slots), -1);
    bool Fits = true;
    for (const PipelineRun &R : Order) {
      int64_t &H = Holder[size_t(R.Microbatch % Slots)];
      if (R.Backward) {
        H = -1;
      } else if (H >= 0) {
        Fits = false;
        break;
      } else {
        H = R.Microbatch;
      }
    }
    if (Fits)
      return Slots;
  }
  return std::max<int64_t>(M, 1);
}

double pipelineBubble(int64_t N, int64_t M) {
  return double(N - 1) / double(M + N - 1);
}

} // namespace weft
