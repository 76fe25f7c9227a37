//===- StagedCommunicator.h - Device memory via host staging -- -*- C++ -*-===//
//
// Several ranks sharing one GPU cannot use NCCL (it refuses two ranks on one
// device), and MPI cannot read device memory. The staged communicator
// decorates a host communicator (MPI): a call on a queue whose memory is
// host memory is forwarded unchanged; any other call copies its device
// buffers to host staging through the queue, runs the host communicator's
// call on hostQueue() with the staging buffers, and copies the results back
// through the queue (docs/design.md, "The device boundary").
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_RUNTIME_COMM_STAGEDCOMMUNICATOR_H
#define WEFT_RUNTIME_COMM_STAGEDCOMMUNICATOR_H

#include "runtime/comm/Communicator.h"

#include <memory>

namespace weft {

/// Wraps Host (whose groups, ranks and barrier it serves unchanged).
/// Staged calls block the host while their queue drains, twice: before the
/// host call (to read the device buffers) and after the copy back (so that
/// the staging buffer may be reused). Nonblocking calls start the host
/// call on a staging buffer of their request's own and copy back when
/// test() or wait() completes it. Staging buffers grow to the largest call
/// and are then reused; reserveRequest sizes a request's for an
/// all-reduce of its Count.
std::unique_ptr<Communicator>
createStagedCommunicator(std::unique_ptr<Communicator> Host);

} // namespace weft

#endif // WEFT_RUNTIME_COMM_STAGEDCOMMUNICATOR_H
