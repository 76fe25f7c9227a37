//===- Threads.cpp - One thread count for OpenMP and OpenBLAS -------------===//
#include "runtime/kernels/cpu/Blas.h"
#include "runtime/kernels/cpu/Kernels.h"

#include <omp.h>
#include <thread>

namespace weft::cpu {

void setNumThreads(int N) {
  if (N <= 0)
    N = std::max(1u, std::thread::hardware_concurrency());
  omp_set_num_threads(N);
  openblas_set_num_threads(N);
}

int numThreads() { return omp_get_max_threads(); }

SerialBlasScope::SerialBlasScope() : Saved(openblas_get_num_threads()) {
  if (Saved != 1)
    openblas_set_num_threads(1);
}

SerialBlasScope::~SerialBlasScope() {
  if (Saved != 1)
    openblas_set_num_threads(Saved);
}

} // namespace weft::cpu
