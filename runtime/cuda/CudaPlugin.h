//===- CudaPlugin.h - The table libweft_cuda.so exports ---------*- C++ -*-===//
//
// The CUDA backend lives in its own shared library, loaded with dlopen the
// first time a CUDA entry point is called (runtime/cuda/CudaLoader.cpp).
// A CPU run never loads the CUDA runtime, cuBLASLt or NCCL: linked into
// weft-run they cost every process of every run 0.12 s and 210 MB more
// peak RSS (weft-run --help: 0.12 s and 220 MB, against 0.01 s and 8 MB),
// and a weft-run built with CUDA would not start where the CUDA libraries
// are missing.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_RUNTIME_CUDA_CUDAPLUGIN_H
#define WEFT_RUNTIME_CUDA_CUDAPLUGIN_H

#include "runtime/Backend.h"
#include "runtime/comm/Communicator.h"

#include <memory>
#include <vector>

namespace weft {

/// Bumped whenever the table or a type it passes changes.
constexpr int CudaPluginVersion = 3;

struct CudaPlugin {
  int Version;
  Expected<std::unique_ptr<Backend>> (*CreateBackend)(DType Type);
  int (*DeviceCount)();
  Status (*RankCommunicator)(std::unique_ptr<Communicator> &Host, bool Share,
                             double TimeoutSeconds);
  /// The ops the backend has no kernel for in Type (needs no device).
  std::vector<OpKind> (*MissingKernels)(DType Type);
};

} // namespace weft

/// The plugin's one exported symbol.
extern "C" const weft::CudaPlugin *weftCudaPlugin();

#endif // WEFT_RUNTIME_CUDA_CUDAPLUGIN_H
