//===- Communicator.h - One thin interface over MPI (and later NCCL) -*- C++
//-*-===//
//
// Collectives run on a group: the ranks of the mesh that differ only on a
// list of axes (docs/program-format.md, "Meshes and shards"), ordered by
// shard index. group() builds a group once per axes list and caches it.
// Every call returns a Status: a failing library call is an error naming
// the call, never a hang or an abort. Sum is the only reduction.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_RUNTIME_COMM_COMMUNICATOR_H
#define WEFT_RUNTIME_COMM_COMMUNICATOR_H

#include "program/CommBytes.h"
#include "program/Program.h"
#include "program/Status.h"
#include "runtime/Queue.h"

#include <cstddef>
#include <memory>
#include <vector>

namespace weft {

/// A group of ranks (one sub-communicator).
struct CommGroup {
  AxesList Axes;
  int Rank = 0; // this rank's shard index in the group
  int Size = 1;
  std::vector<int64_t> Members; // world ranks by shard index
  void *Native = nullptr;       // the implementation's handle
  /// The node index of each shard index (the first member's node is 0), as
  /// the launcher placed the ranks; empty where the communicator cannot
  /// tell.
  std::vector<int64_t> NodeOf;
  /// Whether its all-reduce, reduce-scatter and all-gather run
  /// hierarchically (HierarchicalCollectives.h: within the node, across,
  /// within).
  bool Hierarchical = false;
  NodeSpread spread() const { return nodeSpread(NodeOf); }
};

enum class ReduceOp { Sum };

/// The group of WorldRank for Axes of mesh M, without its Native handle:
/// members, size and shard index. Refuses a mesh whose product is not
/// WorldSize. An empty mesh gives the rank alone.
Expected<CommGroup> describeGroup(const Mesh &M, const AxesList &Axes,
                                  int WorldRank, int WorldSize);

/// A nonblocking collective: iallReduce or iallGather starts it, test()
/// reporting done or wait() finishes it, and it can then start again. The
/// implementation's handles live in Native; reserveRequest() makes them once
/// (at load) so that starting one allocates nothing.
struct CommRequest {
  struct State {
    virtual ~State() = default;
  };
  std::unique_ptr<State> Native;
  bool Active = false; // started, not yet complete
};

/// One point-to-point transfer of a grouped start (Communicator::
/// startTransfers): Count elements of T from or to device memory Buf, with
/// the rank of shard index Peer in the group.
struct Transfer {
  enum Direction { Send, Recv } Dir = Send;
  int Peer = 0;
  void *Buf = nullptr;
  size_t Count = 0;
  DType T = DType::F32;
};

/// Success, or an error naming transfer I of Ops whose peer is not a shard
/// index of G or whose buffer is missing (every communicator checks first).
Status checkTransfer(const CommGroup &G, const std::vector<Transfer> &Ops,
                     size_t I);

/// Every call that moves tensor data takes the Queue whose device memory
/// its buffers are (runtime/Queue.h) and is ordered on it: it runs after
/// the work enqueued on Q before it, and work enqueued after it sees its
/// result. A blocking call's result is ready for Q when it returns; a
/// started one's after wait(R, Q). Buffers in host memory take hostQueue()
/// (control messages: traces, checks). An NCCL communicator enqueues on
/// the queue's stream (and serves hostQueue() calls through its bootstrap
/// communicator); the MPI one needs a queue whose memory is host memory,
/// synchronizes it and calls MPI (docs/design.md, "The device boundary").
class Communicator {
public:
  virtual ~Communicator() = default;
  virtual const char *name() const = 0;
  virtual int rank() const = 0; // world rank
  virtual int size() const = 0; // world size

  /// This rank's group for Axes of mesh M (whose product must be size()),
  /// built on first use and cached per (mesh, axes list); the pointer stays
  /// valid for the communicator's life. Empty Axes: this rank alone; all of
  /// M's axes: the world. Collective: every rank asks for the same groups
  /// in the same order.
  virtual Expected<const CommGroup *> group(const Mesh &M,
                                            const AxesList &Axes) = 0;

  /// Recv = Σ over the group of Send (Count elements). Send == Recv is in
  /// place.
  virtual Status allReduce(const CommGroup &G, const void *Send, void *Recv,
                           size_t Count, DType T, Queue &Q) = 0;
  /// Starts Recv = Σ over the group of Send (Send == Recv is in place).
  /// Send and Recv must stay untouched until R completes; R must not be
  /// active. A communicator without peers completes it at once. After an
  /// error from any of these calls R is inactive.
  virtual Status iallReduce(const CommGroup &G, const void *Send, void *Recv,
                            size_t Count, DType T, Queue &Q,
                            CommRequest &R) = 0;
  /// Done = whether R has completed (progressing it); an inactive R is done.
  virtual Status test(CommRequest &R, bool &Done) = 0;
  /// Orders R's completion on Q: work enqueued on Q from now on sees R's
  /// result (a synchronous queue: blocks until R completes). An inactive R
  /// returns at once.
  virtual Status wait(CommRequest &R, Queue &Q) = 0;
  /// Makes R's handles for an iallReduce of up to Count elements of T (or
  /// for an iallGather, of any count), so that starting it allocates
  /// nothing.
  virtual Status reserveRequest(CommRequest &R, size_t Count, DType T) = 0;

  /// Recv (G.Size * Count elements) = the group's Sends in shard-index
  /// order. Send == nullptr: in place, this rank's chunk is already at
  /// its position in Recv.
  virtual Status allGather(const CommGroup &G, const void *Send, void *Recv,
                           size_t Count, DType T, Queue &Q) = 0;
  /// Starts allGather (Send == nullptr is in place); the rules of
  /// iallReduce apply.
  virtual Status iallGather(const CommGroup &G, const void *Send, void *Recv,
                            size_t Count, DType T, Queue &Q,
                            CommRequest &R) = 0;
  /// Recv (Count elements) = chunk G.Rank of Σ over the group of Send
  /// (G.Size * Count elements).
  virtual Status reduceScatter(const CommGroup &G, const void *Send, void *Recv,
                               size_t Count, DType T, Queue &Q) = 0;
  /// Starts reduceScatter; the rules of iallReduce apply. A communicator
  /// without a nonblocking one runs it here and completes it at its start
  /// (R stays inactive).
  virtual Status ireduceScatter(const CommGroup &G, const void *Send,
                                void *Recv, size_t Count, DType T, Queue &Q,
                                CommRequest &R) {
    R.Active = false;
    return reduceScatter(G, Send, Recv, Count, T, Q);
  }
  virtual Status broadcast(const CommGroup &G, void *Buf, size_t Count, DType T,
                           int Root, Queue &Q) = 0;
  /// Recv (on Root only) = Σ over the group of Send.
  virtual Status reduce(const CommGroup &G, const void *Send, void *Recv,
                        size_t Count, DType T, int Root, Queue &Q) = 0;
  /// Starts every transfer of Ops at once (NCCL: one ncclGroupStart/End;
  /// MPI: an MPI_Isend or MPI_Irecv each); R completes when all have. The
  /// transfers between two ranks of G match in the order they are started,
  /// sends with receives, with no tags (NCCL has none). Because a call's
  /// transfers are posted together, a pipeline stage that sends to a
  /// neighbour and receives from it in one call cannot deadlock, whatever
  /// order either side lists them in. The buffers stay untouched until R
  /// completes; R must not be active.
  virtual Status startTransfers(const CommGroup &G,
                                const std::vector<Transfer> &Ops, Queue &Q,
                                CommRequest &R) = 0;
  virtual Status barrier(const CommGroup &G) = 0;
  /// Whether a startTransfers request completes on its own, whatever else
  /// this rank has started or not (MPI: the peer's matching call suffices).
  /// A pipeline stage may then start its sends and its receives as
  /// separate requests and wait for each where it needs it. NCCL's are
  /// ordered on one stream, where a send started before a receive holds
  /// it back until the peer receives: its sends and receives must be
  /// started together.
  virtual bool independentTransfers() const { return false; }

  /// Ends every rank of the job with exit code Code (MPI_Abort), so that an
  /// error on one rank never leaves the others waiting in a collective. A
  /// communicator without peers returns and the caller exits itself.
  virtual void abortJob(int Code) {}

  /// How this communicator chooses between its paths, when a measured table
  /// decides it (runtime/comm/CommPaths.h); empty otherwise.
  virtual std::string pathNote() const { return {}; }
};

/// A communicator without peers: rank Rank of a world of Size. Groups of
/// one rank work (copies); a collective over a larger group is an error.
/// Size > 1 serves tests that place one rank of a mesh without MPI.
std::unique_ptr<Communicator> createLocalCommunicator(int Rank = 0,
                                                      int Size = 1);

/// Whether this build has MPI.
bool haveMpi();
/// Whether the process was started by mpirun/srun (a launcher's
/// environment variables are set).
bool launchedByMpi();
/// MPI when launched by mpirun (initialising it), else the local
/// communicator of one rank: a plain start makes no MPI call at all.
Expected<std::unique_ptr<Communicator>> createCommunicator();

} // namespace weft

#endif // WEFT_RUNTIME_COMM_COMMUNICATOR_H
