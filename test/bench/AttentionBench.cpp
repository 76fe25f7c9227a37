//===- AttentionBench.cpp - weft's CPU attention kernels on GPT-2's shape -===//
//
// Times cpu::attention and cpu::attentionGrad (causal, 64-row query blocks,
// the softmax in FastMath's lanes) as one GPT-2 124M step runs them: batch
// 4 x 12 heads x seq 256 x head dim 64, 12 layers, and prints one JSON line
// with the best of the repetitions. Restarts itself with the right OpenBLAS
// kernels as weft-run does.
//
//   weft-bench-attention [--threads N] [--reps R]
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/kernels/Kernels.h"
#include "test/bench/KernelBenchArgs.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

using namespace weft;

int main(int Argc, char **Argv) {
  cpu::restartWithRightBlasKernels(Argv);
  int Threads = 0, Reps = 3;
  if (!parseKernelBenchArgs(Argc, Argv, "weft-bench-attention", Threads, Reps))
    return 2;
  cpu::setNumThreads(Threads);
  const int64_t B = 4, S = 256, H = 12, Hd = 64, D = H * Hd, Layers = 12;
  const size_t Elems = size_t(B * S * D);
  std::vector<float> Q(Elems), K(Elems), V(Elems), Y(Elems), Dy(Elems),
      Dq(Elems), Dk(Elems), Dv(Elems);
  std::mt19937 G(1);
  std::normal_distribution<float> N(0, 1);
  for (std::vector<float> *X : {&Q, &K, &V, &Dy})
    for (float &E : *X)
      E = N(G);
  std::vector<char> Scratch(
      cpu::attentionScratchBytes(S, S, Hd, sizeof(float), cpu::numThreads()));
  const cpu::QueryRun Run{0, 0, S};
  const cpu::QueryRuns Runs{&Run, 1};
  double Fwd = 1e30, Bwd = 1e30;
  for (int R = 0; R < Reps + 1; ++R) { // the first run warms up
    auto T0 = std::chrono::steady_clock::now();
    for (int64_t L = 0; L < Layers; ++L)
      cpu::attention(Q.data(), K.data(), V.data(), Y.data(), B, S, S, Runs, H,
                     H, Hd, Scratch.data(), 0.0, true, nullptr, nullptr);
    auto T1 = std::chrono::steady_clock::now();
    for (int64_t L = 0; L < Layers; ++L)
      cpu::attentionGrad(Dy.data(), Q.data(), K.data(), V.data(), Dq.data(),
                         Dk.data(), Dv.data(), B, S, S, Runs, H, H, Hd,
                         Scratch.data(), 0.0, true, nullptr, nullptr);
    auto T2 = std::chrono::steady_clock::now();
    if (R > 0) {
      Fwd = std::min(Fwd, std::chrono::duration<double>(T1 - T0).count());
      Bwd = std::min(Bwd, std::chrono::duration<double>(T2 - T1).count());
    }
  }
  std::printf("{\"shape\": \"gpt2 attention x12\", \"batch\": %lld, "
              "\"heads\": %lld, \"seq\": %lld, \"head_dim\": %lld, "
              "\"forward_ms\": %.1f, \"backward_ms\": %.1f, \"threads\": %d, "
              "\"restarted\": %s}\n",
              (long long)B, (long long)H, (long long)S, (long long)Hd,
              Fwd * 1e3, Bwd * 1e3, cpu::numThreads(),
              std::getenv("WEFT_BLAS_RESTARTED") ? "true" : "false");
  return 0;
}
