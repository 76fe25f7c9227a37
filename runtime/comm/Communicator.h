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

#include "program/Program.h"
#include "program/Status.h"

#include <cstddef>
#include <memory>

namespace weft {

/// A group of ranks (one sub-communicator).
struct CommGroup {
  AxesList Axes;
  int Rank = 0; // this rank's shard index in the group
  int Size = 1;
  std::vector<int64_t> Members; // world ranks by shard index
  void *Native = nullptr;       // the implementation's handle
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
                           size_t Count, DType T) = 0;
  /// Starts Recv = Σ over the group of Send (Send == Recv is in place).
  /// Send and Recv must stay untouched until R completes; R must not be
  /// active. A communicator without peers completes it at once. After an
  /// error from any of these calls R is inactive.
  virtual Status iallReduce(const CommGroup &G, const void *Send, void *Recv,
                            size_t Count, DType T, CommRequest &R) = 0;
  /// Done = whether R has completed (progressing it); an inactive R is done.
  virtual Status test(CommRequest &R, bool &Done) = 0;
  /// Blocks until R completes; an inactive R returns at once.
  virtual Status wait(CommRequest &R) = 0;
  /// Makes R's handles for an iallReduce of up to Count elements of T (or
  /// for an iallGather, of any count), so that starting it allocates
  /// nothing.
  virtual Status reserveRequest(CommRequest &R, size_t Count, DType T) = 0;

  /// Recv (G.Size * Count elements) = the group's Sends in shard-index
  /// order. Send == nullptr: in place, this rank's chunk is already at
  /// its position in Recv.
  virtual Status allGather(const CommGroup &G, const void *Send, void *Recv,
                           size_t Count, DType T) = 0;
  /// Starts allGather (Send == nullptr is in place); the rules of
  /// iallReduce apply.
  virtual Status iallGather(const CommGroup &G, const void *Send, void *Recv,
                            size_t Count, DType T, CommRequest &R) = 0;
  /// Recv (Count elements) = chunk G.Rank of Σ over the group of Send
  /// (G.Size * Count elements).
  virtual Status reduceScatter(const CommGroup &G, const void *Send, void *Recv,
                               size_t Count, DType T) = 0;
  virtual Status broadcast(const CommGroup &G, void *Buf, size_t Count, DType T,
                           int Root) = 0;
  /// Recv (on Root only) = Σ over the group of Send.
  virtual Status reduce(const CommGroup &G, const void *Send, void *Recv,
                        size_t Count, DType T, int Root) = 0;
  virtual Status send(const CommGroup &G, const void *Buf, size_t Count,
                      DType T, int Peer, int Tag) = 0;
  virtual Status recv(const CommGroup &G, void *Buf, size_t Count, DType T,
                      int Peer, int Tag) = 0;
  virtual Status barrier(const CommGroup &G) = 0;

  /// Ends every rank of the job with exit code Code (MPI_Abort), so that an
  /// error on one rank never leaves the others waiting in a collective. A
  /// communicator without peers returns and the caller exits itself.
  virtual void abortJob(int Code) {}
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
