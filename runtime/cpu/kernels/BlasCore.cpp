//===- BlasCore.cpp - OpenBLAS's kernels on a CPU whose model a VM masks -===//
//
// OpenBLAS picks its kernels from the CPU model (DYNAMIC_ARCH); a VM that
// masks the model makes it pick pre-AVX ones on an AVX-512 CPU, several
// times slower. A machine image may also preset OPENBLAS_CORETYPE=Haswell
// on an AVX-512 CPU: GPT-2's step 1.75x slower (docs/performance.md).
// weft-run and weft-plan --calibrate restart themselves with
// OPENBLAS_CORETYPE set to the kernels cpuid allows
// (restartWithRightBlasKernels) unless WEFT_KEEP_OPENBLAS_CORETYPE is set.
// A library of its own: weft-plan links it without the runtime.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/kernels/BlasCore.h"

#if defined(WEFT_HAVE_OPENBLAS) && !defined(WEFT_BLAS_BLIS)
#include <cblas.h>
#endif

#include <cstdlib>
#include <initializer_list>
#include <unistd.h>

namespace weft::cpu {

namespace {
bool isOneOf(const std::string &Core,
             std::initializer_list<const char *> Names) {
  for (const char *N : Names)
    if (Core == N)
      return true;
  return false;
}

bool isPreAvx2(const std::string &Core) {
  return isOneOf(Core, {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem",
                        "Atom", "Sandybridge", "Bulldozer", "Piledriver",
                        "Steamroller"});
}

// OpenBLAS's cores whose sgemm is AVX2's, not AVX-512's.
bool isAvx2(const std::string &Core) {
  return isOneOf(Core, {"Haswell", "Zen", "Excavator"});
}

bool keepUsersCore() {
  return std::getenv("OPENBLAS_CORETYPE") &&
         std::getenv("WEFT_KEEP_OPENBLAS_CORETYPE");
}
} // namespace

std::string blasCoreToForce(const std::string &Core, bool Avx512, bool Avx2) {
  if (Avx512 && (isPreAvx2(Core) || isAvx2(Core)))
    return "SkylakeX";
  if (Avx2 && isPreAvx2(Core))
    return "Haswell";
  return "";
}

std::string blasKernelWarning(const std::string &Core, bool Avx512, bool Avx2,
                              const char *UsersCore) {
  std::string Want = blasCoreToForce(Core, Avx512, Avx2);
  if (Want.empty())
    return "";
  std::string Why =
      UsersCore ? std::string(" (OPENBLAS_CORETYPE=") + UsersCore + ")"
                : std::string(" (the CPU model is probably masked by a VM)");
  return "OpenBLAS runs its '" + Core + "' kernels on a CPU with " +
         (Avx512 ? "AVX-512" : "AVX2") + Why +
         ": matrix products run slower than they could. Start weft-run "
         "with OPENBLAS_CORETYPE=" +
         Want + " in its environment, or without WEFT_KEEP_OPENBLAS_CORETYPE";
}

#if defined(WEFT_HAVE_OPENBLAS) && !defined(WEFT_BLAS_BLIS)
std::string blasKernelWarning() {
  const char *Core = openblas_get_corename();
  return blasKernelWarning(
      Core ? Core : "", __builtin_cpu_supports("avx512f") != 0,
      __builtin_cpu_supports("avx2") != 0, std::getenv("OPENBLAS_CORETYPE"));
}

std::string blasCoreToForce() {
  if (keepUsersCore())
    return "";
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
  // What the restarted process says it replaced (blasRestartNote).
  const char *Old = openblas_get_corename();
  setenv("WEFT_BLAS_REPLACED", Old ? Old : "", 1);
  unsetenv("WEFT_BLAS_REPLACED_SETTING");
  if (const char *Set = std::getenv("OPENBLAS_CORETYPE"))
    setenv("WEFT_BLAS_REPLACED_SETTING", Set, 1);
  setenv("OPENBLAS_CORETYPE", Core.c_str(), 1);
  setenv("WEFT_BLAS_RESTARTED", Core.c_str(), 1);
  execv("/proc/self/exe", Argv);
  // exec failed: carry on as started, and warn (blasKernelWarning).
  if (const char *Set = std::getenv("WEFT_BLAS_REPLACED_SETTING"))
    setenv("OPENBLAS_CORETYPE", Set, 1);
  else
    unsetenv("OPENBLAS_CORETYPE");
  for (const char *Mark : {"WEFT_BLAS_RESTARTED", "WEFT_BLAS_REPLACED",
                           "WEFT_BLAS_REPLACED_SETTING"})
    unsetenv(Mark);
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
  const char *Old = std::getenv("WEFT_BLAS_REPLACED");
  std::string Was = std::string("its '") + (Old ? Old : "?") + "' kernels";
  if (const char *Set = std::getenv("WEFT_BLAS_REPLACED_SETTING"))
    return "OPENBLAS_CORETYPE=" + std::string(Set) + " gave OpenBLAS " + Was +
           ", slower than this CPU allows; restarted with "
           "OPENBLAS_CORETYPE=" +
           Core + " (set WEFT_KEEP_OPENBLAS_CORETYPE=1 to keep yours)";
  return "OpenBLAS had chosen " + Was +
         " on this CPU (its model is probably masked by a VM); restarted "
         "with OPENBLAS_CORETYPE=" +
         Core;
}

} // namespace weft::cpu
