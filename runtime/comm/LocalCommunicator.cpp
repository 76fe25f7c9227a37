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

  Status allReduce(const CommGroup &G, const void *Send, void *Recv,
                   size_t Count, DType T) override {
    WEFT_RETURN_IF_ERROR(alone(G, "all_reduce"));
    copy(Send, Recv, Count, T);
    return Status::success();
  }
  Status iallReduce(const CommGroup &G, const void *Send, void *Recv,
                    size_t Count, DType T, CommRequest &R) override {
    if (R.Active)
      return Status::error("iall_reduce: the request is still in flight");
    WEFT_RETURN_IF_ERROR(alone(G, "iall_reduce"));
    copy(Send, Recv, Count, T);
    return Status::success();
  }
  Status test(CommRequest &R, bool &Done) override {
    Done = !R.Active;
    return Status::success();
  }
  Status wait(CommRequest &) override { return Status::success(); }
  Status reserveRequest(CommRequest &, size_t, DType) override {
    return Status::success();
  }
  Status allGather(const CommGroup &G, const void *Send, void *Recv,
                   size_t Count, DType T) override {
    WEFT_RETURN_IF_ERROR(alone(G, "all_gather"));
    if (Send)
      copy(Send, Recv, Count, T);
    return Status::success();
  }
  Status iallGather(const CommGroup &G, const void *Send, void *Recv,
                    size_t Count, DType T, CommRequest &R) override {
    if (R.Active)
      return Status::error("iall_gather: the request is still in flight");
    WEFT_RETURN_IF_ERROR(alone(G, "iall_gather"));
    if (Send)
      copy(Send, Recv, Count, T);
    return Status::success();
  }
  Status reduceScatter(const CommGroup &G, const void *Send, void *Recv,
                       size_t Count, DType T) override {
    WEFT_RETURN_IF_ERROR(alone(G, "reduce_scatter"));
    copy(Send, Recv, Count, T);
    return Status::success();
  }
  Status broadcast(const CommGroup &G, void *, size_t, DType, int) override {
    return alone(G, "broadcast");
  }
  Status reduce(const CommGroup &G, const void *Send, void *Recv, size_t Count,
                DType T, int) override {
    WEFT_RETURN_IF_ERROR(alone(G, "reduce"));
    copy(Send, Recv, Count, T);
    return Status::success();
  }
  Status send(const CommGroup &, const void *, size_t, DType, int Peer,
              int) override {
    return Status::error("send to rank " + std::to_string(Peer) +
                         ": the local communicator has no peers");
  }
  Status recv(const CommGroup &, void *, size_t, DType, int Peer,
              int) override {
    return Status::error("recv from rank " + std::to_string(Peer) +
                         ": the local communicator has no peers");
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
  static void copy(const void *Send, void *Recv, size_t Count, DType T) {
    if (Send != Recv)
      std::memmove(Recv, Send, Count * dtypeBytes(T));
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
