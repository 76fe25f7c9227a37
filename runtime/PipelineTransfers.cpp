//===- PipelineTransfers.cpp - A pipeline stage's sends and receives ------===//
//
// The schedule's consecutive transfer actions form a group, run one of two
// ways (docs/design.md, "Pipeline transfers"):
//
// - Asynchronous, where the communicator's transfers complete on their own
//   (MPI). The group's sends are copied to a staging buffer and started, and
//   the stage goes on at once: it never waits for its peer to take what it
//   sends. Its receives are started into another staging buffer and
//   completed (copied into place) right before their attached run, the
//   first run of their micro-batch (Stage::attachedRun): ZB-H1's weight
//   gradients, placed between a receive and its backward, run while it is in
//   flight. Every transfer is complete when a range of actions ends.
// - Grouped (NCCL, whose sends and receives on one stream must start
//   together, or WEFT_NO_ASYNC=1): all start together and complete at once.
//
// Either way a stage blocks only where the grouped model does or later, so
// a schedule the loader's simulation accepts (program/ValidatePipeline.cpp,
// which models the grouped way) cannot deadlock asynchronously either. The
// staging copies keep sent values and received ones out of the memory plan's
// way: a sent buffer's bytes may be reused once its fragment ends, and a
// received one's are written only where the grouped way wrote them or later.
//
//===----------------------------------------------------------------------===//
#include "runtime/Executor.h"

#include <cstdint>

namespace weft {

Status Executor::planTransfers() {
  const Stage &St = Prog.Stages.front();
  const size_t N = St.Schedule.size();
  AsyncTransfers = AsyncAllowed && Comm->independentTransfers();
  ReceivedBy.assign(N, SIZE_MAX);
  SendDirect.assign(N, false);
  RecvDirect.assign(N, false);
  size_t GroupedStaging = 0;
  for (size_t A = 0; A < N;) {
    // ArenaRecvBytes: grouped, what lands in staging (a receive into a
    // param's storage, a replica's value, cannot land where a send of the
    // group reads).
    size_t E = A, SendBytes = 0, RecvBytes = 0, ArenaRecvBytes = 0;
    const size_t Limit = A < UpdateBegin ? UpdateBegin : N;
    for (; E < Limit && St.Schedule[E].isTransfer(); ++E) {
      const Action &T = St.Schedule[E];
      const size_t Bytes =
          align64(size_t(Prog.Buffers[size_t(T.Buffer)].bytes()));
      (T.K == Action::Send ? SendBytes : RecvBytes) += Bytes;
      if (T.K == Action::Recv &&
          Prog.Buffers[size_t(T.Buffer)].Kind == BufferKind::Arena)
        ArenaRecvBytes += Bytes;
      if (T.K == Action::Recv) {
        const int64_t Run = St.attachedRun(E);
        if (Run >= 0 && size_t(Run) < Limit)
          ReceivedBy[A] = std::min(ReceivedBy[A], size_t(Run));
      }
    }
    if (E == A) {
      ++A;
      continue;
    }
    if (SendBytes)
      GroupedStaging = std::max(GroupedStaging, ArenaRecvBytes);
    // The first run after the group that does anything (a stage that
    // keeps its backward whole runs an empty weight fragment), in its part
    // of the step.
    size_t NextRun = E;
    while (NextRun < Limit &&
           (St.Schedule[NextRun].isTransfer() ||
            St.Fragments[size_t(St.Schedule[NextRun].Frag)].Begin ==
                St.Fragments[size_t(St.Schedule[NextRun].Frag)].End))
      ++NextRun;
    // Receives land in place when no run comes between them and where
    // they complete (as grouped transfers do); sends leave from place when
    // no run follows them before the part ends, which waits for them. The
    // others go through staging.
    RecvDirect[A] = ReceivedBy[A] == NextRun ||
                    (ReceivedBy[A] == SIZE_MAX && NextRun == Limit);
    // In the update, a send before the optimizer's run is a step's sum,
    // which the memory plan keeps through that run (checkDataflow).
    SendDirect[A] = (!RecvBytes && NextRun == Limit) || A >= UpdateBegin;
    if (!SendDirect[A])
      SendBufferBytes = std::max(SendBufferBytes, SendBytes);
    if (!RecvDirect[A])
      RecvBufferBytes = std::max(RecvBufferBytes, RecvBytes);
    A = E;
  }
  if (AsyncTransfers) {
    // Every buffer at load, so that the peak does not depend on how many
    // groups happened to be in flight at once (and --explain's bound holds).
    for (bool Recv : {false, true}) {
      std::deque<TransferBuffer> &Pool = Recv ? RecvBuffers : SendBuffers;
      const size_t Bytes = Recv ? RecvBufferBytes : SendBufferBytes;
      Pool.resize(MaxTransferBuffers);
      for (size_t I = 0; I < Pool.size() && Bytes; ++I) {
        Pool[I].Data = Impl->allocate(Bytes);
        if (!Pool[I].Data)
          return Status::error("cannot allocate " + std::to_string(Bytes) +
                               " bytes of transfer staging (" +
                               (Recv ? "receive" : "send") + " buffer " +
                               std::to_string(I) + ")");
        ScratchBytes += Bytes;
      }
    }
    return Status::success();
  }
  if (GroupedStaging) {
    Staging = Impl->allocate(GroupedStaging);
    if (!Staging)
      return Status::error("cannot allocate " + std::to_string(GroupedStaging) +
                           " bytes of transfer staging");
    ScratchBytes += GroupedStaging;
  }
  return Status::success();
}

Status Executor::runTransfers(size_t A, size_t End, size_t &Next) {
  const Stage &St = Prog.Stages.front();
  size_t E = A;
  while (E < End && St.Schedule[E].isTransfer())
    ++E;
  Next = E;
  return (AsyncTransfers ? startTransfers(A, E) : runGroupedTransfers(A, E))
      .withContext("schedule[" + std::to_string(A) + "] (transfers)");
}

Span Executor::transferSpan(size_t A) const {
  Span Sp;
  Sp.Kind = SpanKind::Transfer;
  Sp.Action = int32_t(A);
  Sp.Microbatch = int32_t(Prog.Stages.front().Schedule[A].Microbatch);
  Sp.Step = Ctx0Step;
  return Sp;
}

Status Executor::runGroupedTransfers(size_t A, size_t E) {
  const Stage &St = Prog.Stages.front();
  TransferOps.clear();
  Span Sp = transferSpan(A);
  bool Sends = false;
  for (size_t I = A; I < E; ++I)
    Sends |= St.Schedule[I].K == Action::Send;
  // A group's receive may land where one of its sends reads (the sent value
  // of one micro-batch, the received of the next, in one slot, or bytes the
  // memory plan reuses): with sends in the group, receives go to staging
  // and are copied into place once the group completes.
  size_t StagedBytes = 0;
  Staged.clear();
  for (size_t I = A; I < E; ++I) {
    const Action &T = St.Schedule[I];
    const BufferSpec &B = Prog.Buffers[size_t(T.Buffer)];
    Transfer X;
    X.Dir = T.K == Action::Send ? Transfer::Send : Transfer::Recv;
    X.Peer = int(T.Peer);
    X.Buf = bufferAt(T.Buffer, T.Microbatch);
    X.Count = size_t(B.numel());
    X.T = B.Type;
    if (T.K == Action::Recv && Sends && B.Kind == BufferKind::Arena) {
      Staged.push_back({X.Buf, StagedBytes, size_t(B.bytes())});
      X.Buf = static_cast<char *>(Staging) + StagedBytes;
      StagedBytes += align64(size_t(B.bytes()));
    }
    TransferOps.push_back(X);
    ++(T.K == Action::Send ? Sp.Sends : Sp.Recvs);
    if (T.K == Action::Send)
      Sp.Bytes += double(B.bytes());
  }
  if (TransferOps.empty())
    return Status::success();
  if (TransferKey >= 0)
    CommTotals[size_t(TransferKey)] += Sp.Bytes;
  const int64_t W0 = Timeline::nowNs();
  Status S = Comm->startTransfers(*Pipeline, TransferOps, *Q, TransferRequest);
  if (S.ok())
    S = Comm->wait(TransferRequest, *Q);
  WaitNs += Timeline::nowNs() - W0;
  for (size_t I = 0; I < Staged.size() && S.ok(); ++I)
    S = Q->copyOnDevice(Staged[I].To,
                        static_cast<char *>(Staging) + Staged[I].Offset,
                        Staged[I].Bytes);
  if (Timing) {
    Sp.StartNs = W0;
    Sp.DurNs = Timeline::nowNs() - W0;
    Times.record(Sp);
  }
  return S;
}

Status Executor::takeTransferBuffer(bool Recv, size_t &Index) {
  std::deque<TransferBuffer> &Pool = Recv ? RecvBuffers : SendBuffers;
  auto FirstFree = [&] {
    Index = 0;
    while (Index < Pool.size() && Pool[Index].InUse)
      ++Index;
    return Index < Pool.size();
  };
  if (FirstFree())
    return Status::success();
  // Every one in flight: retire this direction's oldest group (a receive
  // completes early, which is safe anywhere between its action and its
  // run).
  WEFT_RETURN_IF_ERROR(progressTransfers());
  for (size_t I = 0; !FirstFree() && I < InFlight.size(); ++I)
    if (InFlight[I].Recv == Recv)
      WEFT_RETURN_IF_ERROR(retire(I));
  if (!FirstFree())
    return Status::error("no free transfer buffer"); // every one is retired
  return Status::success();
}

Status Executor::startTransfers(size_t A, size_t E) {
  const Stage &St = Prog.Stages.front();
  // Retiring the sends done frees their buffers for this group's.
  WEFT_RETURN_IF_ERROR(progressTransfers());
  for (bool Recv : {false, true}) {
    auto Mine = [&](size_t I) {
      return (St.Schedule[I].K == Action::Recv) == Recv;
    };
    size_t First = A;
    while (First < E && !Mine(First))
      ++First;
    if (First == E)
      continue;
    const bool Staged = !(Recv ? RecvDirect : SendDirect)[A];
    size_t Index;
    WEFT_RETURN_IF_ERROR(takeTransferBuffer(Recv, Index));
    TransferBuffer &Buf = (Recv ? RecvBuffers : SendBuffers)[Index];
    TransferOps.clear();
    size_t Offset = 0;
    double Bytes = 0;
    for (size_t I = First; I < E; ++I) {
      if (!Mine(I))
        continue;
      const Action &T = St.Schedule[I];
      const BufferSpec &B = Prog.Buffers[size_t(T.Buffer)];
      void *Place = bufferAt(T.Buffer, T.Microbatch);
      Transfer X;
      X.Dir = Recv ? Transfer::Recv : Transfer::Send;
      X.Peer = int(T.Peer);
      X.Buf = Staged ? static_cast<char *>(Buf.Data) + Offset : Place;
      X.Count = size_t(B.numel());
      X.T = B.Type;
      if (Staged && !Recv)
        WEFT_RETURN_IF_ERROR(Q->copyOnDevice(X.Buf, Place, size_t(B.bytes())));
      TransferOps.push_back(X);
      Offset += align64(size_t(B.bytes()));
      Bytes += double(B.bytes());
    }
    if (!Recv && TransferKey >= 0)
      CommTotals[size_t(TransferKey)] += Bytes;
    InFlightTransfers F;
    F.Recv = Recv;
    F.Buffer = Index;
    F.Begin = A;
    F.End = E;
    F.StartNs = Timeline::nowNs();
    WEFT_RETURN_IF_ERROR(
        Comm->startTransfers(*Pipeline, TransferOps, *Q, Buf.Request));
    Buf.InUse = true;
    InFlight.push_back(F);
  }
  return Status::success();
}

Status Executor::retire(size_t I) {
  const Stage &St = Prog.Stages.front();
  InFlightTransfers F = InFlight[I];
  InFlight.erase(InFlight.begin() + std::ptrdiff_t(I));
  TransferBuffer &Buf = (F.Recv ? RecvBuffers : SendBuffers)[F.Buffer];
  Status S = Status::success();
  if (F.DoneNs < 0) {
    const int64_t W0 = Timeline::nowNs();
    S = Comm->wait(Buf.Request, *Q)
            .withContext("schedule[" + std::to_string(F.Begin) + "] (" +
                         (F.Recv ? "receives" : "sends") + ")");
    F.DoneNs = Timeline::nowNs();
    WaitNs += F.DoneNs - W0;
  }
  // A staged receive is copied into place now.
  const bool CopyIn = F.Recv && !RecvDirect[F.Begin];
  Span Sp = transferSpan(F.Begin);
  size_t Offset = 0;
  for (size_t A = F.Begin; A < F.End; ++A) {
    const Action &T = St.Schedule[A];
    if ((T.K == Action::Recv) != F.Recv)
      continue;
    const size_t Bytes = size_t(Prog.Buffers[size_t(T.Buffer)].bytes());
    if (CopyIn && S.ok())
      S = Q->copyOnDevice(bufferAt(T.Buffer, T.Microbatch),
                          static_cast<char *>(Buf.Data) + Offset, Bytes);
    Offset += align64(Bytes);
    ++(F.Recv ? Sp.Recvs : Sp.Sends);
    if (!F.Recv)
      Sp.Bytes += double(Bytes);
  }
  Buf.InUse = false;
  if (Timing) {
    Sp.StartNs = F.StartNs;
    Sp.DurNs = F.DoneNs - F.StartNs;
    Times.record(Sp);
  }
  return S;
}

Status Executor::progressTransfers() {
  Status S = Status::success();
  for (size_t I = 0; I < InFlight.size();) {
    InFlightTransfers &F = InFlight[I];
    if (F.DoneNs < 0 && S.ok()) {
      bool Done = false;
      TransferBuffer &Buf = (F.Recv ? RecvBuffers : SendBuffers)[F.Buffer];
      S = Comm->test(Buf.Request, Done);
      if (Done)
        F.DoneNs = Timeline::nowNs();
    }
    // A send is done with its buffer once complete; a receive waits for
    // its run to be copied into place.
    if (!F.Recv && F.DoneNs >= 0) {
      Status R = retire(I);
      if (S.ok())
        S = R;
      continue;
    }
    ++I;
  }
  return S;
}

Status Executor::completeReceives(size_t Before) {
  Status S = Status::success();
  for (size_t I = 0; I < InFlight.size();) {
    if (!InFlight[I].Recv || ReceivedBy[InFlight[I].Begin] > Before) {
      ++I;
      continue;
    }
    Status R = retire(I);
    if (S.ok())
      S = R;
  }
  return S;
}

Status Executor::finishTransfers() {
  Status S = Status::success();
  while (!InFlight.empty()) {
    Status R = retire(0);
    if (S.ok())
      S = R;
  }
  return S;
}

} // namespace weft
