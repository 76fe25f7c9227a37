//===- Timeline.h - Timed spans of a rank's work, for traces and profiles -===//
//
// The executor reports every instruction it runs, every wait for an
// asynchronous collective and every asynchronous collective's flight (issue
// to completion) as a span. The timeline always keeps per-op totals (the
// WEFT_PROFILE summary) and, when tracing, the spans themselves, which
// chromeTraceEvents() writes as Chrome trace-event JSON (Perfetto,
// chrome://tracing): one process per rank, one thread per queue.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_RUNTIME_TIMELINE_H
#define WEFT_RUNTIME_TIMELINE_H

#include "program/Program.h"

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace weft {

enum class SpanKind : uint8_t {
  Instruction, // a kernel or a blocking collective, on the main queue
  Wait,        // the main queue waiting for an async collective
  Test,        // the main queue testing async collectives (progress)
  InFlight,    // an async collective from its start to its completion
  Transfer,    // a group of pipeline sends and receives, start to completion
};

struct Span {
  int64_t StartNs = 0, DurNs = 0; // steady clock
  int64_t Step = 0;               // global, 1-based
  int32_t Inst = -1;              // instruction index
  OpKind Op = OpKind::Fill;
  SpanKind Kind = SpanKind::Instruction;
  double Bytes = 0;                // collectives: sent by this rank (ring)
  const AxesList *Group = nullptr; // collectives: the group's mesh axes
  /// Transfers: the schedule action starting the group, its micro-batch
  /// (-1: once per step), and how many sends and receives it holds.
  int32_t Action = -1, Microbatch = -1, Sends = 0, Recvs = 0;
};

class Timeline {
public:
  static int64_t nowNs() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  /// Keep the spans themselves (a trace), up to MaxSpans; later ones are
  /// counted in dropped().
  void keepSpans(size_t MaxSpans) {
    Keep = true;
    Max = MaxSpans;
  }
  bool keepingSpans() const { return Keep; }
  void record(const Span &S);
  size_t dropped() const { return Dropped; }
  const std::vector<Span> &spans() const { return Spans; }

  /// The WEFT_PROFILE summary: wall time per op kind over all steps.
  std::string profileReport(bool HasAsync) const;
  /// This rank's spans as comma-separated trace-event objects (with the
  /// process and thread names), for a "traceEvents" array.
  std::string chromeTraceEvents(int Rank) const;

private:
  bool Keep = false;
  size_t Max = 0, Dropped = 0;
  std::vector<Span> Spans;
  double OpSeconds[NumOpKinds] = {};
  int64_t OpCalls[NumOpKinds] = {};
  double WaitSeconds = 0, TestSeconds = 0, TransferSeconds = 0;
  int64_t TransferGroups = 0;
};

} // namespace weft

#endif // WEFT_RUNTIME_TIMELINE_H
