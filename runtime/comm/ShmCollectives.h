//===- ShmCollectives.h - Collectives through shared slots -----*- C++ -*-===//
//
// For large messages among ranks that share a node, all-reduce,
// reduce-scatter and all-gather run through a small MPI-3 shared window per
// rank: two slots of SlotKB KiB each, allocated once. A message moves in
// pipeline steps of one slot; step g uses slot g % 2, and the step counter
// persists across calls, so the two slots alternate across consecutive calls
// too. The slots stay in cache, so the user's buffers cross DRAM about once
// each way (read Send, write Recv), where copying the whole message into a
// shared window first costs 3-4 passes.
//
// Each slot is cut into one region per rank (slot bytes / ranks, rounded
// down to a cache line); in an all-reduce and a reduce-scatter, region q of a
// slot holds what rank q reads or writes. The synchronisation argument is in
// ShmCollectives.cpp.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_RUNTIME_COMM_SHMCOLLECTIVES_H
#define WEFT_RUNTIME_COMM_SHMCOLLECTIVES_H

#include "program/Program.h"
#include "program/Status.h"

#include <mpi.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace weft {

/// This rank's shared memory as the kernel names it: /dev/shm's device and
/// inode, and the launcher's or a test's WEFT_NODE_ID (hashed; 0 unset).
std::array<uint64_t, 3> shmIdentity();

class ShmCollectives {
public:
  static constexpr size_t kDefaultSlotKB = 512;

  /// Collective over Group. usable() is false when the group spans nodes (or
  /// has one rank); only then is no window allocated. Slots of SlotKB KiB
  /// (4 KiB to 1 GiB; the largest any rank asks for).
  static Expected<ShmCollectives *> create(MPI_Comm Group,
                                           size_t SlotKB = kDefaultSlotKB);
  ~ShmCollectives();
  ShmCollectives(const ShmCollectives &) = delete;
  ShmCollectives &operator=(const ShmCollectives &) = delete;

  bool usable() const { return Usable; }
  size_t slotBytes() const { return SlotBytes; }

  /// Recv = sum over the group of Send (Count elements, F32 or F64). Send
  /// may equal Recv. Collective: every rank calls it with the same Count.
  Status allReduce(const void *Send, void *Recv, size_t Count, DType T);
  /// Recv (Count elements) = block `rank` of the sum over the group of Send
  /// (size() * Count elements); F32 or F64. Send and Recv must not overlap.
  Status reduceScatter(const void *Send, void *Recv, size_t Count, DType T);
  /// Recv (size() * Count elements of any type) = the group's Sends in rank
  /// order. Send == nullptr: in place, this rank's block is already in Recv.
  Status allGather(const void *Send, void *Recv, size_t Count, DType T);

private:
  ShmCollectives() = default;
  Status barrier();
  char *slot(int Q, uint64_t Step) const {
    return Segments[Q] + (Step & 1) * SlotBytes;
  }

  MPI_Comm Shm = MPI_COMM_NULL;
  MPI_Win Win = MPI_WIN_NULL;
  int Rank = 0, Size = 1;
  bool Usable = false;
  size_t SlotBytes = 0;         // one slot; the window holds two
  size_t RegionBytes = 0;       // a rank's part of a slot, a multiple of 64
  uint64_t Step = 0;            // the next pipeline step; slot Step % 2
  std::vector<char *> Segments; // every rank's window, mapped here
  std::vector<double> Scratch;  // one region: partial sums (3+ ranks)
};

} // namespace weft

#endif // WEFT_RUNTIME_COMM_SHMCOLLECTIVES_H
