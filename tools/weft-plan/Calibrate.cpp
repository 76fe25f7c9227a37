//===- Calibrate.cpp - GEMM rate and memory bandwidth of this machine -----===//
#include "Calibrate.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>
#ifdef WEFT_HAVE_CBLAS
#include <cblas.h>
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
    std::snprintf(line, sizeof line,
                  "sgemm 1024^3: %.1f GFLOP/s, 128^3: %.1f GFLOP/s -> peak "
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
  log += "collectives: not measured; the preset's 3.3 GB/s, 20 us kept "
         "(ENVIRONMENT.md)\n";
  hw.measured = "sgemm and memcpy by weft-plan --calibrate; links from the "
                "preset";
  return hw;
}

} // namespace weft::cost
