//===- ValidateDataflow.cpp - what a program computes, not only its shapes ===//
//
// validateProgram checks every instruction's operands one by one. These
// checks look at the instruction list as a whole and refuse programs that
// load fine but cannot compute the model: no instructions, a loss nothing
// writes, an arena buffer read before anything writes it, two live arena
// buffers sharing bytes, an instruction writing a buffer it reads where the
// op is not in place, tokens and targets swapped, cross-entropy means over
// the wrong number of rows.
//
//===----------------------------------------------------------------------===//
#include "program/Program.h"

#include <algorithm>
#include <set>
#include <unordered_map>

namespace weft {
namespace {

std::string bufferName(const Program &P, int64_t Id) {
  const BufferSpec &B = P.Buffers[size_t(Id)];
  std::string S =
      "buffers[" + std::to_string(Id) + "] (" + bufferKindName(B.Kind);
  if (B.Kind == BufferKind::Arena)
    S += " at byte " + std::to_string(B.Offset) + ", " +
         std::to_string(B.bytes()) + " bytes";
  else if (!B.Name.empty())
    S += " '" + B.Name + "'";
  return S + ")";
}

std::string instName(const Program &P, size_t I) {
  return "instructions[" + std::to_string(I) + "] (" +
         instructionName(P.Instructions[I]) + ")";
}

// Whether buffers A and B are the same or share arena bytes.
bool overlaps(const Program &P, int64_t A, int64_t B) {
  if (A == B)
    return true;
  const BufferSpec &BA = P.Buffers[size_t(A)], &BB = P.Buffers[size_t(B)];
  return BA.Kind == BufferKind::Arena && BB.Kind == BufferKind::Arena &&
         BA.Offset < BB.Offset + BB.bytes() &&
         BB.Offset < BA.Offset + BA.bytes();
}

// An asynchronous collective in flight: instruction Start reads X, writes Y.
struct InFlight {
  size_t Start;
  int64_t X, Y;
};

// Explicit start/wait pairs: a wait completes the one collective in flight
// that writes its buffer; until then no instruction touches (reads or
// writes) the bytes of that collective's output or writes those of its
// input (reading the input is safe: the collective only reads it; ring
// attention computes on the block it is sending), and every collective
// started in a fragment is waited for in that fragment.
Status checkInFlight(const Program &P, size_t I, std::vector<InFlight> &Open) {
  const Instruction &Inst = P.Instructions[I];
  for (const Fragment &F : P.Stages.front().Fragments)
    if (F.Begin == int64_t(I) && !Open.empty())
      return Status::error(instName(P, Open.front().Start) +
                           " is not waited for before fragment '" + F.Name +
                           "' begins");
  if (Inst.Op == OpKind::Wait) {
    for (size_t K = 0; K < Open.size(); ++K)
      if (Open[K].Y == Inst.In[0]) {
        Open.erase(Open.begin() + int64_t(K));
        return Status::success();
      }
    return Status::error(instName(P, I) + " waits for " +
                         bufferName(P, Inst.In[0]) +
                         ", which no collective in flight writes");
  }
  for (const InFlight &F : Open)
    for (const std::vector<int64_t> *Ids : {&Inst.In, &Inst.Out})
      for (int64_t Id : *Ids)
        if ((Ids == &Inst.Out && overlaps(P, Id, F.X)) || overlaps(P, Id, F.Y))
          return Status::error(
              instName(P, I) + " touches " + bufferName(P, Id) + " while " +
              instName(P, F.Start) + " is in flight (wait for it first)");
  if (Inst.Attrs.Async)
    Open.push_back({I, Inst.In[0], Inst.Out[0]});
  return Status::success();
}

// Which input an op may read: embeddings look up tokens, cross-entropies
// compare with targets.
Status checkInputUse(const Program &P, size_t I) {
  const Instruction &Inst = P.Instructions[I];
  const char *Want = nullptr;
  if (Inst.Op == OpKind::Embedding || Inst.Op == OpKind::EmbeddingGrad)
    Want = "tokens";
  else if (isCrossEntropy(Inst.Op) || isMseLoss(Inst.Op))
    Want = "targets";
  if (!Want)
    return Status::success();
  for (int64_t Id : Inst.In) {
    const BufferSpec &B = P.Buffers[size_t(Id)];
    if (B.Kind == BufferKind::Input && B.Name != Want)
      return Status::error(instName(P, I) + " reads the '" + B.Name +
                           "' input where it needs '" + Want + "'");
  }
  return Status::success();
}

// A cross-entropy is a mean over every row of the global batch: its
// denominator is batch*seq (batch with one target per sample), or 0 (the
// local rows) when this rank holds them all.
Status checkDenominator(const Program &P, size_t I) {
  const Instruction &Inst = P.Instructions[I];
  const bool Mse = isMseLoss(Inst.Op);
  if ((!isCrossEntropy(Inst.Op) && !Mse) ||
      Inst.Op == OpKind::CrossEntropyStats)
    return Status::success();
  const bool PerSample = P.sampleTargets();
  int64_t Rows = PerSample ? P.Batch : P.Batch * P.Seq, Local = -1;
  if (const BufferSpec *T = P.targets())
    Local = T->numel();
  // A regression's mean is over every element of the step's targets.
  const BufferSpec *Floats = P.floatTargets();
  if (Mse && Floats && !Floats->Dims.empty()) {
    Rows = P.Batch * (numElements(Floats->Dims) / Floats->Dims[0]);
    // Its own operand: a sequence-split reader reads a slice of the input.
    if (!Inst.In.empty())
      Local = P.Buffers[size_t(Inst.In[0])].numel();
  }
  int64_t D = Inst.Attrs.Denominator;
  if (D == Rows || (D == 0 && Local == Rows))
    return Status::success();
  return Status::error(
      instName(P, I) + " has denominator " + std::to_string(D) + ", expected " +
      std::to_string(Rows) +
      (Mse         ? " (the step's target elements)"
       : PerSample ? " (batch " + std::to_string(P.Batch) + " samples)"
                   : " (batch " + std::to_string(P.Batch) + " x seq " +
                         std::to_string(P.Seq) + " rows)") +
      (D == 0 ? " since this rank holds " + std::to_string(Local) + " of them"
              : ""));
}

// `masked` is a cross-entropy's, and every cross-entropy of a program with
// a masked-LM recipe has it: a next-token op there would divide by the
// wrong count. (Masked ops without the recipe train on given targets.)
Status checkMasked(const Program &P, size_t I) {
  const Instruction &Inst = P.Instructions[I];
  if (Inst.Attrs.Masked && !isCrossEntropy(Inst.Op))
    return Status::error(
        instName(P, I) +
        " has attrs.masked, which only cross-entropy ops take");
  if (isCrossEntropy(Inst.Op) && !Inst.Attrs.Masked && P.MaskedLm.enabled())
    return Status::error(instName(P, I) +
                         " is not masked, but the program trains a masked-LM "
                         "loss (masked_lm)");
  return Status::success();
}

// With several slots, the arena past slot_bytes is one instance that the
// micro-batches in flight share. A per-micro-batch buffer there is a run's
// scratch: one fragment writes and reads it, and no transfer touches it
// (an asynchronous one would read or write it while another micro-batch's
// run reuses the bytes).
Status checkSharedArena(const Program &P, const std::vector<bool> &PerMb) {
  const Stage &St = P.Stages.front();
  const int64_t Slot = slotBytes(P);
  auto Shared = [&](int64_t Id) {
    const BufferSpec &B = P.Buffers[size_t(Id)];
    return B.Kind == BufferKind::Arena && PerMb[size_t(Id)] && B.Offset >= Slot;
  };
  for (size_t A = 0; A < St.Schedule.size(); ++A) {
    const Action &Act = St.Schedule[A];
    if (Act.isTransfer() && Act.Microbatch >= 0 && Shared(Act.Buffer))
      return Status::error(
          "schedule[" + std::to_string(A) + "] " +
          (Act.K == Action::Send ? "sends " : "receives ") +
          bufferName(P, Act.Buffer) + " for micro-batch " +
          std::to_string(Act.Microbatch) +
          ", but it lies past slot_bytes=" + std::to_string(Slot) +
          ", where the micro-batches in flight share one instance");
  }
  std::vector<int64_t> Owner(P.Buffers.size(), -1);
  for (size_t F = 0; F < St.Fragments.size(); ++F)
    for (int64_t I = St.Fragments[F].Begin; I < St.Fragments[F].End; ++I)
      for (const std::vector<int64_t> *Ids :
           {&P.Instructions[size_t(I)].In, &P.Instructions[size_t(I)].Out})
        for (int64_t Id : *Ids) {
          if (!Shared(Id))
            continue;
          int64_t &O = Owner[size_t(Id)];
          if (O >= 0 && O != int64_t(F))
            return Status::error(
                instName(P, size_t(I)) + " in fragment '" +
                St.Fragments[F].Name + "' touches " + bufferName(P, Id) +
                ", which fragment '" + St.Fragments[size_t(O)].Name +
                "' also uses: past slot_bytes=" + std::to_string(Slot) +
                " the micro-batches in flight share it, so only one "
                "fragment's run may hold a value there");
          O = int64_t(F);
        }
  return Status::success();
}

struct Interval {
  int64_t First = -1, Last = -1; // instruction indices; -1: unused
};

} // namespace

// The (input, output) buffer pairs of packs whose input lies where the pack
// puts it, at the same arena bytes (a gradient weft-plan-memory wrote
// straight into its bucket): the two meet at the pack and share its bytes.
static std::set<std::pair<int64_t, int64_t>> packedInPlace(const Program &P) {
  std::set<std::pair<int64_t, int64_t>> Pairs;
  for (const Instruction &I : P.Instructions) {
    if (I.Op != OpKind::Pack || I.Attrs.Blocks != 1 || I.Out.size() != 1)
      continue;
    const BufferSpec &Out = P.Buffers[size_t(I.Out[0])];
    int64_t Flat = 0;
    for (int64_t Id : I.In) {
      const BufferSpec &In = P.Buffers[size_t(Id)];
      if (In.Kind == BufferKind::Arena && Out.Kind == BufferKind::Arena &&
          In.StageIndex == Out.StageIndex && In.Offset == Out.Offset + Flat)
        Pairs.insert({Id, I.Out[0]});
      Flat += In.bytes();
    }
  }
  return Pairs;
}

Status checkDataflow(const Program &P) {
  const size_t N = P.Instructions.size();
  if (N == 0)
    return Status::error("the program has no instructions");
  // A stage view before the last stage computes no loss.
  const bool HasLoss = P.Loss >= 0;
  if (HasLoss && P.ForwardEnd < 1)
    return Status::error("forward_end=0: no instruction computes the loss");
  if (HasLoss && P.Buffers[size_t(P.Loss)].Kind != BufferKind::Arena)
    return Status::error("the loss is " + bufferName(P, P.Loss) +
                         ", expected an arena buffer an instruction writes");
  // Transfers (format version 5): a received buffer is written as its
  // fragment begins, a sent one read as its fragment ends.
  const Stage &St0 = P.Stages.front();
  std::vector<std::vector<int64_t>> RecvAt(N + 1), SendAt(N + 1);
  for (size_t A = 0; A < St0.Schedule.size(); ++A) {
    const Action &Act = St0.Schedule[A];
    if (!Act.isTransfer())
      continue;
    const int64_t Run = St0.attachedRun(A); // checkSchedule found it
    if (Run < 0)
      continue;
    const Fragment &F = St0.Fragments[size_t(St0.Schedule[size_t(Run)].Frag)];
    if (F.Begin == F.End)
      return Status::error("schedule[" + std::to_string(A) +
                           "] transfers a buffer for fragment '" + F.Name +
                           "', which has no instructions");
    if (Act.K == Action::Recv)
      RecvAt[size_t(F.Begin)].push_back(Act.Buffer);
    else
      SendAt[size_t(F.End - 1)].push_back(Act.Buffer);
  }

  std::vector<Interval> Live(P.Buffers.size());
  std::vector<bool> Written(P.Buffers.size(), false);
  std::vector<InFlight> Open;
  bool LossWritten = false;
  std::vector<bool> OutputWritten(P.Outputs.size(), false);
  // The outputs each buffer is (by id: a pairwise test was quadratic).
  std::unordered_multimap<int64_t, size_t> OutputOf;
  for (size_t O = 0; O < P.Outputs.size(); ++O)
    OutputOf.emplace(P.Outputs[O].Buffer, O);
  // The micro-batch loop: instructions [LoopBegin, LoopEnd) run once per
  // micro-batch. A value from before it that the loop reads must survive
  // every iteration; a value the loop writes is its last iteration's after
  // it, which with several micro-batches is not the step's.
  const Stage &St = P.Stages.front();
  const int64_t LoopBegin = St.Fragments[size_t(St.firstPerMicrobatch())].Begin;
  const int64_t LoopEnd = St.Fragments[size_t(St.lastPerMicrobatch())].End;
  std::vector<bool> Carried(P.Buffers.size(), false);
  for (size_t I = 0; I < N; ++I) {
    const Instruction &Inst = P.Instructions[I];
    for (int64_t Id : RecvAt[I]) {
      if (P.Buffers[size_t(Id)].Kind == BufferKind::Constant)
        return Status::error("a recv after " + instName(P, I) + " writes " +
                             bufferName(P, Id) + ": a constant is read only");
      if (P.Buffers[size_t(Id)].Kind != BufferKind::Arena)
        continue; // a param's value
      Interval &L = Live[size_t(Id)];
      if (L.First < 0)
        L.First = int64_t(I);
      L.Last = std::max(L.Last, int64_t(I));
      Written[size_t(Id)] = true;
    }
    WEFT_RETURN_IF_ERROR(checkInFlight(P, I, Open));
    // A collective's input stays live until its wait.
    if (Inst.Op == OpKind::Wait)
      for (size_t S = I; S-- > 0;)
        if (P.Instructions[S].Attrs.Async &&
            P.Instructions[S].Out[0] == Inst.In[0]) {
          int64_t X = P.Instructions[S].In[0];
          if (P.Buffers[size_t(X)].Kind == BufferKind::Arena)
            Live[size_t(X)].Last = int64_t(I);
          break;
        }
    WEFT_RETURN_IF_ERROR(checkInputUse(P, I));
    WEFT_RETURN_IF_ERROR(checkDenominator(P, I));
    WEFT_RETURN_IF_ERROR(checkMasked(P, I));
    // accumulate reads the arena sum it writes (a step sum, written first
    // by the prologue).
    const size_t NumReads =
        Inst.In.size() + (Inst.Op == OpKind::Accumulate ? 1 : 0);
    for (size_t R = 0; R < NumReads; ++R) {
      const int64_t Id = R < Inst.In.size() ? Inst.In[R] : Inst.Out[0];
      const BufferSpec &B = P.Buffers[size_t(Id)];
      if (B.Kind != BufferKind::Arena)
        continue;
      if (!Written[size_t(Id)])
        return Status::error(instName(P, I) + " reads " + bufferName(P, Id) +
                             " before any instruction writes it");
      Live[size_t(Id)].Last = int64_t(I);
      const int64_t First = Live[size_t(Id)].First, At = int64_t(I);
      if (At >= LoopBegin && At < LoopEnd && First < LoopBegin)
        Carried[size_t(Id)] = true;
      if (P.Microbatches > 1 && At >= LoopEnd && First >= LoopBegin &&
          First < LoopEnd)
        return Status::error(
            instName(P, I) + " reads " + bufferName(P, Id) + ", written by " +
            instName(P, size_t(First)) +
            " once per micro-batch: only the last micro-batch's would be read");
    }
    for (int64_t Id : Inst.Out) {
      // A constant (version 10) holds the file's values for the whole run.
      if (P.Buffers[size_t(Id)].Kind == BufferKind::Constant)
        return Status::error(instName(P, I) + " writes " + bufferName(P, Id) +
                             ": a constant is read only");
      bool InPlace =
          std::find(Inst.In.begin(), Inst.In.end(), Id) != Inst.In.end();
      // adamw updates param, m and v in place by definition, and an
      // all_gather of dim 0 blocks may gather in place (checked per op).
      if (InPlace && Inst.Op != OpKind::AdamW && Inst.Op != OpKind::AllGather)
        return Status::error(instName(P, I) + " writes " + bufferName(P, Id) +
                             ", which it also reads: " + opName(Inst.Op) +
                             " does not work in place");
      if (Id == P.Loss && int64_t(I) < P.ForwardEnd)
        LossWritten = true;
      if (int64_t(I) < P.ForwardEnd)
        for (auto [It, End] = OutputOf.equal_range(Id); It != End; ++It)
          OutputWritten[It->second] = true;
      if (P.Buffers[size_t(Id)].Kind != BufferKind::Arena)
        continue;
      Interval &L = Live[size_t(Id)];
      if (L.First < 0)
        L.First = int64_t(I);
      L.Last = std::max(L.Last, int64_t(I));
      Written[size_t(Id)] = true;
    }
    for (int64_t Id : SendAt[I]) {
      if (P.Buffers[size_t(Id)].Kind != BufferKind::Arena)
        continue; // a param's value
      if (!Written[size_t(Id)])
        return Status::error("a send after " + instName(P, I) + " reads " +
                             bufferName(P, Id) +
                             ", which no instruction has written");
      Live[size_t(Id)].Last = int64_t(I);
    }
  }
  if (!Open.empty())
    return Status::error(instName(P, Open.front().Start) +
                         " is never waited for");
  if (HasLoss && !LossWritten)
    return Status::error(
        "no instruction before forward_end=" + std::to_string(P.ForwardEnd) +
        " writes the loss " + bufferName(P, P.Loss));
  if (HasLoss)
    Live[size_t(P.Loss)].Last = int64_t(N); // read after the step
  for (size_t O = 0; O < P.Outputs.size(); ++O) {
    const int64_t Id = P.Outputs[O].Buffer;
    if (!OutputWritten[O])
      return Status::error(
          "no instruction before forward_end=" + std::to_string(P.ForwardEnd) +
          " writes output '" + P.Outputs[O].Name + "', " + bufferName(P, Id));
    Live[size_t(Id)].Last = int64_t(N); // read after the forward
  }
  // Several micro-batches in flight each write their own instance of a
  // per-micro-batch buffer; one written once per step as well would be
  // written by all of them at once.
  if (St0.Slots > 1) {
    std::vector<bool> PerMb = perMicrobatchBuffers(P);
    for (const Fragment &F : St0.Fragments)
      if (F.PerMicrobatch)
        for (int64_t I = F.Begin; I < F.End; ++I)
          for (int64_t Id : P.Instructions[size_t(I)].Out)
            // A step sum has one instance on purpose: each micro-batch adds
            // into it.
            if (P.Buffers[size_t(Id)].Kind == BufferKind::Arena &&
                !PerMb[size_t(Id)] &&
                P.Instructions[size_t(I)].Op != OpKind::Accumulate)
              return Status::error(
                  instName(P, size_t(I)) + " writes " + bufferName(P, Id) +
                  " once per micro-batch, but a once-per-step fragment "
                  "wrote it first: with several slots it has one instance");
    WEFT_RETURN_IF_ERROR(checkSharedArena(P, PerMb));
  }
  for (size_t Id = 0; Id < P.Buffers.size(); ++Id)
    if (Carried[Id])
      Live[Id].Last = std::max(Live[Id].Last, LoopEnd - 1);

  // Live arena buffers must not share bytes: sweep them in offset order.
  const std::set<std::pair<int64_t, int64_t>> InPlacePacks = packedInPlace(P);
  std::vector<int64_t> Ids;
  for (size_t Id = 0; Id < P.Buffers.size(); ++Id)
    if (P.Buffers[Id].Kind == BufferKind::Arena && Live[Id].First >= 0)
      Ids.push_back(int64_t(Id));
  std::sort(Ids.begin(), Ids.end(), [&](int64_t A, int64_t B) {
    return P.Buffers[size_t(A)].Offset < P.Buffers[size_t(B)].Offset;
  });
  for (size_t A = 0; A < Ids.size(); ++A) {
    const BufferSpec &BA = P.Buffers[size_t(Ids[A])];
    for (size_t B = A + 1; B < Ids.size(); ++B) {
      const BufferSpec &BB = P.Buffers[size_t(Ids[B])];
      if (BB.Offset >= BA.Offset + BA.bytes())
        break;
      const Interval &LA = Live[size_t(Ids[A])], &LB = Live[size_t(Ids[B])];
      // A pack's input in place in its output: they meet at the pack only.
      auto MeetAtPack = [&](int64_t In, int64_t Out) {
        return InPlacePacks.count({In, Out}) &&
               Live[size_t(In)].Last == Live[size_t(Out)].First;
      };
      if (MeetAtPack(Ids[A], Ids[B]) || MeetAtPack(Ids[B], Ids[A]))
        continue;
      if (LA.First <= LB.Last && LB.First <= LA.Last)
        return Status::error(
            bufferName(P, Ids[A]) + " and " + bufferName(P, Ids[B]) +
            " share bytes while both are live (instructions " +
            std::to_string(LA.First) + ".." + std::to_string(LA.Last) +
            " and " + std::to_string(LB.First) + ".." +
            std::to_string(LB.Last) + ")");
    }
  }
  return Status::success();
}

} // namespace weft

namespace weft {

int64_t slotBytes(const Program &V) {
  const int64_t S = V.Stages.front().SlotBytes;
  return S >= 0 ? S : V.ArenaBytes;
}

int64_t arenaAllocation(const Program &V) {
  const int64_t Slot = slotBytes(V);
  return (V.Stages.front().Slots - 1) * Slot + V.ArenaBytes;
}

int64_t arenaAddress(const Program &V, const std::vector<bool> &PerMb,
                     int64_t Id, int64_t K) {
  const int64_t Slot = slotBytes(V), Slots = V.Stages.front().Slots;
  const int64_t Offset = V.Buffers[size_t(Id)].Offset;
  if (Offset >= Slot)
    return (Slots - 1) * Slot + Offset;
  return K >= 0 && PerMb[size_t(Id)] ? (K % Slots) * Slot + Offset : Offset;
}

std::vector<bool> perMicrobatchBuffers(const Program &V) {
  std::vector<bool> Per(V.Buffers.size(), false), Seen(V.Buffers.size(), false);
  const Stage &S = V.Stages.front();
  auto Mark = [&](int64_t Id, bool PerMb) {
    if (V.Buffers[size_t(Id)].Kind != BufferKind::Arena || Seen[size_t(Id)])
      return;
    Seen[size_t(Id)] = true;
    Per[size_t(Id)] = PerMb;
  };
  for (const Action &A : S.Schedule)
    if (A.K == Action::Recv && A.Buffer >= 0 &&
        A.Buffer < int64_t(V.Buffers.size()))
      Mark(A.Buffer, A.Microbatch >= 0);
  for (const Fragment &F : S.Fragments)
    for (int64_t I = F.Begin; I < F.End; ++I)
      for (int64_t Id : V.Instructions[size_t(I)].Out)
        Mark(Id, F.PerMicrobatch);
  return Per;
}

} // namespace weft
