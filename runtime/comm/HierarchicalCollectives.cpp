//===- HierarchicalCollectives.cpp - Collectives of a group across nodes --===//
#include "runtime/comm/HierarchicalCollectives.h"
#include "runtime/comm/MpiTypes.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <map>
#include <string>

namespace weft {
namespace {
using mpi::check;
using mpi::countFits;

/// Cross-node all-reduces in pieces of at most this many elements (MPI's
/// counts are int).
constexpr size_t kCrossPiece = size_t(1) << 28;

/// From this block size, a node-major group's reduce-scatter and all-gather
/// take one step within the node per node instead of copying the message
/// into node order: on the simulated two nodes, the copy cost as much as
/// the transfer (docs/reliability.md).
constexpr size_t kPerNodeMinBytes = size_t(64) << 10;
} // namespace

Expected<NodeLayout> nodeLayout(MPI_Comm Group) {
  int Size = 0, Rank = 0;
  WEFT_RETURN_IF_ERROR(check(MPI_Comm_size(Group, &Size), "MPI_Comm_size"));
  WEFT_RETURN_IF_ERROR(check(MPI_Comm_rank(Group, &Rank), "MPI_Comm_rank"));
  // The host first (MPI's "shared"), then /dev/shm and WEFT_NODE_ID within
  // it: two hosts' /dev/shm may carry the same device and inode.
  MPI_Comm Shared = MPI_COMM_NULL;
  WEFT_RETURN_IF_ERROR(check(MPI_Comm_split_type(Group, MPI_COMM_TYPE_SHARED,
                                                 Rank, MPI_INFO_NULL, &Shared),
                             "MPI_Comm_split_type"));
  std::array<uint64_t, 3> Id = shmIdentity();
  uint64_t Mine[4] = {Id[0], Id[1], Id[2], uint64_t(Rank)};
  int SharedSize = 0;
  Status S = check(MPI_Comm_size(Shared, &SharedSize), "MPI_Comm_size");
  std::vector<uint64_t> All(size_t(std::max(SharedSize, 0)) * 4);
  if (S.ok())
    S = check(MPI_Allgather(Mine, 4, MPI_UINT64_T, All.data(), 4, MPI_UINT64_T,
                            Shared),
              "MPI_Allgather");
  MPI_Comm_free(&Shared);
  WEFT_RETURN_IF_ERROR(S);
  // A node's color: its lowest shard index.
  int Color = Rank;
  for (int Q = 0; Q < SharedSize; ++Q)
    if (std::equal(Mine, Mine + 3, All.begin() + 4 * Q))
      Color = std::min(Color, int(All[size_t(4 * Q + 3)]));
  std::vector<int> Colors(static_cast<size_t>(Size));
  WEFT_RETURN_IF_ERROR(
      check(MPI_Allgather(&Color, 1, MPI_INT, Colors.data(), 1, MPI_INT, Group),
            "MPI_Allgather"));
  NodeLayout L;
  std::map<int, int64_t> Index; // color -> node index, by first member
  for (int C : Colors)
    L.NodeOf.push_back(Index.emplace(C, int64_t(Index.size())).first->second);
  L.Spread = nodeSpread(L.NodeOf);
  return L;
}

Expected<std::unique_ptr<HierarchicalCollectives>>
HierarchicalCollectives::create(MPI_Comm Group, size_t SlotKB,
                                size_t ShmMinBytes) {
  std::unique_ptr<HierarchicalCollectives> H(new HierarchicalCollectives());
  Expected<NodeLayout> L = nodeLayout(Group);
  if (!L.ok())
    return L.status();
  H->Layout = *L;
  H->ShmMinBytes = ShmMinBytes;
  // Every rank sees the same layout, so all agree.
  H->Usable = H->Layout.Spread.hierarchical();
  if (!H->Usable)
    return H;
  int Rank = 0;
  WEFT_RETURN_IF_ERROR(check(MPI_Comm_rank(Group, &Rank), "MPI_Comm_rank"));
  H->Members.assign(size_t(H->Layout.Spread.Nodes), {});
  for (size_t Q = 0; Q < H->Layout.NodeOf.size(); ++Q) {
    auto &Node = H->Members[size_t(H->Layout.NodeOf[Q])];
    if (int(Q) == Rank) {
      H->Node = int(H->Layout.NodeOf[Q]);
      H->Local = int(Node.size());
    }
    Node.push_back(int(Q));
  }
  H->NodeMajor = true;
  for (size_t Nd = 0; Nd < H->Members.size(); ++Nd)
    for (size_t L = 0; L < H->Members[Nd].size(); ++L)
      H->NodeMajor &= H->Members[Nd][L] == int(Nd * H->Members[Nd].size() + L);
  WEFT_RETURN_IF_ERROR(check(
      MPI_Comm_split(Group, H->Node, H->Local, &H->Intra), "MPI_Comm_split"));
  WEFT_RETURN_IF_ERROR(check(
      MPI_Comm_split(Group, H->Local, H->Node, &H->Cross), "MPI_Comm_split"));
  const bool Within[5] = {true, false, true, false, true};
  for (int K = 0; K < 5; ++K)
    WEFT_RETURN_IF_ERROR(
        check(MPI_Comm_dup(Within[K] ? H->Intra : H->Cross, &H->Steps[K]),
              "MPI_Comm_dup"));
  if (ShmMinBytes != SIZE_MAX) {
    Expected<ShmCollectives *> Shm = ShmCollectives::create(H->Intra, SlotKB);
    if (!Shm.ok())
      return Shm.status();
    H->Shm.reset(*Shm);
  }
  return H;
}

HierarchicalCollectives::~HierarchicalCollectives() {
  Shm.reset(); // its window before the communicator it lives on
  for (MPI_Comm &C : Steps)
    if (C != MPI_COMM_NULL)
      MPI_Comm_free(&C);
  if (Intra != MPI_COMM_NULL)
    MPI_Comm_free(&Intra);
  if (Cross != MPI_COMM_NULL)
    MPI_Comm_free(&Cross);
}

bool HierarchicalCollectives::shmFor(size_t Bytes, DType T,
                                     bool Reduces) const {
  return Shm && Shm->usable() && Bytes >= ShmMinBytes &&
         (!Reduces || T == DType::F32 || T == DType::F64);
}

Status HierarchicalCollectives::nodeReduceScatter(const void *Send, void *Recv,
                                                  size_t Count, DType T) {
  const size_t L = size_t(Layout.Spread.PerNode);
  if (shmFor(L * Count * dtypeBytes(T), T, true))
    return Shm->reduceScatter(Send, Recv, Count, T);
  WEFT_RETURN_IF_ERROR(countFits(Count, "MPI_Reduce_scatter_block"));
  return check(MPI_Reduce_scatter_block(Send, Recv, int(Count),
                                        mpi::datatype(T), mpi::sumOp(T), Intra),
               "MPI_Reduce_scatter_block");
}

Status HierarchicalCollectives::nodeAllGather(const void *Send, void *Recv,
                                              size_t Count, DType T) {
  const size_t L = size_t(Layout.Spread.PerNode);
  if (shmFor(L * Count * dtypeBytes(T), T, false))
    return Shm->allGather(Send, Recv, Count, T);
  WEFT_RETURN_IF_ERROR(countFits(Count, "MPI_Allgather"));
  MPI_Datatype D = mpi::datatype(T);
  return check(MPI_Allgather(Send, int(Count), D, Recv, int(Count), D, Intra),
               "MPI_Allgather");
}

void HierarchicalCollectives::regroup(const char *From, char *To, size_t Bytes,
                                      bool Gather) const {
  const size_t N = Members.size();
  for (size_t Nd = 0; Nd < N; ++Nd)
    for (size_t L = 0; L < Members[Nd].size(); ++L) {
      size_t Shard = size_t(Members[Nd][L]) * Bytes,
             Grouped = (L * N + Nd) * Bytes;
      if (Gather)
        std::memcpy(To + Grouped, From + Shard, Bytes);
      else
        std::memcpy(To + Shard, From + Grouped, Bytes);
    }
}

Status HierarchicalCollectives::allReduce(const void *Send, void *Recv,
                                          size_t Count, DType T) {
  if (Count == 0)
    return Status::success();
  const size_t E = dtypeBytes(T), L = size_t(Layout.Spread.PerNode);
  const size_t P = (Count + L - 1) / L;
  const bool Pad = P * L != Count;
  const void *Src = Send;
  if (Pad) {
    Staged.assign(L * P * E, 0); // zero bits: 0.0 in every float type
    std::memcpy(Staged.data(), Send, Count * E);
    Src = Staged.data();
  }
  Parts.resize(P * E);
  WEFT_RETURN_IF_ERROR(nodeReduceScatter(Src, Parts.data(), P, T));
  for (size_t Off = 0; Off < P; Off += kCrossPiece) {
    size_t M = std::min(kCrossPiece, P - Off);
    WEFT_RETURN_IF_ERROR(
        check(MPI_Allreduce(MPI_IN_PLACE, Parts.data() + Off * E, int(M),
                            mpi::datatype(T), mpi::sumOp(T), Cross),
              "MPI_Allreduce"));
  }
  if (!Pad)
    return nodeAllGather(Parts.data(), Recv, P, T);
  WEFT_RETURN_IF_ERROR(nodeAllGather(Parts.data(), Staged.data(), P, T));
  std::memcpy(Recv, Staged.data(), Count * E);
  return Status::success();
}

Status HierarchicalCollectives::reduceScatter(const void *Send, void *Recv,
                                              size_t Count, DType T) {
  if (Count == 0)
    return Status::success();
  const size_t E = dtypeBytes(T), N = size_t(Layout.Spread.Nodes);
  const size_t L = size_t(Layout.Spread.PerNode);
  Parts.resize(N * Count * E);
  if (NodeMajor && Count * E >= kPerNodeMinBytes) {
    // Node n's blocks are contiguous: part n = Σ of block n*L + Local.
    const char *From = static_cast<const char *>(Send);
    for (size_t Nd = 0; Nd < N; ++Nd)
      WEFT_RETURN_IF_ERROR(nodeReduceScatter(
          From + Nd * L * Count * E, Parts.data() + Nd * Count * E, Count, T));
  } else {
    Staged.resize(Layout.NodeOf.size() * Count * E);
    regroup(static_cast<const char *>(Send), Staged.data(), Count * E, true);
    WEFT_RETURN_IF_ERROR(
        nodeReduceScatter(Staged.data(), Parts.data(), N * Count, T));
  }
  WEFT_RETURN_IF_ERROR(countFits(Count, "MPI_Reduce_scatter_block"));
  return check(MPI_Reduce_scatter_block(Parts.data(), Recv, int(Count),
                                        mpi::datatype(T), mpi::sumOp(T), Cross),
               "MPI_Reduce_scatter_block");
}

Status HierarchicalCollectives::allGather(const void *Send, void *Recv,
                                          size_t Count, DType T) {
  if (Count == 0)
    return Status::success();
  const size_t E = dtypeBytes(T), N = size_t(Layout.Spread.Nodes);
  const void *Src =
      Send ? Send
           : static_cast<char *>(Recv) +
                 size_t(Members[size_t(Node)][size_t(Local)]) * Count * E;
  WEFT_RETURN_IF_ERROR(countFits(N * Count, "MPI_Allgather"));
  Parts.resize(N * Count * E);
  MPI_Datatype D = mpi::datatype(T);
  WEFT_RETURN_IF_ERROR(check(
      MPI_Allgather(Src, int(Count), D, Parts.data(), int(Count), D, Cross),
      "MPI_Allgather"));
  if (NodeMajor && Count * E >= kPerNodeMinBytes) {
    // Node n's blocks land contiguous, in shard order, from part n.
    const size_t L = size_t(Layout.Spread.PerNode);
    for (size_t Nd = 0; Nd < N; ++Nd)
      WEFT_RETURN_IF_ERROR(nodeAllGather(
          Parts.data() + Nd * Count * E,
          static_cast<char *>(Recv) + Nd * L * Count * E, Count, T));
    return Status::success();
  }
  Staged.resize(Layout.NodeOf.size() * Count * E);
  WEFT_RETURN_IF_ERROR(
      nodeAllGather(Parts.data(), Staged.data(), N * Count, T));
  regroup(Staged.data(), static_cast<char *>(Recv), Count * E, false);
  return Status::success();
}

Status HierarchicalCollectives::startAllReduce(const void *Send, void *Recv,
                                               size_t Count, DType T,
                                               HierarchicalOp &Op) {
  if (Op.Phase >= 0)
    return Status::error("a hierarchical all-reduce is still in flight");
  const size_t E = dtypeBytes(T), L = size_t(Layout.Spread.PerNode);
  Op.What = HierarchicalOp::AllReduce;
  Op.Count = Count;
  Op.T = T;
  Op.Recv = static_cast<char *>(Recv);
  Op.Part = (Count + L - 1) / L;
  WEFT_RETURN_IF_ERROR(countFits(Op.Part, "MPI_Iallreduce"));
  if (Count == 0)
    return Status::success();
  Op.Padded = Op.Part * L != Count;
  Op.Send = static_cast<const char *>(Send);
  if (Op.Padded) {
    Op.Staged.assign(L * Op.Part * E, 0);
    std::memcpy(Op.Staged.data(), Send, Count * E);
    Op.Send = Op.Staged.data();
  }
  Op.Parts.resize(Op.Part * E);
  return launch(Op);
}

Status HierarchicalCollectives::startAllGather(const void *Send, void *Recv,
                                               size_t Count, DType T,
                                               HierarchicalOp &Op) {
  if (Op.Phase >= 0)
    return Status::error("a hierarchical all-gather is still in flight");
  const size_t E = dtypeBytes(T), N = size_t(Layout.Spread.Nodes);
  WEFT_RETURN_IF_ERROR(countFits(N * Count, "MPI_Iallgather"));
  if (Count == 0)
    return Status::success();
  Op.What = HierarchicalOp::AllGather;
  Op.Count = Count;
  Op.T = T;
  Op.Recv = static_cast<char *>(Recv);
  Op.Send =
      Send ? static_cast<const char *>(Send)
           : Op.Recv + size_t(Members[size_t(Node)][size_t(Local)]) * Count * E;
  Op.Parts.resize(N * Count * E);
  Op.Staged.resize(Layout.NodeOf.size() * Count * E);
  return launch(Op);
}

/// Starts Op's first step and tracks it.
Status HierarchicalCollectives::launch(HierarchicalOp &Op) {
  Op.Phase = 0;
  Op.Ready = false;
  WEFT_RETURN_IF_ERROR(startPhase(Op));
  InFlight.push_back(&Op);
  return Status::success();
}

/// Starts step Op.Phase, or finishes Op after its last step (Phase -1).
Status HierarchicalCollectives::startPhase(HierarchicalOp &Op) {
  const size_t E = dtypeBytes(Op.T), N = size_t(Layout.Spread.Nodes);
  MPI_Datatype D = mpi::datatype(Op.T);
  int Rc = MPI_SUCCESS;
  const char *Call = "";
  if (Op.What == HierarchicalOp::AllReduce) {
    int P = int(Op.Part);
    switch (Op.Phase) {
    case 0:
      Call = "MPI_Ireduce_scatter_block";
      Rc = MPI_Ireduce_scatter_block(Op.Send, Op.Parts.data(), P, D,
                                     mpi::sumOp(Op.T), Steps[0], &Op.Handle);
      break;
    case 1:
      Call = "MPI_Iallreduce";
      Rc = MPI_Iallreduce(MPI_IN_PLACE, Op.Parts.data(), P, D, mpi::sumOp(Op.T),
                          Steps[1], &Op.Handle);
      break;
    case 2:
      Call = "MPI_Iallgather";
      Rc = MPI_Iallgather(Op.Parts.data(), P, D,
                          Op.Padded ? Op.Staged.data() : Op.Recv, P, D,
                          Steps[2], &Op.Handle);
      break;
    default:
      if (Op.Padded)
        std::memcpy(Op.Recv, Op.Staged.data(), Op.Count * E);
      Op.Phase = -1;
    }
  } else {
    int C = int(Op.Count);
    switch (Op.Phase) {
    case 0:
      Call = "MPI_Iallgather";
      Rc = MPI_Iallgather(Op.Send, C, D, Op.Parts.data(), C, D, Steps[3],
                          &Op.Handle);
      break;
    case 1:
      Call = "MPI_Iallgather";
      Rc = MPI_Iallgather(Op.Parts.data(), int(N) * C, D, Op.Staged.data(),
                          int(N) * C, D, Steps[4], &Op.Handle);
      break;
    default:
      regroup(Op.Staged.data(), Op.Recv, Op.Count * E, false);
      Op.Phase = -1;
    }
  }
  if (Rc != MPI_SUCCESS) {
    Status S = check(Rc, Call).withContext("hierarchical step " +
                                           std::to_string(Op.Phase));
    Op.Phase = -1;
    return S;
  }
  return Status::success();
}

bool HierarchicalCollectives::sweep() {
  bool Changed = false;
  auto fail = [&](HierarchicalOp &Op, const Status &S) {
    Op.Error = S.message();
    Op.Phase = -1;
    Changed = true;
  };
  for (size_t I = 0; I < InFlight.size(); ++I) {
    HierarchicalOp &Op = *InFlight[I];
    while (Op.Phase >= 0) {
      if (!Op.Ready) {
        int Flag = 0;
        int Rc = MPI_Test(&Op.Handle, &Flag, MPI_STATUS_IGNORE);
        if (Rc != MPI_SUCCESS) {
          fail(Op, check(Rc, "MPI_Test"));
          break;
        }
        if (!Flag)
          break;
        Op.Ready = Changed = true;
      }
      // Its turn: no earlier op of its kind is still before this step.
      bool Turn = true;
      for (size_t J = 0; J < I; ++J)
        Turn &= InFlight[J]->What != Op.What || InFlight[J]->Phase < 0 ||
                InFlight[J]->Phase > Op.Phase;
      if (!Turn)
        break;
      ++Op.Phase;
      Op.Ready = false;
      Changed = true;
      if (Status S = startPhase(Op); !S.ok())
        fail(Op, S);
    }
  }
  InFlight.erase(
      std::remove_if(InFlight.begin(), InFlight.end(),
                     [](HierarchicalOp *Op) { return Op->Phase < 0; }),
      InFlight.end());
  return Changed;
}

void HierarchicalCollectives::forget(HierarchicalOp &Op) {
  InFlight.erase(std::remove(InFlight.begin(), InFlight.end(), &Op),
                 InFlight.end());
}

Status HierarchicalCollectives::progress(HierarchicalOp &Op, bool Block,
                                         bool &Done) {
  for (;;) {
    Done = Op.Phase < 0;
    if (Done) {
      if (Op.Error.empty())
        return Status::success();
      Status S = Status::error(Op.Error);
      Op.Error.clear();
      return S;
    }
    if (!sweep() && !Block)
      return Status::success();
  }
}

} // namespace weft
