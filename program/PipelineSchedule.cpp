//===- PipelineSchedule.cpp - GPipe, 1F1B, interleaved, hand-written ------===//
#include "program/PipelineSchedule.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <sstream>

namespace weft {

namespace {

/// At most this many model chunks per stage.
constexpr int64_t MaxVirtualStages = 1024;

/// Digits only, at most 8 of them.
bool parseCount(const std::string &T, int64_t &N) {
  if (T.empty() || T.size() > 8 || !std::all_of(T.begin(), T.end(), ::isdigit))
    return false;
  N = std::stoll(T);
  return true;
}

/// "F3", "B0", "W0" or "F3.1": a run of micro-batch k < M on chunk c < V.
bool parseRun(const std::string &T, int64_t M, int64_t V, PipelineRun &R) {
  if (T.size() < 2 || (T[0] != 'F' && T[0] != 'B' && T[0] != 'W'))
    return false;
  const size_t Dot = T.find('.');
  R.Backward = T[0] != 'F';
  R.Weight = T[0] == 'W';
  R.Chunk = 0;
  if (!parseCount(T.substr(1, Dot == std::string::npos ? Dot : Dot - 1),
                  R.Microbatch) ||
      (Dot != std::string::npos && !parseCount(T.substr(Dot + 1), R.Chunk)))
    return false;
  return R.Microbatch < M && R.Chunk < V;
}

std::string runName(const PipelineRun &R) {
  return (R.Weight     ? "W"
          : R.Backward ? "B"
                       : "F") +
         std::to_string(R.Microbatch) +
         (R.Chunk ? "." + std::to_string(R.Chunk) : "");
}

/// Every micro-batch's forward and backward once on every chunk: forwards
/// in chunk order, then backwards in reverse (the order of the stage's
/// fragments, which a micro-batch runs in table order), then its W when
/// backwards split.
Status checkOrder(const std::vector<PipelineRun> &Order, int64_t M, int64_t V,
                  bool Split, const std::string &Where) {
  const int64_t Steps = 2 * V + (Split ? 1 : 0);
  auto runAt = [&](int64_t K, int64_t D) {
    PipelineRun R{D >= V, K, D >= V ? 2 * V - 1 - D : D};
    R.Weight = D == 2 * V;
    R.Chunk = R.Weight ? 0 : R.Chunk;
    return R;
  };
  // Per micro-batch: how many of its runs have run.
  std::vector<int64_t> Done(size_t(M), 0);
  for (size_t I = 0; I < Order.size(); ++I) {
    const PipelineRun &R = Order[I];
    if (R.Weight && !Split)
      return Status::error(Where + "[" + std::to_string(I) + "] runs " +
                           runName(R) + ", but the backwards do not split");
    const int64_t Step = R.Weight     ? 2 * V
                         : R.Backward ? 2 * V - 1 - R.Chunk
                                      : R.Chunk;
    int64_t &D = Done[size_t(R.Microbatch)];
    if (Step != D)
      return Status::error(
          Where + "[" + std::to_string(I) + "] runs " + runName(R) +
          (Step < D ? ", which already ran"
                    : " before " + runName(runAt(R.Microbatch, D))) +
          " (a micro-batch runs its forwards in chunk order, then its "
          "backwards in reverse" +
          (Split ? ", then its weight gradients)" : ")"));
    ++D;
  }
  for (int64_t K = 0; K < M; ++K)
    if (Done[size_t(K)] < Steps)
      return Status::error(Where + " never runs " +
                           runName(runAt(K, Done[size_t(K)])));
  return Status::success();
}

/// ZB-H1's runs of stage S (see PipelineScheduleKind).
std::vector<PipelineRun> zeroBubbleH1Order(int64_t S, int64_t N, int64_t M) {
  const int64_t Warmup = std::min(std::max<int64_t>(N - 1 - S, 0), M);
  std::vector<PipelineRun> Order;
  auto weight = [&](int64_t K) {
    PipelineRun W{true, K, 0};
    W.Weight = true;
    Order.push_back(W);
  };
  for (int64_t F = 0; F < Warmup; ++F)
    Order.push_back({false, F, 0});
  for (int64_t K = 0; K < M; ++K) {
    if (K + Warmup < M)
      Order.push_back({false, K + Warmup, 0});
    Order.push_back({true, K, 0});
    if (K >= S)
      weight(K - S);
  }
  for (int64_t K = std::max<int64_t>(M - S, 0); K < M; ++K)
    weight(K);
  return Order;
}

/// Interleaved 1F1B's runs of rank S (see PipelineScheduleKind).
std::vector<PipelineRun> interleavedOrder(int64_t S, int64_t N, int64_t M,
                                          int64_t V) {
  const int64_t Total = M * V;
  auto runOf = [&](int64_t I, bool Backward) {
    const int64_t InRound = I % (N * V);
    const int64_t Chunk = InRound / N;
    return PipelineRun{Backward, (I / (N * V)) * N + InRound % N,
                       Backward ? V - 1 - Chunk : Chunk};
  };
  const int64_t Warmup =
      M == N ? Total : std::min(Total, (N - 1 - S) * 2 + (V - 1) * N);
  std::vector<PipelineRun> Order;
  int64_t F = 0, B = 0;
  for (; F < Warmup; ++F)
    Order.push_back(runOf(F, false));
  for (; F < Total; ++F, ++B) {
    Order.push_back(runOf(F, false));
    Order.back().Paired = true;
    Order.push_back(runOf(B, true));
  }
  for (; B < Total; ++B)
    Order.push_back(runOf(B, true));
  return Order;
}

} // namespace

Status parsePipelineSchedule(const std::string &Name, PipelineSchedule &S) {
  S.Orders.clear();
  S.VirtualStages = 1;
  S.SplitBackward = false;
  if (Name == "zb-h1") {
    S.Kind = PipelineScheduleKind::ZeroBubbleH1;
    S.SplitBackward = true;
  } else if (Name == "gpipe") {
    S.Kind = PipelineScheduleKind::GPipe;
  } else if (Name == "1f1b") {
    S.Kind = PipelineScheduleKind::OneFOneB;
  } else if (Name.rfind("interleaved:", 0) == 0) {
    S.Kind = PipelineScheduleKind::Interleaved;
    if (!parseCount(Name.substr(12), S.VirtualStages) || S.VirtualStages < 2 ||
        S.VirtualStages > MaxVirtualStages)
      return Status::error(
          "interleaved pipeline schedule '" + Name + "': expected 2 to " +
          std::to_string(MaxVirtualStages) + " virtual stages");
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
        if (!parseRun(T, INT64_MAX, MaxVirtualStages, R))
          return Status::error("malformed pipeline run '" + T + "'");
        S.VirtualStages = std::max(S.VirtualStages, R.Chunk + 1);
        S.SplitBackward |= R.Weight;
        S.Orders.back().push_back(R);
      }
    }
  } else {
    return Status::error("unknown pipeline schedule '" + Name +
                         "' (expected gpipe, 1f1b, interleaved, zb-h1 or a "
                         ".json file)");
  }
  return Status::success();
}

const char *pipelineScheduleName(PipelineScheduleKind K) {
  return K == PipelineScheduleKind::GPipe          ? "gpipe"
         : K == PipelineScheduleKind::OneFOneB     ? "1f1b"
         : K == PipelineScheduleKind::Interleaved  ? "interleaved"
         : K == PipelineScheduleKind::ZeroBubbleH1 ? "zb-h1"
                                                   : "custom";
}

std::string pipelineScheduleSpec(const PipelineSchedule &S) {
  switch (S.Kind) {
  case PipelineScheduleKind::Interleaved:
    return "interleaved:" + std::to_string(S.VirtualStages);
  case PipelineScheduleKind::Custom:
    return "custom:" + pipelineOrdersText(S);
  default:
    return pipelineScheduleName(S.Kind);
  }
}

Status parsePipelineScheduleJson(const std::string &Text, int64_t N, int64_t M,
                                 int64_t V, PipelineSchedule &S) {
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
  S.VirtualStages = V;
  S.SplitBackward = false;
  S.Orders.assign(size_t(N), {});
  for (int64_t St = 0; St < N; ++St) {
    const std::string Where = "stages[" + std::to_string(St) + "]";
    if (!Stages[size_t(St)].is_array())
      return Status::error(Where + " is not a list of runs");
    for (size_t I = 0; I < Stages[size_t(St)].size(); ++I) {
      const nlohmann::json &T = Stages[size_t(St)][I];
      PipelineRun R;
      if (!T.is_string() || !parseRun(T.get<std::string>(), M, V, R))
        return Status::error(Where + "[" + std::to_string(I) + "] is " +
                             T.dump() + ", expected F<k> or B<k> with k < " +
                             std::to_string(M) + " (the micro-batches)" +
                             (V > 1 ? ", or F<k>.<c> and B<k>.<c> with c < " +
                                          std::to_string(V) + " (the chunks)"
                                    : ""));
      S.SplitBackward |= R.Weight;
      S.Orders[size_t(St)].push_back(R);
    }
  }
  if (S.SplitBackward && V > 1)
    return Status::error("W runs split the backwards of one chunk per "
                         "stage, not of " +
                         std::to_string(V));
  for (int64_t St = 0; St < N; ++St)
    WEFT_RETURN_IF_ERROR(checkOrder(S.Orders[size_t(St)], M, V, S.SplitBackward,
                                    "stages[" + std::to_string(St) + "]"));
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
  if (P.Kind == PipelineScheduleKind::Interleaved)
    return interleavedOrder(S, N, M, P.VirtualStages);
  if (P.Kind == PipelineScheduleKind::ZeroBubbleH1)
    return zeroBubbleH1Order(S, N, M);
  std::vector<PipelineRun> Order;
  const int64_t Warmup = P.Kind == PipelineScheduleKind::GPipe
                             ? M
                             : std::min(std::max<int64_t>(N - 1 - S, 0), M);
  int64_t F = 0, B = 0;
  for (; F < Warmup; ++F)
    Order.push_back({false, F, 0});
  for (; F < M; ++F, ++B) {
    Order.push_back({false, F, 0});
    Order.push_back({true, B, 0});
  }
  for (; B < M; ++B)
    Order.push_back({true, B, 0});
  return Order;
}

int64_t pipelineSlots(const PipelineSchedule &P, int64_t S, int64_t N,
                      int64_t M) {
  // A micro-batch holds its slot from its first action to its last, over
  // all of the stage's chunks; a run's receives go before the W runs right
  // before it (weft-emit-program). The fewest slots with which no two
  // micro-batches of one slot, k mod slots, overlap (at least the most in
  // flight at once; more when an order finishes them out of order).
  const std::vector<PipelineRun> Order = pipelineOrder(P, S, N, M);
  std::vector<int64_t> First(size_t(std::max<int64_t>(M, 0)), INT64_MAX),
      Last(First.size(), -1);
  for (size_t I = 0, Block = 0; I < Order.size(); ++I) {
    const int64_t K = Order[I].Microbatch;
    if (K < 0 || K >= M)
      continue;
    if (I == 0 || !Order[I - 1].Weight)
      Block = I; // where a block of W runs before run I begins
    // Forwards receive but on the first virtual stage, backwards but on
    // the last (W runs never).
    const int64_t V = Order[I].Chunk * N + S, NV = N * P.VirtualStages;
    const bool Receives =
        !Order[I].Weight && (Order[I].Backward ? V < NV - 1 : V > 0);
    const int64_t Posted = Receives ? int64_t(Block) : int64_t(I);
    First[size_t(K)] = std::min(First[size_t(K)], Posted);
    Last[size_t(K)] = int64_t(I);
  }
  for (int64_t Slots = 1; Slots < M; ++Slots) {
    // Per slot: the last action of the micro-batches that held it.
    std::vector<int64_t> Held(size_t(Slots), -1);
    bool Fits = true;
    for (int64_t K = 0; K < M && Fits; ++K) {
      int64_t &H = Held[size_t(K % Slots)];
      Fits = First[size_t(K)] > H;
      H = std::max(H, Last[size_t(K)]);
    }
    if (Fits)
      return Slots;
  }
  return std::max<int64_t>(M, 1);
}

double pipelineBubble(int64_t N, int64_t M, int64_t V) {
  return double(N - 1) / double(V * M + N - 1);
}

double zeroBubbleH1Bubble(int64_t N, int64_t M) {
  return double(N - 1) / double(3 * M + N - 1);
}

} // namespace weft
