//===- ValidateSchedule.cpp - A stage's fragments and schedule ------------===//
//
// Format version 3 (docs/program-format.md, "Stages, fragments and the
// schedule"). The rules are what this runtime executes exactly: one stage,
// and one micro-batch's activations in the arena at a time.
//
//===----------------------------------------------------------------------===//
#include "program/Program.h"

#include <string>

namespace weft {

int64_t Stage::find(const std::string &Name) const {
  for (size_t F = 0; F < Fragments.size(); ++F)
    if (Fragments[F].Name == Name)
      return int64_t(F);
  return -1;
}

namespace {

/// At most this many micro-batches per step (a schedule is a list).
constexpr int64_t MaxMicrobatches = int64_t(1) << 20;

std::string actionName(const Stage &S, size_t A) {
  const Action &Act = S.Schedule[A];
  std::string R = "schedule[" + std::to_string(A) + "] (";
  if (Act.Frag >= 0 && Act.Frag < int64_t(S.Fragments.size()))
    R += S.Fragments[size_t(Act.Frag)].Name;
  else
    R += "fragment " + std::to_string(Act.Frag);
  if (Act.Microbatch >= 0)
    R += " on micro-batch " + std::to_string(Act.Microbatch);
  return R + ")";
}

Status checkFragments(const Program &P, const Stage &S) {
  // The names this version knows, in table order; prologue is optional.
  const char *const Order[] = {FragmentPrologue, FragmentForward,
                               FragmentBackward, FragmentOptimizer};
  size_t Next = 0;
  int64_t End = 0;
  for (size_t F = 0; F < S.Fragments.size(); ++F) {
    const Fragment &Fr = S.Fragments[F];
    const std::string Ctx =
        "stages[0].fragments[" + std::to_string(F) + "] ('" + Fr.Name + "')";
    while (Next < 4 && Fr.Name != Order[Next] &&
           std::string(Order[Next]) == FragmentPrologue)
      ++Next;
    if (Next == 4 || Fr.Name != Order[Next])
      return Status::error(
          Ctx + " is not expected here: a stage's fragments are "
                "[prologue,] forward, backward, optimizer, in that order");
    ++Next;
    if (Fr.Begin != End || Fr.End < Fr.Begin)
      return Status::error(Ctx + " covers instructions [" +
                           std::to_string(Fr.Begin) + ", " +
                           std::to_string(Fr.End) + "), expected to start at " +
                           std::to_string(End));
    bool Want = Fr.Name == FragmentForward || Fr.Name == FragmentBackward;
    if (Fr.PerMicrobatch != Want)
      return Status::error(Ctx + (Want ? " must" : " must not") +
                           " run per micro-batch");
    End = Fr.End;
  }
  if (Next < 4)
    return Status::error("stages[0] has no '" + std::string(Order[Next]) +
                         "' fragment");
  if (End != int64_t(P.Instructions.size()))
    return Status::error("the fragments cover " + std::to_string(End) + " of " +
                         std::to_string(P.Instructions.size()) +
                         " instructions");
  if (P.Microbatches > 1 && S.find(FragmentPrologue) < 0)
    return Status::error(
        std::to_string(P.Microbatches) +
        " micro-batches accumulate gradients, but stages[0] has no "
        "prologue fragment to clear them once per step");
  const Fragment &Fwd = S.Fragments[size_t(S.find(FragmentForward))];
  const Fragment &Opt = S.Fragments[size_t(S.find(FragmentOptimizer))];
  if (P.ForwardEnd != Fwd.End || P.OptimizerBegin != Opt.Begin)
    return Status::error("forward_end " + std::to_string(P.ForwardEnd) +
                         " and optimizer_begin " +
                         std::to_string(P.OptimizerBegin) +
                         " are not the fragments' boundaries");
  return Status::success();
}

} // namespace

Status checkSchedule(const Program &P) {
  if (P.Microbatches < 1 || P.Microbatches > MaxMicrobatches)
    return Status::error("microbatches=" + std::to_string(P.Microbatches) +
                         " (expected 1 to 2^20)");
  if (P.Batch % P.Microbatches != 0)
    return Status::error("batch " + std::to_string(P.Batch) +
                         " is not divisible into " +
                         std::to_string(P.Microbatches) + " micro-batches");
  if (P.Stages.size() != 1)
    return Status::error(
        "the program has " + std::to_string(P.Stages.size()) +
        " stages; this runtime runs programs of one stage (pipeline "
        "stages are not implemented yet)");
  const Stage &S = P.Stages[0];
  WEFT_RETURN_IF_ERROR(checkFragments(P, S));
  const int64_t M = P.Microbatches;
  const int64_t Fwd = S.find(FragmentForward), Bwd = S.find(FragmentBackward);
  const int64_t Opt = S.find(FragmentOptimizer),
                Zero = S.find(FragmentPrologue);
  // Per micro-batch: where its forward and backward ran (-1: not yet).
  std::vector<int64_t> FwdAt(size_t(M), -1), BwdAt(size_t(M), -1);
  int64_t InFlight = -1, ZeroAt = -1, OptAt = -1, Forwards = 0, Backwards = 0;
  for (size_t A = 0; A < S.Schedule.size(); ++A) {
    const Action &Act = S.Schedule[A];
    const std::string Name = actionName(S, A);
    if (Act.Frag < 0 || Act.Frag >= int64_t(S.Fragments.size()))
      return Status::error(Name + " names no fragment of stages[0]");
    const Fragment &Fr = S.Fragments[size_t(Act.Frag)];
    if (Fr.PerMicrobatch != (Act.Microbatch >= 0))
      return Status::error(
          Name + (Fr.PerMicrobatch ? " needs a micro-batch"
                                   : " runs once per step: no micro-batch"));
    if (Act.Microbatch >= M)
      return Status::error(Name + ": micro-batch out of range [0, " +
                           std::to_string(M) + ")");
    if (Act.Frag == Fwd) {
      int64_t &At = FwdAt[size_t(Act.Microbatch)];
      if (At >= 0)
        return Status::error(Name + " repeats schedule[" + std::to_string(At) +
                             "]");
      if (InFlight >= 0)
        return Status::error(
            Name + " starts while micro-batch " + std::to_string(InFlight) +
            " awaits its backward: the arena holds one micro-batch's "
            "activations");
      if (OptAt >= 0)
        return Status::error(Name + " runs after the optimizer");
      At = int64_t(A);
      InFlight = Act.Microbatch;
      ++Forwards;
    } else if (Act.Frag == Bwd) {
      if (InFlight != Act.Microbatch)
        return Status::error(Name + " does not follow its micro-batch's "
                                    "forward");
      BwdAt[size_t(Act.Microbatch)] = int64_t(A);
      InFlight = -1;
      ++Backwards;
    } else {
      int64_t &At = Act.Frag == Opt ? OptAt : ZeroAt;
      if (At >= 0)
        return Status::error(Name + " repeats schedule[" + std::to_string(At) +
                             "]");
      At = int64_t(A);
      if (Act.Frag == Zero && (Forwards > 0 || OptAt >= 0))
        return Status::error(Name + " must come before every forward");
      if (Act.Frag == Opt && Backwards < M)
        return Status::error(Name + " runs before every micro-batch's "
                                    "backward has");
    }
  }
  for (int64_t K = 0; K < M; ++K)
    if (FwdAt[size_t(K)] < 0 || BwdAt[size_t(K)] < 0)
      return Status::error(
          "the schedule never runs " +
          std::string(FwdAt[size_t(K)] < 0 ? "forward" : "backward") +
          " on micro-batch " + std::to_string(K));
  if (OptAt < 0)
    return Status::error("the schedule never runs the optimizer");
  if (Zero >= 0 && ZeroAt < 0)
    return Status::error("the schedule never runs prologue");
  return Status::success();
}

} // namespace weft
