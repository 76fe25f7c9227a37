//===- CudaPlugin.cpp - The table libweft_cuda.so exports -----------------===//
#include "runtime/cuda/CudaPlugin.h"
#include "runtime/cuda/PluginImpl.h"

extern "C" __attribute__((visibility("default"))) const weft::CudaPlugin *
weftCudaPlugin() {
  static const weft::CudaPlugin Table = {
      weft::CudaPluginVersion, weft::createCudaBackendOnDevice,
      weft::countCudaDevices, weft::cudaRankCommunicatorOnDevice,
      weft::cudaMissingKernelsOf};
  return &Table;
}
