//===- ValidateSchedule.cpp - A stage's fragments and schedule ------------===//
//
// Format version 3 (docs/program-format.md, "Stages, fragments and the
// schedule"). The rules are what this runtime executes exactly: one stage,
// and one micro-batch's activations in the arena at a time.
//
//===----------------------------------------------------------------------===//
#include "program/Program.h"

#include <algorithm>
#include <string>

namespace weft {

int64_t Stage::find(const std::string &Name) const {
  for (size_t F = 0; F < Fragments.size(); ++F)
    if (Fragments[F].Name == Name)
      return int64_t(F);
  return -1;
}

int64_t Stage::find(bool Backward, int64_t C) const {
  for (size_t F = 0; F < Fragments.size(); ++F)
    if (Fragments[F].PerMicrobatch && !Fragments[F].Weight &&
        Fragments[F].Backward == Backward && Fragments[F].Chunk == C)
      return int64_t(F);
  return -1;
}

int64_t Stage::lastPerMicrobatch() const {
  for (size_t F = Fragments.size(); F-- > 0;)
    if (Fragments[F].PerMicrobatch)
      return int64_t(F);
  return -1;
}

size_t Stage::updateBegin() const {
  const int64_t Opt = find(FragmentOptimizer);
  size_t A = Schedule.size();
  for (size_t I = 0; I < Schedule.size(); ++I)
    if (!Schedule[I].isTransfer() && Schedule[I].Frag == Opt)
      A = I;
  while (A > 0 && Schedule[A - 1].isTransfer() &&
         Schedule[A - 1].Microbatch < 0)
    --A;
  return A;
}

int64_t Stage::attachedRun(size_t A) const {
  // A once-per-step send whose group a once-per-step run follows (the
  // optimizer's) belongs to that run.
  bool Next = Schedule[A].K == Action::Recv;
  if (!Next && Schedule[A].Microbatch < 0) {
    size_t B = A;
    while (B < Schedule.size() && Schedule[B].isTransfer())
      ++B;
    Next = B < Schedule.size() && Schedule[B].Microbatch < 0;
  }
  for (int64_t B = int64_t(A); B >= 0 && B < int64_t(Schedule.size());
       B += Next ? 1 : -1)
    if (!Schedule[size_t(B)].isTransfer() &&
        Schedule[size_t(B)].Microbatch == Schedule[A].Microbatch)
      return B;
  return -1;
}

std::string transferName(const Action &A) {
  const bool Send = A.K == Action::Send;
  return std::string(Send ? "send buffers[" : "recv buffers[") +
         std::to_string(A.Buffer) + (Send ? "] to stage " : "] from stage ") +
         std::to_string(A.Peer);
}

namespace {

/// At most this many micro-batches per step (a schedule is a list).
constexpr int64_t MaxMicrobatches = int64_t(1) << 20;

std::string actionName(const Stage &S, size_t A) {
  const Action &Act = S.Schedule[A];
  std::string R = "schedule[" + std::to_string(A) + "] (";
  if (Act.isTransfer())
    R += transferName(Act);
  else if (Act.Frag >= 0 && Act.Frag < int64_t(S.Fragments.size()))
    R += S.Fragments[size_t(Act.Frag)].Name;
  else
    R += "fragment " + std::to_string(Act.Frag);
  if (Act.Microbatch >= 0)
    R += " on micro-batch " + std::to_string(Act.Microbatch);
  return R + ")";
}

/// A stage's fragment names in table order: [prologue,] its chunks'
/// forwards, their backwards in reverse, [weight,] optimizer.
std::vector<std::string> fragmentOrder(int64_t Chunks, bool Split) {
  std::vector<std::string> Order{FragmentPrologue};
  auto name = [&](const char *Base, int64_t C) {
    return Chunks > 1 ? std::string(Base) + "." + std::to_string(C)
                      : std::string(Base);
  };
  for (int64_t C = 0; C < Chunks; ++C)
    Order.push_back(name(FragmentForward, C));
  for (int64_t C = Chunks; C-- > 0;)
    Order.push_back(name(FragmentBackward, C));
  if (Split)
    Order.push_back(FragmentWeight);
  Order.push_back(FragmentOptimizer);
  return Order;
}

Status checkFragments(const Program &P, const Stage &S,
                      const std::string &Where) {
  // The names this version knows, in table order; prologue is optional.
  // A weight fragment splits the backward of a stage of one chunk.
  const bool Split = S.find(FragmentWeight) >= 0 && S.Chunks == 1;
  const std::vector<std::string> Order = fragmentOrder(S.Chunks, Split);
  size_t Next = 0;
  int64_t End = 0;
  for (size_t F = 0; F < S.Fragments.size(); ++F) {
    const Fragment &Fr = S.Fragments[F];
    const std::string Ctx =
        Where + ".fragments[" + std::to_string(F) + "] ('" + Fr.Name + "')";
    if (Next == 0 && Fr.Name != Order[0])
      ++Next; // no prologue
    if (Next == Order.size() || Fr.Name != Order[Next]) {
      std::string List = "[prologue,]";
      for (size_t N = 1; N < Order.size(); ++N)
        List += (N > 1 ? ", " : " ") + Order[N];
      return Status::error(Ctx +
                           " is not expected here: this stage's "
                           "fragments are " +
                           List + ", in that order");
    }
    ++Next;
    if (Fr.Begin != End || Fr.End < Fr.Begin)
      return Status::error(Ctx + " covers instructions [" +
                           std::to_string(Fr.Begin) + ", " +
                           std::to_string(Fr.End) + "), expected to start at " +
                           std::to_string(End));
    End = Fr.End;
  }
  if (Next < Order.size())
    return Status::error(Where + " has no '" + Order[Next] + "' fragment");
  if (End != int64_t(P.Instructions.size()))
    return Status::error("the fragments cover " + std::to_string(End) + " of " +
                         std::to_string(P.Instructions.size()) +
                         " instructions");
  if (P.Microbatches > 1 && S.find(FragmentPrologue) < 0)
    return Status::error(
        std::to_string(P.Microbatches) +
        " micro-batches accumulate gradients, but " + Where +
        " has no prologue fragment to clear them once per step");
  const Fragment &Fwd = S.Fragments[size_t(S.lastForward())];
  const Fragment &Opt = S.Fragments[size_t(S.find(FragmentOptimizer))];
  if (P.ForwardEnd != Fwd.End || P.OptimizerBegin != Opt.Begin)
    return Status::error("forward_end " + std::to_string(P.ForwardEnd) +
                         " and optimizer_begin " +
                         std::to_string(P.OptimizerBegin) +
                         " are not the fragments' boundaries");
  return Status::success();
}

} // namespace

namespace {

std::string stageName(const Program &P) {
  return "stages[" + std::to_string(std::max<int64_t>(P.StageIndex, 0)) + "]";
}

Status checkTransfer(const Program &P, const Stage &S, size_t A) {
  const Action &Act = S.Schedule[A];
  const std::string Name = stageName(P) + "." + actionName(S, A);
  if (P.NumStages < 2)
    return Status::error(Name + ": a program of one stage has no peer to " +
                         (Act.K == Action::Send ? "send to" : "receive from"));
  if (Act.Peer < 0 || Act.Peer >= P.NumStages || Act.Peer == P.StageIndex)
    return Status::error(Name + ": peer stage " + std::to_string(Act.Peer) +
                         " is not another of the " +
                         std::to_string(P.NumStages) + " stages");
  if (Act.Buffer < 0 || Act.Buffer >= int64_t(P.Buffers.size()))
    return Status::error(Name + ": buffer id " + std::to_string(Act.Buffer) +
                         " out of range [0, " +
                         std::to_string(P.Buffers.size()) + ")");
  const BufferSpec &B = P.Buffers[size_t(Act.Buffer)];
  // A param's value moves once per step (to the stages holding a replica).
  const bool Param = B.Kind == BufferKind::Param && Act.Microbatch < 0;
  if ((B.Kind != BufferKind::Arena && !Param) || B.StageIndex != P.StageIndex)
    return Status::error(Name + ": buffers[" + std::to_string(Act.Buffer) +
                         "] is a " + bufferKindName(B.Kind) +
                         " buffer of stage " + std::to_string(B.StageIndex) +
                         ", expected an arena buffer of this stage (or, once "
                         "per step, a param buffer)");
  if (Act.Microbatch >= P.Microbatches)
    return Status::error(Name + ": micro-batch out of range [0, " +
                         std::to_string(P.Microbatches) + ")");
  if (S.attachedRun(A) < 0)
    return Status::error(
        Name +
        (Act.K == Action::Recv
             ? " is not followed by a run of the same micro-batch"
             : " does not follow a run of the same micro-batch") +
        " (a receive belongs to its micro-batch's next run, a send to its "
        "previous)");
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
    return Status::error("checkSchedule takes one stage, got " +
                         std::to_string(P.Stages.size()) +
                         " (checkPipeline checks a program of several)");
  const Stage &S = P.Stages[0];
  const std::string Where = stageName(P);
  WEFT_RETURN_IF_ERROR(checkFragments(P, S, Where));
  const int64_t M = P.Microbatches;
  const int64_t Opt = S.find(FragmentOptimizer),
                Zero = S.find(FragmentPrologue);
  // The per-micro-batch fragments in table order: each micro-batch runs
  // them in that order, each once. Position of each fragment among them.
  std::vector<int64_t> PerMb, Position(S.Fragments.size(), -1);
  for (size_t F = 0; F < S.Fragments.size(); ++F)
    if (S.Fragments[F].PerMicrobatch) {
      Position[F] = int64_t(PerMb.size());
      PerMb.push_back(int64_t(F));
    }
  const int64_t Runs = int64_t(PerMb.size());
  // Per micro-batch: how many of its runs have run, and its last action
  // (it holds its slot until then).
  std::vector<int64_t> Done(size_t(M), 0), LastAt(size_t(M), -1);
  for (size_t A = 0; A < S.Schedule.size(); ++A)
    if (S.Schedule[A].Microbatch >= 0 && S.Schedule[A].Microbatch < M)
      LastAt[size_t(S.Schedule[A].Microbatch)] = int64_t(A);
  std::vector<int64_t> Holder(size_t(std::min(S.Slots, M)), -1);
  int64_t ZeroAt = -1, OptAt = -1, Started = 0, Finished = 0;
  for (size_t A = 0; A < S.Schedule.size(); ++A) {
    const Action &Act = S.Schedule[A];
    const std::string Name = Where + "." + actionName(S, A);
    if (Act.isTransfer()) {
      WEFT_RETURN_IF_ERROR(checkTransfer(P, S, A));
    } else {
      if (Act.Frag < 0 || Act.Frag >= int64_t(S.Fragments.size()))
        return Status::error(Name + " names no fragment of " + Where);
      const Fragment &Fr = S.Fragments[size_t(Act.Frag)];
      if (Fr.PerMicrobatch != (Act.Microbatch >= 0))
        return Status::error(
            Name + (Fr.PerMicrobatch ? " needs a micro-batch"
                                     : " runs once per step: no micro-batch"));
      if (Act.Microbatch >= M)
        return Status::error(Name + ": micro-batch out of range [0, " +
                             std::to_string(M) + ")");
    }
    if (Act.Microbatch >= 0) {
      // A micro-batch holds its arena slot from its first action to its
      // last.
      int64_t &H = Holder[size_t(Act.Microbatch % int64_t(Holder.size()))];
      if (H >= 0 && H != Act.Microbatch)
        return Status::error(
            Name + " needs arena slot " +
            std::to_string(Act.Microbatch % int64_t(Holder.size())) +
            ", which micro-batch " + std::to_string(H) +
            " still holds (slots=" + std::to_string(S.Slots) +
            ": the arena holds that many micro-batches' activations)");
      H = LastAt[size_t(Act.Microbatch)] == int64_t(A) ? -1 : Act.Microbatch;
    }
    if (Act.isTransfer())
      continue;
    if (S.Fragments[size_t(Act.Frag)].PerMicrobatch) {
      int64_t &D = Done[size_t(Act.Microbatch)];
      const int64_t Pos = Position[size_t(Act.Frag)];
      if (Pos != D)
        return Status::error(
            Name +
            (Pos < D ? " runs again"
                     : " does not follow its micro-batch's " +
                           S.Fragments[size_t(PerMb[size_t(Pos - 1)])].Name) +
            " (each micro-batch runs " + Where +
            "'s per-micro-batch fragments once each, in table order)");
      if (OptAt >= 0)
        return Status::error(Name + " runs after the optimizer");
      Started += D == 0;
      Finished += ++D == Runs;
    } else {
      int64_t &At = Act.Frag == Opt ? OptAt : ZeroAt;
      if (At >= 0)
        return Status::error(Name + " repeats schedule[" + std::to_string(At) +
                             "]");
      At = int64_t(A);
      if (Act.Frag == Zero && (Started > 0 || OptAt >= 0))
        return Status::error(Name + " must come before every forward");
      if (Act.Frag == Opt && Finished < M)
        return Status::error(Name + " runs before every micro-batch's "
                                    "backward has");
    }
  }
  for (int64_t K = 0; K < M; ++K)
    if (Done[size_t(K)] < Runs)
      return Status::error(
          Where + ": the schedule never runs " +
          S.Fragments[size_t(PerMb[size_t(Done[size_t(K)])])].Name +
          " on micro-batch " + std::to_string(K));
  if (OptAt < 0)
    return Status::error(Where + ": the schedule never runs the optimizer");
  if (Zero >= 0 && ZeroAt < 0)
    return Status::error(Where + ": the schedule never runs prologue");
  return Status::success();
}

} // namespace weft
