//===- HierarchicalCollectives.h - Collectives of a group across nodes -*- C++
//-*-===//
//
// A group whose ranks sit on N >= 2 nodes, L >= 2 on each, runs its
// all-reduce, reduce-scatter and all-gather in three steps, so that only
// 1/L of the message crosses the network per rank:
//
//   all-reduce     reduce-scatter within the node (part l to local rank l),
//                  all-reduce of part l across the nodes (among the ranks of
//                  local index l), all-gather within the node;
//   reduce-scatter the blocks regrouped by local index, reduce-scatter within
//                  the node (local rank l: the N blocks of the members of
//                  local index l), reduce-scatter across the nodes;
//   all-gather     all-gather across the nodes, all-gather within the node,
//                  the blocks put back in shard order.
//
// A node is what MPI calls "shared" (MPI_Comm_split_type) further split by
// /dev/shm's identity and WEFT_NODE_ID (ShmCollectives.h: a mount namespace,
// a container, a two-node simulation). Inside a node the shared-slot path
// runs from its threshold on (f32/f64 reductions); everything else is MPI
// on the node's or the cross-node sub-communicator. Every rank of the group
// ends with the same bits: each part is summed once and then copied.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_RUNTIME_COMM_HIERARCHICALCOLLECTIVES_H
#define WEFT_RUNTIME_COMM_HIERARCHICALCOLLECTIVES_H

#include "program/CommBytes.h"
#include "program/Program.h"
#include "program/Status.h"
#include "runtime/comm/ShmCollectives.h"

#include <mpi.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace weft {

/// Where the ranks of a group sit: NodeOf[q] is the node index of shard
/// index q (nodes numbered by their first member).
struct NodeLayout {
  std::vector<int64_t> NodeOf;
  NodeSpread Spread; // program/CommBytes.h
};

/// Collective over Group (ranked by shard index): the node of every rank.
Expected<NodeLayout> nodeLayout(MPI_Comm Group);

/// A nonblocking hierarchical collective in flight: its steps are started
/// one after the other as the previous one completes (progress()).
struct HierarchicalOp {
  enum Kind { AllReduce, AllGather } What = AllReduce;
  int Phase = -1;     // -1: inactive; the step in flight otherwise
  bool Ready = false; // the step has completed; the next waits its turn
  MPI_Request Handle = MPI_REQUEST_NULL;
  const char *Send = nullptr; // an all-reduce's padded copy where Padded
  char *Recv = nullptr;
  size_t Count = 0, Part = 0; // Part: elements per local rank (all-reduce)
  DType T = DType::F32;
  bool Padded = false;
  std::vector<char> Staged, Parts; // padded or regrouped copies
  std::string Error; // why it ended early (progress() reports it once)
};

class HierarchicalCollectives {
public:
  /// Collective over Group. usable() only where the group spans two nodes
  /// or more with the same number (two or more) of its ranks on each; only
  /// then are the sub-communicators made. ShmMinBytes: from which size
  /// (the node's larger buffer) a step within the node takes the
  /// shared-slot path (SIZE_MAX: never).
  static Expected<std::unique_ptr<HierarchicalCollectives>>
  create(MPI_Comm Group, size_t SlotKB, size_t ShmMinBytes);
  ~HierarchicalCollectives();
  HierarchicalCollectives(const HierarchicalCollectives &) = delete;
  HierarchicalCollectives &operator=(const HierarchicalCollectives &) = delete;

  bool usable() const { return Usable; }
  const NodeLayout &layout() const { return Layout; }

  /// As Communicator's: Recv = Σ Send (Send == Recv in place).
  Status allReduce(const void *Send, void *Recv, size_t Count, DType T);
  /// Recv (Count) = block `shard index` of Σ Send (G.Size * Count).
  Status reduceScatter(const void *Send, void *Recv, size_t Count, DType T);
  /// Recv (G.Size * Count) = the Sends by shard index; Send == nullptr: in
  /// place.
  Status allGather(const void *Send, void *Recv, size_t Count, DType T);

  /// Start an all-reduce or all-gather; Op must be inactive.
  Status startAllReduce(const void *Send, void *Recv, size_t Count, DType T,
                        HierarchicalOp &Op);
  Status startAllGather(const void *Send, void *Recv, size_t Count, DType T,
                        HierarchicalOp &Op);
  /// Advances every op in flight, and with Block until Op has finished;
  /// Done says whether Op has (then it is inactive). Returns Op's own error
  /// only (another op's waits for its own test or wait); after it Op is
  /// inactive.
  Status progress(HierarchicalOp &Op, bool Block, bool &Done);
  /// Stops tracking Op (its request is going away while in flight).
  void forget(HierarchicalOp &Op);

private:
  HierarchicalCollectives() = default;
  bool shmFor(size_t Bytes, DType T, bool Reduces) const;
  Status nodeReduceScatter(const void *Send, void *Recv, size_t Count, DType T);
  Status nodeAllGather(const void *Send, void *Recv, size_t Count, DType T);
  /// Copies block Member(n, l) of From (shard order) to block l*N + n of To
  /// (Gather), or back (!Gather); blocks of Bytes bytes.
  void regroup(const char *From, char *To, size_t Bytes, bool Gather) const;
  Status launch(HierarchicalOp &Op);
  Status startPhase(HierarchicalOp &Op);
  /// One pass over the ops in flight, in the order they were started:
  /// tests each step, and starts the next one where every earlier op of its
  /// kind has started it. Returns whether any step completed or started; an
  /// op whose step fails ends with its Error.
  bool sweep();

  NodeLayout Layout;
  bool Usable = false;
  /// Node n holds shard indices n*L .. n*L+L-1 (ranks placed node by node,
  /// the mesh's usual order): reduce-scatter and all-gather then run one
  /// step within the node per node, on blocks already in shard order, and
  /// skip the copy into node order (from kPerNodeMinBytes a block).
  bool NodeMajor = false;
  int Node = 0, Local = 0;               // this rank's node and local index
  std::vector<std::vector<int>> Members; // [node][local] = shard index
  MPI_Comm Intra = MPI_COMM_NULL;        // this node's ranks, by local index
  MPI_Comm Cross = MPI_COMM_NULL;        // same local index, by node
  /// The nonblocking steps, one communicator each (Intra's or Cross's
  /// duplicates): all-reduce's reduce-scatter, all-reduce, all-gather, then
  /// all-gather's two. MPI needs the collectives of a communicator started
  /// in the same order on every rank. A step starts when the one before it
  /// completes, which differs between ranks; so each step has its own
  /// communicator, on which the ops start in the order they were created
  /// (sweep()), the program's order on every rank.
  MPI_Comm Steps[5] = {MPI_COMM_NULL, MPI_COMM_NULL, MPI_COMM_NULL,
                       MPI_COMM_NULL, MPI_COMM_NULL};
  std::vector<HierarchicalOp *> InFlight; // in the order they started
  std::unique_ptr<ShmCollectives> Shm;    // on Intra
  size_t ShmMinBytes = 0;
  std::vector<char> Staged, Parts; // the blocking calls' buffers
};

} // namespace weft

#endif // WEFT_RUNTIME_COMM_HIERARCHICALCOLLECTIVES_H
