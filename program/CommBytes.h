//===- CommBytes.h - What a collective sends, and what crosses nodes -*- C++
//-*-===//
//
// One formula for the runtime's byte accounting (runtime/MeshOps.cpp) and
// weft-compile --explain --ranks-per-node, so that the prediction and the
// run agree. A group's ranks are described by their nodes: NodeOf[q] is a
// node id of shard index q (any ids; equal ids, one node).
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_PROGRAM_COMMBYTES_H
#define WEFT_PROGRAM_COMMBYTES_H

#include <cstddef>
#include <cstdint>
#include <vector>

namespace weft {

/// How a group's ranks spread over nodes.
struct NodeSpread {
  int Nodes = 1;
  /// L when every node holds L ranks of the group, else 0.
  int PerNode = 0;
  /// Whether the group runs its collectives hierarchically
  /// (runtime/comm/HierarchicalCollectives.h): two or more ranks on each of
  /// two or more nodes.
  bool hierarchical() const { return Nodes >= 2 && PerNode >= 2; }
};
NodeSpread nodeSpread(const std::vector<int64_t> &NodeOf);

/// The bytes one rank of a group of Size ranks sends in a collective whose
/// larger buffer has Bytes bytes (all-reduce, or else reduce-scatter and
/// all-gather): a ring's 2(n-1)/n or (n-1)/n of it, or, Hierarchical, the
/// sum of its three steps. Across: the part that crosses nodes (NodeOf
/// empty: unknown, 0).
struct SentBytes {
  double Total = 0, Across = 0;
};
SentBytes sentBytes(bool AllReduce, double Bytes, int64_t Size,
                    const std::vector<int64_t> &NodeOf, bool Hierarchical);

/// The bytes the group's shard Q sends across nodes in a point-to-point
/// exchange: an all_to_all of a Bytes buffer sends block k (Bytes/n) to
/// shard k; a ring_shift sends its whole Bytes to shard Q+1 (mod n).
double allToAllAcross(double Bytes, const std::vector<int64_t> &NodeOf,
                      size_t Q);
double ringShiftAcross(double Bytes, const std::vector<int64_t> &NodeOf,
                       size_t Q);

} // namespace weft

#endif // WEFT_PROGRAM_COMMBYTES_H
