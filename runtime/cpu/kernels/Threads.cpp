//===- Threads.cpp - One thread pool: OpenMP (OpenBLAS kept serial) -------===//
//
// OpenBLAS (the pthreads build) has its own worker pool whose threads spin
// after each call; next to OpenMP's workers they oversubscribe the cores and
// every kernel after a GEMM slows down several-fold. So OpenBLAS always runs
// single-threaded and the runtime parallelises GEMMs itself, by output
// blocks, on the OpenMP pool.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/kernels/Blas.h"
#include "runtime/cpu/kernels/Kernels.h"

#include <omp.h>
#include <sched.h>
#include <unistd.h>

#ifdef WEFT_BLAS_BLIS
#include <blis.h>
#endif

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>

namespace weft::cpu {

void setNumThreads(int N) {
  if (N <= 0)
    N = threadsThatFit(usableCores(),
                       int(std::max(1u, std::thread::hardware_concurrency())),
                       localRanks());
  omp_set_num_threads(N);
  serialBlas();
}

void serialBlas() {
#if defined(WEFT_BLAS_BLIS)
  bli_thread_set_num_threads(1);
#elif defined(WEFT_HAVE_OPENBLAS)
  openblas_set_num_threads(1);
#endif
}

std::string blasName() {
#if defined(WEFT_BLAS_BLIS)
  return std::string("BLIS ") + bli_arch_string(bli_arch_query_id());
#elif defined(WEFT_HAVE_OPENBLAS)
  const char *Core = openblas_get_corename();
  return std::string("OpenBLAS ") + (Core ? Core : "?");
#else
  return "reference loops";
#endif
}

int numThreads() { return omp_get_max_threads(); }

int localRanks() {
  for (const char *Var : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"})
    if (const char *V = std::getenv(Var)) {
      char *End = nullptr;
      long N = std::strtol(V, &End, 10);
      if (End != V && *End == '\0' && N >= 1 && N <= (1 << 20))
        return int(N);
    }
  return 1;
}

int usableCores() {
  cpu_set_t Set;
  CPU_ZERO(&Set);
  if (sched_getaffinity(0, sizeof(Set), &Set) == 0 && CPU_COUNT(&Set) > 0)
    return CPU_COUNT(&Set);
  return int(std::max(1u, std::thread::hardware_concurrency()));
}

int threadsThatFit(int UsableCores, int HardwareCores, int LocalRanks) {
  // A rank bound to its own cores uses them; ranks sharing every core
  // share them out.
  int Share = std::max(1, HardwareCores / std::max(1, LocalRanks));
  return std::max(1, std::min(UsableCores, Share));
}

std::string oversubscriptionWarning(int Threads, int HardwareCores,
                                    int LocalRanks) {
  // One thread a rank is the least there is: more ranks than cores is the
  // launcher's choice, not --threads'.
  if (Threads <= 1 || int64_t(Threads) * LocalRanks <= HardwareCores)
    return "";
  return "--threads " + std::to_string(Threads) + " x " +
         std::to_string(LocalRanks) + " rank" + (LocalRanks > 1 ? "s" : "") +
         " on this node = " + std::to_string(int64_t(Threads) * LocalRanks) +
         " threads on " + std::to_string(HardwareCores) +
         " cores: oversubscribed, every step waits on descheduled threads "
         "(4 ranks x 2 threads on 2 cores ran 33x slower); without --threads "
         "each rank takes " +
         std::to_string(
             threadsThatFit(HardwareCores, HardwareCores, LocalRanks)) +
         " thread(s)";
}

#ifdef WEFT_HAVE_OPENBLAS
namespace {
// Makes sure the BLAS is serial even when setNumThreads is never called.
struct SerialBlasAtStartup {
  SerialBlasAtStartup() { serialBlas(); }
} SerialBlas;
} // namespace
#endif

namespace {
// C's block of rows [R0, R1) x columns [C0, C1) (row stride N) set to the
// bias: the GEMM then adds the product to it (beta = 1), as addmm, where
// beta = 0 would have zeroed the block (OpenBLAS clears C before it
// accumulates), so the bias costs no extra pass over C.
template <typename T>
void fillBias(T *C, int64_t N, int64_t R0, int64_t R1, int64_t C0, int64_t C1,
              const T *Bias) {
  for (int64_t R = R0; R < R1; ++R)
    std::copy(Bias + C0, Bias + C1, C + R * N + C0);
}
} // namespace

template <typename T>
void parallelGemm(bool TA, bool TB, int64_t M, int64_t N, int64_t K, const T *A,
                  const T *B, T *C, const T *Bias) {
  const int64_t Lda = TA ? M : K, Ldb = TB ? K : N;
  const T Beta = Bias ? T(1) : T(0);
  int Threads = omp_get_max_threads();
  // Below ~4 MFLOP a parallel region costs more than it saves.
  if (Threads == 1 || omp_in_parallel() || double(M) * N * K < 2e6) {
    if (Bias)
      fillBias(C, N, 0, M, 0, N, Bias);
    gemm(TA, TB, M, N, K, T(1), A, Lda, B, Ldb, Beta, C, N);
    return;
  }
  const bool SplitM = M >= N;
  const int64_t Dim = SplitM ? M : N;
  // Blocks are multiples of 16 so every call keeps full-width micro-kernels.
  int64_t Chunk = (Dim + Threads - 1) / Threads;
  Chunk = (Chunk + 15) / 16 * 16;
  const int64_t NumChunks = (Dim + Chunk - 1) / Chunk;
#pragma omp parallel for schedule(static, 1) num_threads(int(NumChunks))
  for (int64_t Ci = 0; Ci < NumChunks; ++Ci) {
    int64_t Lo = Ci * Chunk, Len = std::min(Chunk, Dim - Lo);
    if (SplitM) {
      const T *Ab = TA ? A + Lo : A + Lo * Lda;
      if (Bias)
        fillBias(C, N, Lo, Lo + Len, 0, N, Bias);
      gemm(TA, TB, Len, N, K, T(1), Ab, Lda, B, Ldb, Beta, C + Lo * N, N);
    } else {
      const T *Bb = TB ? B + Lo * Ldb : B + Lo;
      if (Bias)
        fillBias(C, N, 0, M, Lo, Lo + Len, Bias);
      gemm(TA, TB, M, Len, K, T(1), A, Lda, Bb, Ldb, Beta, C + Lo, N);
    }
  }
}

template void parallelGemm<float>(bool, bool, int64_t, int64_t, int64_t,
                                  const float *, const float *, float *,
                                  const float *);
template void parallelGemm<double>(bool, bool, int64_t, int64_t, int64_t,
                                   const double *, const double *, double *,
                                   const double *);

} // namespace weft::cpu
