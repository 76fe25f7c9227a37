//===- PipelineSchedule.h - The order of a pipeline stage's work -*- C++
//-*-===//
//
// A pipeline schedule as data: for each stage, the order in which it runs
// its forward and backward fragments over the step's micro-batches, and how
// many micro-batches' activations it holds at once (its slots). The
// compiler turns each order into the stage's schedule actions, adding the
// transfers beside each run; checkPipeline proves the result deadlock-free.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_PROGRAM_PIPELINESCHEDULE_H
#define WEFT_PROGRAM_PIPELINESCHEDULE_H

#include "program/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace weft {

enum class PipelineScheduleKind {
  /// GPipe (Huang et al. 2019): every forward, then every backward. Stage s
  /// holds all M micro-batches. With 3 stages and 4 micro-batches
  /// (F = forward, B = backward, digits = micro-batch):
  ///
  ///   stage 0: F0 F1 F2 F3 .. .. .. .. .. .. B0 B1 B2 B3
  ///   stage 1: .. F0 F1 F2 F3 .. .. .. .. B0 B1 B2 B3 ..
  ///   stage 2: .. .. F0 F1 F2 F3 B0 B1 B2 B3 .. .. .. ..
  GPipe,
  /// 1F1B (PipeDream-Flush; Narayanan et al. 2021, Megatron's default):
  /// stage s runs min(N-1-s, M) warm-up forwards, then alternates one
  /// forward and one backward, then drains its backwards. Stage s holds at
  /// most min(N-s, M) micro-batches; the bubble is GPipe's.
  ///
  ///   stage 0: F0 F1 F2 .. B0 F3 B1 .. B2 .. B3
  ///   stage 1: .. F0 F1 B0 F2 B1 F3 B2 .. B3 ..
  ///   stage 2: .. .. F0 B0 F1 B1 F2 B2 F3 B3 ..
  OneFOneB,
  /// A user's orders (weft-compile --pipeline-schedule FILE.json): each
  /// stage's runs as written, checked like any other (a schedule that would
  /// deadlock is refused when the program is written).
  Custom,
};

struct PipelineRun {
  bool Backward = false;
  int64_t Microbatch = 0;
};

/// A schedule: its kind, and for Custom every stage's runs.
struct PipelineSchedule {
  PipelineScheduleKind Kind = PipelineScheduleKind::OneFOneB;
  std::vector<std::vector<PipelineRun>> Orders;
};

/// "gpipe", "1f1b", or "custom:" followed by the orders in the compact form
/// pipelineOrdersText writes ("F0 F1 B0 B1|F0 B0 F1 B1"); anything else is
/// refused, naming it.
Status parsePipelineSchedule(const std::string &Name, PipelineSchedule &S);
/// The kind's name ("custom" for a user's orders).
const char *pipelineScheduleName(PipelineScheduleKind K);
/// A hand-written schedule file: {"stages": [["F0", "F1", "B0", "B1"], ...]}
/// with one list per stage, each running F<k> and B<k> once for every
/// micro-batch k < M, F<k> first. Refused naming the stage and entry.
Status parsePipelineScheduleJson(const std::string &Text, int64_t N, int64_t M,
                                 PipelineSchedule &S);
/// The compact form: stages' runs separated by '|'.
std::string pipelineOrdersText(const PipelineSchedule &S);

/// Stage S's runs, of N stages over M micro-batches, in order.
std::vector<PipelineRun> pipelineOrder(const PipelineSchedule &P, int64_t S,
                                       int64_t N, int64_t M);
/// The micro-batches stage S holds at once under that order: at most those
/// whose forward has run and backward has not.
int64_t pipelineSlots(const PipelineSchedule &P, int64_t S, int64_t N,
                      int64_t M);
/// The idle fraction of an ideal pipeline of equal stages: (N-1)/(M+N-1)
/// for both GPipe and 1F1B.
double pipelineBubble(int64_t N, int64_t M);

} // namespace weft

#endif // WEFT_PROGRAM_PIPELINESCHEDULE_H
