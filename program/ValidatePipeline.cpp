//===- ValidatePipeline.cpp - Stages that run together --------------------===//
//
// Format version 5 (docs/program-format.md, "Pipeline stages"). Each stage
// is checked as a program of its own (stageView), then the stages'
// schedules are simulated together, as grouped transfers run them (NCCL,
// WEFT_NO_ASYNC=1): a group of consecutive transfers posts all of them and
// completes once each has met its partner; a stage's k-th send to a peer
// meets the peer's k-th receive from it (no tags, as NCCL). The
// asynchronous way (runtime/PipelineTransfers.cpp) blocks only where this
// one does or later, so what passes here passes there. Between the actions
// that compute the step's gradients and the update's every stage waits for
// all (the runtime sums the loss there), and no group spans that point. A
// schedule that could wait forever, or whose partners disagree on the
// micro-batch, shape or dtype, is refused.
//
//===----------------------------------------------------------------------===//
#include "program/Program.h"

#include <algorithm>
#include <map>

namespace weft {

Program stageView(const Program &P, size_t S) {
  // Everything but the instruction table and the stages is the whole
  // program's (a field added to Program is carried without a change here).
  Program V = P;
  Stage St = P.Stages[S];
  const int64_t Base = St.Fragments.empty() ? 0 : St.Fragments.front().Begin;
  const int64_t End =
      std::min<int64_t>(St.Fragments.empty() ? 0 : St.Fragments.back().End,
                        int64_t(P.Instructions.size()));
  V.Instructions.assign(P.Instructions.begin() + std::min(Base, End),
                        P.Instructions.begin() + End);
  V.StageIndex = int64_t(S);
  V.NumStages = int64_t(P.Stages.size());
  V.Stages.clear();
  for (Fragment &F : St.Fragments) {
    F.Begin -= Base;
    F.End -= Base;
    if (F.Name == FragmentOptimizer)
      V.OptimizerBegin = F.Begin;
  }
  if (St.lastForward() >= 0)
    V.ForwardEnd = St.Fragments[size_t(St.lastForward())].End;
  V.Stages.push_back(std::move(St));
  V.Loss = S + 1 == P.Stages.size() ? P.Loss : -1;
  if (V.Stages.front().ArenaBytes >= 0)
    V.ArenaBytes = V.Stages.front().ArenaBytes;
  return V;
}

namespace {

std::string actionText(const Program &P, size_t S, size_t A) {
  const Action &Act = P.Stages[S].Schedule[A];
  std::string R =
      "stages[" + std::to_string(S) + "].schedule[" + std::to_string(A) + "] (";
  if (Act.K == Action::Run)
    R += "run " + P.Stages[S].Fragments[size_t(Act.Frag)].Name;
  else
    R += transferName(Act);
  if (Act.Microbatch >= 0)
    R += ", micro-batch " + std::to_string(Act.Microbatch);
  return R + ")";
}

/// Where in the model a transfer of stage S sits: the run it belongs to's
/// virtual stage (chunk c of stage S is virtual stage c*NS + S), and
/// whether that run is a backward; -1 for a once-per-step run.
std::pair<int64_t, bool> placeOf(const Program &P, size_t S, size_t A) {
  const Stage &St = P.Stages[S];
  const int64_t Run = St.attachedRun(A);
  const Fragment &F = St.Fragments[size_t(St.Schedule[size_t(Run)].Frag)];
  if (!F.PerMicrobatch)
    return {-1, false};
  return {F.Chunk * int64_t(P.Stages.size()) + int64_t(S), F.Backward};
}

/// Every instruction of stage S reads and writes buffers of stage S only.
Status checkStageBuffers(const Program &P, size_t S) {
  const Stage &St = P.Stages[S];
  if (St.Fragments.empty())
    return Status::success();
  for (int64_t I = St.Fragments.front().Begin; I < St.Fragments.back().End; ++I)
    for (const std::vector<int64_t> *Ids :
         {&P.Instructions[size_t(I)].In, &P.Instructions[size_t(I)].Out})
      for (int64_t Id : *Ids)
        if (P.Buffers[size_t(Id)].StageIndex != int64_t(S))
          return Status::error(
              "stages[" + std::to_string(S) + "]: instructions[" +
              std::to_string(I - St.Fragments.front().Begin) + "] (" +
              instructionName(P.Instructions[size_t(I)]) + ") uses buffers[" +
              std::to_string(Id) + "] of stage " +
              std::to_string(P.Buffers[size_t(Id)].StageIndex) +
              " (a stage reaches another's values only by transfers)");
  return Status::success();
}

/// The stages' schedules run together (see the file comment).
Status simulate(const Program &P) {
  const size_t NS = P.Stages.size();
  // Per ordered pair (from, to): the sends and receives posted so far, as
  // (stage, action).
  std::map<std::pair<int64_t, int64_t>, std::vector<size_t>> Sends, Recvs;
  std::vector<size_t> Pos(NS, 0), GroupEnd(NS, 0);
  std::vector<bool> Posted(NS, false);
  // The (from, to) pair of stage S's transfer action Act.
  auto PairOf = [](size_t S, const Action &Act) {
    return Act.K == Action::Send ? std::make_pair(int64_t(S), Act.Peer)
                                 : std::make_pair(Act.Peer, int64_t(S));
  };
  auto Partner = [&](size_t S, size_t A, const std::vector<size_t> *&List,
                     size_t &Index) {
    const Action &Act = P.Stages[S].Schedule[A];
    const bool Send = Act.K == Action::Send;
    auto Key = PairOf(S, Act);
    const std::vector<size_t> &Mine = Send ? Sends[Key] : Recvs[Key];
    Index = size_t(std::find(Mine.begin(), Mine.end(), A) - Mine.begin());
    List = Send ? &Recvs[Key] : &Sends[Key];
  };
  // Every stage completes its actions before its update's, and the loss is
  // summed over the stages, before any stage starts its update.
  std::vector<size_t> Barrier(NS);
  for (size_t S = 0; S < NS; ++S)
    Barrier[S] = P.Stages[S].updateBegin();
  auto AllAtBarrier = [&] {
    for (size_t S = 0; S < NS; ++S)
      if (Pos[S] < Barrier[S])
        return false;
    return true;
  };
  bool Progress = true;
  while (Progress) {
    Progress = false;
    const bool Released = AllAtBarrier();
    for (size_t S = 0; S < NS; ++S) {
      const std::vector<Action> &Sched = P.Stages[S].Schedule;
      while (Pos[S] < Sched.size()) {
        if (Pos[S] == Barrier[S] && !Released)
          break;
        if (!Sched[Pos[S]].isTransfer()) {
          ++Pos[S];
          Progress = true;
          continue;
        }
        if (!Posted[S]) {
          size_t E = Pos[S];
          const size_t Limit = Pos[S] < Barrier[S] ? Barrier[S] : Sched.size();
          while (E < Limit && Sched[E].isTransfer()) {
            const Action &Act = Sched[E];
            (Act.K == Action::Send ? Sends : Recvs)[PairOf(S, Act)].push_back(
                E);
            ++E;
          }
          GroupEnd[S] = E;
          Posted[S] = true;
          Progress = true;
        }
        bool Done = true;
        for (size_t A = Pos[S]; A < GroupEnd[S] && Done; ++A) {
          const std::vector<size_t> *Other;
          size_t Index;
          Partner(S, A, Other, Index);
          Done = Index < Other->size();
        }
        if (!Done)
          break;
        Pos[S] = GroupEnd[S];
        Posted[S] = false;
        Progress = true;
      }
    }
  }
  // Partners agree on what they move.
  for (const auto &[Key, List] : Sends) {
    const std::vector<size_t> &Other = Recvs[Key];
    for (size_t K = 0; K < std::min(List.size(), Other.size()); ++K) {
      const size_t From = size_t(Key.first), To = size_t(Key.second);
      const Action &Snd = P.Stages[From].Schedule[List[K]];
      const Action &Rcv = P.Stages[To].Schedule[Other[K]];
      const BufferSpec &BS = P.Buffers[size_t(Snd.Buffer)];
      const BufferSpec &BR = P.Buffers[size_t(Rcv.Buffer)];
      if (Snd.Microbatch != Rcv.Microbatch || BS.Dims != BR.Dims ||
          BS.Type != BR.Type)
        return Status::error(
            actionText(P, From, List[K]) + " (" + dtypeName(BS.Type) + " " +
            shapeString(BS.Dims) + ") meets " + actionText(P, To, Other[K]) +
            " (" + dtypeName(BR.Type) + " " + shapeString(BR.Dims) +
            "): transfers between two stages pair in order, and these "
            "differ in micro-batch, shape or dtype");
      // A forward value moves down the model's chunks, a gradient up.
      const auto [VS, BackS] = placeOf(P, From, List[K]);
      const auto [VR, BackR] = placeOf(P, To, Other[K]);
      if (BackS != BackR || (VS < 0) != (VR < 0) ||
          (VS >= 0 && (BackS ? VR >= VS : VR <= VS)))
        return Status::error(
            actionText(P, From, List[K]) + " meets " +
            actionText(P, To, Other[K]) +
            ": transfers between two stages pair in order, and this pair "
            "does not carry a forward value to a later model chunk or a "
            "gradient to an earlier one (virtual stages " +
            std::to_string(VS) + " and " + std::to_string(VR) + ")");
    }
  }
  for (size_t S = 0; S < NS; ++S) {
    if (Pos[S] == P.Stages[S].Schedule.size())
      continue;
    for (size_t A = Pos[S]; A < GroupEnd[S]; ++A) {
      const std::vector<size_t> *Other;
      size_t Index;
      Partner(S, A, Other, Index);
      if (Index < Other->size())
        continue;
      const size_t Peer = size_t(P.Stages[S].Schedule[A].Peer);
      std::string Blocked =
          Pos[Peer] == Barrier[Peer] && !AllAtBarrier() &&
                  Pos[Peer] < P.Stages[Peer].Schedule.size()
              ? "stage " + std::to_string(Peer) +
                    " waits for every stage to finish its gradients"
          : Pos[Peer] < P.Stages[Peer].Schedule.size()
              ? "stage " + std::to_string(Peer) + " waits at " +
                    actionText(P, Peer, Pos[Peer])
              : "stage " + std::to_string(Peer) + " has finished its schedule";
      return Status::error(
          "the pipeline schedule deadlocks: " + actionText(P, S, A) +
          " never meets its partner (" + Blocked + ")");
    }
  }
  return Status::success();
}

} // namespace

Status checkPipeline(const Program &P) {
  const Mesh &M = P.Devices;
  if (M.Pipeline.empty())
    return Status::error("the program has " + std::to_string(P.Stages.size()) +
                         " stages but its mesh names no pipeline axis "
                         "(mesh.pipeline)");
  const int64_t Axis = M.Dims[size_t(M.axisIndex(M.Pipeline))];
  if (Axis != int64_t(P.Stages.size()))
    return Status::error("the program has " + std::to_string(P.Stages.size()) +
                         " stages, but pipeline axis '" + M.Pipeline +
                         "' has size " + std::to_string(Axis));
  if (std::find(M.Groups.begin(), M.Groups.end(), AxesList{M.Pipeline}) ==
      M.Groups.end())
    return Status::error("mesh.groups does not list [" + M.Pipeline +
                         "], the group the stages' transfers and the loss "
                         "use");
  for (const BufferSpec &B : P.Buffers)
    if (B.StageIndex >= int64_t(P.Stages.size()))
      return Status::error("a buffer of stage " + std::to_string(B.StageIndex) +
                           " in a program of " +
                           std::to_string(P.Stages.size()) + " stages");
  const BufferSpec &Loss = P.Buffers[size_t(P.Loss)];
  if (Loss.StageIndex + 1 != int64_t(P.Stages.size()))
    return Status::error("the loss buffers[" + std::to_string(P.Loss) +
                         "] is on stage " + std::to_string(Loss.StageIndex) +
                         ", expected the last");
  // The stages' fragments follow one another in the instruction table.
  int64_t End = 0;
  for (size_t S = 0; S < P.Stages.size(); ++S) {
    const Stage &St = P.Stages[S];
    if (St.Fragments.empty() || St.Fragments.front().Begin != End)
      return Status::error("stages[" + std::to_string(S) +
                           "]'s fragments do not start at instruction " +
                           std::to_string(End));
    End = St.Fragments.back().End;
    WEFT_RETURN_IF_ERROR(checkStageBuffers(P, S));
  }
  if (End != int64_t(P.Instructions.size()))
    return Status::error("the stages' fragments cover " + std::to_string(End) +
                         " of " + std::to_string(P.Instructions.size()) +
                         " instructions");
  for (size_t S = 0; S < P.Stages.size(); ++S) {
    Program V = stageView(P, S);
    const std::string Ctx = "stages[" + std::to_string(S) + "]";
    WEFT_RETURN_IF_ERROR(checkSchedule(V));
    WEFT_RETURN_IF_ERROR(checkDataflow(V).withContext(Ctx));
  }
  return simulate(P);
}

} // namespace weft
