//===- CommPaths.h - which path each collective takes, by measurement -*- C++
//-*-===//
//
// Within one node the MPI communicator has two paths for a blocking
// collective: weft's shared-memory slots (ShmCollectives.h) and the plain MPI
// call. Which is faster depends on the machine, the collective and the size
// (on this project's CI VM the shared path wins at every size; on another VM
// Open MPI's all-gather won from 64 KiB to 16 MiB). A path table, measured on
// the machine by `weft-bench-comm --write-table FILE`, says per collective
// and group size from which byte size on which path is faster:
//
//   {"weft_comm_paths": 1, "ranks": 2,
//    "all_reduce":     [[4096, "shm"]],
//    "all_gather":     [[4096, "shm"], [65536, "mpi"], [16777216, "shm"]],
//    "reduce_scatter": [[4096, "shm"]]}
//
// A group across nodes reads the same keys, "hier" (its hierarchical
// collectives) or "mpi" (MPI's flat one); weft-bench-comm writes them when
// its ranks span nodes.
//
// Below a collective's first entry, and for a collective, or a group size,
// the table does not list, the built-in rule holds (shared path from 4 KiB;
// hierarchical at every size).
// Rank 0 reads the table and every rank gets its bytes, so that all ranks of
// a group take the same path.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_RUNTIME_COMM_COMMPATHS_H
#define WEFT_RUNTIME_COMM_COMMPATHS_H

#include "program/Status.h"

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace weft {

/// Within a node: the shared slots or MPI. For a group across nodes
/// (HierarchicalCollectives.h): hierarchical or MPI's flat collective.
enum class CommPath { Shm, Hier, Mpi };

class CommPathTable {
public:
  /// Parses a table; errors name `Where`, the key and the value.
  static Expected<CommPathTable> parse(const std::string &Text,
                                       const std::string &Where);
  /// The path the table chooses for `Kind` ("all_reduce", "all_gather",
  /// "reduce_scatter") over a group of `GroupSize` ranks whose larger buffer
  /// has `Bytes` bytes; nullopt where the table says nothing.
  std::optional<CommPath> choose(const std::string &Kind, int GroupSize,
                                 size_t Bytes) const;
  /// One line per collective, for the start-up note.
  std::string describe() const;
  /// The JSON text of a table with these entries (ascending thresholds);
  /// `Measured` says where and when (kept for people, not read).
  static std::string
  format(int Ranks,
         const std::map<std::string, std::vector<std::pair<size_t, CommPath>>>
             &Entries,
         const std::string &Measured = "");

  int ranks() const { return Ranks; }

private:
  int Ranks = 0;
  std::map<std::string, std::vector<std::pair<size_t, CommPath>>> Entries;
};

/// Where the table is read from: WEFT_COMM_TABLE if set (empty: none), else
/// $XDG_CACHE_HOME/weft/comm-paths.json or ~/.cache/weft/comm-paths.json if
/// that file exists; empty when there is none.
std::string commPathTableFile();

} // namespace weft

#endif // WEFT_RUNTIME_COMM_COMMPATHS_H
