//===- NoCuda.cpp - The CUDA entry points of a build without CUDA ---------===//
#include "runtime/Backend.h"
#include "runtime/cuda/CudaRanks.h"

namespace weft {

bool haveCuda() { return false; }

int cudaDeviceCount() { return 0; }

Expected<std::unique_ptr<Backend>> createCudaBackend(DType) {
  return Status::error("this weft was built without CUDA (CMake found no "
                       "CUDA compiler, cuBLASLt or CUDA runtime)");
}

Expected<std::vector<OpKind>> cudaMissingKernels(DType) {
  return Status::error("this weft was built without CUDA");
}

Status cudaRankCommunicator(std::unique_ptr<Communicator> &, bool, double) {
  return Status::error("this weft was built without CUDA");
}

} // namespace weft
