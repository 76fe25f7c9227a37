//===- Trainer.h - The training loop and the gradient check ----*- C++ -*-===//
#ifndef WEFT_RUNTIME_TRAINER_H
#define WEFT_RUNTIME_TRAINER_H

#include "runtime/Executor.h"
#include "runtime/data/Data.h"

#include <functional>
#include <ostream>
#include <string>
#include <vector>

namespace weft {

/// The learning rate of 1-based optimizer step Step.
double learningRate(const OptimizerSpec &O, int64_t Step);

struct StepRecord;

struct TrainOptions {
  int64_t Steps = 10;
  /// Steps already taken (a resumed run): local step k is global StartStep+k.
  int64_t StartStep = 0;
  std::ostream *Log = nullptr;     // one line per step, or null
  std::ostream *Metrics = nullptr; // JSON lines, or null
  /// Called as step Step (global, 1-based) begins, and after it ends with
  /// its record (periodic checkpoints); an error stops training.
  std::function<void(int64_t Step)> BeforeStep;
  std::function<Status(const StepRecord &)> AfterStep;
  /// A NaN or infinity in the loss or a gradient (checked before the
  /// optimizer, firstNonFinite) stops training naming the step and the
  /// tensor; with SkipNonFinite the step's update is skipped instead (its
  /// batch is consumed, the step count and lr schedule go on, as after a
  /// GradScaler skip; the step's record says so).
  bool SkipNonFinite = false;
  /// Every this many steps (0: never) the data-parallel replicas are
  /// compared (checkReplicas); a difference stops training.
  int64_t CheckReplicasEvery = 0;
};

struct StepRecord {
  int64_t Step; // global, 1-based
  double Loss, Lr, Seconds, TokensPerSec;
  std::string Skipped; // why the update was skipped, or empty
  /// This rank's work and its waits in communication (Seconds = both).
  double BusySeconds = 0, WaitSeconds = 0;
  /// The rank busier than the median for 3 steps running (-1: none), and
  /// by how much this step.
  int64_t Straggler = -1;
  double StragglerSeconds = 0;
};

/// Runs Steps full steps (data -> inputs, all instructions).
Expected<std::vector<StepRecord>> train(Executor &E, const BatchSource &Data,
                                        const TrainOptions &O);

/// Prints the end-of-run summary of Records.
void printSummary(std::ostream &OS, const std::vector<StepRecord> &Records,
                  const Executor &E);

struct GradCheckOptions {
  int64_t PerParam = 8; // K elements per parameter (at least first and last)
  double Tol = 0;       // 0: 1e-5 for f64, 5e-2 for f32
  double H = 0;         // 0: 1e-5 for f64, 1e-2 for f32
  int64_t Step = 0;     // which batch (0-based global step)
};

struct GradCheckEntry {
  std::string Name;
  double MaxErr = 0;
  int64_t WorstIndex = 0;
  double Analytic = 0, Numeric = 0; // at WorstIndex
};

struct GradCheckReport {
  std::vector<GradCheckEntry> Params;
  double Tol = 0, Floor = 0, H = 0;
  bool passed() const;
};

/// The error measure: |a-n| / max(|a|, |n|, Floor), so gradients below
/// Floor are compared absolutely. Floor is 1e-3 for f64 and 1e-2 for f32: an
/// f32 central difference with h = 1e-2 carries ~1e-4 of absolute noise
/// (the loss itself is rounded to ~5e-7), which a smaller floor would report
/// as a relative error.
double gradCheckError(double Analytic, double Numeric, double Floor);
/// K indices spread evenly over [0, N), always holding 0 and N-1.
std::vector<int64_t> gradCheckIndices(int64_t N, int64_t K);
/// Analytic gradients from [0, optimizer_begin) against central differences
/// of the loss from [0, forward_end). Parameters are restored afterwards.
Expected<GradCheckReport> gradCheck(Executor &E, const BatchSource &Data,
                                    const GradCheckOptions &O);

} // namespace weft

#endif // WEFT_RUNTIME_TRAINER_H
