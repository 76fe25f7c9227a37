//===- ShmAllReduce.h - zero-copy all-reduce within one node ----*- C++ -*-===//
//
// For large messages among ranks that share a node, Open MPI's shared-memory
// all-reduce copies every chunk through its own buffers several times. Here
// each rank copies its input once into an MPI-3 shared window, reduces its
// 1/n slice straight from its peers' windows, and copies the peers' reduced
// slices out: about 2.5 passes over the data instead of Open MPI's ~4.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_RUNTIME_COMM_SHMALLREDUCE_H
#define WEFT_RUNTIME_COMM_SHMALLREDUCE_H

#include "runtime/Program.h"
#include "runtime/Status.h"

#include <mpi.h>

#include <cstddef>
#include <vector>

namespace weft {

class ShmAllReduce {
public:
  /// Collective over Group. usable() is false when the group spans nodes.
  static Expected<ShmAllReduce *> create(MPI_Comm Group);
  ~ShmAllReduce();

  bool usable() const { return Usable; }
  /// Recv = sum over the group of Send (Count elements, F32 or F64). Send may
  /// equal Recv. Collective: every rank calls it with the same Count.
  Status run(const void *Send, void *Recv, size_t Count, DType T);

private:
  Status reserve(size_t Bytes);

  MPI_Comm Shm = MPI_COMM_NULL;
  MPI_Win Win = MPI_WIN_NULL;
  int Rank = 0, Size = 1;
  bool Usable = false;
  size_t Capacity = 0;
  std::vector<char *> Segments; // every rank's window, mapped here
};

} // namespace weft

#endif // WEFT_RUNTIME_COMM_SHMALLREDUCE_H
