//===- BlasCore.h - OpenBLAS's kernels on a masked CPU model ---*- C++ -*-===//
#ifndef WEFT_RUNTIME_KERNELS_CPU_BLASCORE_H
#define WEFT_RUNTIME_KERNELS_CPU_BLASCORE_H

#include <string>

namespace weft::cpu {

/// A warning when OpenBLAS runs kernels older than the CPU's: pre-AVX2 ones
/// on a CPU with AVX2 or AVX-512 (a VM that masks its CPU model defeats
/// OpenBLAS's dynamic-arch detection: GPT-2 124M steps then take 4-5x
/// longer), AVX2 ones on an AVX-512 CPU (OPENBLAS_CORETYPE=Haswell preset
/// by a machine image: 1.75x); empty otherwise. UsersCore is the
/// OPENBLAS_CORETYPE set, or null. The first form asks this process's
/// OpenBLAS, CPU and environment.
std::string blasKernelWarning();
std::string blasKernelWarning(const std::string &Core, bool Avx512, bool Avx2,
                              const char *UsersCore);
/// The OPENBLAS_CORETYPE that gives OpenBLAS its AVX2 or AVX-512 kernels
/// when it runs older ones (Core) on a CPU whose cpuid has them, else "".
/// The first form asks this process, and returns "" when the user set
/// OPENBLAS_CORETYPE and WEFT_KEEP_OPENBLAS_CORETYPE. OpenBLAS reads the
/// variable once, when it loads: weft-run restarts itself with it set.
std::string blasCoreToForce();
std::string blasCoreToForce(const std::string &Core, bool Avx512, bool Avx2);
/// Restarts this program (execv of /proc/self/exe with Argv) with
/// OPENBLAS_CORETYPE = blasCoreToForce() when that is not empty, once
/// (WEFT_BLAS_RESTARTED marks the restarted process). Call first in main,
/// before MPI or threads start. Returns if no restart is needed or exec
/// failed (then blasKernelWarning says what to set).
void restartWithRightBlasKernels(char **Argv);
/// What a restarted process says (empty otherwise, and on MPI ranks but
/// the first).
std::string blasRestartNote();

} // namespace weft::cpu

#endif // WEFT_RUNTIME_KERNELS_CPU_BLASCORE_H
