//===- Calibrate.cpp - GEMM rate and memory bandwidth of this machine -----===//
#include "Calibrate.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>
#ifdef WEFT_HAVE_CBLAS
#include <cblas.h>
#ifdef WEFT_BLAS_BLIS
#include <blis.h>
#endif
#endif

namespace weft::cost {
namespace {
double now() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

// Best of a few runs of an n^3 sgemm, in FLOP/s.
double sgemmRate(int n) {
#ifdef WEFT_HAVE_CBLAS
  std::vector<float> a(size_t(n) * n, 0.5f), b(size_t(n) * n, 0.25f),
      c(size_t(n) * n, 0.0f);
  double best = 1e30;
  int reps = n <= 256 ? 20 : 3;
  for (int r = 0; r < reps; ++r) {
    double t0 = now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f,
                a.data(), n, b.data(), n, 0.0f, c.data(), n);
    best = std::min(best, now() - t0);
  }
  return 2.0 * n * n * double(n) / best;
#else
  (void)n;
  return 0;
#endif
}

// Runs the collective probe under mpirun; empty when it cannot.
std::string runProbe() {
#if defined(WEFT_MPIEXEC) && defined(WEFT_PLAN_PROBE)
  std::string cmd = std::string(WEFT_MPIEXEC) +
                    " --allow-run-as-root --oversubscribe --mca btl self,vader"
                    " -np 2 -x OMP_NUM_THREADS=1 " WEFT_PLAN_PROBE
                    " 2>/dev/null";
  FILE *pipe = popen(cmd.c_str(), "r");
  if (!pipe)
    return "";
  std::string out;
  char buf[512];
  while (std::fgets(buf, sizeof buf, pipe))
    out += buf;
  return pclose(pipe) == 0 ? out : "";
#else
  return "";
#endif
}

double memcpyRate() {
  size_t bytes = size_t(64) << 20;
  std::vector<char> a(bytes, 1), b(bytes, 0);
  double best = 1e30;
  for (int r = 0; r < 5; ++r) {
    double t0 = now();
    std::memcpy(b.data(), a.data(), bytes);
    best = std::min(best, now() - t0);
  }
  return 2.0 * bytes / best; // read + write
}
} // namespace

Hardware calibrateLocal(std::string &log) {
  Hardware hw = lookupHardwarePreset("local").hardware;
  char line[256];
#ifdef WEFT_HAVE_CBLAS
  // A device of the CPU meshes is one rank on one core (OMP_NUM_THREADS=1).
#ifdef WEFT_BLAS_BLIS
  bli_thread_set_num_threads(1);
#else
  openblas_set_num_threads(1);
#endif
#endif
  double big = sgemmRate(1024), small = sgemmRate(128);
  if (big > 0) {
    // eff(d) = max * d / (d + half): peak is the 1024^3 rate / max, with
    // max = 1; half from the 128^3 rate: small/big = (1024+half)*128 /
    // ((128+half)*1024).
    double ratio = std::min(0.999, small / big);
    double half = (128.0 - ratio * 128.0) / (ratio - 128.0 / 1024.0);
    half = std::max(1.0, half);
    hw.gemm.max = 1.0;
    hw.gemm.halfDim = half;
    hw.peakTflops = big * (1024.0 + half) / 1024.0 / 1e12;
    std::snprintf(
        line, sizeof line,
        "sgemm (1 thread) 1024^3: %.1f GFLOP/s, 128^3: %.1f GFLOP/s -> peak "
        "%.1f GFLOP/s, half_dim %.0f\n",
        big / 1e9, small / 1e9, hw.peakTflops * 1e3, half);
    log += line;
  } else {
    log += "sgemm: not measured (built without cblas); preset kept\n";
  }
  double mem = memcpyRate();
  hw.hbmGBps = mem / 1e9;
  std::snprintf(line, sizeof line, "memcpy 64 MiB: %.1f GB/s (read + write)\n",
                mem / 1e9);
  log += line;
  std::string probe = runProbe();
  nlohmann::json j = nlohmann::json::parse(probe, nullptr, false);
  if (!probe.empty() && j.is_object() && j.contains("bus_bandwidth_gbps")) {
    double bw = j["bus_bandwidth_gbps"].get<double>();
    double lat = std::max(0.1, j["latency_us"].get<double>());
    for (LinkTier *t : {&hw.intraNode, &hw.interNode}) {
      t->bandwidthGBps = bw;
      t->latencyUs = lat;
      t->efficiency = 1.0; // measured as ring bus bandwidth already
    }
    std::snprintf(line, sizeof line,
                  "all-reduce, 2 ranks (runtime communicator under mpirun): "
                  "16 MiB in %.3f ms -> bus bandwidth %.2f GB/s; 16 B in "
                  "%.2f us -> alpha %.2f us\n",
                  j["big_s"].get<double>() * 1e3, bw,
                  j["small_s"].get<double>() * 1e6, lat);
    log += line;
    hw.measured = "sgemm (1 thread), memcpy and a 2-rank all-reduce by "
                  "weft-plan --calibrate";
  } else {
    log += "collectives: not measured (no mpirun or the probe failed); the "
           "preset's 3.3 GB/s, 20 us kept (ENVIRONMENT.md)\n";
    hw.measured = "sgemm (1 thread) and memcpy by weft-plan --calibrate; "
                  "links from the preset";
  }
  return hw;
}

} // namespace weft::cost
