//===- CudaLoader.cpp - The CUDA entry points, through the plugin ---------===//
//
// Loads libweft_cuda.so (runtime/cuda/CudaPlugin.h) on first use: from
// WEFT_CUDA_PLUGIN when set, else from the lib/ beside the executable's
// bin/ (the build tree and an install), else by the loader's search path.
//
//===----------------------------------------------------------------------===//
#include "runtime/Backend.h"
#include "runtime/cuda/CudaPlugin.h"
#include "runtime/cuda/CudaRanks.h"

#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <string>

namespace weft {

namespace {

std::string besideExecutable() {
  char Buf[PATH_MAX];
  ssize_t N = readlink("/proc/self/exe", Buf, sizeof(Buf) - 1);
  if (N <= 0)
    return "";
  std::string Exe(Buf, size_t(N));
  std::string Bin = Exe.substr(0, Exe.rfind('/'));
  return Bin.substr(0, Bin.rfind('/')) + "/lib/libweft_cuda.so";
}

/// The plugin's table, or the error that stopped it loading (both kept).
Expected<const CudaPlugin *> load() {
  static Expected<const CudaPlugin *> Loaded =
      []() -> Expected<const CudaPlugin *> {
    std::string Tried;
    void *Handle = nullptr;
    std::vector<std::string> Candidates;
    if (const char *Env = std::getenv("WEFT_CUDA_PLUGIN"))
      Candidates.push_back(Env);
    else
      Candidates = {besideExecutable(), "libweft_cuda.so"};
    for (const std::string &Path : Candidates) {
      if (Path.empty())
        continue;
      Handle = dlopen(Path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (Handle)
        break;
      const char *Why = dlerror();
      Tried += "\n  " + Path + ": " + (Why ? Why : "not found");
    }
    if (!Handle)
      return Status::error("cannot load the CUDA backend (libweft_cuda.so):" +
                           Tried);
    using Entry = const CudaPlugin *(*)();
    auto Fn = reinterpret_cast<Entry>(dlsym(Handle, "weftCudaPlugin"));
    if (!Fn)
      return Status::error("libweft_cuda.so has no weftCudaPlugin");
    const CudaPlugin *P = Fn();
    if (!P || P->Version != CudaPluginVersion)
      return Status::error(
          "libweft_cuda.so is version " + std::to_string(P ? P->Version : -1) +
          ", this runtime needs " + std::to_string(CudaPluginVersion));
    return P;
  }();
  return Loaded;
}

} // namespace

bool haveCuda() { return true; }

int cudaDeviceCount() {
  Expected<const CudaPlugin *> P = load();
  return P.ok() ? (*P)->DeviceCount() : 0;
}

Expected<std::unique_ptr<Backend>> createCudaBackend(DType Type) {
  Expected<const CudaPlugin *> P = load();
  if (!P.ok())
    return P.status();
  return (*P)->CreateBackend(Type);
}

Expected<std::vector<OpKind>> cudaMissingKernels(DType Type) {
  Expected<const CudaPlugin *> P = load();
  if (!P.ok())
    return P.status();
  return (*P)->MissingKernels(Type);
}

Status cudaRankCommunicator(std::unique_ptr<Communicator> &Host, bool Share,
                            double TimeoutSeconds) {
  Expected<const CudaPlugin *> P = load();
  if (!P.ok())
    return P.status();
  return (*P)->RankCommunicator(Host, Share, TimeoutSeconds);
}

} // namespace weft
