//===- CommBench.cpp - collective bus bandwidth, weft vs plain MPI --------===//
//
//   mpirun -np 2 weft-bench-comm
//
// For all-reduce, reduce-scatter and all-gather from 4 KiB to 64 MiB: bus
// bandwidth with nccl-tests' formulas (algbw = S / t; busbw = algbw * 2(n-1)/n
// for all-reduce, * (n-1)/n for the others; S the larger buffer), through
// weft's communicator and through the plain MPI call on the same buffers, and
// memcpy bandwidth of 64 MiB measured in the same run (the "% memcpy"
// reference; also printed: every rank copying at once). Within one node,
// weft's collectives take the shared-slot path (runtime/comm/ShmCollectives.h)
// from 4 KiB: WEFT_NO_SHM=1 for weft over Open MPI instead,
// WEFT_SHM_SLOT_KB=k and WEFT_SHM_MIN_KB=k to sweep the slot size and the
// threshold. Run once more with WEFT_KEEP_MALLOC=1 for Open MPI under glibc's
// default malloc settings.
//
//   mpirun -np 2 weft-bench-comm --write-table FILE
//
// measures the shared-memory path (ignoring any path table) against plain
// MPI and writes the path table (runtime/comm/CommPaths.h) that takes, per
// collective and size, the faster one; weft-run reads it from
// WEFT_COMM_TABLE or ~/.cache/weft/comm-paths.json. Without the flag the
// "weft" column follows the table in force, so it shows whether weft is
// anywhere slower than plain MPI.
//
// Across nodes (mpirun on a hostfile; test/e2e/two_nodes.sh on this
// machine), the world group runs weft's hierarchical collectives
// (runtime/comm/HierarchicalCollectives.h) against MPI's flat ones, and the
// table it writes says "hier" or "mpi".
//
//   weft-bench-comm --write-cluster FILE
//
// measures the links the planner needs, with point-to-point transfers only
// (every pair at once: within each node, and between nodes by local index):
// latency (ping-pong of 8 bytes) and bandwidth (4 MiB each way at once, as
// a ring's steps move it), and writes a cluster file
// (planner/Hardware.h; compute figures of the "local" preset, collectives
// "hierarchical").
//
//   weft-bench-comm --cluster FILE
//
// prints beside the measured bus bandwidths the cost model's prediction for
// them on that cluster (planner/CostModel.h, groupAllReduceSeconds). With
// --max-bytes N the sweep stops at N bytes.
//
//===----------------------------------------------------------------------===//
#include "planner/CostModel.h"
#include "planner/Hardware.h"
#include "runtime/comm/CommPaths.h"
#include "runtime/comm/Communicator.h"
#include "runtime/comm/HierarchicalCollectives.h"

#include <mpi.h>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

using namespace weft;
using Clock = std::chrono::steady_clock;

namespace {
double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

template <typename F> double timeIt(F &&f, int iters) {
  f(); // warm-up: first touch of pages, communicator set-up
  MPI_Barrier(MPI_COMM_WORLD);
  auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i)
    f();
  MPI_Barrier(MPI_COMM_WORLD);
  return seconds(t0, Clock::now()) / iters;
}

/// One-way time of Bytes between this rank and Peer (-1: none), every pair
/// at once: ping-pong, half the round trip.
double pingPong(int rank, int peer, size_t bytes, int iters) {
  std::vector<char> buf(bytes, 1);
  auto once = [&] {
    if (peer < 0)
      return;
    if (rank < peer) {
      MPI_Send(buf.data(), int(bytes), MPI_CHAR, peer, 3, MPI_COMM_WORLD);
      MPI_Recv(buf.data(), int(bytes), MPI_CHAR, peer, 3, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(buf.data(), int(bytes), MPI_CHAR, peer, 3, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
      MPI_Send(buf.data(), int(bytes), MPI_CHAR, peer, 3, MPI_COMM_WORLD);
    }
  };
  double t = timeIt(once, iters) / 2;
  // Rank 0's pair speaks for all: the slowest would, too, but pairs run at
  // once, so their times agree.
  MPI_Bcast(&t, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  return t;
}

/// Seconds to exchange Bytes each way between this rank and Peer (-1:
/// none), every pair at once and both directions at once (MPI_Sendrecv),
/// as a ring's steps move data.
double exchange(int peer, size_t bytes, int iters) {
  std::vector<char> out(bytes, 1), in(bytes, 0);
  double t = timeIt(
      [&] {
        if (peer >= 0)
          MPI_Sendrecv(out.data(), int(bytes), MPI_CHAR, peer, 4, in.data(),
                       int(bytes), MPI_CHAR, peer, 4, MPI_COMM_WORLD,
                       MPI_STATUS_IGNORE);
      },
      iters);
  MPI_Bcast(&t, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  return t;
}

/// Writes the cluster file: latency by ping-pong, bandwidth by exchange.
/// Rank 0 writes.
int writeCluster(const std::string &file, int rank) {
  Expected<NodeLayout> layout = nodeLayout(MPI_COMM_WORLD);
  if (!layout.ok() || layout->Spread.PerNode < 1) {
    if (rank == 0)
      std::fprintf(stderr,
                   "weft-bench-comm: --write-cluster needs the same number "
                   "of ranks on every node%s\n",
                   layout.ok() ? ""
                               : (": " + layout.status().message()).c_str());
    return 1;
  }
  const NodeLayout &l = *layout;
  // This rank's local index, and the ranks by (node, local).
  std::vector<std::vector<int>> members(size_t(l.Spread.Nodes));
  int node = int(l.NodeOf[size_t(rank)]), local = 0;
  for (size_t q = 0; q < l.NodeOf.size(); ++q) {
    if (int(q) == rank)
      local = int(members[size_t(l.NodeOf[q])].size());
    members[size_t(l.NodeOf[q])].push_back(int(q));
  }
  auto peerAt = [&](int n, int loc) {
    return n < l.Spread.Nodes && loc < l.Spread.PerNode
               ? members[size_t(n)][size_t(loc)]
               : -1;
  };
  int intraPeer = peerAt(node, local ^ 1);
  int interPeer = peerAt(node ^ 1, local);
  const size_t big = size_t(4) << 20;
  cost::LinkTier tiers[2];
  int peers[2] = {intraPeer, interPeer};
  for (int k = 0; k < 2; ++k) {
    double lat = pingPong(rank, peers[k], 8, 200);
    double t = exchange(peers[k], big, 10);
    tiers[k].latencyUs = lat * 1e6;
    tiers[k].bandwidthGBps = big / std::max(t - lat, 1e-9) / 1e9;
    tiers[k].efficiency = 1;
  }
  if (rank != 0)
    return 0;
  cost::Hardware hw = cost::lookupHardwarePreset("local").hardware;
  char host[256] = "?";
  gethostname(host, sizeof(host) - 1);
  hw.name = std::string("cpu ranks on ") + host + ", " +
            std::to_string(l.Spread.PerNode) + " per node";
  hw.gpusPerNode = l.Spread.PerNode;
  hw.intraNode = tiers[0];
  hw.interNode = tiers[1];
  hw.hierarchical = true;
  hw.measured = "weft-bench-comm --write-cluster: latency by ping-pong, "
                "bandwidth by exchange both ways, every pair at once; compute "
                "figures of the local preset";
  std::ofstream out(file);
  out << cost::hardwareToJson(hw);
  out.close();
  if (!out) {
    std::fprintf(stderr, "weft-bench-comm: cannot write %s\n", file.c_str());
    return 1;
  }
  std::printf("intra-node: %.1f us, %.2f GB/s | inter-node: %.1f us, %.2f "
              "GB/s\nwrote %s\n",
              tiers[0].latencyUs, tiers[0].bandwidthGBps, tiers[1].latencyUs,
              tiers[1].bandwidthGBps, file.c_str());
  return 0;
}
} // namespace

int main(int argc, char **argv) {
  std::string table, clusterOut, clusterIn;
  size_t maxBytes = 64u << 20;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--write-table" && i + 1 < argc) {
      table = argv[++i];
    } else if (a == "--write-cluster" && i + 1 < argc) {
      clusterOut = argv[++i];
    } else if (a == "--cluster" && i + 1 < argc) {
      clusterIn = argv[++i];
    } else if (a == "--max-bytes" && i + 1 < argc) {
      char *end = nullptr;
      unsigned long long v = std::strtoull(argv[++i], &end, 10);
      if (*end || v < 4096 || v > (64u << 20)) {
        std::fprintf(stderr,
                     "weft-bench-comm: --max-bytes must be 4096 to "
                     "67108864, got '%s'\n",
                     argv[i]);
        return 2;
      }
      maxBytes = size_t(v);
    } else {
      std::fprintf(stderr,
                   "weft-bench-comm: unknown argument '%s' (usage: "
                   "weft-bench-comm [--write-table FILE] [--write-cluster "
                   "FILE] [--cluster FILE] [--max-bytes N])\n",
                   argv[i]);
      return 2;
    }
  }
  cost::HardwareResult cluster;
  if (!clusterIn.empty()) {
    cluster = cost::resolveHardware(clusterIn);
    if (!cluster.ok()) {
      std::fprintf(stderr, "weft-bench-comm: %s\n", cluster.error.c_str());
      return 2;
    }
  }
  if (!table.empty()) // measure the shared path itself, not a table's choice
    setenv("WEFT_COMM_TABLE", "", 1);
  auto commOr = createCommunicator();
  if (!commOr.ok()) {
    std::fprintf(stderr, "weft-bench-comm: error: %s\n",
                 commOr.status().message().c_str());
    return 1;
  }
  std::unique_ptr<Communicator> comm = std::move(*commOr);
  int n = comm->size(), rank = comm->rank();
  Mesh mesh;
  mesh.Axes = {"x"};
  mesh.Dims = {n};
  auto groupOr = comm->group(mesh, {"x"});
  if (!groupOr.ok()) {
    std::fprintf(stderr, "weft-bench-comm: error: %s\n",
                 groupOr.status().message().c_str());
    return 1;
  }
  const CommGroup &g = **groupOr;
  if (!clusterOut.empty()) {
    int rc = writeCluster(clusterOut, rank);
    comm.reset();
    return rc;
  }

  std::vector<float> a(maxBytes / 4, 1.0f), b(maxBytes / 4, 0.0f);
  // memcpyBw, the reference of "% memcpy", as it always was: each rank
  // copies with no synchronisation, so the peers' copies overlap it by
  // chance. For context, memcpyAllBw: every rank copying at once (the
  // memory traffic a collective meets).
  double memcpyBw, memcpyAllBw;
  {
    std::vector<char> src(maxBytes, 1), dst(maxBytes, 0);
    auto copies = [&] {
      auto t0 = Clock::now();
      for (int i = 0; i < 5; ++i)
        std::memcpy(dst.data(), src.data(), maxBytes);
      return 5.0 * maxBytes / seconds(t0, Clock::now()) / 1e9;
    };
    std::memcpy(dst.data(), src.data(), maxBytes);
    memcpyBw = copies();
    MPI_Barrier(MPI_COMM_WORLD);
    memcpyAllBw = copies();
  }
  if (rank == 0) {
    std::printf("ranks %d | memcpy 64 MiB: %.2f GB/s (every rank at once: "
                "%.2f GB/s) | malloc tuning: %s\n",
                n, memcpyBw, memcpyAllBw,
                std::getenv("WEFT_KEEP_MALLOC") ? "off" : "on");
    if (std::string note = comm->pathNote(); !note.empty())
      std::printf("%s\n", note.c_str());
    if (NodeSpread s = g.spread(); s.Nodes > 1)
      std::printf("%d nodes, %d ranks on each: weft's collectives %s\n",
                  s.Nodes, s.PerNode,
                  g.Hierarchical ? "hierarchical (within, across, within)"
                                 : "flat (MPI's)");
    if (cluster.ok() && !clusterIn.empty())
      std::printf("predicted: the cost model on %s (%s)\n",
                  cluster.hardware.name.c_str(), clusterIn.c_str());
    std::printf("%-15s %10s %14s %14s %10s%s\n", "collective", "bytes",
                "weft busbw", "MPI busbw", "% memcpy",
                clusterIn.empty() ? "" : "  predicted busbw");
  }
  // Per collective: from which size on each path is the faster.
  std::map<std::string, std::vector<std::pair<size_t, CommPath>>> faster;
  for (size_t bytes = 4096; bytes <= maxBytes; bytes *= 4) {
    size_t count = bytes / 4;
    int iters = bytes >= (16u << 20) ? 5 : 50;
    struct Row {
      const char *name;
      double factor;
      double weft, mpi;
    } rows[3] = {{"all_reduce", 2.0 * (n - 1) / n, 0, 0},
                 {"reduce_scatter", double(n - 1) / n, 0, 0},
                 {"all_gather", double(n - 1) / n, 0, 0}};
    rows[0].weft = timeIt(
        [&] {
          (void)comm->allReduce(g, a.data(), b.data(), count, DType::F32,
                                hostQueue());
        },
        iters);
    rows[0].mpi = timeIt(
        [&] {
          MPI_Allreduce(a.data(), b.data(), int(count), MPI_FLOAT, MPI_SUM,
                        MPI_COMM_WORLD);
        },
        iters);
    rows[1].weft = timeIt(
        [&] {
          (void)comm->reduceScatter(g, a.data(), b.data(), count / n,
                                    DType::F32, hostQueue());
        },
        iters);
    rows[1].mpi = timeIt(
        [&] {
          MPI_Reduce_scatter_block(a.data(), b.data(), int(count / n),
                                   MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        },
        iters);
    rows[2].weft = timeIt(
        [&] {
          (void)comm->allGather(g, a.data(), b.data(), count / n, DType::F32,
                                hostQueue());
        },
        iters);
    rows[2].mpi = timeIt(
        [&] {
          MPI_Allgather(a.data(), int(count / n), MPI_FLOAT, b.data(),
                        int(count / n), MPI_FLOAT, MPI_COMM_WORLD);
        },
        iters);
    if (rank == 0)
      for (const Row &r : rows) {
        double weftBus = bytes / r.weft / 1e9 * r.factor;
        double mpiBus = bytes / r.mpi / 1e9 * r.factor;
        std::printf("%-15s %10zu %11.2f GB/s %9.2f GB/s %9.0f%%", r.name, bytes,
                    weftBus, mpiBus, 100.0 * weftBus / memcpyBw);
        if (!clusterIn.empty()) {
          bool reduce = std::string(r.name) == "all_reduce";
          double t = reduce ? cost::groupAllReduceSeconds(double(bytes), 1, n,
                                                          cluster.hardware)
                            : cost::groupGatherSeconds(double(bytes), 1, n,
                                                       cluster.hardware);
          std::printf(" %11.2f GB/s", bytes / t / 1e9 * r.factor);
        }
        std::printf("\n");
        CommPath mine = g.Hierarchical ? CommPath::Hier : CommPath::Shm;
        CommPath best = r.weft <= r.mpi ? mine : CommPath::Mpi;
        auto &steps = faster[r.name];
        if (steps.empty() || steps.back().second != best)
          steps.push_back({bytes, best});
      }
  }
  int rc = 0;
  if (rank == 0 && !table.empty()) {
    // The table's folder (~/.cache/weft, the runtime's default) may not
    // exist yet on a new machine.
    std::error_code made;
    std::filesystem::path folder = std::filesystem::path(table).parent_path();
    if (!folder.empty())
      std::filesystem::create_directories(folder, made);
    std::ofstream out(table);
    char host[256] = "?";
    gethostname(host, sizeof(host) - 1);
    std::time_t now = std::time(nullptr);
    char when[32];
    std::strftime(when, sizeof(when), "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
    out << CommPathTable::format(
        n, faster, std::string("weft-bench-comm on ") + host + ", " + when);
    out.close();
    if (!out) {
      std::fprintf(stderr, "weft-bench-comm: cannot write %s\n", table.c_str());
      rc = 1;
    } else {
      std::printf("wrote %s\n", table.c_str());
    }
  }
  comm.reset(); // finalizes MPI
  return rc;
}
