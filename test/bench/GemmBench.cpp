//===- GemmBench.cpp - weft's CPU GEMM path on transformer shapes ---------===//
//
// Times cpu::matmul (OpenBLAS called per block of rows or columns on the
// OpenMP threads, as every matmul instruction runs) on GPT-2 and Llama
// shapes and prints one JSON line per shape with the GEMM library and its
// kernels ("core": "OpenBLAS Zen", "BLIS zen3").
// Like weft-run, it restarts itself with the right OpenBLAS kernels when
// it runs ones older than the CPU allows (cpu::restartWithRightBlasKernels),
// so test/bench/bench_gemm_check.py measures what a new user gets.
//
//   weft-bench-gemm [--threads N] [--reps R]
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/kernels/Kernels.h"
#include "test/bench/KernelBenchArgs.h"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

using namespace weft;

namespace {

struct Shape {
  const char *Name;
  int64_t M, N, K;
  bool TransB;
};

// 1,024 tokens (GPT-2 124M at batch 4 x seq 256); weights [out, in] as
// Hugging Face stores Llama's (transpose_b), GPT-2's Conv1D as [in, out].
const Shape Shapes[] = {
    {"gpt2 c_attn", 1024, 2304, 768, false},
    {"gpt2 mlp.c_fc", 1024, 3072, 768, false},
    {"gpt2 mlp.c_proj", 1024, 768, 3072, false},
    {"llama-1b gate_proj", 1024, 8192, 2048, true},
    {"llama-1b down_proj", 1024, 2048, 8192, true},
    {"square 1024", 1024, 1024, 1024, false},
};

} // namespace

int main(int Argc, char **Argv) {
  cpu::restartWithRightBlasKernels(Argv);
  int Threads = 0, Reps = 5;
  if (!parseKernelBenchArgs(Argc, Argv, "weft-bench-gemm", Threads, Reps))
    return 2;
  cpu::setNumThreads(Threads);
  const std::string Lib = cpu::blasName();
  const char *Core = Lib.c_str();
  std::mt19937 G(1);
  std::uniform_real_distribution<float> D(-1, 1);
  for (const Shape &S : Shapes) {
    std::vector<float> A(size_t(S.M * S.K)), B(size_t(S.K * S.N)),
        C(size_t(S.M * S.N));
    for (float &X : A)
      X = D(G);
    for (float &X : B)
      X = D(G);
    double Best = 1e30;
    for (int R = 0; R < Reps + 1; ++R) { // the first run warms up
      auto T0 = std::chrono::steady_clock::now();
      cpu::matmul(A.data(), B.data(), C.data(), S.M, S.N, S.K, false, S.TransB);
      double T =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - T0)
              .count();
      if (R > 0)
        Best = std::min(Best, T);
    }
    std::printf("{\"shape\": \"%s\", \"m\": %lld, \"n\": %lld, \"k\": %lld, "
                "\"gflops\": %.2f, \"core\": \"%s\", \"threads\": %d, "
                "\"restarted\": %s}\n",
                S.Name, (long long)S.M, (long long)S.N, (long long)S.K,
                2.0 * double(S.M) * double(S.N) * double(S.K) / Best / 1e9,
                Core ? Core : "?", cpu::numThreads(),
                std::getenv("WEFT_BLAS_RESTARTED") ? "true" : "false");
  }
  return 0;
}
