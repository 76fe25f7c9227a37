//===- weft-plan-probe.cpp - all-reduce latency and bandwidth -------------===//
//
//   mpirun -np N weft-plan-probe
//
// Times the runtime's communicator (runtime/comm) all-reduce over the world
// at 4 floats (latency) and 4 Mi floats (16 MiB, bandwidth), buffers
// preallocated and touched first; rank 0 prints one JSON line with the
// median times and the ring model's alpha and bus bandwidth:
//   t(S) = 2(n-1)/n * S/B + 2(n-1) * alpha.
// `weft-plan --calibrate` runs it when mpirun is available.
//
//===----------------------------------------------------------------------===//
#include "runtime/comm/Communicator.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

static double now() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

int main() {
  auto comm = weft::createCommunicator();
  if (!comm.ok()) {
    std::fprintf(stderr, "weft-plan-probe: %s\n", comm.message().c_str());
    return 1;
  }
  weft::Communicator &c = **comm;
  int n = c.size();
  weft::Mesh mesh;
  mesh.Axes = {"dp"};
  mesh.Dims = {n};
  auto group = c.group(mesh, {"dp"});
  if (!group.ok() || n < 2) {
    std::fprintf(stderr, "weft-plan-probe: needs >= 2 ranks under mpirun\n");
    return 1;
  }
  const weft::CommGroup &g = **group;
  auto median = [&](size_t count, int reps) {
    std::vector<float> send(count, 1.0f), recv(count, 0.0f);
    std::vector<double> times;
    for (int r = 0; r < reps + 2; ++r) {
      (void)c.barrier(g);
      double t0 = now();
      (void)c.allReduce(g, send.data(), recv.data(), count, weft::DType::F32,
                        weft::hostQueue());
      double t = now() - t0;
      if (r >= 2) // warm-up: first touch, connection set-up
        times.push_back(t);
    }
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
  };
  double small = median(4, 200);
  size_t bigCount = size_t(4) << 20;
  double big = median(bigCount, 10);
  double alpha = small / (2.0 * (n - 1));
  double bytes = double(bigCount) * 4;
  double wire = std::max(1e-9, big - 2.0 * (n - 1) * alpha);
  double busbw = 2.0 * (n - 1) / n * bytes / wire;
  if (c.rank() == 0)
    std::printf("{\"ranks\": %d, \"small_s\": %.9g, \"big_s\": %.9g, "
                "\"big_bytes\": %.0f, \"latency_us\": %.4g, "
                "\"bus_bandwidth_gbps\": %.4g}\n",
                n, small, big, bytes, alpha * 1e6, busbw / 1e9);
  return 0;
}
