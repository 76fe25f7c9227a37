//===- PluginImpl.h - What libweft_cuda.so implements -----------*- C++ -*-===//
//
// The functions behind the CUDA plugin's table (runtime/cuda/CudaPlugin.h),
// internal to libweft_cuda.so.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_RUNTIME_CUDA_PLUGINIMPL_H
#define WEFT_RUNTIME_CUDA_PLUGINIMPL_H

#include "runtime/Backend.h"
#include "runtime/comm/Communicator.h"

#include <memory>
#include <vector>

namespace weft {

Expected<std::unique_ptr<Backend>> createCudaBackendOnDevice(DType Type);
int countCudaDevices();
/// The ops without a kernel in Type's table; no device needed.
std::vector<OpKind> cudaMissingKernelsOf(DType Type);
/// Makes this rank's CUDA device current (see cudaRankCommunicator).
Status selectCudaDeviceForRank(bool Share, int WorldSize, int &Device);
Status cudaRankCommunicatorOnDevice(std::unique_ptr<Communicator> &Host,
                                    bool Share, double TimeoutSeconds);

} // namespace weft

#endif // WEFT_RUNTIME_CUDA_PLUGINIMPL_H
