//===- Timeline.cpp - Timed spans of a rank's work ------------------------===//
#include "runtime/trace/Timeline.h"

#include <algorithm>
#include <cstdio>

namespace weft {

void Timeline::record(const Span &S) {
  double Secs = double(S.DurNs) * 1e-9;
  switch (S.Kind) {
  case SpanKind::Instruction:
    OpSeconds[int(S.Op)] += Secs;
    ++OpCalls[int(S.Op)];
    break;
  case SpanKind::Wait:
    // Time spent waiting counts as the collective's.
    OpSeconds[int(S.Op)] += Secs;
    WaitSeconds += Secs;
    break;
  case SpanKind::Test:
    TestSeconds += Secs;
    break;
  case SpanKind::InFlight:
    break; // overlaps the main queue's spans: not a share of its time
  case SpanKind::Transfer:
    TransferSeconds += Secs;
    ++TransferGroups;
    break;
  }
  if (!Keep)
    return;
  if (Spans.size() >= Max) {
    ++Dropped;
    return;
  }
  Spans.push_back(S);
}

std::string Timeline::profileReport(bool HasAsync) const {
  double Total = 0;
  std::vector<int> Order;
  for (int Op = 0; Op < NumOpKinds; ++Op) {
    Total += OpSeconds[Op];
    if (OpCalls[Op])
      Order.push_back(Op);
  }
  std::sort(Order.begin(), Order.end(),
            [&](int A, int B) { return OpSeconds[A] > OpSeconds[B]; });
  std::string R = "profile (wall time per op kind, all steps):\n";
  for (int Op : Order) {
    char Line[160];
    std::snprintf(
        Line, sizeof(Line), "  %-26s %9.1f ms  %5.1f%%  %7lld calls\n",
        opName(OpKind(Op)), OpSeconds[Op] * 1e3,
        100.0 * OpSeconds[Op] / std::max(Total, 1e-12), (long long)OpCalls[Op]);
    R += Line;
  }
  if (TransferGroups) {
    char Line[160];
    std::snprintf(Line, sizeof(Line),
                  "  pipeline transfers: %.1f ms in %lld groups (not above)\n",
                  TransferSeconds * 1e3, (long long)TransferGroups);
    R += Line;
  }
  if (HasAsync) {
    char Line[160];
    std::snprintf(Line, sizeof(Line),
                  "  async collectives: %.1f ms waiting (in their ops above), "
                  "%.1f ms testing (not above)\n",
                  WaitSeconds * 1e3, TestSeconds * 1e3);
    R += Line;
  }
  return R;
}

namespace {

const char *threadName(SpanKind K) {
  return K == SpanKind::InFlight   ? "async collectives in flight"
         : K == SpanKind::Transfer ? "pipeline transfers"
                                   : "main queue";
}

int threadId(SpanKind K) {
  return K == SpanKind::InFlight ? 1 : K == SpanKind::Transfer ? 2 : 0;
}

} // namespace

std::string Timeline::chromeTraceEvents(int Rank) const {
  std::string R;
  char Buf[512];
  std::snprintf(Buf, sizeof(Buf),
                "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": %d, "
                "\"args\": {\"name\": \"rank %d\", \"dropped_spans\": %zu}},\n"
                "{\"ph\": \"M\", \"name\": \"process_sort_index\", \"pid\": "
                "%d, \"args\": {\"sort_index\": %d}}",
                Rank, Rank, Dropped, Rank, Rank);
  R += Buf;
  for (SpanKind K :
       {SpanKind::Instruction, SpanKind::InFlight, SpanKind::Transfer}) {
    std::snprintf(Buf, sizeof(Buf),
                  ",\n{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": %d, "
                  "\"tid\": %d, \"args\": {\"name\": \"%s\"}}",
                  Rank, threadId(K), threadName(K));
    R += Buf;
  }
  for (const Span &S : Spans) {
    const char *Cat = S.Kind == SpanKind::Wait       ? "wait"
                      : S.Kind == SpanKind::Test     ? "test"
                      : S.Kind == SpanKind::InFlight ? "async"
                      : S.Kind == SpanKind::Transfer ? "transfer"
                      : S.Group                      ? "collective"
                                                     : "compute";
    std::string Name =
        S.Kind == SpanKind::Wait   ? std::string("wait ") + opName(S.Op)
        : S.Kind == SpanKind::Test ? std::string("test async collectives")
        : S.Kind == SpanKind::Transfer
            ? "transfers: " + std::to_string(S.Sends) + " send, " +
                  std::to_string(S.Recvs) + " recv"
            : std::string(opName(S.Op));
    std::string Args = "\"step\": " + std::to_string(S.Step);
    if (S.Kind == SpanKind::Transfer) {
      std::snprintf(Buf, sizeof(Buf),
                    ", \"action\": %d, \"microbatch\": %d, \"bytes\": %.0f",
                    S.Action, S.Microbatch, S.Bytes);
      Args += Buf;
    }
    if (S.Inst >= 0)
      Args += ", \"instruction\": " + std::to_string(S.Inst);
    if (S.Group) {
      std::string Axes;
      for (const std::string &A : *S.Group)
        Axes += (Axes.empty() ? "\"" : ", \"") + A + "\"";
      std::snprintf(Buf, sizeof(Buf), ", \"bytes\": %.0f, \"group\": [%s]",
                    S.Bytes, Axes.c_str());
      Args += Buf;
    }
    // Microseconds with nanosecond digits, as the format allows.
    std::snprintf(Buf, sizeof(Buf),
                  ",\n{\"ph\": \"X\", \"pid\": %d, \"tid\": %d, \"name\": "
                  "\"%s\", \"cat\": \"%s\", \"ts\": %.3f, \"dur\": %.3f, "
                  "\"args\": {%s}}",
                  Rank, threadId(S.Kind), Name.c_str(), Cat,
                  double(S.StartNs) * 1e-3, double(S.DurNs) * 1e-3,
                  Args.c_str());
    R += Buf;
  }
  return R;
}

} // namespace weft
