//===- CudaRanks.cpp - Which GPU a rank uses, and how ranks talk ----------===//
//
// One rank per GPU by default: local rank L takes device L, and ranks talk
// through NCCL (the staged MPI communicator where NCCL was not built). On a
// node with fewer GPUs than ranks that is refused, naming both numbers,
// unless the ranks share them (--share-gpu, for tests on a one-GPU
// machine): NCCL refuses two ranks on one device, so those ranks use MPI
// with host-staged buffers.
//
//===----------------------------------------------------------------------===//
#include "runtime/comm/StagedCommunicator.h"
#include "runtime/cuda/CudaQueue.h"
#include "runtime/cuda/PluginImpl.h"
#ifdef WEFT_HAVE_NCCL
#include "runtime/comm/NcclCommunicator.h"
#endif

#include <cuda_runtime_api.h>

#include <climits>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace weft {

namespace {

/// "a CUDA device" for the first, then "a second", "a third", ..., "a
/// 21st": the Nth device.
std::string nth(long N) {
  if (N <= 1)
    return "a";
  static const char *Words[] = {"",       "",      "second", "third",
                                "fourth", "fifth", "sixth",  "seventh",
                                "eighth", "ninth", "tenth"};
  if (N >= 2 && N <= 10)
    return std::string("a ") + Words[N];
  const int Tens = N % 100, Ones = N % 10;
  const char *Suffix = (Tens >= 11 && Tens <= 13) ? "th"
                       : Ones == 1                ? "st"
                       : Ones == 2                ? "nd"
                       : Ones == 3                ? "rd"
                                                  : "th";
  const bool An = N == 8 || N == 11 || N == 18 || (N >= 80 && N < 90);
  return std::string(An ? "an " : "a ") + std::to_string(N) + Suffix;
}

} // namespace

namespace {

/// The launchers' variables for a rank's index on its node, in the order
/// they are tried.
const char *const LocalRankVars[] = {
    "OMPI_COMM_WORLD_LOCAL_RANK", // Open MPI
    "SLURM_LOCALID",              // srun
    "MPI_LOCALRANKID",            // MPICH's hydra
    "MV2_COMM_WORLD_LOCAL_RANK",  // MVAPICH
    "PALS_LOCAL_RANKID",          // HPE PALS
};

} // namespace

Status selectCudaDeviceForRank(bool Share, int WorldSize, int &Device) {
  const char *Var = nullptr, *Value = nullptr;
  for (const char *V : LocalRankVars)
    if ((Value = std::getenv(V))) {
      Var = V;
      break;
    }
  long Local = 0;
  if (Value) {
    char *End = nullptr;
    Local = std::strtol(Value, &End, 10);
    if (!*Value || *End || Local < 0 || Local >= INT32_MAX)
      return Status::error(std::string(Var) + "='" + Value +
                           "' is not a local rank");
  } else if (WorldSize > 1) {
    std::string Names;
    for (const char *V : LocalRankVars)
      Names += (Names.empty() ? "" : ", ") + std::string(V);
    return Status::error("cannot tell this rank's index on its node (none "
                         "of " +
                         Names + " is set), so not which GPU it takes");
  }
  int Count = 0;
  cudaError_t E = cudaGetDeviceCount(&Count);
  std::string Why;
  if (E == cudaErrorInsufficientDriver || E == cudaErrorNoDevice) {
    Count = 0; // the call may leave it untouched
    Why = std::string(" (cudaGetDeviceCount: ") + cudaGetErrorString(E) + ")";
  } else if (E != cudaSuccess) {
    return cudaStatus(E, "cudaGetDeviceCount");
  }
  if (Count == 0)
    return Status::error("no CUDA device on this node" + Why);
  // Ranks that share GPUs, or a launcher that gave each rank its own
  // CUDA_VISIBLE_DEVICES (then NCCL refuses real duplicates).
  if (Share || (std::getenv("CUDA_VISIBLE_DEVICES") && Local >= Count))
    Local %= Count;
  if (Local >= Count)
    return Status::error("local rank " + std::to_string(Local) + " needs " +
                         nth(Local + 1) + " CUDA device; this node has " +
                         std::to_string(Count) +
                         " (--share-gpu lets ranks share them)");
  Device = int(Local);
  return cudaStatus(cudaSetDevice(Device),
                    "local rank " + std::to_string(Local) + ": cudaSetDevice");
}

Status cudaRankCommunicatorOnDevice(std::unique_ptr<Communicator> &Host,
                                    bool Share, double TimeoutSeconds) {
  int Device = 0;
  // On an error Host stays as it is: the caller prints the error and ends
  // the job through it (destroying it would finalize MPI, which waits for
  // every rank, and the others are already in their first collective).
  WEFT_RETURN_IF_ERROR(selectCudaDeviceForRank(Share, Host->size(), Device));
  if (Host->size() == 1) {
    // One rank (perhaps under mpirun): groups of one are copies on the
    // queue, which the MPI communicator cannot do on device memory.
    Host = createLocalCommunicator(Host->rank(), 1);
    return Status::success();
  }
#ifdef WEFT_HAVE_NCCL
  if (!Share)
    return createNcclCommunicator(Host, Device, TimeoutSeconds);
#endif
  Host = createStagedCommunicator(std::move(Host));
  return Status::success();
}

} // namespace weft
