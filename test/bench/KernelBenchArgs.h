//===- KernelBenchArgs.h - the kernel benchmarks' two flags ----*- C++ -*-===//
//
// weft-bench-gemm and weft-bench-attention take the same flags:
// [--threads N] [--reps R]; anything else prints the usage.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_TEST_BENCH_KERNELBENCHARGS_H
#define WEFT_TEST_BENCH_KERNELBENCHARGS_H

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace weft {

/// Reads --threads (0: the default) and --reps (at least 1) into Threads
/// and Reps, which hold the defaults; false after printing the usage.
inline bool parseKernelBenchArgs(int Argc, char **Argv, const char *Tool,
                                 int &Threads, int &Reps) {
  for (int I = 1; I < Argc; I += 2) {
    if (I + 1 < Argc && !std::strcmp(Argv[I], "--threads"))
      Threads = std::atoi(Argv[I + 1]);
    else if (I + 1 < Argc && !std::strcmp(Argv[I], "--reps"))
      Reps = std::max(1, std::atoi(Argv[I + 1]));
    else {
      std::fprintf(stderr, "usage: %s [--threads N] [--reps R]\n", Tool);
      return false;
    }
  }
  return true;
}

} // namespace weft

#endif // WEFT_TEST_BENCH_KERNELBENCHARGS_H
