//===- Trainer.cpp - Step loop, lr schedule, metrics, gradient check ------===//
#include "runtime/Trainer.h"
#include "runtime/TrainingChecks.h"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace weft {

double learningRate(const OptimizerSpec &O, int64_t Step) {
  return scheduledLr(O, Step);
}

Expected<std::vector<StepRecord>> train(Executor &E, const BatchSource &Data,
                                        const TrainOptions &O) {
  const Program &P = E.program();
  const double TokensPerStep = double(E.globalBatch() * E.globalSeq());
  std::vector<StepRecord> Records;
  Records.reserve(size_t(O.Steps));
  // WEFT_DEBUG_DELAY=RANK:MS: rank RANK sleeps MS at each step's start (a
  // straggler, for tests).
  int64_t DelayRank = -1, DelayMs = 0;
  if (const char *D = std::getenv("WEFT_DEBUG_DELAY"))
    if (std::sscanf(D, "%" SCNd64 ":%" SCNd64, &DelayRank, &DelayMs) != 2)
      DelayRank = -1;
  // The rank named a straggler, and for how many steps in a row.
  int64_t SlowRank = -1, SlowSteps = 0;
  for (int64_t K = 0; K < O.Steps; ++K) {
    int64_t Global = O.StartStep + K;
    auto T0 = std::chrono::steady_clock::now();
    const std::string At = "step " + std::to_string(Global + 1);
    Status Loaded = E.loadBatch(Data, Global);
    if (!Loaded.ok())
      return Loaded.withContext(At);
    E.resetCommBytes();
    if (DelayRank == E.rank() && DelayMs > 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(DelayMs));
    StepContext Ctx;
    Ctx.Step = Global + 1;
    if (O.BeforeStep)
      O.BeforeStep(Ctx.Step);
    Ctx.Lr = learningRate(P.Optimizer, Ctx.Step);
    Ctx.Optimizer = &P.Optimizer;
    // Forward and backward of every micro-batch; the gradients are checked
    // before any update.
    Status S = E.runGradients(Ctx);
    if (!S.ok())
      return S.withContext(At);
    Expected<std::string> Bad = firstNonFinite(E);
    if (!Bad.ok())
      return Bad.status().withContext(At);
    if (!Bad->empty() && !O.SkipNonFinite)
      return Status::error(At + ": " + *Bad +
                           "; stopping before the update (--on-nonfinite "
                           "skip skips such steps)");
    if (Bad->empty()) {
      S = E.runUpdate(Ctx);
      if (!S.ok())
        return S.withContext(At);
    }
    double Secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - T0)
            .count();
    StepRecord R{Ctx.Step, E.loss(), Ctx.Lr, Secs, TokensPerStep / Secs, *Bad};
    // A straggler: the same rank busier than the median for 3 steps in a
    // row (a slow step now and then is noise).
    R.BusySeconds = Secs - E.waitSeconds();
    R.WaitSeconds = E.waitSeconds();
    Expected<StragglerReport> Slow = findStraggler(E, R.BusySeconds);
    if (!Slow.ok())
      return Slow.status().withContext(At);
    SlowSteps = Slow->Rank >= 0 && Slow->Rank == SlowRank ? SlowSteps + 1 : 1;
    SlowRank = Slow->Rank;
    if (SlowRank >= 0 && SlowSteps >= 3) {
      R.Straggler = SlowRank;
      R.StragglerSeconds = Slow->OverMedianSeconds;
      if (SlowSteps == 3 && O.Log)
        *O.Log << "step " << R.Step << ": rank " << SlowRank
               << (Slow->Node >= 0 ? " on node " + std::to_string(Slow->Node)
                                   : std::string())
               << " is a straggler: +" << std::lround(R.StragglerSeconds * 1e3)
               << " ms/step of work over the median rank's, 3 steps in a row"
               << std::endl;
    }
    Records.push_back(R);
    if (O.CheckReplicasEvery && Ctx.Step % O.CheckReplicasEvery == 0) {
      Expected<std::string> Drift = checkReplicas(E);
      if (!Drift.ok())
        return Drift.status().withContext(At);
      if (!Drift->empty())
        return Status::error(At + ": replicas differ: " + *Drift);
    }
    if (O.Log) {
      char Line[160];
      std::snprintf(Line, sizeof(Line),
                    "step %4lld | loss %.6f | lr %.2e | %.1f ms | %.0f tok/s\n",
                    (long long)R.Step, R.Loss, R.Lr, R.Seconds * 1e3,
                    R.TokensPerSec);
      *O.Log << Line;
      if (!R.Skipped.empty())
        *O.Log << "step " << R.Step << " skipped: " << R.Skipped << "\n";
      *O.Log << std::flush;
    }
    if (O.Metrics) {
      char Line[320];
      // JSON has no NaN: a non-finite loss (a skipped step) is null.
      char Loss[32] = "null";
      if (std::isfinite(R.Loss))
        std::snprintf(Loss, sizeof(Loss), "%.9g", R.Loss);
      std::snprintf(Line, sizeof(Line),
                    "{\"step\": %lld, \"loss\": %s, \"lr\": %.9g, "
                    "\"step_time_s\": %.9g, \"tokens_per_s\": %.9g, "
                    "\"peak_bytes\": %zu",
                    (long long)R.Step, Loss, R.Lr, R.Seconds, R.TokensPerSec,
                    E.peakBytes());
      *O.Metrics << Line;
      if (!R.Skipped.empty())
        *O.Metrics << ", \"skipped\": true";
      if (E.comm().size() > 1) {
        std::snprintf(Line, sizeof(Line),
                      ", \"busy_s\": %.6g, \"wait_s\": %.6g", R.BusySeconds,
                      R.WaitSeconds);
        *O.Metrics << Line;
      }
      if (R.Straggler >= 0) {
        std::snprintf(Line, sizeof(Line),
                      ", \"straggler\": %lld, \"straggler_ms\": %.1f",
                      (long long)R.Straggler, R.StragglerSeconds * 1e3);
        *O.Metrics << Line;
      }
      auto Comm = E.commBytes();
      if (!Comm.empty()) {
        *O.Metrics << ", \"comm_bytes\": {";
        for (size_t I = 0; I < Comm.size(); ++I) {
          std::snprintf(Line, sizeof(Line), "%s\"%s\": %.0f", I ? ", " : "",
                        Comm[I].first.c_str(), Comm[I].second);
          *O.Metrics << Line;
        }
        *O.Metrics << "}";
        if (double Across = E.commBytesAcrossNodes(); Across > 0) {
          std::snprintf(Line, sizeof(Line),
                        ", \"comm_bytes_across_nodes\": %.0f", Across);
          *O.Metrics << Line;
        }
      }
      *O.Metrics << "}\n" << std::flush;
      if (!*O.Metrics)
        return Status::error(At + ": cannot write the metrics file (disk "
                                  "full?)");
    }
    if (O.AfterStep)
      WEFT_RETURN_IF_ERROR(O.AfterStep(R));
  }
  return Records;
}

void printSummary(std::ostream &OS, const std::vector<StepRecord> &Records,
                  const Executor &E) {
  if (Records.empty()) {
    OS << "summary: no steps run\n";
    return;
  }
  // Step 1 warms caches and the thread pools; leave it out of the mean.
  double Sum = 0;
  size_t N = 0;
  for (size_t I = Records.size() > 1 ? 1 : 0; I < Records.size(); ++I, ++N)
    Sum += Records[I].Seconds;
  double Mean = Sum / double(N);
  char Line[512];
  std::snprintf(
      Line, sizeof(Line),
      "summary: steps %zu | first loss %.6f | last loss %.6f | mean step "
      "%.1f ms (excluding step 1) | %.0f tok/s | matmul %.1f GFLOP/step, "
      "%.1f GFLOP/s | peak bytes %zu (arena %zu + persistent %zu)\n",
      Records.size(), Records.front().Loss, Records.back().Loss, Mean * 1e3,
      double(E.globalBatch() * E.globalSeq()) / Mean,
      E.matmulFlopsPerStep() / 1e9, E.matmulFlopsPerStep() / Mean / 1e9,
      E.peakBytes(), E.arenaBytes(), E.persistentBytes());
  OS << Line;
  // Bytes of the last step (every step sends the same).
  auto Comm = E.commBytes();
  if (!Comm.empty()) {
    double Total = 0;
    std::string Parts;
    for (const auto &[Key, Bytes] : Comm) {
      Total += Bytes;
      std::snprintf(Line, sizeof(Line), " | %s %.0f", Key.c_str(), Bytes);
      Parts += Line;
    }
    std::snprintf(
        Line, sizeof(Line),
        "comm: %.0f bytes/step sent by this rank (%s)%s | %.3g MB "
        "over %zu steps\n",
        Total, E.hierarchicalComm() ? "hierarchical across nodes" : "ring",
        Parts.c_str(), Total * double(Records.size()) / 1e6, Records.size());
    OS << Line;
    if (double Across = E.commBytesAcrossNodes(); Across > 0) {
      std::snprintf(Line, sizeof(Line), "comm: %.0f of them between nodes\n",
                    Across);
      OS << Line;
    }
  }
}

bool GradCheckReport::passed() const {
  for (const GradCheckEntry &E : Params)
    if (!(E.MaxErr <= Tol))
      return false;
  return true;
}

double gradCheckError(double A, double N, double Floor) {
  return std::fabs(A - N) / std::max({std::fabs(A), std::fabs(N), Floor});
}

std::vector<int64_t> gradCheckIndices(int64_t N, int64_t K) {
  std::vector<int64_t> Out;
  if (N <= 0)
    return Out;
  K = std::max<int64_t>(K, 2);
  if (N <= K) {
    for (int64_t I = 0; I < N; ++I)
      Out.push_back(I);
    return Out;
  }
  for (int64_t J = 0; J < K; ++J) {
    int64_t I = int64_t((long double)J * (N - 1) / (K - 1) + 0.5L);
    if (Out.empty() || Out.back() != I)
      Out.push_back(I);
  }
  return Out;
}

Expected<GradCheckReport> gradCheck(Executor &E, const BatchSource &Data,
                                    const GradCheckOptions &O) {
  const Program &P = E.program();
  const bool F64 = P.Type == DType::F64;
  GradCheckReport Rep;
  Rep.Tol = O.Tol > 0 ? O.Tol : (F64 ? 1e-5 : 5e-2);
  // f64: h = 1e-5 keeps the rounding noise of a loss near 1..10 at ~1e-11
  // (eps*|loss|/h) and the truncation error (h^2 f''') near 1e-10; gradients
  // below Floor = 1e-3 are compared absolutely (Tol*Floor = 1e-8), since
  // their relative error is dominated by those two terms.
  Rep.H = O.H > 0 ? O.H : (F64 ? 1e-5 : 1e-2);
  // f32: h = 1e-2; the loss is rounded to ~5e-7 and every activation to f32,
  // so a difference carries ~1e-4 of absolute noise: Floor = 1e-2 (Tol*Floor
  // = 5e-4).
  Rep.Floor = F64 ? 1e-3 : 1e-2;
  WEFT_RETURN_IF_ERROR(E.loadBatch(Data, O.Step));
  StepContext Ctx;
  Ctx.Step = O.Step + 1;
  Ctx.Lr = learningRate(P.Optimizer, Ctx.Step);
  Ctx.Optimizer = &P.Optimizer;
  WEFT_RETURN_IF_ERROR(E.runGradients(Ctx));
  // Read every sampled analytic value before the forward reruns.
  std::vector<std::vector<int64_t>> Indices(P.Params.size());
  std::vector<std::vector<double>> Analytic(P.Params.size());
  for (size_t Pi = 0; Pi < P.Params.size(); ++Pi) {
    Indices[Pi] = gradCheckIndices(numElements(P.Params[Pi].Dims), O.PerParam);
    for (int64_t I : Indices[Pi])
      Analytic[Pi].push_back(E.gradElement(Pi, I));
  }
  auto LossAt = [&](size_t Pi, int64_t I, double V) -> Expected<double> {
    WEFT_RETURN_IF_ERROR(E.setParamElement(Pi, I, V));
    Status S = E.runForward(Ctx);
    if (!S.ok())
      return S;
    return E.loss();
  };
  for (size_t Pi = 0; Pi < P.Params.size(); ++Pi) {
    GradCheckEntry Entry;
    Entry.Name = P.Params[Pi].Name;
    for (size_t J = 0; J < Indices[Pi].size(); ++J) {
      int64_t I = Indices[Pi][J];
      double Orig = E.paramElement(Pi, I);
      Expected<double> Plus = LossAt(Pi, I, Orig + Rep.H);
      Expected<double> Minus = LossAt(Pi, I, Orig - Rep.H);
      WEFT_RETURN_IF_ERROR(E.setParamElement(Pi, I, Orig));
      if (!Plus.ok())
        return Plus.status();
      if (!Minus.ok())
        return Minus.status();
      double Numeric = (*Plus - *Minus) / (2 * Rep.H);
      double Err = gradCheckError(Analytic[Pi][J], Numeric, Rep.Floor);
      if (J == 0 || (!std::isnan(Entry.MaxErr) && !(Err <= Entry.MaxErr))) {
        Entry.MaxErr = Err;
        Entry.WorstIndex = I;
        Entry.Analytic = Analytic[Pi][J];
        Entry.Numeric = Numeric;
      }
    }
    Rep.Params.push_back(Entry);
  }
  return Rep;
}

} // namespace weft
