//===- CudaQueue.h - A queue on a CUDA stream -------------------*- C++ -*-===//
//
// The CUDA side of the device boundary (runtime/Queue.h): work on one
// stream, events as cudaEvent_t, copies as cudaMemcpyAsync. Host-to-device
// copies go through pinned staging buffers: from pageable memory,
// cudaMemcpyAsync first waits for the stream's earlier work, so the host
// could not run ahead of the device (the step's tokens, every
// micro-batch). The caller's buffer may change once copyToDevice returns,
// as before. Kernels report
// data errors (a token id outside the vocab) into a KernelError slot in
// device memory; synchronize() reads it and turns the first one into an
// error naming the instruction.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_RUNTIME_CUDA_CUDAQUEUE_H
#define WEFT_RUNTIME_CUDA_CUDAQUEUE_H

#include "program/Status.h"
#include "runtime/Queue.h"
#include "runtime/comm/DeviceWait.h"
#include "runtime/cuda/kernels/Kernels.h"

#include <cuda_runtime_api.h>

#include <functional>
#include <memory>
#include <string>

namespace weft {

/// "what: cudaErrorX (message)", or success.
Status cudaStatus(cudaError_t E, const std::string &What);

/// A look at CUDA work for waitPolling (runtime/comm/DeviceWait.h): the
/// result of cudaStreamQuery or cudaEventQuery (What) as Done, Running
/// (cudaErrorNotReady) or the error.
Expected<Progress> cudaProgress(cudaError_t Query, const char *What);

/// While a CUDA queue synchronizes, Check is called between looks at its
/// stream with the seconds waited; an error it returns ends the wait
/// (runtime/comm/DeviceWait.h). The NCCL communicator sets it while it
/// exists; unset, a queue blocks in cudaStreamSynchronize.
void setStreamWaitCheck(std::function<Status(double Waited)> Check);

/// Names instruction I for a kernel error message ("instructions[3]
/// (embedding)").
using InstructionNamer = std::function<std::string(int)>;

/// What the NCCL communicator needs of a queue: its stream. A CUDA queue
/// implements it beside Queue (Queue itself stays free of CUDA); the
/// communicator finds it by dynamic_cast.
struct CudaQueueAccess {
  virtual ~CudaQueueAccess() = default;
  virtual cudaStream_t stream() const = 0;
};

class CudaQueue final : public Queue, public CudaQueueAccess {
public:
  /// A queue on a new non-blocking stream of the current device; Errors
  /// (device memory) is the slot its kernels report into, or null.
  static Expected<std::unique_ptr<CudaQueue>> create(cuda::KernelError *Errors,
                                                     InstructionNamer Namer);
  ~CudaQueue() override;

  cudaStream_t stream() const override { return Stream; }
  bool hostMemory() const override { return false; }
  Status copyToDevice(void *Device, const void *Host, size_t Bytes) override;
  Status copyToHost(void *Host, const void *Device, size_t Bytes) override;
  Status copyOnDevice(void *Dst, const void *Src, size_t Bytes) override;
  Status fillZero(void *Device, size_t Bytes) override;
  Status record(Event &E) override;
  Status waitFor(const Event &E) override;
  /// Waits for the stream, then reports (and clears) a kernel's data error.
  Status synchronize() override;

  /// Bytes of one staging buffer at most; a longer copy goes in pieces.
  static constexpr size_t MaxStagingBytes = size_t(64) << 20;
  /// Copies up to this size (tokens, positions) take small buffers.
  static constexpr size_t SmallStagingBytes = size_t(1) << 20;

private:
  /// A pinned buffer, and the event after the copy that last read it.
  struct Staging {
    void *Buffer = nullptr;
    size_t Bytes = 0;
    cudaEvent_t Read = nullptr;
    bool InFlight = false;
  };
  CudaQueue() = default;
  /// Staging that holds Bytes and is free to write (its last copy done).
  Status stagingFor(size_t Bytes, Staging *&Out);
  cudaStream_t Stream = nullptr;
  // Used in turn, so that a copy overlaps the next memcpy: two large
  // buffers, and 16 small ones so that the host runs ahead of the device
  // by as many small copies (a step's positions, per layer) before it
  // waits for one.
  Staging Large[2], Small[16];
  int NextLarge = 0, NextSmall = 0;
  cuda::KernelError *Errors = nullptr;
  cuda::KernelError *HostErrors = nullptr; // pinned
  InstructionNamer Namer;
};

/// The cudaEvent_t of an Event recorded on a CudaQueue.
struct CudaEventState final : Event::State {
  cudaEvent_t Native = nullptr;
  ~CudaEventState() override;
};

} // namespace weft

#endif // WEFT_RUNTIME_CUDA_CUDAQUEUE_H
