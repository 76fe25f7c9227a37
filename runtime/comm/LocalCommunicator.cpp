//===- LocalCommunicator.cpp - One rank, no peers, no MPI ----------------===//
#include "runtime/comm/Communicator.h"

#include <cstdlib>
#include <cstring>
#include <map>

namespace weft {

Expected<CommGroup> describeGroup(const Mesh &M, const AxesList &Axes,
                                  int WorldRank, int WorldSize) {
  if (!M.Axes.empty() && M.size() != WorldSize)
    return Status::error("world size " + std::to_string(WorldSize) +
                         " is not the mesh product " + M.describe() + " = " +
                         std::to_string(M.size()));
  CommGroup G;
  G.Axes = Axes;
  G.Members = M.Axes.empty() ? std::vector<int64_t>{WorldRank}
                             : M.group(WorldRank, Axes);
  G.Size = int(G.Members.size());
  G.Rank = M.Axes.empty() ? 0 : int(M.shardIndex(WorldRank, Axes));
  return G;
}

Status checkTransfer(const CommGroup &G, const std::vector<Transfer> &Ops,
                     size_t I) {
  const Transfer &X = Ops[I];
  const char *Dir = X.Dir == Transfer::Send ? "send to" : "receive from";
  if (X.Peer < 0 || X.Peer >= G.Size)
    return Status::error("transfers[" + std::to_string(I) + "]: " + Dir +
                         " peer " + std::to_string(X.Peer) +
                         ", but the group has shard indices 0.." +
                         std::to_string(G.Size - 1));
  if (!X.Buf && X.Count)
    return Status::error("transfers[" + std::to_string(I) + "]: " + Dir +
                         " peer " + std::to_string(X.Peer) + " of " +
                         std::to_string(X.Count) + " elements has no buffer");
  return Status::success();
}

namespace {

class LocalCommunicator final : public Communicator {
public:
  LocalCommunicator(int Rank, int Size) : WorldRank(Rank), WorldSize(Size) {}
  const char *name() const override { return "local"; }
  int rank() const override { return WorldRank; }
  int size() const override { return WorldSize; }

  Expected<const CommGroup *> group(const Mesh &TheMesh,
                                    const AxesList &Axes) override {
    auto Key = std::make_pair(TheMesh.describe(), Axes);
    auto It = Groups.find(Key);
    if (It != Groups.end())
      return &It->second;
    Expected<CommGroup> G = describeGroup(TheMesh, Axes, WorldRank, size());
    if (!G.ok())
      return G.status();
    return &Groups.emplace(Key, *G).first->second;
  }

  // A group of one: every collective is a copy on the queue.
  Status allReduce(const CommGroup &G, const void *Send, void *Recv,
                   size_t Count, DType T, Queue &Q) override {
    WEFT_RETURN_IF_ERROR(alone(G, "all_reduce"));
    return copy(Send, Recv, Count, T, Q);
  }
  Status iallReduce(const CommGroup &G, const void *Send, void *Recv,
                    size_t Count, DType T, Queue &Q, CommRequest &R) override {
    if (R.Active)
      return Status::error("iall_reduce: the request is still in flight");
    WEFT_RETURN_IF_ERROR(alone(G, "iall_reduce"));
    return copy(Send, Recv, Count, T, Q);
  }
  Status test(CommRequest &R, bool &Done) override {
    Done = !R.Active;
    return Status::success();
  }
  Status wait(CommRequest &, Queue &) override { return Status::success(); }
  Status reserveRequest(CommRequest &, size_t, DType) override {
    return Status::success();
  }
  Status allGather(const CommGroup &G, const void *Send, void *Recv,
                   size_t Count, DType T, Queue &Q) override {
    WEFT_RETURN_IF_ERROR(alone(G, "all_gather"));
    return Send ? copy(Send, Recv, Count, T, Q) : Status::success();
  }
  Status iallGather(const CommGroup &G, const void *Send, void *Recv,
                    size_t Count, DType T, Queue &Q, CommRequest &R) override {
    if (R.Active)
      return Status::error("iall_gather: the request is still in flight");
    WEFT_RETURN_IF_ERROR(alone(G, "iall_gather"));
    return Send ? copy(Send, Recv, Count, T, Q) : Status::success();
  }
  Status reduceScatter(const CommGroup &G, const void *Send, void *Recv,
                       size_t Count, DType T, Queue &Q) override {
    WEFT_RETURN_IF_ERROR(alone(G, "reduce_scatter"));
    return copy(Send, Recv, Count, T, Q);
  }
  Status broadcast(const CommGroup &G, void *, size_t, DType, int,
                   Queue &) override {
    return alone(G, "broadcast");
  }
  Status reduce(const CommGroup &G, const void *Send, void *Recv, size_t Count,
                DType T, int, Queue &Q) override {
    WEFT_RETURN_IF_ERROR(alone(G, "reduce"));
    return copy(Send, Recv, Count, T, Q);
  }
  /// Transfers to and from this rank itself (peer 0 of a group of one):
  /// the k-th send pairs with the k-th receive.
  Status startTransfers(const CommGroup &G, const std::vector<Transfer> &Ops,
                        Queue &Q, CommRequest &R) override {
    if (R.Active)
      return Status::error("transfers: the request is still in flight");
    std::vector<const Transfer *> Sends, Recvs;
    for (size_t I = 0; I < Ops.size(); ++I) {
      WEFT_RETURN_IF_ERROR(checkTransfer(G, Ops, I));
      (Ops[I].Dir == Transfer::Send ? Sends : Recvs).push_back(&Ops[I]);
    }
    if (Sends.size() != Recvs.size())
      return Status::error(
          "transfers: " + std::to_string(Sends.size()) + " send(s) to and " +
          std::to_string(Recvs.size()) +
          " receive(s) from this rank itself: they would never complete");
    for (size_t I = 0; I < Sends.size(); ++I) {
      if (Sends[I]->Count != Recvs[I]->Count || Sends[I]->T != Recvs[I]->T)
        return Status::error(
            "transfers: send " + std::to_string(I) + " moves " +
            std::to_string(Sends[I]->Count) + " " + dtypeName(Sends[I]->T) +
            " but its receive expects " + std::to_string(Recvs[I]->Count) +
            " " + dtypeName(Recvs[I]->T));
      WEFT_RETURN_IF_ERROR(
          copy(Sends[I]->Buf, Recvs[I]->Buf, Sends[I]->Count, Sends[I]->T, Q));
    }
    return Status::success();
  }
  Status barrier(const CommGroup &G) override { return alone(G, "barrier"); }

private:
  static Status alone(const CommGroup &G, const char *Op) {
    if (G.Size == 1)
      return Status::success();
    return Status::error(std::string(Op) + " over a group of " +
                         std::to_string(G.Size) +
                         " ranks: this process has no MPI peers (start it "
                         "with mpirun)");
  }
  static Status copy(const void *Send, void *Recv, size_t Count, DType T,
                     Queue &Q) {
    return Send == Recv ? Status::success()
                        : Q.copyOnDevice(Recv, Send, Count * dtypeBytes(T));
  }
  int WorldRank, WorldSize;
  std::map<std::pair<std::string, AxesList>, CommGroup> Groups;
};

} // namespace

std::unique_ptr<Communicator> createLocalCommunicator(int Rank, int Size) {
  return std::make_unique<LocalCommunicator>(Rank, Size);
}

bool launchedByMpi() {
  for (const char *V :
       {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MV2_COMM_WORLD_SIZE"})
    if (std::getenv(V))
      return true;
  return false;
}

} // namespace weft
