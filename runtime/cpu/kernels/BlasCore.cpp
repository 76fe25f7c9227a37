//===- BlasCore.cpp - OpenBLAS's kernels on a CPU whose model a VM masks -===//
//
// OpenBLAS picks its kernels from the CPU model (DYNAMIC_ARCH); a VM that
// masks the model makes it pick pre-AVX ones on an AVX-512 CPU, several
// times slower. weft-run and weft-plan --calibrate restart themselves with
// OPENBLAS_CORETYPE set (restartWithRightBlasKernels). A library of its
// own: weft-plan links it without the runtime.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/kernels/BlasCore.h"

#if defined(WEFT_HAVE_OPENBLAS) && !defined(WEFT_BLAS_BLIS)
#include <cblas.h>
#endif

#include <cstdlib>
#include <unistd.h>

namespace weft::cpu {

std::string blasCoreToForce(const std::string &Core, bool Avx512, bool Avx2) {
  static const char *const PreAvx[] = {"Prescott",   "Core2",   "Penryn",
                                       "Dunnington", "Nehalem", "Atom"};
  if (!Avx512 && !Avx2)
    return "";
  bool Generic = false;
  for (const char *C : PreAvx)
    Generic |= Core == C;
  if (!Generic)
    return "";
  return Avx512 ? "SkylakeX" : "Haswell";
}

std::string blasKernelWarning(const std::string &Core, bool Avx512, bool Avx2) {
  std::string Want = blasCoreToForce(Core, Avx512, Avx2);
  if (Want.empty())
    return "";
  return "OpenBLAS chose its '" + Core + "' kernels on a CPU with " +
         (Avx512 ? "AVX-512" : "AVX2") +
         " (the CPU model is probably masked by a VM): matrix products run "
         "several times slower. Start weft-run with OPENBLAS_CORETYPE=" +
         Want + " set in its environment";
}

#if defined(WEFT_HAVE_OPENBLAS) && !defined(WEFT_BLAS_BLIS)
std::string blasKernelWarning() {
  const char *Core = openblas_get_corename();
  return blasKernelWarning(Core ? Core : "",
                           __builtin_cpu_supports("avx512f") != 0,
                           __builtin_cpu_supports("avx2") != 0);
}

std::string blasCoreToForce() {
  if (std::getenv("OPENBLAS_CORETYPE"))
    return ""; // the user's choice stands
  const char *Core = openblas_get_corename();
  return blasCoreToForce(Core ? Core : "",
                         __builtin_cpu_supports("avx512f") != 0,
                         __builtin_cpu_supports("avx2") != 0);
}

void restartWithRightBlasKernels(char **Argv) {
  if (std::getenv("WEFT_BLAS_RESTARTED"))
    return;
  std::string Core = blasCoreToForce();
  if (Core.empty())
    return;
  setenv("OPENBLAS_CORETYPE", Core.c_str(), 1);
  setenv("WEFT_BLAS_RESTARTED", Core.c_str(), 1);
  execv("/proc/self/exe", Argv);
  unsetenv("OPENBLAS_CORETYPE"); // exec failed: carry on, and warn
}
#else
std::string blasKernelWarning() {
#ifdef WEFT_BLAS_BLIS
  return ""; // no OpenBLAS core to check
#else
  return "this weft-run was built without OpenBLAS "
         "(WEFT_ALLOW_REFERENCE_BLAS): "
         "matrix products on the CPU run as plain loops, many times slower";
#endif
}

std::string blasCoreToForce() { return ""; }

void restartWithRightBlasKernels(char **) {}
#endif

std::string blasRestartNote() {
  const char *Core = std::getenv("WEFT_BLAS_RESTARTED");
  const char *Rank = std::getenv("OMPI_COMM_WORLD_RANK");
  if (!Core || (Rank && std::string(Rank) != "0"))
    return "";
  return std::string("OpenBLAS had chosen pre-AVX kernels on this CPU (its "
                     "model is probably masked by a VM); restarted with "
                     "OPENBLAS_CORETYPE=") +
         Core;
}

} // namespace weft::cpu
