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

/// "a second", "a third", ..., "a 21st": the Nth device.
std::string nth(int N) {
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

Status selectCudaDeviceForRank(bool Share, int &Device) {
  const char *Var = "OMPI_COMM_WORLD_LOCAL_RANK";
  const char *Value = std::getenv(Var);
  if (!Value) {
    Var = "SLURM_LOCALID";
    Value = std::getenv(Var);
  }
  long Local = 0;
  if (Value) {
    char *End = nullptr;
    Local = std::strtol(Value, &End, 10);
    if (!*Value || *End || Local < 0 || Local > INT32_MAX)
      return Status::error(std::string(Var) + "='" + Value +
                           "' is not a local rank");
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
  if (Share && Count > 0)
    Local %= Count;
  if (Local >= Count)
    return Status::error("local rank " + std::to_string(Local) + " needs " +
                         (Local == 0 ? std::string("a CUDA device")
                                     : nth(int(Local) + 1) + " CUDA device") +
                         "; this node has " + std::to_string(Count) + Why);
  Device = int(Local);
  return cudaStatus(cudaSetDevice(Device),
                    "local rank " + std::to_string(Local) + ": cudaSetDevice");
}

Expected<std::unique_ptr<Communicator>>
cudaRankCommunicatorOnDevice(std::unique_ptr<Communicator> Host, bool Share) {
  int Device = 0;
  WEFT_RETURN_IF_ERROR(selectCudaDeviceForRank(Share, Device));
  if (Host->size() == 1)
    return Host;
#ifdef WEFT_HAVE_NCCL
  if (!Share)
    return createNcclCommunicator(std::move(Host), Device);
#endif
  return createStagedCommunicator(std::move(Host));
}

} // namespace weft
