//===- MpiCommunicator.cpp - The communicator over Open MPI --------------===//
//
// One MPI sub-communicator per group of mesh axes: MPI_Comm_split of the
// world with color = the rank's coordinates outside the group and key = its
// shard index, so the sub-communicator's ranks are shard indices. Errors
// return (MPI_ERRORS_RETURN) and become Status values naming the call.
//
//===----------------------------------------------------------------------===//
#include "program/Bf16.h"
#include "runtime/comm/CommPaths.h"
#include "runtime/comm/Communicator.h"
#include "runtime/comm/HierarchicalCollectives.h"
#include "runtime/comm/MpiTypes.h"
#include "runtime/comm/ShmCollectives.h"

#include <malloc.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <vector>

namespace weft {

MPI_Op mpi::sumOp(DType T) {
  if (T != DType::BF16)
    return reduceOp(ReduceOp::Sum);
  static MPI_Op Bf16Sum = [] {
    MPI_Op Op = MPI_OP_NULL;
    MPI_Op_create(
        [](void *In, void *InOut, int *Len, MPI_Datatype *) {
          const uint16_t *A = static_cast<const uint16_t *>(In);
          uint16_t *B = static_cast<uint16_t *>(InOut);
          for (int I = 0; I < *Len; ++I)
            B[I] = floatToBf16(bf16ToFloat(A[I]) + bf16ToFloat(B[I]));
        },
        /*commute=*/1, &Op);
    return Op;
  }();
  return Bf16Sum;
}

namespace {

using mpi::check;
using mpi::countFits;

MPI_Comm comm(const CommGroup &G) { return static_cast<MPI_Comm>(G.Native); }

/// All-reduces run in chunks of this many elements of T (1 MiB): each stays
/// in cache through Open MPI's shared-memory copy-reduce-copy, which for
/// 64 MiB messages otherwise runs at a third of the speed
/// (test/bench/CommBench.cpp); also keeps counts in int.
size_t chunkElements(DType T) {
  return std::max<size_t>(1, (size_t(1) << 20) / dtypeBytes(T));
}

size_t chunkCount(size_t Count, DType T) {
  size_t C = chunkElements(T);
  return (Count + C - 1) / C;
}

/// A nonblocking collective in flight, the first Started handles of
/// Handles: one MPI_Iallreduce per chunk, or one MPI_Iallgather.
struct MpiRequestState final : CommRequest::State {
  std::vector<MPI_Request> Handles;
  int Started = 0;
  /// Or a hierarchical one (a group across nodes), stepped by its owner.
  HierarchicalCollectives *HierOwner = nullptr;
  HierarchicalOp Hier;
  ~MpiRequestState() override {
    if (HierOwner && Hier.Phase >= 0)
      HierOwner->forget(Hier);
  }
};

/// R's handles; made here only when reserveRequest did not (a request
/// belongs to the communicator that first started it).
MpiRequestState &requestState(CommRequest &R) {
  if (!R.Native)
    R.Native = std::make_unique<MpiRequestState>();
  return static_cast<MpiRequestState &>(*R.Native);
}

/// Where the shared-memory path beats Open MPI's: from 4 KiB (the larger
/// buffer) on 2 ranks, all-reduce 0.85 us against 1.1 us at 4 KiB but 0.6
/// against 0.45 at 1 KiB; reduce-scatter and all-gather win at every size
/// (test/bench/CommBench.cpp, README "Collectives, 2 ranks"). Read when the
/// communicator is made: WEFT_NO_SHM=1 turns the path off; WEFT_SHM_MIN_KB
/// and WEFT_SHM_SLOT_KB set the threshold and the slot size (for the
/// benchmark's sweep, and for tests that push small messages through many
/// slots); WEFT_HIER_MIN_KB and WEFT_NO_HIER the hierarchical path's. Every
/// rank must take the same path, and a launcher may give remote ranks
/// another environment (mpirun passes only -x variables to other hosts):
/// the world agrees on the largest of each.
struct PathSettings {
  size_t ShmMinBytes = 0, ShmSlotKB = 0, HierMinBytes = 0;
  bool NoHier = false;
};

size_t envKB(const char *Name, size_t Default) {
  const char *V = std::getenv(Name);
  return V && *V ? size_t(std::strtoull(V, nullptr, 10)) : Default;
}

Expected<PathSettings> agreedPathSettings() {
  constexpr size_t kShmMinKB = 4;
  unsigned long long Mine[4] = {
      std::getenv("WEFT_NO_SHM")
          ? ~0ull
          : (unsigned long long)envKB("WEFT_SHM_MIN_KB", kShmMinKB) << 10,
      envKB("WEFT_SHM_SLOT_KB", ShmCollectives::kDefaultSlotKB),
      (unsigned long long)envKB("WEFT_HIER_MIN_KB", 0) << 10,
      std::getenv("WEFT_NO_HIER") ? 1ull : 0ull};
  unsigned long long All[4] = {};
  WEFT_RETURN_IF_ERROR(check(MPI_Allreduce(Mine, All, 4, MPI_UNSIGNED_LONG_LONG,
                                           MPI_MAX, MPI_COMM_WORLD),
                             "MPI_Allreduce"));
  PathSettings S;
  S.ShmMinBytes = All[0] == ~0ull ? SIZE_MAX : size_t(All[0]);
  S.ShmSlotKB = size_t(All[1]);
  S.HierMinBytes = size_t(All[2]);
  S.NoHier = All[3] != 0;
  return S;
}

class MpiCommunicator final : public Communicator {
public:
  MpiCommunicator(bool Owns, int Rank, int Size,
                  std::optional<CommPathTable> Paths, std::string PathsFile,
                  const PathSettings &Set)
      : ShmMinBytes(Set.ShmMinBytes), ShmSlotKB(Set.ShmSlotKB),
        HierMinBytes(Set.HierMinBytes), NoHier(Set.NoHier),
        Paths(std::move(Paths)), PathsFile(std::move(PathsFile)), OwnsMpi(Owns),
        WorldRank(Rank), WorldSize(Size) {}
  ~MpiCommunicator() override {
    // Shared windows go before their communicators. MPI_Win_free is
    // collective over the window's group, so every rank frees them in the
    // same order: by the group's axes (Groups' keys), never by the
    // communicator handles' addresses, which differ between ranks (a 4-rank
    // dp x tp run hung at exit when two ranks freed dp's window and tp's in
    // opposite orders).
    for (auto &[Axes, G] : Groups) {
      HierByComm.erase(comm(G));
      ShmByComm.erase(comm(G));
    }
    ShmByComm.clear();
    for (auto &[Axes, G] : Groups) {
      MPI_Comm C = comm(G);
      if (C != MPI_COMM_WORLD && C != MPI_COMM_SELF && C != MPI_COMM_NULL)
        MPI_Comm_free(&C);
    }
    int Finalized = 0;
    MPI_Finalized(&Finalized);
    if (OwnsMpi && !Finalized)
      MPI_Finalize();
  }
  const char *name() const override { return "mpi"; }
  std::string pathNote() const override {
    if (!Paths)
      return {};
    return "collective paths measured for " + std::to_string(Paths->ranks()) +
           " ranks (" + PathsFile + "): " + Paths->describe();
  }
  void abortJob(int Code) override {
    if (WorldSize > 1)
      MPI_Abort(MPI_COMM_WORLD, Code);
  }
  int rank() const override { return WorldRank; }
  int size() const override { return WorldSize; }

  Expected<const CommGroup *> group(const Mesh &TheMesh,
                                    const AxesList &Axes) override {
    auto Key = std::make_pair(TheMesh.describe(), Axes);
    auto It = Groups.find(Key);
    if (It != Groups.end())
      return &It->second;
    Expected<CommGroup> Described =
        describeGroup(TheMesh, Axes, WorldRank, size());
    if (!Described.ok())
      return Described.status();
    CommGroup G = *Described;
    if (TheMesh.Axes.empty()) {
      G.Native = MPI_COMM_SELF;
    } else {
      // Color: the rank with its coordinates on Axes zeroed = the group's
      // first member; key: the shard index.
      int Color = int(G.Members[0]);
      MPI_Comm Sub = MPI_COMM_NULL;
      // Collective over the world: every rank builds groups in the same
      // order (the program's instruction order).
      WEFT_RETURN_IF_ERROR(
          check(MPI_Comm_split(MPI_COMM_WORLD, Color, G.Rank, &Sub),
                "MPI_Comm_split"));
      int SubSize = 0, SubRank = 0;
      WEFT_RETURN_IF_ERROR(
          check(MPI_Comm_size(Sub, &SubSize), "MPI_Comm_size"));
      WEFT_RETURN_IF_ERROR(
          check(MPI_Comm_rank(Sub, &SubRank), "MPI_Comm_rank"));
      if (SubSize != G.Size || SubRank != G.Rank)
        return Status::error(
            "MPI_Comm_split gave rank " + std::to_string(SubRank) + " of " +
            std::to_string(SubSize) + ", expected " + std::to_string(G.Rank) +
            " of " + std::to_string(G.Size));
      G.Native = Sub;
      if (Status Placed = placeOnNodes(G); !Placed.ok()) {
        MPI_Comm_free(&Sub);
        return Placed;
      }
    }
    return &Groups.emplace(Key, G).first->second;
  }

  Status allReduce(const CommGroup &G, const void *Send, void *Recv,
                   size_t Count, DType T, Queue &Q) override {
    WEFT_RETURN_IF_ERROR(hostReady(Q, "MPI_Allreduce"));
    if (HierarchicalCollectives *H =
            hierFor("all_reduce", G, Count * dtypeBytes(T)))
      return H->allReduce(Send, Recv, Count, T);
    ShmCollectives *Shm = nullptr;
    WEFT_RETURN_IF_ERROR(
        shmFor("all_reduce", G, Count * dtypeBytes(T), T, true, Shm));
    if (Shm)
      return Shm->allReduce(Send, Recv, Count, T);
    // In chunks (chunkElements).
    const size_t E = dtypeBytes(T), Chunk = chunkElements(T);
    for (size_t Off = 0; Off < Count; Off += Chunk) {
      size_t N = std::min(Chunk, Count - Off);
      const void *S = Send == Recv ? MPI_IN_PLACE
                                   : static_cast<const char *>(Send) + Off * E;
      WEFT_RETURN_IF_ERROR(
          check(MPI_Allreduce(S, static_cast<char *>(Recv) + Off * E, int(N),
                              mpi::datatype(T), mpi::sumOp(T), comm(G)),
                "MPI_Allreduce"));
    }
    return Status::success();
  }
  Status iallReduce(const CommGroup &G, const void *Send, void *Recv,
                    size_t Count, DType T, Queue &Q, CommRequest &R) override {
    WEFT_RETURN_IF_ERROR(hostReady(Q, "MPI_Iallreduce"));
    if (R.Active)
      return Status::error("MPI_Iallreduce: the request is still in flight "
                           "(wait for it before starting it again)");
    // One MPI_Iallreduce per chunk, all in flight at once.
    const size_t E = dtypeBytes(T), Chunk = chunkElements(T);
    const size_t N = chunkCount(Count, T);
    MpiRequestState &St = requestState(R);
    St.HierOwner = nullptr;
    if (HierarchicalCollectives *H = hierFor("all_reduce", G, Count * E)) {
      WEFT_RETURN_IF_ERROR(H->startAllReduce(Send, Recv, Count, T, St.Hier));
      St.HierOwner = H;
      R.Active = St.Hier.Phase >= 0;
      return Status::success();
    }
    // Where shared memory serves the group, the reduction runs here, to the
    // end: Open MPI progresses an MPI_Iallreduce only inside MPI calls, at
    // 0.4 GB/s on GPT-2's 26 MB buckets (66 ms each, dp=2 on 2 cores)
    // against 13-18 ms through shared memory, and a rank computing on its
    // only core has none to spare for it. The request is then complete.
    ShmCollectives *Shm = nullptr;
    WEFT_RETURN_IF_ERROR(shmFor("all_reduce", G, Count * E, T, true, Shm));
    if (Shm) {
      R.Active = false;
      return Shm->allReduce(Send, Recv, Count, T);
    }
    if (St.Handles.size() < N)
      St.Handles.resize(N, MPI_REQUEST_NULL);
    St.Started = 0;
    for (size_t K = 0; K < N; ++K) {
      size_t Off = K * Chunk, M = std::min(Chunk, Count - Off);
      const void *S = Send == Recv ? MPI_IN_PLACE
                                   : static_cast<const char *>(Send) + Off * E;
      int Rc = MPI_Iallreduce(S, static_cast<char *>(Recv) + Off * E, int(M),
                              mpi::datatype(T), mpi::sumOp(T), comm(G),
                              &St.Handles[K]);
      if (Rc != MPI_SUCCESS) {
        // Finish the chunks already started before reporting.
        Status Drain = check(
            MPI_Waitall(St.Started, St.Handles.data(), MPI_STATUSES_IGNORE),
            "MPI_Waitall");
        St.Started = 0;
        Status S = check(Rc, "MPI_Iallreduce")
                       .withContext("chunk " + std::to_string(K) + " of " +
                                    std::to_string(N));
        return Drain.ok()
                   ? S
                   : Status::error(S.message() + "; then " + Drain.message());
      }
      ++St.Started;
    }
    R.Active = St.Started > 0;
    return Status::success();
  }
  Status test(CommRequest &R, bool &Done) override {
    Done = true;
    if (!R.Active)
      return Status::success();
    MpiRequestState &St = requestState(R);
    if (St.HierOwner) {
      Status S = St.HierOwner->progress(St.Hier, /*Block=*/false, Done);
      R.Active = !Done;
      return S;
    }
    int Flag = 0;
    Status S = check(
        MPI_Testall(St.Started, St.Handles.data(), &Flag, MPI_STATUSES_IGNORE),
        "MPI_Testall");
    Done = !S.ok() || Flag;
    if (Done) {
      R.Active = false;
      St.Started = 0;
    }
    return S;
  }
  // The host queue is synchronous: R's result is ready for it once MPI has
  // completed R.
  Status wait(CommRequest &R, Queue &) override {
    if (!R.Active)
      return Status::success();
    MpiRequestState &St = requestState(R);
    if (St.HierOwner) {
      bool Done = false;
      Status S = St.HierOwner->progress(St.Hier, /*Block=*/true, Done);
      R.Active = false;
      return S;
    }
    Status S =
        check(MPI_Waitall(St.Started, St.Handles.data(), MPI_STATUSES_IGNORE),
              "MPI_Waitall");
    R.Active = false;
    St.Started = 0;
    return S;
  }
  Status reserveRequest(CommRequest &R, size_t Count, DType T) override {
    MpiRequestState &St = requestState(R);
    // At least one: an iallGather's.
    size_t N = std::max<size_t>(1, chunkCount(Count, T));
    if (St.Handles.size() < N)
      St.Handles.resize(N, MPI_REQUEST_NULL);
    return Status::success();
  }
  Status allGather(const CommGroup &G, const void *Send, void *Recv,
                   size_t Count, DType T, Queue &Q) override {
    WEFT_RETURN_IF_ERROR(hostReady(Q, "MPI_Allgather"));
    if (HierarchicalCollectives *H =
            hierFor("all_gather", G, size_t(G.Size) * Count * dtypeBytes(T)))
      return H->allGather(Send, Recv, Count, T);
    ShmCollectives *Shm = nullptr;
    WEFT_RETURN_IF_ERROR(shmFor("all_gather", G,
                                size_t(G.Size) * Count * dtypeBytes(T), T,
                                false, Shm));
    if (Shm)
      return Shm->allGather(Send, Recv, Count, T);
    WEFT_RETURN_IF_ERROR(countFits(Count, "MPI_Allgather"));
    MPI_Datatype D = mpi::datatype(T);
    return check(MPI_Allgather(Send ? Send : MPI_IN_PLACE,
                               Send ? int(Count) : 0, D, Recv, int(Count), D,
                               comm(G)),
                 "MPI_Allgather");
  }
  Status iallGather(const CommGroup &G, const void *Send, void *Recv,
                    size_t Count, DType T, Queue &Q, CommRequest &R) override {
    WEFT_RETURN_IF_ERROR(hostReady(Q, "MPI_Iallgather"));
    if (R.Active)
      return Status::error("MPI_Iallgather: the request is still in flight "
                           "(wait for it before starting it again)");
    MpiRequestState &St = requestState(R);
    St.HierOwner = nullptr;
    if (HierarchicalCollectives *H =
            hierFor("all_gather", G, size_t(G.Size) * Count * dtypeBytes(T))) {
      WEFT_RETURN_IF_ERROR(H->startAllGather(Send, Recv, Count, T, St.Hier));
      St.HierOwner = H;
      R.Active = St.Hier.Phase >= 0;
      return Status::success();
    }
    WEFT_RETURN_IF_ERROR(countFits(Count, "MPI_Iallgather"));
    if (St.Handles.empty())
      St.Handles.resize(1, MPI_REQUEST_NULL);
    St.Started = 0;
    MPI_Datatype D = mpi::datatype(T);
    WEFT_RETURN_IF_ERROR(
        check(MPI_Iallgather(Send ? Send : MPI_IN_PLACE, Send ? int(Count) : 0,
                             D, Recv, int(Count), D, comm(G), &St.Handles[0]),
              "MPI_Iallgather"));
    St.Started = 1;
    R.Active = true;
    return Status::success();
  }
  Status reduceScatter(const CommGroup &G, const void *Send, void *Recv,
                       size_t Count, DType T, Queue &Q) override {
    WEFT_RETURN_IF_ERROR(hostReady(Q, "MPI_Reduce_scatter_block"));
    if (HierarchicalCollectives *H = hierFor(
            "reduce_scatter", G, size_t(G.Size) * Count * dtypeBytes(T)))
      return H->reduceScatter(Send, Recv, Count, T);
    ShmCollectives *Shm = nullptr;
    WEFT_RETURN_IF_ERROR(shmFor("reduce_scatter", G,
                                size_t(G.Size) * Count * dtypeBytes(T), T, true,
                                Shm));
    if (Shm)
      return Shm->reduceScatter(Send, Recv, Count, T);
    WEFT_RETURN_IF_ERROR(countFits(Count, "MPI_Reduce_scatter_block"));
    return check(MPI_Reduce_scatter_block(Send, Recv, int(Count),
                                          mpi::datatype(T), mpi::sumOp(T),
                                          comm(G)),
                 "MPI_Reduce_scatter_block");
  }
  // Through shared memory or the hierarchical path it runs here, to the end
  // (as iallReduce's shared-memory path); else MPI_Ireduce_scatter_block,
  // progressed by test().
  Status ireduceScatter(const CommGroup &G, const void *Send, void *Recv,
                        size_t Count, DType T, Queue &Q,
                        CommRequest &R) override {
    const char *Call = "MPI_Ireduce_scatter_block";
    WEFT_RETURN_IF_ERROR(hostReady(Q, Call));
    if (R.Active)
      return Status::error(std::string(Call) +
                           ": the request is still in flight (wait for it "
                           "before starting it again)");
    MpiRequestState &St = requestState(R);
    St.HierOwner = nullptr;
    R.Active = false;
    const size_t Bytes = size_t(G.Size) * Count * dtypeBytes(T);
    if (HierarchicalCollectives *H = hierFor("reduce_scatter", G, Bytes))
      return H->reduceScatter(Send, Recv, Count, T);
    ShmCollectives *Shm = nullptr;
    WEFT_RETURN_IF_ERROR(shmFor("reduce_scatter", G, Bytes, T, true, Shm));
    if (Shm)
      return Shm->reduceScatter(Send, Recv, Count, T);
    WEFT_RETURN_IF_ERROR(countFits(Count, Call));
    if (St.Handles.empty())
      St.Handles.resize(1, MPI_REQUEST_NULL);
    St.Started = 0;
    WEFT_RETURN_IF_ERROR(check(
        MPI_Ireduce_scatter_block(Send, Recv, int(Count), mpi::datatype(T),
                                  mpi::sumOp(T), comm(G), &St.Handles[0]),
        Call));
    St.Started = 1;
    R.Active = true;
    return Status::success();
  }
  Status broadcast(const CommGroup &G, void *Buf, size_t Count, DType T,
                   int Root, Queue &Q) override {
    WEFT_RETURN_IF_ERROR(hostReady(Q, "MPI_Bcast"));
    WEFT_RETURN_IF_ERROR(countFits(Count, "MPI_Bcast"));
    return check(MPI_Bcast(Buf, int(Count), mpi::datatype(T), Root, comm(G)),
                 "MPI_Bcast");
  }
  Status reduce(const CommGroup &G, const void *Send, void *Recv, size_t Count,
                DType T, int Root, Queue &Q) override {
    WEFT_RETURN_IF_ERROR(hostReady(Q, "MPI_Reduce"));
    WEFT_RETURN_IF_ERROR(countFits(Count, "MPI_Reduce"));
    const void *S = (Send == Recv && G.Rank == Root) ? MPI_IN_PLACE : Send;
    return check(MPI_Reduce(S, Recv, int(Count), mpi::datatype(T),
                            mpi::sumOp(T), Root, comm(G)),
                 "MPI_Reduce");
  }
  Status startTransfers(const CommGroup &G, const std::vector<Transfer> &Ops,
                        Queue &Q, CommRequest &R) override {
    WEFT_RETURN_IF_ERROR(hostReady(Q, "transfers"));
    if (R.Active)
      return Status::error("transfers: the request is still in flight (wait "
                           "for it before starting it again)");
    for (size_t I = 0; I < Ops.size(); ++I) {
      WEFT_RETURN_IF_ERROR(checkTransfer(G, Ops, I));
      WEFT_RETURN_IF_ERROR(countFits(Ops[I].Count, "MPI_Isend/MPI_Irecv"));
    }
    MpiRequestState &St = requestState(R);
    St.HierOwner = nullptr;
    if (St.Handles.size() < Ops.size())
      St.Handles.resize(Ops.size(), MPI_REQUEST_NULL);
    St.Started = 0;
    // One tag for every transfer: MPI matches messages between a pair in
    // the order they were posted (non-overtaking), as NCCL does.
    for (const Transfer &X : Ops) {
      int Rc = X.Dir == Transfer::Send
                   ? MPI_Isend(X.Buf, int(X.Count), mpi::datatype(X.T), X.Peer,
                               kTransferTag, comm(G), &St.Handles[St.Started])
                   : MPI_Irecv(X.Buf, int(X.Count), mpi::datatype(X.T), X.Peer,
                               kTransferTag, comm(G), &St.Handles[St.Started]);
      if (Rc != MPI_SUCCESS) {
        Status S =
            check(Rc, X.Dir == Transfer::Send ? "MPI_Isend" : "MPI_Irecv")
                .withContext("transfers[" + std::to_string(St.Started) +
                             "] with peer " + std::to_string(X.Peer));
        // The ones posted already cannot be taken back: cancel and complete
        // them, so that R is inactive again.
        for (int K = 0; K < St.Started; ++K)
          MPI_Cancel(&St.Handles[size_t(K)]);
        MPI_Waitall(St.Started, St.Handles.data(), MPI_STATUSES_IGNORE);
        St.Started = 0;
        return S;
      }
      ++St.Started;
    }
    R.Active = St.Started > 0;
    return Status::success();
  }
  Status barrier(const CommGroup &G) override {
    return check(MPI_Barrier(comm(G)), "MPI_Barrier");
  }
  bool independentTransfers() const override { return true; }

private:
  static constexpr int kTransferTag = 7;
  /// Collectives on Q's memory: MPI reads host memory, after the work
  /// enqueued before (a no-op on the synchronous CPU queue).
  static Status hostReady(Queue &Q, const char *Call) {
    if (!Q.hostMemory())
      return Status::error(std::string(Call) +
                           ": the MPI communicator moves host memory only; a "
                           "device backend needs its device communicator");
    return Q.synchronize();
  }

  /// The shared-memory path for a blocking collective over G whose larger
  /// buffer has Bytes bytes (ShmCollectives.h), or null for plain MPI: from
  /// ShmMinBytes on, for f32/f64 when it reduces, when the group shares one
  /// node. Every rank of G gets the same answer (it depends only on the
  /// count, the type and the group).
  /// A measured path table (CommPaths.h), where one exists, overrides the
  /// threshold for the collectives and group size it lists.
  Status shmFor(const char *Kind, const CommGroup &G, size_t Bytes, DType T,
                bool Reduces, ShmCollectives *&Out) {
    Out = nullptr;
    std::optional<CommPath> Measured =
        Paths ? Paths->choose(Kind, G.Size, Bytes) : std::nullopt;
    bool Wanted = Measured ? *Measured == CommPath::Shm : Bytes >= ShmMinBytes;
    if (!Wanted || ShmMinBytes == SIZE_MAX || G.Size < 2 ||
        (Reduces && T != DType::F32 && T != DType::F64))
      return Status::success();
    auto &Shm = ShmByComm[comm(G)];
    if (!Shm) {
      auto Made = ShmCollectives::create(comm(G), ShmSlotKB);
      if (!Made.ok())
        return Made.status();
      Shm.reset(*Made);
    }
    if (Shm->usable())
      Out = Shm.get();
    return Status::success();
  }

  /// The nodes G's ranks sit on; a group across two nodes or more with the
  /// same number (two or more) on each gets its hierarchical collectives,
  /// unless WEFT_NO_HIER is set. Collective over G, at the group's making.
  Status placeOnNodes(CommGroup &G) {
    if (G.Size < 2)
      return Status::success();
    auto H = HierarchicalCollectives::create(comm(G), ShmSlotKB, ShmMinBytes);
    if (!H.ok())
      return H.status().withContext("the nodes of the group over " +
                                    axesString(G.Axes));
    G.NodeOf = (*H)->layout().NodeOf;
    G.Hierarchical = (*H)->usable() && !NoHier;
    if (G.Hierarchical)
      HierByComm[comm(G)] = std::move(*H);
    return Status::success();
  }
  /// G's hierarchical collectives for a `Kind` whose larger buffer has
  /// Bytes bytes, or null for the flat path: from HierMinBytes on, unless a
  /// measured path table says "mpi" there.
  HierarchicalCollectives *hierFor(const char *Kind, const CommGroup &G,
                                   size_t Bytes) {
    if (!G.Hierarchical || Bytes < HierMinBytes)
      return nullptr;
    std::optional<CommPath> Measured =
        Paths ? Paths->choose(Kind, G.Size, Bytes) : std::nullopt;
    if (Measured == CommPath::Mpi)
      return nullptr;
    auto It = HierByComm.find(comm(G));
    return It == HierByComm.end() ? nullptr : It->second.get();
  }

  /// The paths' thresholds (PathSettings, agreed by every rank): from
  /// ShmMinBytes the shared slots within a node, from HierMinBytes the
  /// hierarchical collectives across nodes.
  const size_t ShmMinBytes, ShmSlotKB, HierMinBytes;
  const bool NoHier;
  std::map<MPI_Comm, std::unique_ptr<ShmCollectives>> ShmByComm;
  std::map<MPI_Comm, std::unique_ptr<HierarchicalCollectives>> HierByComm;
  std::optional<CommPathTable> Paths;
  std::string PathsFile;
  bool OwnsMpi;
  int WorldRank, WorldSize;
  std::map<std::pair<std::string, AxesList>, CommGroup> Groups;
};

/// Open MPI mallocs a temporary per large collective; with glibc's defaults
/// that memory is mmapped and unmapped each call and every page faults
/// again (ENVIRONMENT.md: all-reduce of 64 MiB at 0.2 GB/s). Keep freed
/// memory in the heap instead. WEFT_KEEP_MALLOC=1 leaves glibc alone.
void keepFreedMemory() {
  if (std::getenv("WEFT_KEEP_MALLOC"))
    return;
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, INT_MAX);
}

/// The measured path table, read by rank 0 and sent to every rank, so that
/// all take the same path (a rank on another path would wait forever).
Expected<std::optional<CommPathTable>> readPathTable(int Rank,
                                                     const std::string &File) {
  std::string Text;
  long long Size = -1; // -1: no table; -2: unreadable
  if (Rank == 0 && !File.empty()) {
    std::ifstream In(File, std::ios::binary);
    if (In) {
      std::ostringstream Read;
      Read << In.rdbuf(); // an empty file or a directory reads as ""
      Text = Read.str();
      Size = In.bad()                          ? -2
             : Text.size() > (size_t(1) << 20) ? -3
                                               : (long long)Text.size();
    } else {
      Size = -2;
    }
  }
  WEFT_RETURN_IF_ERROR(check(
      MPI_Bcast(&Size, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD), "MPI_Bcast"));
  if (Size == -2)
    return Status::error("cannot read the collective path table " + File +
                         " (WEFT_COMM_TABLE, or weft-bench-comm "
                         "--write-table)");
  if (Size == -3)
    return Status::error("the collective path table " + File +
                         " is over 1 MiB");
  if (Size < 0)
    return std::optional<CommPathTable>();
  Text.resize(size_t(Size));
  WEFT_RETURN_IF_ERROR(
      check(MPI_Bcast(Text.data(), int(Size), MPI_CHAR, 0, MPI_COMM_WORLD),
            "MPI_Bcast"));
  Expected<CommPathTable> T =
      CommPathTable::parse(Text, "collective path table " + File);
  if (!T.ok())
    return T.status();
  return std::optional<CommPathTable>(std::move(*T));
}
} // namespace

bool haveMpi() { return true; }

Expected<std::unique_ptr<Communicator>> createCommunicator() {
  if (!launchedByMpi())
    return createLocalCommunicator();
  int Initialized = 0;
  WEFT_RETURN_IF_ERROR(check(MPI_Initialized(&Initialized), "MPI_Initialized"));
  bool Owns = !Initialized;
  if (Owns) {
    keepFreedMemory();
    int Provided = 0;
    WEFT_RETURN_IF_ERROR(
        check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &Provided),
              "MPI_Init_thread"));
  }
  WEFT_RETURN_IF_ERROR(
      check(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN),
            "MPI_Comm_set_errhandler"));
  int Rank = 0, Size = 1;
  WEFT_RETURN_IF_ERROR(
      check(MPI_Comm_rank(MPI_COMM_WORLD, &Rank), "MPI_Comm_rank"));
  WEFT_RETURN_IF_ERROR(
      check(MPI_Comm_size(MPI_COMM_WORLD, &Size), "MPI_Comm_size"));
  std::string PathsFile = commPathTableFile();
  Expected<std::optional<CommPathTable>> Paths = readPathTable(Rank, PathsFile);
  if (!Paths.ok())
    return Paths.status();
  Expected<PathSettings> Set = agreedPathSettings();
  if (!Set.ok())
    return Set.status();
  return std::unique_ptr<Communicator>(new MpiCommunicator(
      Owns, Rank, Size, std::move(*Paths), std::move(PathsFile), *Set));
}

} // namespace weft
