//===- TrainingChecks.cpp - Catch silent errors while training ------------===//
#include "runtime/TrainingChecks.h"
#include "runtime/DurableFile.h"
#include "runtime/comm/Communicator.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>

#include <unistd.h>

namespace weft {

namespace {

Expected<const CommGroup *> worldGroup(const Executor &E) {
  return E.comm().group(E.mesh(), E.mesh().Axes);
}

/// Gathers one 64-bit value per rank of G (as F64 bit patterns: gathering
/// moves bytes, it does no arithmetic).
Status gather64(const Executor &E, const CommGroup &G, uint64_t Mine,
                std::vector<uint64_t> &All) {
  All.assign(size_t(G.Size), 0);
  double In;
  std::memcpy(&In, &Mine, 8);
  std::vector<double> Buf(size_t(G.Size));
  WEFT_RETURN_IF_ERROR(
      E.comm().allGather(G, &In, Buf.data(), 1, DType::F64, hostQueue()));
  for (int I = 0; I < G.Size; ++I)
    std::memcpy(&All[size_t(I)], &Buf[size_t(I)], 8);
  return Status::success();
}

} // namespace

Expected<std::string> firstNonFinite(const Executor &E) {
  const Program &P = E.program();
  // This rank's first problem as a code: 0 the loss, 1 + p parameter p's
  // gradient, past them all: none.
  const uint64_t None = uint64_t(P.Params.size()) + 1;
  uint64_t Code = None;
  int64_t Elem = -1;
  double Value = 0;
  if (!std::isfinite(E.loss())) {
    Code = 0;
    Value = E.loss();
  }
  for (size_t I = 0; Code == None && I < P.Params.size(); ++I) {
    // A reduction on the device: the gradients stay where they are.
    int64_t At = -1;
    double Bad = 0;
    WEFT_RETURN_IF_ERROR(E.findNonFinite(I, BufferKind::Grad, At, Bad));
    if (At >= 0) {
      Code = 1 + I;
      Elem = At;
      Value = Bad;
    }
  }
  // Every rank learns the first problem of the lowest rank that has one.
  uint64_t Rank = uint64_t(E.rank());
  bool Known = true;
  if (E.comm().size() > 1) {
    Expected<const CommGroup *> W = worldGroup(E);
    if (!W.ok())
      return W.status();
    std::vector<uint64_t> All;
    WEFT_RETURN_IF_ERROR(gather64(E, **W, Code, All));
    uint64_t First = None;
    for (size_t R = 0; R < All.size(); ++R)
      if (All[R] < None && First == None) {
        First = All[R];
        Rank = uint64_t((*W)->Members[R]);
      }
    Known = First == Code; // else another rank's: its value is not known
    if (!Known)
      Elem = -1;
    Code = First;
  }
  if (Code == None)
    return std::string();
  std::string Where =
      E.comm().size() > 1 ? " on rank " + std::to_string(Rank) : "";
  char V[64];
  std::snprintf(V, sizeof(V), "%g", Value);
  if (Code == 0)
    return "the loss is not finite" + Where +
           (Known ? " (" + std::string(V) + ")" : "");
  std::string Name = P.Params[Code - 1].Name;
  return "the gradient of '" + Name + "' is not finite" + Where +
         (Elem >= 0
              ? " (local element " + std::to_string(Elem) + " is " + V + ")"
              : "");
}

Expected<std::string> tpPlacementNote(const Executor &E) {
  const Mesh &M = E.mesh();
  const int Tp = M.axisIndex("tp");
  if (E.comm().size() <= 1 || Tp < 0 || M.Dims[size_t(Tp)] <= 1)
    return std::string();
  Expected<const CommGroup *> W = worldGroup(E);
  if (!W.ok())
    return W.status();
  // The nodes as the communicator knows them (MPI: the launcher's), else by
  // host name and WEFT_NODE_ID.
  std::vector<uint64_t> Nodes((*W)->NodeOf.begin(), (*W)->NodeOf.end());
  if (Nodes.empty()) {
    char Host[256] = {};
    gethostname(Host, sizeof(Host) - 1);
    const char *Node = std::getenv("WEFT_NODE_ID");
    const uint64_t Mine =
        std::hash<std::string>()(std::string(Host) + "/" + (Node ? Node : ""));
    WEFT_RETURN_IF_ERROR(gather64(E, **W, Mine, Nodes));
  }
  std::map<int64_t, uint64_t> NodeOf;
  for (size_t I = 0; I < Nodes.size(); ++I)
    NodeOf[(*W)->Members[I]] = Nodes[I];
  int64_t Spanning = 0;
  std::string First;
  for (int64_t R = 0; R < M.size(); ++R) {
    std::vector<int64_t> G = M.group(R, {"tp"});
    if (G.empty() || G[0] != R)
      continue; // each group once, at its first rank
    bool Same = true;
    for (int64_t Q : G)
      Same &= NodeOf[Q] == NodeOf[R];
    if (Same)
      continue;
    if (!Spanning++)
      for (int64_t Q : G)
        First += (First.empty() ? "" : ", ") + std::to_string(Q);
  }
  if (!Spanning)
    return std::string();
  int64_t Stride = 1;
  for (size_t A = size_t(Tp) + 1; A < M.Dims.size(); ++A)
    Stride *= M.Dims[A];
  return "the tp group of ranks " + First +
         (Spanning > 1 ? " (and " + std::to_string(Spanning - 1) + " more)"
                       : std::string()) +
         " spans nodes: tensor parallelism all-reduces inside every layer, "
         "here across the link between nodes; " +
         (Stride > 1
              ? "the mesh " + M.describe() + " puts a tp group's ranks " +
                    std::to_string(Stride) +
                    " apart: list tp last, so that they are neighbours, "
                    "which launchers place on one node"
              : "place a multiple of tp=" + std::to_string(M.Dims[size_t(Tp)]) +
                    " ranks on each node (mpirun --map-by ppr:K:node)");
}

Expected<StragglerReport> findStraggler(const Executor &E, double BusySeconds) {
  StragglerReport R;
  if (E.comm().size() <= 1 || E.mesh().Axes.empty())
    return R;
  Expected<const CommGroup *> W = E.comm().group(E.mesh(), E.mesh().Axes);
  if (!W.ok())
    return W.status();
  uint64_t Mine;
  std::memcpy(&Mine, &BusySeconds, 8);
  std::vector<uint64_t> All, Nodes;
  WEFT_RETURN_IF_ERROR(gather64(E, **W, Mine, All));
  std::vector<double> Busy(All.size());
  for (size_t I = 0; I < All.size(); ++I)
    std::memcpy(&Busy[I], &All[I], 8);
  std::vector<double> Sorted = Busy;
  std::nth_element(Sorted.begin(), Sorted.begin() + Sorted.size() / 2,
                   Sorted.end());
  const double Median = Sorted[Sorted.size() / 2];
  size_t Worst =
      size_t(std::max_element(Busy.begin(), Busy.end()) - Busy.begin());
  const double Over = Busy[Worst] - Median;
  if (Over > std::max(0.05, 0.2 * Median)) {
    // Every rank decides alike from the same gather; only then are the
    // nodes gathered (where the communicator does not know them), to name
    // the straggler's.
    if ((*W)->NodeOf.empty()) {
      const char *Node = std::getenv("WEFT_NODE_ID");
      WEFT_RETURN_IF_ERROR(gather64(
          E, **W, uint64_t(Node && *Node ? std::atoll(Node) : -1), Nodes));
    } else {
      Nodes.assign((*W)->NodeOf.begin(), (*W)->NodeOf.end());
    }
    R.Rank = (*W)->Members[Worst];
    R.Node = int64_t(Nodes[Worst]);
    R.OverMedianSeconds = Over;
  }
  return R;
}

Expected<std::string> checkReplicas(const Executor &E) {
  if (E.comm().size() <= 1)
    return std::string();
  const Program &P = E.program();
  for (size_t I = 0; I < P.Params.size(); ++I) {
    const BufferSpec &Spec = E.stateSpec(I, BufferKind::Param);
    AxesList Replicas;
    for (const std::string &A : E.mesh().Axes) {
      if (A == E.mesh().Pipeline)
        continue; // stages hold different params, not replicas
      bool Splits = false;
      for (const AxesList &D : Spec.Place.Sharding)
        Splits |= std::find(D.begin(), D.end(), A) != D.end();
      if (!Splits && E.mesh().count({A}) > 1)
        Replicas.push_back(A);
    }
    if (Replicas.empty())
      continue;
    Expected<const CommGroup *> G = E.comm().group(E.mesh(), Replicas);
    if (!G.ok())
      return G.status();
    // Ranks of another pipeline stage compare nothing (hash 0).
    Expected<std::vector<char>> Host =
        E.holds(I, BufferKind::Param)
            ? E.stateBytes(I, BufferKind::Param)
            : Expected<std::vector<char>>(std::vector<char>());
    if (!Host.ok())
      return Host.status();
    uint64_t H = E.holds(I, BufferKind::Param)
                     ? contentHash(Host->data(), Host->size())
                     : 0;
    std::vector<uint64_t> All;
    WEFT_RETURN_IF_ERROR(gather64(E, **G, H, All));
    std::map<uint64_t, std::vector<int64_t>> ByHash;
    for (size_t R = 0; R < All.size(); ++R)
      ByHash[All[R]].push_back((*G)->Members[R]);
    if (ByHash.size() == 1)
      continue;
    // The majority (ties: the copy of the lowest rank) is the reference.
    const std::vector<int64_t> *Ref = nullptr;
    for (const auto &[Hash, Ranks] : ByHash)
      if (!Ref || Ranks.size() > Ref->size() ||
          (Ranks.size() == Ref->size() && Ranks[0] < (*Ref)[0]))
        Ref = &Ranks;
    std::string Bad;
    for (const auto &[Hash, Ranks] : ByHash)
      if (&Ranks != Ref)
        for (int64_t R : Ranks)
          Bad += (Bad.empty() ? "" : ", ") + std::to_string(R);
    std::string Good;
    for (int64_t R : *Ref)
      Good += (Good.empty() ? "" : ", ") + std::to_string(R);
    std::string Axes;
    for (const std::string &A : Replicas)
      Axes += (Axes.empty() ? "" : ",") + A;
    return "parameter '" + P.Params[I].Name + "' on rank(s) " + Bad +
           " differs from its replica(s) on rank(s) " + Good +
           " (replicated over " + Axes + ")";
  }
  return std::string();
}

} // namespace weft
