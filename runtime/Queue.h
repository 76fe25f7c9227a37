//===- Queue.h - The ordered work of one device ------------------*- C++
//-*-===//
//
// The device boundary (docs/design.md, "The device boundary"): the executor
// never reads or writes tensor memory itself. Everything that touches it is
// work on a Queue: the backend's kernels, copies between host and device,
// zero fills, and the communicator's collectives and transfers. A queue runs
// its work in the order enqueued (CUDA: one stream); the host learns that
// work is done only through synchronize() or an Event.
//
// "Device" pointers below are memory from the backend's allocate() (or
// offsets into it); "host" pointers are ordinary host memory, which must
// stay valid and unchanged until the queue has been synchronized (a CUDA
// queue copies them asynchronously, through pinned staging).
//
// The CPU queue runs everything at once, on the calling thread: it is
// synchronous, and its device memory is host memory.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_RUNTIME_QUEUE_H
#define WEFT_RUNTIME_QUEUE_H

#include "program/Status.h"

#include <cstddef>
#include <memory>

namespace weft {

/// A point in a queue's work (CUDA: cudaEvent_t). Recorded on one queue,
/// waited for by another (or by the host).
struct Event {
  struct State {
    virtual ~State() = default;
  };
  std::unique_ptr<State> Native;
};

class Queue {
public:
  virtual ~Queue() = default;
  /// Whether device memory is host memory (the CPU queue): then a host
  /// library (MPI) may read and write it once the queue is synchronized.
  virtual bool hostMemory() const = 0;
  virtual Status copyToDevice(void *Device, const void *Host, size_t Bytes) = 0;
  virtual Status copyToHost(void *Host, const void *Device, size_t Bytes) = 0;
  /// Device to device; the ranges may overlap.
  virtual Status copyOnDevice(void *Dst, const void *Src, size_t Bytes) = 0;
  virtual Status fillZero(void *Device, size_t Bytes) = 0;
  /// Marks the end of the work enqueued so far.
  virtual Status record(Event &E) = 0;
  /// Work enqueued from now on runs after E's work (recorded on any queue).
  virtual Status waitFor(const Event &E) = 0;
  /// Blocks the host until all work enqueued so far has run.
  virtual Status synchronize() = 0;
};

/// A synchronous queue whose "device" is host memory: the CPU backend's
/// queue, and the one communicator calls on host buffers take (control
/// messages: traces, checks, gathers of host copies).
std::unique_ptr<Queue> createHostQueue();
/// One process-wide host queue, for communicator calls on host buffers.
Queue &hostQueue();

} // namespace weft

#endif // WEFT_RUNTIME_QUEUE_H
