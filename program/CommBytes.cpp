//===- CommBytes.cpp - What a collective sends, and what crosses nodes ---===//
#include "program/CommBytes.h"

#include <algorithm>
#include <map>

namespace weft {

NodeSpread nodeSpread(const std::vector<int64_t> &NodeOf) {
  std::map<int64_t, int> Count;
  for (int64_t N : NodeOf)
    ++Count[N];
  NodeSpread S;
  if (Count.empty())
    return S;
  S.Nodes = int(Count.size());
  const int L = Count.begin()->second;
  S.PerNode = std::all_of(Count.begin(), Count.end(),
                          [&](const auto &E) { return E.second == L; })
                  ? L
                  : 0;
  return S;
}

SentBytes sentBytes(bool AllReduce, double Bytes, int64_t Size,
                    const std::vector<int64_t> &NodeOf, bool Hierarchical) {
  SentBytes S;
  const double N = double(Size), Ring = AllReduce ? 2.0 : 1.0;
  if (Size < 2)
    return S;
  const NodeSpread Spread = nodeSpread(NodeOf);
  if (!Hierarchical || !Spread.hierarchical()) {
    S.Total = Ring * (N - 1) / N * Bytes;
    // A ring in shard order: the share of its hops that cross nodes.
    size_t Crossing = 0, Members = NodeOf.size();
    for (size_t Q = 0; Q < Members; ++Q)
      Crossing += NodeOf[Q] != NodeOf[(Q + 1) % Members];
    S.Across = Members ? S.Total * double(Crossing) / double(Members) : 0;
    return S;
  }
  // Within the node (twice for an all-reduce), across on 1/L of the bytes.
  const double L = Spread.PerNode, Nodes = Spread.Nodes;
  S.Across = Ring * (Nodes - 1) / Nodes * Bytes / L;
  S.Total = Ring * (L - 1) / L * Bytes + S.Across;
  return S;
}

double allToAllAcross(double Bytes, const std::vector<int64_t> &NodeOf,
                      size_t Q) {
  if (Q >= NodeOf.size())
    return 0;
  const double N = double(NodeOf.size());
  double Across = 0;
  for (int64_t Node : NodeOf)
    Across += Node != NodeOf[Q] ? Bytes / N : 0.0;
  return Across;
}

double ringShiftAcross(double Bytes, const std::vector<int64_t> &NodeOf,
                       size_t Q) {
  if (Q >= NodeOf.size())
    return 0;
  return NodeOf[Q] != NodeOf[(Q + 1) % NodeOf.size()] ? Bytes : 0.0;
}

} // namespace weft
