//===- StagedCommunicator.cpp - Device buffers through host staging ------===//
//
// The decorator of StagedCommunicator.h. A staged call copies its inputs to
// the host through the queue (Q.copyToHost), synchronizes Q so that the
// staging buffer holds them, runs the host communicator on hostQueue(),
// copies the result back (Q.copyToDevice) and synchronizes Q again: a
// queue may read a host source until it is synchronized (runtime/Queue.h),
// and the staging buffer is reused by the next call.
//
// Every all-reduce and all-gather runs in place on one staging buffer: a
// separate send buffer would double the staging memory and the copies for
// the same result (the input is copied to where the host call would have
// put it). reduce-scatter needs two (its input and output differ in size).
//
// Nonblocking calls (iallReduce, iallGather, startTransfers) start the host
// call on their request's own staging buffer and complete it in test() or
// wait(), which copy the results back on the queue that started them and
// synchronize it: after that any queue sees them. A staged start thus
// overlaps the host communication with the device's later work, as MPI's
// does with the CPU backend's. A host call that completes at once (a
// communicator without peers) is copied back before the start returns.
//
//===----------------------------------------------------------------------===//
#include "runtime/comm/StagedCommunicator.h"

#include <cstdint>
#include <new>
#include <string>
#include <vector>

namespace weft {

namespace {

/// Host memory that grows to the largest use and is then reused.
class Staging {
public:
  Status reserve(size_t Bytes) {
    if (Bytes <= Capacity && Data)
      return Status::success();
    size_t N = Bytes ? Bytes : 1;
    Data.reset(new (std::nothrow) char[N]);
    Capacity = Data ? N : 0;
    if (!Data)
      return Status::error("cannot allocate " + std::to_string(N) +
                           " bytes of host staging");
    return Status::success();
  }
  char *data() { return Data.get(); }

private:
  std::unique_ptr<char[]> Data; // operator new: aligned for any DType
  size_t Capacity = 0;
};

/// Bytes = Count * Mult elements of T, or an error when it overflows.
Status byteCount(size_t Count, size_t Mult, DType T, size_t &Bytes) {
  const size_t E = dtypeBytes(T);
  if (Mult && Count > SIZE_MAX / Mult / E)
    return Status::error(std::to_string(Mult) + " x " + std::to_string(Count) +
                         " elements of " + dtypeName(T) +
                         " overflow size_t bytes");
  Bytes = Count * Mult * E;
  return Status::success();
}

/// Offset rounded up to 64 bytes (transfer buffers in one staging buffer).
Status align64(size_t &Offset) {
  if (Offset > SIZE_MAX - 63)
    return Status::error("transfer staging overflows size_t bytes");
  Offset = (Offset + 63) & ~size_t(63);
  return Status::success();
}

/// A staged result: Bytes at Offset of the request's staging go to Device.
struct CopyBack {
  void *Device;
  size_t Offset;
  size_t Bytes;
};

/// A request of the staged communicator: the host communicator's request,
/// and when it was staged, its staging buffer and where the results go.
struct StagedRequestState final : CommRequest::State {
  CommRequest Inner;
  bool Staged = false;     // else forwarded: Inner is the whole request
  Queue *StartQ = nullptr; // the staged start's queue
  Staging Buf;
  std::vector<CopyBack> Backs;
  std::vector<Transfer> HostOps; // startTransfers' ops on staging
  std::vector<size_t> Offsets;   // and their buffers' offsets in Buf
};

Status inCall(const char *Call, const Status &S) {
  return S.withContext(std::string("staged ") + Call);
}

class StagedCommunicator final : public Communicator {
public:
  explicit StagedCommunicator(std::unique_ptr<Communicator> H)
      : Host(std::move(H)), Name(std::string("staged-") + Host->name()) {}
  const char *name() const override { return Name.c_str(); }
  int rank() const override { return Host->rank(); }
  int size() const override { return Host->size(); }
  void abortJob(int Code) override { Host->abortJob(Code); }
  Expected<const CommGroup *> group(const Mesh &M,
                                    const AxesList &Axes) override {
    return Host->group(M, Axes);
  }
  Status barrier(const CommGroup &G) override { return Host->barrier(G); }

  Status allReduce(const CommGroup &G, const void *Send, void *Recv,
                   size_t Count, DType T, Queue &Q) override {
    if (Q.hostMemory())
      return Host->allReduce(G, Send, Recv, Count, T, Q);
    return inCall("allReduce", stagedAllReduce(G, Send, Recv, Count, T, Q));
  }
  Status allGather(const CommGroup &G, const void *Send, void *Recv,
                   size_t Count, DType T, Queue &Q) override {
    if (Q.hostMemory())
      return Host->allGather(G, Send, Recv, Count, T, Q);
    return inCall("allGather", stagedAllGather(G, Send, Recv, Count, T, Q));
  }
  Status reduceScatter(const CommGroup &G, const void *Send, void *Recv,
                       size_t Count, DType T, Queue &Q) override {
    if (Q.hostMemory())
      return Host->reduceScatter(G, Send, Recv, Count, T, Q);
    return inCall("reduceScatter",
                  stagedReduceScatter(G, Send, Recv, Count, T, Q));
  }
  Status broadcast(const CommGroup &G, void *Buf, size_t Count, DType T,
                   int Root, Queue &Q) override {
    if (Q.hostMemory())
      return Host->broadcast(G, Buf, Count, T, Root, Q);
    return inCall("broadcast", stagedBroadcast(G, Buf, Count, T, Root, Q));
  }
  Status reduce(const CommGroup &G, const void *Send, void *Recv, size_t Count,
                DType T, int Root, Queue &Q) override {
    if (Q.hostMemory())
      return Host->reduce(G, Send, Recv, Count, T, Root, Q);
    return inCall("reduce", stagedReduce(G, Send, Recv, Count, T, Root, Q));
  }

  Status iallReduce(const CommGroup &G, const void *Send, void *Recv,
                    size_t Count, DType T, Queue &Q, CommRequest &R) override {
    StagedRequestState *St = nullptr;
    WEFT_RETURN_IF_ERROR(inCall("iallReduce", startable(R, St)));
    if (Q.hostMemory())
      return forwarded(R, *St,
                       Host->iallReduce(G, Send, Recv, Count, T, Q, St->Inner));
    return inCall("iallReduce",
                  stagedIallReduce(G, Send, Recv, Count, T, Q, R, *St));
  }
  Status iallGather(const CommGroup &G, const void *Send, void *Recv,
                    size_t Count, DType T, Queue &Q, CommRequest &R) override {
    StagedRequestState *St = nullptr;
    WEFT_RETURN_IF_ERROR(inCall("iallGather", startable(R, St)));
    if (Q.hostMemory())
      return forwarded(R, *St,
                       Host->iallGather(G, Send, Recv, Count, T, Q, St->Inner));
    return inCall("iallGather",
                  stagedIallGather(G, Send, Recv, Count, T, Q, R, *St));
  }
  Status startTransfers(const CommGroup &G, const std::vector<Transfer> &Ops,
                        Queue &Q, CommRequest &R) override {
    StagedRequestState *St = nullptr;
    WEFT_RETURN_IF_ERROR(inCall("startTransfers", startable(R, St)));
    if (Q.hostMemory())
      return forwarded(R, *St, Host->startTransfers(G, Ops, Q, St->Inner));
    return inCall("startTransfers", stagedTransfers(G, Ops, Q, R, *St));
  }

  Status test(CommRequest &R, bool &Done) override {
    Done = true;
    if (!R.Active)
      return Status::success();
    StagedRequestState *St = nullptr;
    WEFT_RETURN_IF_ERROR(inCall("test", state(R, St)));
    Status S = Host->test(St->Inner, Done);
    if (!S.ok()) {
      R.Active = false;
      Done = true;
      return St->Staged ? inCall("test", S) : S;
    }
    if (!Done)
      return Status::success();
    R.Active = false;
    return St->Staged ? inCall("test", finish(*St)) : Status::success();
  }
  Status wait(CommRequest &R, Queue &Q) override {
    if (!R.Active)
      return Status::success();
    StagedRequestState *St = nullptr;
    WEFT_RETURN_IF_ERROR(inCall("wait", state(R, St)));
    Status S = Host->wait(St->Inner, St->Staged ? hostQueue() : Q);
    R.Active = false;
    if (!St->Staged)
      return S;
    WEFT_RETURN_IF_ERROR(inCall("wait", S));
    return inCall("wait", finish(*St));
  }
  Status reserveRequest(CommRequest &R, size_t Count, DType T) override {
    StagedRequestState *St = nullptr;
    WEFT_RETURN_IF_ERROR(inCall("reserveRequest", state(R, St)));
    WEFT_RETURN_IF_ERROR(Host->reserveRequest(St->Inner, Count, T));
    size_t Bytes = 0;
    WEFT_RETURN_IF_ERROR(
        inCall("reserveRequest", byteCount(Count, 1, T, Bytes)));
    WEFT_RETURN_IF_ERROR(inCall("reserveRequest", St->Buf.reserve(Bytes)));
    St->Backs.reserve(1);
    return Status::success();
  }

private:
  /// Q's device bytes at Device, Bytes of them, into host memory at Host
  /// (read once Q is synchronized).
  static Status toHost(Queue &Q, void *HostPtr, const void *Device,
                       size_t Bytes) {
    return Bytes ? Q.copyToHost(HostPtr, Device, Bytes) : Status::success();
  }
  /// Copies back and synchronizes Q, so that the staging buffer is free.
  static Status toDevice(Queue &Q, void *Device, const void *HostPtr,
                         size_t Bytes) {
    Status S =
        Bytes ? Q.copyToDevice(Device, HostPtr, Bytes) : Status::success();
    Status Sync = Q.synchronize();
    return S.ok() ? Sync : S;
  }

  Status stagedAllReduce(const CommGroup &G, const void *Send, void *Recv,
                         size_t Count, DType T, Queue &Q) {
    size_t Bytes = 0;
    WEFT_RETURN_IF_ERROR(byteCount(Count, 1, T, Bytes));
    WEFT_RETURN_IF_ERROR(BlockA.reserve(Bytes));
    char *A = BlockA.data();
    WEFT_RETURN_IF_ERROR(toHost(Q, A, Send, Bytes));
    WEFT_RETURN_IF_ERROR(Q.synchronize());
    WEFT_RETURN_IF_ERROR(Host->allReduce(G, A, A, Count, T, hostQueue()));
    return toDevice(Q, Recv, A, Bytes);
  }
  /// Puts this rank's chunk (Send, or in place its place in Recv) at its
  /// place in Buf, which holds G.Size chunks of Bytes; Q is synchronized.
  static Status stageOwnChunk(const CommGroup &G, const void *Send,
                              const void *Recv, size_t Count, DType T, Queue &Q,
                              Staging &Buf, size_t &Bytes, size_t &Total) {
    WEFT_RETURN_IF_ERROR(byteCount(Count, 1, T, Bytes));
    WEFT_RETURN_IF_ERROR(byteCount(Count, size_t(G.Size), T, Total));
    WEFT_RETURN_IF_ERROR(Buf.reserve(Total));
    const size_t Offset = size_t(G.Rank) * Bytes;
    const void *Mine = Send ? Send : static_cast<const char *>(Recv) + Offset;
    WEFT_RETURN_IF_ERROR(toHost(Q, Buf.data() + Offset, Mine, Bytes));
    return Q.synchronize();
  }
  Status stagedAllGather(const CommGroup &G, const void *Send, void *Recv,
                         size_t Count, DType T, Queue &Q) {
    size_t Bytes = 0, Total = 0;
    WEFT_RETURN_IF_ERROR(
        stageOwnChunk(G, Send, Recv, Count, T, Q, BlockA, Bytes, Total));
    char *A = BlockA.data();
    WEFT_RETURN_IF_ERROR(Host->allGather(G, nullptr, A, Count, T, hostQueue()));
    return toDevice(Q, Recv, A, Total);
  }
  Status stagedReduceScatter(const CommGroup &G, const void *Send, void *Recv,
                             size_t Count, DType T, Queue &Q) {
    size_t Bytes = 0, Total = 0;
    WEFT_RETURN_IF_ERROR(byteCount(Count, 1, T, Bytes));
    WEFT_RETURN_IF_ERROR(byteCount(Count, size_t(G.Size), T, Total));
    WEFT_RETURN_IF_ERROR(BlockA.reserve(Total));
    WEFT_RETURN_IF_ERROR(BlockB.reserve(Bytes));
    char *A = BlockA.data(), *B = BlockB.data();
    WEFT_RETURN_IF_ERROR(toHost(Q, A, Send, Total));
    WEFT_RETURN_IF_ERROR(Q.synchronize());
    WEFT_RETURN_IF_ERROR(Host->reduceScatter(G, A, B, Count, T, hostQueue()));
    return toDevice(Q, Recv, B, Bytes);
  }
  /// The root's buffer does not change: it is only read; the others' is
  /// only written (the staging buffer is not in a queue's use between
  /// calls, so they need no synchronize before the host call).
  Status stagedBroadcast(const CommGroup &G, void *Buf, size_t Count, DType T,
                         int Root, Queue &Q) {
    size_t Bytes = 0;
    WEFT_RETURN_IF_ERROR(byteCount(Count, 1, T, Bytes));
    WEFT_RETURN_IF_ERROR(BlockA.reserve(Bytes));
    char *A = BlockA.data();
    const bool IsRoot = G.Rank == Root;
    if (IsRoot) {
      WEFT_RETURN_IF_ERROR(toHost(Q, A, Buf, Bytes));
      WEFT_RETURN_IF_ERROR(Q.synchronize());
    }
    WEFT_RETURN_IF_ERROR(Host->broadcast(G, A, Count, T, Root, hostQueue()));
    return IsRoot ? Status::success() : toDevice(Q, Buf, A, Bytes);
  }
  /// In place on the root's staging; the others pass no receive buffer.
  Status stagedReduce(const CommGroup &G, const void *Send, void *Recv,
                      size_t Count, DType T, int Root, Queue &Q) {
    size_t Bytes = 0;
    WEFT_RETURN_IF_ERROR(byteCount(Count, 1, T, Bytes));
    WEFT_RETURN_IF_ERROR(BlockA.reserve(Bytes));
    char *A = BlockA.data();
    const bool IsRoot = G.Rank == Root;
    WEFT_RETURN_IF_ERROR(toHost(Q, A, Send, Bytes));
    WEFT_RETURN_IF_ERROR(Q.synchronize());
    WEFT_RETURN_IF_ERROR(
        Host->reduce(G, A, IsRoot ? A : nullptr, Count, T, Root, hostQueue()));
    return IsRoot ? toDevice(Q, Recv, A, Bytes) : Status::success();
  }

  Status stagedIallReduce(const CommGroup &G, const void *Send, void *Recv,
                          size_t Count, DType T, Queue &Q, CommRequest &R,
                          StagedRequestState &St) {
    size_t Bytes = 0;
    WEFT_RETURN_IF_ERROR(byteCount(Count, 1, T, Bytes));
    WEFT_RETURN_IF_ERROR(St.Buf.reserve(Bytes));
    char *B = St.Buf.data();
    WEFT_RETURN_IF_ERROR(toHost(Q, B, Send, Bytes));
    WEFT_RETURN_IF_ERROR(Q.synchronize());
    St.Backs.clear();
    St.Backs.push_back({Recv, 0, Bytes});
    return started(R, St, Q,
                   Host->iallReduce(G, B, B, Count, T, hostQueue(), St.Inner));
  }
  Status stagedIallGather(const CommGroup &G, const void *Send, void *Recv,
                          size_t Count, DType T, Queue &Q, CommRequest &R,
                          StagedRequestState &St) {
    size_t Bytes = 0, Total = 0;
    WEFT_RETURN_IF_ERROR(
        stageOwnChunk(G, Send, Recv, Count, T, Q, St.Buf, Bytes, Total));
    St.Backs.clear();
    St.Backs.push_back({Recv, 0, Total});
    return started(R, St, Q,
                   Host->iallGather(G, nullptr, St.Buf.data(), Count, T,
                                    hostQueue(), St.Inner));
  }
  /// Every transfer's buffer in one staging buffer, 64-byte aligned.
  Status stagedTransfers(const CommGroup &G, const std::vector<Transfer> &Ops,
                         Queue &Q, CommRequest &R, StagedRequestState &St) {
    for (size_t I = 0; I < Ops.size(); ++I)
      WEFT_RETURN_IF_ERROR(checkTransfer(G, Ops, I));
    St.HostOps.assign(Ops.begin(), Ops.end());
    St.Offsets.resize(Ops.size());
    St.Backs.clear();
    size_t End = 0;
    for (size_t I = 0; I < Ops.size(); ++I) {
      size_t Bytes = 0;
      WEFT_RETURN_IF_ERROR(
          byteCount(Ops[I].Count, 1, Ops[I].T, Bytes)
              .withContext("transfers[" + std::to_string(I) + "]"));
      if (Bytes > SIZE_MAX - End)
        return Status::error("transfer staging overflows size_t bytes");
      const size_t Offset = End;
      End += Bytes;
      WEFT_RETURN_IF_ERROR(align64(End));
      if (Ops[I].Dir == Transfer::Recv)
        St.Backs.push_back({Ops[I].Buf, Offset, Bytes});
      St.Offsets[I] = Offset;
    }
    WEFT_RETURN_IF_ERROR(St.Buf.reserve(End));
    for (size_t I = 0; I < Ops.size(); ++I) {
      St.HostOps[I].Buf = St.Buf.data() + St.Offsets[I];
      if (Ops[I].Dir == Transfer::Send)
        WEFT_RETURN_IF_ERROR(toHost(Q, St.HostOps[I].Buf, Ops[I].Buf,
                                    Ops[I].Count * dtypeBytes(Ops[I].T)));
    }
    WEFT_RETURN_IF_ERROR(Q.synchronize());
    return started(R, St, Q,
                   Host->startTransfers(G, St.HostOps, hostQueue(), St.Inner));
  }

  /// R's state, made on first use.
  static Status state(CommRequest &R, StagedRequestState *&St) {
    if (!R.Native)
      R.Native = std::make_unique<StagedRequestState>();
    St = dynamic_cast<StagedRequestState *>(R.Native.get());
    if (!St)
      return Status::error("the request was made by another communicator");
    return Status::success();
  }
  static Status startable(CommRequest &R, StagedRequestState *&St) {
    if (R.Active)
      return Status::error("the request is still in flight (wait for it "
                           "before starting it again)");
    return state(R, St);
  }
  /// A start forwarded to the host communicator: R is its request.
  static Status forwarded(CommRequest &R, StagedRequestState &St, Status S) {
    St.Staged = false;
    R.Active = S.ok() && St.Inner.Active;
    return S;
  }
  /// After the host call of a staged start: active while the host's request
  /// is, else (done at once) copied back now.
  static Status started(CommRequest &R, StagedRequestState &St, Queue &Q,
                        Status S) {
    St.Staged = true;
    St.StartQ = &Q;
    R.Active = S.ok() && St.Inner.Active;
    if (!S.ok() || R.Active)
      return S;
    return finish(St);
  }
  /// Copies a completed staged request's results back on its queue and
  /// synchronizes it (also after a failed copy: the staging buffer must be
  /// out of the queue's use before the request starts again).
  static Status finish(StagedRequestState &St) {
    Queue &Q = *St.StartQ;
    Status S = Status::success();
    for (const CopyBack &C : St.Backs)
      if (S.ok() && C.Bytes)
        S = Q.copyToDevice(C.Device, St.Buf.data() + C.Offset, C.Bytes);
    Status Sync = Q.synchronize();
    return S.ok() ? Sync : S;
  }

  std::unique_ptr<Communicator> Host;
  std::string Name;
  /// The blocking calls' staging (free between calls).
  Staging BlockA, BlockB;
};

} // namespace

std::unique_ptr<Communicator>
createStagedCommunicator(std::unique_ptr<Communicator> Host) {
  return std::make_unique<StagedCommunicator>(std::move(Host));
}

} // namespace weft
