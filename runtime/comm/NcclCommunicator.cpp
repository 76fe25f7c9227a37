//===- NcclCommunicator.cpp - The communicator over NCCL -----------------===//
//
// One NCCL communicator per group of the bootstrap (MPI) communicator: the
// group's shard index 0 makes a unique id and broadcasts it over the MPI
// group, and every member calls ncclCommInitRank with its shard index as
// its NCCL rank, so that NCCL ranks, MPI ranks of the group and transfer
// peers are all shard indices. Our CommGroup's Native points at the
// group's record (NCCL communicator and bootstrap group), so that a call
// on the host queue reaches the bootstrap with the bootstrap's own group.
//
// Started operations run on one communication stream of the communicator:
// NCCL runs the operations of one stream in order, and every rank starts
// the program's operations in the same order, so they match across ranks.
// Each request owns two events: Ready (recorded on the compute queue: the
// inputs are written) and Done (recorded on the communication stream after
// the operation). Events are made by reserveRequest or the first start.
//
// Every NCCL and CUDA call is checked; an error names the call and carries
// the library's message.
//
//===----------------------------------------------------------------------===//
#include "runtime/comm/NcclCommunicator.h"
#include "runtime/comm/DeviceWait.h"

#include <nccl.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace weft {

namespace {

Status checkCuda(cudaError_t E, const char *Call) {
  if (E == cudaSuccess)
    return Status::success();
  return Status::error(std::string(Call) + " failed: " + cudaGetErrorString(E) +
                       " (" + cudaGetErrorName(E) + ")");
}

Status checkNccl(ncclResult_t R, const char *Call) {
  if (R == ncclSuccess)
    return Status::success();
  std::string Msg = std::string(Call) + " failed: " + ncclGetErrorString(R);
  const char *Last = ncclGetLastError(nullptr); // its argument is unused
  if (Last && *Last)
    Msg += std::string(" (") + Last + ")";
  return Status::error(Msg);
}

/// DeviceWait's view of NCCL (runtime/comm/DeviceWait.h).
Expected<Progress> ncclProgress(void *C) {
  ncclResult_t Async = ncclSuccess;
  WEFT_RETURN_IF_ERROR(
      checkNccl(ncclCommGetAsyncError(static_cast<ncclComm_t>(C), &Async),
                "ncclCommGetAsyncError"));
  if (Async == ncclInProgress)
    return Progress::Running;
  if (Async == ncclSuccess)
    return Progress::Done;
  return checkNccl(Async, "ncclCommGetAsyncError");
}
void ncclAbortComm(void *C) { ncclCommAbort(static_cast<ncclComm_t>(C)); }
NcclWaitApi ncclWaitApi() {
  NcclWaitApi A;
  A.AsyncError = ncclProgress;
  A.Abort = ncclAbortComm;
  return A;
}

/// One row per DType NCCL moves (bf16 as NCCL's own: it sums in f32 and
/// rounds, as the MPI communicator's bf16 sum does).
struct NcclTypeEntry {
  DType Type;
  ncclDataType_t Nccl;
};
const NcclTypeEntry NcclTypeTable[] = {
    {DType::F32, ncclFloat32},
    {DType::F64, ncclFloat64},
    {DType::BF16, ncclBfloat16},
    {DType::I32, ncclInt32},
};

Status ncclType(DType T, const char *Call, ncclDataType_t &Out) {
  for (const NcclTypeEntry &E : NcclTypeTable)
    if (E.Type == T) {
      Out = E.Nccl;
      return Status::success();
    }
  return Status::error(std::string(Call) + ": NCCL has no type for " +
                       dtypeName(T) + " (DType " + std::to_string(int(T)) +
                       ")");
}

/// An error naming Call unless Mult blocks of Count elements of T fit in
/// size_t bytes (NCCL takes size_t counts; it computes their bytes).
Status fits(size_t Count, size_t Mult, DType T, const char *Call) {
  const size_t E = dtypeBytes(T);
  if (Mult && Count > SIZE_MAX / Mult / E)
    return Status::error(std::string(Call) + ": " + std::to_string(Mult) +
                         " x " + std::to_string(Count) + " elements of " +
                         dtypeName(T) + " overflow size_t bytes");
  return Status::success();
}

/// A group's record: our CommGroup (Native = this record), the bootstrap's
/// group of the same (mesh, axes), and its NCCL communicator.
struct NcclGroup {
  CommGroup G;
  const CommGroup *Boot = nullptr;
  ncclComm_t Comm = nullptr;
  std::string Members;                    // "world ranks 0,1", for messages
  mutable const char *LastCall = nullptr; // for messages
  /// Recorded after each operation it enqueues: while it is not complete,
  /// the group has NCCL work in flight (the collective timeout applies).
  mutable cudaEvent_t Last = nullptr;
};

/// A started operation: on the communication stream (its events), or, on
/// the host queue, the bootstrap's request Inner.
struct NcclRequestState final : CommRequest::State {
  ~NcclRequestState() override {
    if (Ready)
      cudaEventDestroy(Ready);
    if (Done)
      cudaEventDestroy(Done);
  }
  Status makeEvents() {
    if (!Ready)
      WEFT_RETURN_IF_ERROR(
          checkCuda(cudaEventCreateWithFlags(&Ready, cudaEventDisableTiming),
                    "cudaEventCreateWithFlags"));
    if (!Done)
      WEFT_RETURN_IF_ERROR(
          checkCuda(cudaEventCreateWithFlags(&Done, cudaEventDisableTiming),
                    "cudaEventCreateWithFlags"));
    return Status::success();
  }
  cudaEvent_t Ready = nullptr, Done = nullptr;
  ncclComm_t Comm = nullptr; // the operation's (its asynchronous errors)
  bool OnBootstrap = false;
  CommRequest Inner;
};

Status requestState(CommRequest &R, NcclRequestState *&St) {
  if (!R.Native)
    R.Native = std::make_unique<NcclRequestState>();
  St = dynamic_cast<NcclRequestState *>(R.Native.get());
  if (!St)
    return Status::error("the request was made by another communicator");
  return Status::success();
}

class NcclCommunicator final : public Communicator {
public:
  NcclCommunicator(std::unique_ptr<Communicator> Boot, int Dev,
                   cudaStream_t CommStream, double TimeoutSeconds)
      : Bootstrap(std::move(Boot)), Device(Dev), CommStream(CommStream),
        Timeout(TimeoutSeconds) {
    setStreamWaitCheck([this](double Waited) {
      return checkCommunicators(Waited, "waiting for the device");
    });
  }
  // In Groups' key order, the same on every rank: destroying a
  // communicator may talk to its peers.
  ~NcclCommunicator() override {
    setStreamWaitCheck(nullptr);
    cudaSetDevice(Device);
    cudaStreamSynchronize(CommStream);
    // Non-blocking communicators are finalized (polled until done) before
    // they are destroyed.
    for (auto &[Key, Rec] : Groups) {
      if (Rec.Comm) {
        bool Aborted = false; // by a finalize past the timeout
        if (ncclCommFinalize(Rec.Comm) == ncclInProgress)
          Aborted =
              !waitForComm(ncclWaitApi(), Rec.Comm, Timeout, "finalize").ok();
        if (!Aborted)
          ncclCommDestroy(Rec.Comm);
      }
      if (Rec.Last)
        cudaEventDestroy(Rec.Last);
    }
    cudaStreamDestroy(CommStream);
  }
  const char *name() const override { return "nccl"; }
  int rank() const override { return Bootstrap->rank(); }
  int size() const override { return Bootstrap->size(); }
  /// After an ncclCommAbort of Comm: its group's calls report the abort.
  void abandon(ncclComm_t Comm) {
    for (auto &[Key, Rec] : Groups)
      if (Rec.Comm == Comm)
        Rec.Comm = nullptr;
  }
  void abortJob(int Code) override {
    for (auto &[Key, Rec] : Groups)
      if (Rec.Comm) {
        ncclCommAbort(Rec.Comm);
        Rec.Comm = nullptr;
      }
    Bootstrap->abortJob(Code);
  }

  Expected<const CommGroup *> group(const Mesh &M,
                                    const AxesList &Axes) override {
    auto Key = std::make_pair(M.describe(), Axes);
    auto It = Groups.find(Key);
    if (It != Groups.end())
      return &It->second.G;
    Expected<const CommGroup *> Boot = Bootstrap->group(M, Axes);
    if (!Boot.ok())
      return Boot.status();
    const CommGroup &B = **Boot;
    ncclComm_t Comm = nullptr;
    WEFT_RETURN_IF_ERROR(initComm(B, Comm));
    NcclGroup &Rec = Groups[Key];
    Rec.G = B;
    Rec.G.Native = &Rec;
    Rec.Boot = &B;
    Rec.Comm = Comm;
    Rec.Members = describeMembers(B);
    return &Rec.G;
  }

  Status allReduce(const CommGroup &G, const void *Send, void *Recv,
                   size_t Count, DType T, Queue &Q) override {
    const NcclGroup *Rec = nullptr;
    WEFT_RETURN_IF_ERROR(record(G, "ncclAllReduce", Rec));
    if (Q.hostMemory())
      return Bootstrap->allReduce(*Rec->Boot, Send, Recv, Count, T, Q);
    Enqueue E;
    WEFT_RETURN_IF_ERROR(prepare(Q, T, Count, 1, "ncclAllReduce", E));
    return settled(
        Rec,
        ncclAllReduce(Send, Recv, Count, E.Type, ncclSum, Rec->Comm, E.Stream),
        "ncclAllReduce", E.Stream);
  }
  Status allGather(const CommGroup &G, const void *Send, void *Recv,
                   size_t Count, DType T, Queue &Q) override {
    const NcclGroup *Rec = nullptr;
    WEFT_RETURN_IF_ERROR(record(G, "ncclAllGather", Rec));
    if (Q.hostMemory())
      return Bootstrap->allGather(*Rec->Boot, Send, Recv, Count, T, Q);
    Enqueue E;
    WEFT_RETURN_IF_ERROR(
        prepare(Q, T, Count, size_t(G.Size), "ncclAllGather", E));
    return settled(Rec,
                   ncclAllGather(ownChunk(G, Send, Recv, Count, T), Recv, Count,
                                 E.Type, Rec->Comm, E.Stream),
                   "ncclAllGather", E.Stream);
  }
  Status reduceScatter(const CommGroup &G, const void *Send, void *Recv,
                       size_t Count, DType T, Queue &Q) override {
    const NcclGroup *Rec = nullptr;
    WEFT_RETURN_IF_ERROR(record(G, "ncclReduceScatter", Rec));
    if (Q.hostMemory())
      return Bootstrap->reduceScatter(*Rec->Boot, Send, Recv, Count, T, Q);
    Enqueue E;
    WEFT_RETURN_IF_ERROR(
        prepare(Q, T, Count, size_t(G.Size), "ncclReduceScatter", E));
    return settled(Rec,
                   ncclReduceScatter(Send, Recv, Count, E.Type, ncclSum,
                                     Rec->Comm, E.Stream),
                   "ncclReduceScatter", E.Stream);
  }
  Status broadcast(const CommGroup &G, void *Buf, size_t Count, DType T,
                   int Root, Queue &Q) override {
    const NcclGroup *Rec = nullptr;
    WEFT_RETURN_IF_ERROR(record(G, "ncclBroadcast", Rec));
    if (Q.hostMemory())
      return Bootstrap->broadcast(*Rec->Boot, Buf, Count, T, Root, Q);
    WEFT_RETURN_IF_ERROR(checkRoot(G, Root, "ncclBroadcast"));
    Enqueue E;
    WEFT_RETURN_IF_ERROR(prepare(Q, T, Count, 1, "ncclBroadcast", E));
    return settled(
        Rec, ncclBroadcast(Buf, Buf, Count, E.Type, Root, Rec->Comm, E.Stream),
        "ncclBroadcast", E.Stream);
  }
  Status reduce(const CommGroup &G, const void *Send, void *Recv, size_t Count,
                DType T, int Root, Queue &Q) override {
    const NcclGroup *Rec = nullptr;
    WEFT_RETURN_IF_ERROR(record(G, "ncclReduce", Rec));
    if (Q.hostMemory())
      return Bootstrap->reduce(*Rec->Boot, Send, Recv, Count, T, Root, Q);
    WEFT_RETURN_IF_ERROR(checkRoot(G, Root, "ncclReduce"));
    Enqueue E;
    WEFT_RETURN_IF_ERROR(prepare(Q, T, Count, 1, "ncclReduce", E));
    return settled(Rec,
                   ncclReduce(Send, Recv, Count, E.Type, ncclSum, Root,
                              Rec->Comm, E.Stream),
                   "ncclReduce", E.Stream);
  }

  Status iallReduce(const CommGroup &G, const void *Send, void *Recv,
                    size_t Count, DType T, Queue &Q, CommRequest &R) override {
    const char *Call = "ncclAllReduce";
    const NcclGroup *Rec = nullptr;
    NcclRequestState *St = nullptr;
    WEFT_RETURN_IF_ERROR(startable(G, R, Call, Rec, St));
    if (Q.hostMemory())
      return forwarded(R, *St,
                       Bootstrap->iallReduce(*Rec->Boot, Send, Recv, Count, T,
                                             Q, St->Inner));
    Enqueue E;
    WEFT_RETURN_IF_ERROR(prepare(Q, T, Count, 1, Call, E));
    WEFT_RETURN_IF_ERROR(beginAsync(E, *St, Call));
    return endAsync(R, *St, Rec->Comm, Call,
                    settled(Rec,
                            ncclAllReduce(Send, Recv, Count, E.Type, ncclSum,
                                          Rec->Comm, CommStream),
                            Call, CommStream));
  }
  Status iallGather(const CommGroup &G, const void *Send, void *Recv,
                    size_t Count, DType T, Queue &Q, CommRequest &R) override {
    const char *Call = "ncclAllGather";
    const NcclGroup *Rec = nullptr;
    NcclRequestState *St = nullptr;
    WEFT_RETURN_IF_ERROR(startable(G, R, Call, Rec, St));
    if (Q.hostMemory())
      return forwarded(R, *St,
                       Bootstrap->iallGather(*Rec->Boot, Send, Recv, Count, T,
                                             Q, St->Inner));
    Enqueue E;
    WEFT_RETURN_IF_ERROR(prepare(Q, T, Count, size_t(G.Size), Call, E));
    WEFT_RETURN_IF_ERROR(beginAsync(E, *St, Call));
    return endAsync(
        R, *St, Rec->Comm, Call,
        settled(Rec,
                ncclAllGather(ownChunk(G, Send, Recv, Count, T), Recv, Count,
                              E.Type, Rec->Comm, CommStream),
                Call, CommStream));
  }
  Status ireduceScatter(const CommGroup &G, const void *Send, void *Recv,
                        size_t Count, DType T, Queue &Q,
                        CommRequest &R) override {
    const char *Call = "ncclReduceScatter";
    const NcclGroup *Rec = nullptr;
    NcclRequestState *St = nullptr;
    WEFT_RETURN_IF_ERROR(startable(G, R, Call, Rec, St));
    if (Q.hostMemory())
      return forwarded(R, *St,
                       Bootstrap->ireduceScatter(*Rec->Boot, Send, Recv, Count,
                                                 T, Q, St->Inner));
    Enqueue E;
    WEFT_RETURN_IF_ERROR(prepare(Q, T, Count, size_t(G.Size), Call, E));
    WEFT_RETURN_IF_ERROR(beginAsync(E, *St, Call));
    return endAsync(R, *St, Rec->Comm, Call,
                    settled(Rec,
                            ncclReduceScatter(Send, Recv, Count, E.Type,
                                              ncclSum, Rec->Comm, CommStream),
                            Call, CommStream));
  }
  Status startTransfers(const CommGroup &G, const std::vector<Transfer> &Ops,
                        Queue &Q, CommRequest &R) override {
    const char *Call = "transfers";
    const NcclGroup *Rec = nullptr;
    NcclRequestState *St = nullptr;
    WEFT_RETURN_IF_ERROR(startable(G, R, Call, Rec, St));
    if (Q.hostMemory())
      return forwarded(
          R, *St, Bootstrap->startTransfers(*Rec->Boot, Ops, Q, St->Inner));
    for (size_t I = 0; I < Ops.size(); ++I) {
      WEFT_RETURN_IF_ERROR(checkTransfer(G, Ops, I));
      ncclDataType_t D = ncclFloat32;
      const char *Op = Ops[I].Dir == Transfer::Send ? "ncclSend" : "ncclRecv";
      WEFT_RETURN_IF_ERROR(
          ncclType(Ops[I].T, Op, D)
              .withContext("transfers[" + std::to_string(I) + "]"));
      WEFT_RETURN_IF_ERROR(
          fits(Ops[I].Count, 1, Ops[I].T, Op)
              .withContext("transfers[" + std::to_string(I) + "]"));
    }
    if (Ops.empty())
      return Status::success(); // nothing started: R stays inactive
    Enqueue E;
    WEFT_RETURN_IF_ERROR(streamOf(Q, Call, E.Stream));
    WEFT_RETURN_IF_ERROR(beginAsync(E, *St, Call));
    // The group is always ended, also after a failed send or receive, so
    // that NCCL leaves group mode (the first error is reported; the stream
    // is then drained by endAsync only when the group launched).
    Status S = checkNccl(ncclGroupStart(), "ncclGroupStart");
    if (!S.ok())
      return S.withContext(Call);
    for (size_t I = 0; I < Ops.size() && S.ok(); ++I) {
      const Transfer &X = Ops[I];
      ncclDataType_t D = ncclFloat32;
      (void)ncclType(X.T, "", D); // checked above
      S = X.Dir == Transfer::Send ? queued(ncclSend(X.Buf, X.Count, D, X.Peer,
                                                    Rec->Comm, CommStream),
                                           "ncclSend")
                                  : queued(ncclRecv(X.Buf, X.Count, D, X.Peer,
                                                    Rec->Comm, CommStream),
                                           "ncclRecv");
      if (!S.ok())
        S = S.withContext("transfers[" + std::to_string(I) + "] with peer " +
                          std::to_string(X.Peer));
    }
    Status End = settled(Rec, ncclGroupEnd(), "ncclGroupEnd", CommStream);
    return endAsync(R, *St, Rec->Comm, Call, S.ok() ? End : S);
  }

  Status test(CommRequest &R, bool &Done) override {
    Done = true;
    if (!R.Active)
      return Status::success();
    NcclRequestState *St = nullptr;
    WEFT_RETURN_IF_ERROR(requestState(R, St));
    if (St->OnBootstrap) {
      Status S = Bootstrap->test(St->Inner, Done);
      R.Active = S.ok() && St->Inner.Active;
      return S;
    }
    cudaError_t Query = cudaEventQuery(St->Done);
    if (Query == cudaSuccess) {
      R.Active = false;
      return Status::success();
    }
    if (Query != cudaErrorNotReady) {
      R.Active = false;
      return checkCuda(Query, "cudaEventQuery");
    }
    // Still running: a failed peer shows here, not as a completion. A
    // communicator aborted since (another wait's failure) is gone.
    if (!live(St->Comm)) {
      R.Active = false;
      return Status::error("the NCCL communicator of this operation was "
                           "aborted");
    }
    ncclResult_t Async = ncclSuccess;
    Status S = checkNccl(ncclCommGetAsyncError(St->Comm, &Async),
                         "ncclCommGetAsyncError");
    if (S.ok() && Async != ncclSuccess && Async != ncclInProgress)
      S = Status::error(std::string("ncclCommGetAsyncError: the started "
                                    "operation failed: ") +
                        ncclGetErrorString(Async));
    if (!S.ok()) {
      // The kernel may still run on the caller's buffers: abort the
      // communicator, so that it stops and later calls say so.
      ncclCommAbort(St->Comm);
      abandon(St->Comm);
      R.Active = false;
      return S;
    }
    Done = false;
    return Status::success();
  }
  Status wait(CommRequest &R, Queue &Q) override {
    if (!R.Active)
      return Status::success();
    NcclRequestState *St = nullptr;
    WEFT_RETURN_IF_ERROR(requestState(R, St));
    R.Active = false;
    if (St->OnBootstrap)
      return Bootstrap->wait(St->Inner, Q);
    if (Q.hostMemory()) { // a synchronous queue: the host waits
      cudaEvent_t Done = St->Done;
      return waitPolling(
          [Done] {
            return cudaProgress(cudaEventQuery(Done), "cudaEventQuery");
          },
          [this](double Waited) {
            return checkCommunicators(Waited, "waiting for an operation");
          });
    }
    cudaStream_t S = nullptr;
    Status Found = streamOf(Q, "wait", S);
    if (!Found.ok()) {
      // Inactive after an error: the operation must be over.
      cudaEventSynchronize(St->Done);
      return Found;
    }
    return checkCuda(cudaStreamWaitEvent(S, St->Done, 0),
                     "cudaStreamWaitEvent");
  }
  Status reserveRequest(CommRequest &R, size_t Count, DType T) override {
    NcclRequestState *St = nullptr;
    WEFT_RETURN_IF_ERROR(requestState(R, St));
    WEFT_RETURN_IF_ERROR(St->makeEvents());
    return Bootstrap->reserveRequest(St->Inner, Count, T);
  }
  // A rendezvous of the host threads only: device work is not waited for.
  Status barrier(const CommGroup &G) override {
    const NcclGroup *Rec = nullptr;
    WEFT_RETURN_IF_ERROR(record(G, "barrier", Rec));
    return Bootstrap->barrier(*Rec->Boot);
  }

private:
  /// An NCCL call's result on Rec's communicator, which is non-blocking:
  /// a call still in progress (NCCL enqueues it) is waited for, under the
  /// timeout. Once it is enqueued on Stream, Rec's event marks it.
  Status settled(const NcclGroup *Rec, ncclResult_t R, const char *Call,
                 cudaStream_t Stream) {
    ncclComm_t Comm = Rec->Comm;
    Status S = R == ncclInProgress
                   ? waitForComm(ncclWaitApi(), Comm, Timeout,
                                 "rank " + std::to_string(rank()) + ", " + Call)
                   : checkNccl(R, Call);
    if (!S.ok()) {
      if (R == ncclInProgress)
        abandon(Comm); // aborted
      return S;
    }
    if (!Rec->Last)
      WEFT_RETURN_IF_ERROR(checkCuda(
          cudaEventCreateWithFlags(&Rec->Last, cudaEventDisableTiming),
          "cudaEventCreateWithFlags"));
    return checkCuda(cudaEventRecord(Rec->Last, Stream), "cudaEventRecord")
        .withContext(Call);
  }
  /// A send or receive inside a group: NCCL only queues it (in progress
  /// until ncclGroupEnd, which is settled).
  static Status queued(ncclResult_t R, const char *Call) {
    return R == ncclInProgress ? Status::success() : checkNccl(R, Call);
  }
  /// Whether Comm is still one of the groups' (not aborted since).
  bool live(ncclComm_t Comm) const {
    for (const auto &KV : Groups)
      if (Comm && KV.second.Comm == Comm)
        return true;
    return false;
  }
  /// DeviceWait's check of every communicator of the rank: an asynchronous
  /// error or the timeout aborts them all (so that the device's work
  /// drains) and names them.
  Status checkCommunicators(double Waited, const std::string &What) {
    std::vector<CommInFlight> Comms;
    for (auto &[Key, Rec] : Groups)
      if (Rec.Comm)
        Comms.push_back(
            {Rec.Comm, Rec.Members, Rec.LastCall ? Rec.LastCall : "",
             Rec.Last && cudaEventQuery(Rec.Last) == cudaErrorNotReady});
    Status S = weft::checkCommunicators(ncclWaitApi(), Comms, Waited, Timeout,
                                        rank(), What);
    if (!S.ok())
      for (auto &[Key, Rec] : Groups)
        Rec.Comm = nullptr; // every one is aborted
    return S;
  }

  /// What a device call enqueues with.
  struct Enqueue {
    cudaStream_t Stream = nullptr;
    ncclDataType_t Type = ncclFloat32;
  };

  /// G's record; G must come from group() (looked up among the records,
  /// a handful, rather than trusting G.Native: a bootstrap group's Native
  /// is an MPI handle).
  Status record(const CommGroup &G, const char *Call,
                const NcclGroup *&Rec) const {
    Rec = nullptr;
    for (const auto &KV : Groups)
      if (&KV.second == G.Native)
        Rec = &KV.second;
    if (!Rec)
      return Status::error(std::string(Call) +
                           ": the group was not made by the NCCL "
                           "communicator");
    if (!Rec->Comm)
      return Status::error(std::string(Call) +
                           ": the NCCL communicator was aborted");
    Rec->LastCall = Call;
    return Status::success();
  }
  static Status checkRoot(const CommGroup &G, int Root, const char *Call) {
    if (Root < 0 || Root >= G.Size)
      return Status::error(std::string(Call) + ": root " +
                           std::to_string(Root) +
                           " is not a shard index of the group (0.." +
                           std::to_string(G.Size - 1) + ")");
    return Status::success();
  }
  static Status streamOf(Queue &Q, const char *Call, cudaStream_t &S) {
    auto *A = dynamic_cast<CudaQueueAccess *>(&Q);
    if (!A)
      return Status::error(std::string(Call) +
                           ": the queue is neither host memory nor a CUDA "
                           "queue (CudaQueueAccess); the NCCL communicator "
                           "enqueues on CUDA streams only");
    S = A->stream();
    return Status::success();
  }
  /// Q's stream and T's NCCL type, for Mult blocks of Count elements.
  static Status prepare(Queue &Q, DType T, size_t Count, size_t Mult,
                        const char *Call, Enqueue &E) {
    WEFT_RETURN_IF_ERROR(streamOf(Q, Call, E.Stream));
    WEFT_RETURN_IF_ERROR(ncclType(T, Call, E.Type));
    return fits(Count, Mult, T, Call);
  }
  /// The all-gather's send buffer: Send, or in place (nullptr) this rank's
  /// chunk of Recv, which NCCL recognises as in place.
  static const void *ownChunk(const CommGroup &G, const void *Send, void *Recv,
                              size_t Count, DType T) {
    if (Send)
      return Send;
    return static_cast<const char *>(Recv) +
           size_t(G.Rank) * Count * dtypeBytes(T); // fits: checked
  }

  Status startable(const CommGroup &G, CommRequest &R, const char *Call,
                   const NcclGroup *&Rec, NcclRequestState *&St) {
    WEFT_RETURN_IF_ERROR(record(G, Call, Rec));
    if (R.Active)
      return Status::error(std::string(Call) +
                           ": the request is still in flight (wait for it "
                           "before starting it again)");
    return requestState(R, St).withContext(Call);
  }
  static Status forwarded(CommRequest &R, NcclRequestState &St, Status S) {
    St.OnBootstrap = true;
    R.Active = S.ok() && St.Inner.Active;
    return S;
  }
  /// The communication stream waits for the work enqueued so far on E's.
  Status beginAsync(const Enqueue &E, NcclRequestState &St, const char *Call) {
    St.OnBootstrap = false;
    WEFT_RETURN_IF_ERROR(St.makeEvents().withContext(Call));
    WEFT_RETURN_IF_ERROR(
        checkCuda(cudaEventRecord(St.Ready, E.Stream), "cudaEventRecord")
            .withContext(Call));
    return checkCuda(cudaStreamWaitEvent(CommStream, St.Ready, 0),
                     "cudaStreamWaitEvent")
        .withContext(Call);
  }
  /// After the operation was enqueued (Enqueued: how that went): records
  /// its completion. R is active only on success; when the completion
  /// cannot be recorded, the communication stream is drained so that the
  /// operation is over when the error returns.
  Status endAsync(CommRequest &R, NcclRequestState &St, ncclComm_t Comm,
                  const char *Call, Status Enqueued) {
    R.Active = false;
    if (!Enqueued.ok())
      return Enqueued;
    Status S =
        checkCuda(cudaEventRecord(St.Done, CommStream), "cudaEventRecord")
            .withContext(Call);
    if (!S.ok()) {
      Status Drain =
          checkCuda(cudaStreamSynchronize(CommStream), "cudaStreamSynchronize");
      return Drain.ok()
                 ? S
                 : Status::error(S.message() + "; then " + Drain.message());
    }
    St.Comm = Comm;
    R.Active = true;
    return Status::success();
  }

  /// The NCCL communicator of bootstrap group B. Shard index 0's unique id
  /// travels with a status word, so that its failure reaches every member
  /// instead of leaving them in ncclCommInitRank; after the init, a vote
  /// over the group makes every member fail when one did (instead of
  /// hanging in the first collective).
  Status initComm(const CommGroup &B, ncclComm_t &Comm) {
    static_assert(sizeof(ncclUniqueId) % sizeof(int32_t) == 0,
                  "the unique id travels as i32 words");
    constexpr size_t Words = 1 + sizeof(ncclUniqueId) / sizeof(int32_t);
    std::array<int32_t, Words> Msg{};
    ncclUniqueId Id;
    std::memset(&Id, 0, sizeof(Id));
    if (B.Rank == 0) {
      ncclResult_t R = ncclGetUniqueId(&Id);
      Msg[0] = R == ncclSuccess ? 0 : int32_t(R);
      std::memcpy(&Msg[1], &Id, sizeof(Id));
    }
    const std::string Where =
        "the NCCL communicator of group (" + describeMembers(B) + ")";
    WEFT_RETURN_IF_ERROR(
        Bootstrap
            ->broadcast(B, Msg.data(), Msg.size(), DType::I32, 0, hostQueue())
            .withContext(Where));
    if (Msg[0] != 0)
      return Status::error(Where + ": ncclGetUniqueId failed on world rank " +
                           std::to_string(B.Members[0]) + ": " +
                           ncclGetErrorString(ncclResult_t(Msg[0])));
    std::memcpy(&Id, &Msg[1], sizeof(Id));
    // Non-blocking, so that the wait for a peer that failed before its
    // init ends after the timeout instead of never (runtime/comm/
    // DeviceWait.h); the communicator's calls may then return
    // ncclInProgress (settled()).
    ncclConfig_t Config = NCCL_CONFIG_INITIALIZER;
    Config.blocking = 0;
    Status S = checkCuda(cudaSetDevice(Device), "cudaSetDevice");
    if (S.ok()) {
      ncclResult_t R =
          ncclCommInitRankConfig(&Comm, B.Size, Id, B.Rank, &Config);
      S = (R == ncclInProgress || R == ncclSuccess) && Comm
              ? waitForComm(ncclWaitApi(), Comm, Timeout,
                            "rank " + std::to_string(rank()) +
                                ", ncclCommInitRankConfig")
          : R == ncclSuccess
              ? Status::error("ncclCommInitRankConfig returned no "
                              "communicator")
              : checkNccl(R, "ncclCommInitRankConfig");
      if (!S.ok())
        Comm = nullptr; // aborted, or never made
    }
    int32_t Failed = S.ok() ? 0 : 1;
    Status Vote =
        Bootstrap->allReduce(B, &Failed, &Failed, 1, DType::I32, hostQueue());
    if (!S.ok())
      return S.withContext(Where);
    if (Vote.ok() && !Failed)
      return Status::success();
    ncclCommAbort(Comm);
    Comm = nullptr;
    if (!Vote.ok())
      return Vote.withContext(Where);
    return Status::error(Where + ": ncclCommInitRank failed on " +
                         std::to_string(Failed) + " other rank(s)");
  }
  static std::string describeMembers(const CommGroup &G) {
    std::string S = "world ranks";
    for (size_t I = 0; I < G.Members.size(); ++I)
      S += (I ? "," : " ") + std::to_string(G.Members[I]);
    return S;
  }

  std::unique_ptr<Communicator> Bootstrap;
  int Device;
  cudaStream_t CommStream;
  double Timeout; // seconds; 0: none
  std::map<std::pair<std::string, AxesList>, NcclGroup> Groups;
};

} // namespace

Status createNcclCommunicator(std::unique_ptr<Communicator> &Bootstrap,
                              int Device, double TimeoutSeconds) {
  if (!Bootstrap)
    return Status::error("the NCCL communicator needs a bootstrap "
                         "communicator");
  WEFT_RETURN_IF_ERROR(checkCuda(cudaSetDevice(Device), "cudaSetDevice")
                           .withContext("device " + std::to_string(Device)));
  cudaStream_t CommStream = nullptr;
  WEFT_RETURN_IF_ERROR(
      checkCuda(cudaStreamCreateWithFlags(&CommStream, cudaStreamNonBlocking),
                "cudaStreamCreateWithFlags"));
  Bootstrap = std::unique_ptr<Communicator>(new NcclCommunicator(
      std::move(Bootstrap), Device, CommStream, TimeoutSeconds));
  return Status::success();
}

} // namespace weft
