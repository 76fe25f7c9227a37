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
  /// Interleaved 1F1B (Narayanan et al. 2021, section 2.2; Megatron's
  /// virtual pipeline): the model is cut into N*V chunks, rank r holding
  /// chunks r, r+N, ..., r+(V-1)N (its local chunks 0..V-1). Runs go in
  /// rounds of N micro-batches per chunk: forward i of rank r is micro-batch
  /// (i / (N V)) N + i mod N on local chunk (i / N) mod V, backward i the
  /// same micro-batch on chunk V-1-(i / N) mod V. Rank r warms up with
  /// (N-1-r)*2 + (V-1)*N forwards (all of them when M = N), then alternates,
  /// then drains. The bubble shrinks V-fold, to (N-1)/V of a micro-batch's
  /// whole-model time; M must be a multiple of N. 2 ranks, V = 2, M = 4
  /// (runs in order; F2.1: micro-batch 2's forward on local chunk 1):
  ///
  ///   rank 0: F0 F1 F0.1 F1.1 F2 B0.1 F3 B1.1 F2.1 B0 F3.1 B1 B2.1 B3.1 B2 B3
  ///   rank 1: F0 F1 F0.1 B0.1 F1.1 B1.1 F2 B0 F3 B1 F2.1 B2.1 F3.1 B3.1 B2 B3
  ///
  /// and in time (--explain: a chunk's forward one unit, its backward two;
  /// digit: forward of that micro-batch, letter: its backward):
  ///
  ///   rank 0: |01012.aa3bb2aa3bb.cc.ddccdd|
  ///   rank 1: |.010aa1bb2aa3bb2cc3ddccdd..|
  Interleaved,
  /// ZB-H1 (Qi et al. 2023, "Zero Bubble Pipeline Parallelism"): each
  /// backward splits into B, the input gradient the previous stage waits
  /// for, and W, the weight gradients no one waits for. 1F1B's order of F
  /// and B, with stage s running micro-batch k's W after B of k+s (so each
  /// stage holds N micro-batches, stage 0's under 1F1B, and one more after
  /// the first: a forward's receive goes before the W runs before it, lest
  /// its sender wait for them), and the delayed W's filling the drain. With F,
  /// B and W equally long the
  /// bubble is a third of 1F1B's: (N-1)/(3M+N-1). 3 stages, M = 4 (digit:
  /// F, letter: B, capital: W):
  ///
  ///   stage 0: |012..aA3bBcCdD|
  ///   stage 1: |.01.a2bA3cBdCD|   (--explain's timeline, ideal stages)
  ///   stage 2: |..0a1b2cA3dBCD|
  ZeroBubbleH1,
  /// A user's orders (weft-compile --pipeline-schedule FILE.json): each
  /// stage's runs as written, checked like any other (a schedule that would
  /// deadlock is refused when the program is written).
  Custom,
};

/// One run of a stage: micro-batch Microbatch's forward or backward on the
/// stage's local model chunk Chunk (0 unless the schedule interleaves).
struct PipelineRun {
  bool Backward = false;
  int64_t Microbatch = 0;
  int64_t Chunk = 0;
  /// A forward whose transfers share one group with the next run's (a
  /// backward of another micro-batch): interleaved 1F1B's steady state
  /// exchanges both runs' sends and the next two runs' receives at once, as
  /// Megatron does. Grouping a forward alone there would deadlock, and
  /// grouping it with a backward that waits on its output as well.
  bool Paired = false;
  /// The weight-gradient half of a split backward (Backward is true too):
  /// ZB-H1's W, which sends nothing and no one waits for.
  bool Weight = false;
};

/// A schedule: its kind, the model chunks each rank holds (V, virtual
/// stages: 1 unless interleaved or a custom order names chunks), whether
/// backwards split into B and W (ZB-H1, or a custom order with W runs), and
/// for Custom every stage's runs.
struct PipelineSchedule {
  PipelineScheduleKind Kind = PipelineScheduleKind::OneFOneB;
  int64_t VirtualStages = 1;
  bool SplitBackward = false;
  std::vector<std::vector<PipelineRun>> Orders;
};

/// "gpipe", "1f1b", "interleaved:V" (V >= 2), "zb-h1", or "custom:" followed
/// by the orders in the compact form pipelineOrdersText writes ("F0 F1 B0
/// B1|F0 B0 F1 B1"; "F0.1" runs chunk 1, "W0" micro-batch 0's weight
/// gradients); anything else is refused, naming it.
Status parsePipelineSchedule(const std::string &Name, PipelineSchedule &S);
/// The kind's name ("custom" for a user's orders).
const char *pipelineScheduleName(PipelineScheduleKind K);
/// The form the passes carry: parsePipelineSchedule reads it back.
std::string pipelineScheduleSpec(const PipelineSchedule &S);
/// A hand-written schedule file: {"stages": [["F0", "F1", "B0", "B1"], ...]}
/// with one list per stage, each running F<k> and B<k> once for every
/// micro-batch k < M, F<k> first; with V > 1 chunks per stage, "F<k>.<c>"
/// and "B<k>.<c>" for every chunk c < V, a micro-batch's forwards in chunk
/// order and its backwards in reverse after them; with V = 1, "W<k>" after
/// every B<k> splits the backwards (all micro-batches or none). Refused
/// naming the stage and entry.
Status parsePipelineScheduleJson(const std::string &Text, int64_t N, int64_t M,
                                 int64_t V, PipelineSchedule &S);
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
/// for both GPipe and 1F1B, (N-1)/(V M + N-1) interleaved over V chunks.
double pipelineBubble(int64_t N, int64_t M, int64_t V = 1);
/// ZB-H1's, with F, B and W equally long: (N-1)/(3M+N-1).
double zeroBubbleH1Bubble(int64_t N, int64_t M);

} // namespace weft

#endif // WEFT_PROGRAM_PIPELINESCHEDULE_H
