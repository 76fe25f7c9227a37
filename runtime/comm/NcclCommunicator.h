//===- NcclCommunicator.h - The communicator over NCCL ----------*- C++ -*-===//
//
// Collectives and transfers on CUDA device memory, enqueued on the CUDA
// queue's stream (docs/design.md, "The device boundary"). NCCL is
// bootstrapped over the MPI communicator, which also serves every call on
// a queue whose memory is host memory (hostQueue(): control messages).
// NCCL refuses two ranks on one device: ranks sharing a GPU use the staged
// MPI communicator instead (runtime/comm/StagedCommunicator.h).
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_RUNTIME_COMM_NCCLCOMMUNICATOR_H
#define WEFT_RUNTIME_COMM_NCCLCOMMUNICATOR_H

#include "runtime/comm/Communicator.h"
#include "runtime/cuda/CudaQueue.h"

#include <memory>

namespace weft {

/// The NCCL communicator over Bootstrap (the MPI communicator, whose groups
/// it mirrors: one NCCL communicator per (mesh, axes), made on first use,
/// its unique id broadcast over the bootstrap's group by shard index 0).
/// Device is the CUDA device of this rank, already made current by the
/// caller (selectCudaDeviceForRank).
///
/// Blocking calls enqueue on Q's stream and return without waiting for
/// the device. iallReduce, iallGather and startTransfers run on a stream
/// of the communicator's own, after an event recorded on Q; wait(R, Q)
/// makes Q's stream wait for R's completion event (the host does not
/// block; on the host queue it does); test() queries that event. barrier()
/// is the bootstrap's: it orders the ranks' host threads, not their
/// streams (nothing is synchronized first).
/// On success Bootstrap is replaced by the NCCL communicator that owns it;
/// on an error it is left as it was.
///
/// NCCL's failures end waits instead of hanging them (runtime/comm/
/// DeviceWait.h): its communicators are non-blocking, their init is waited
/// for under TimeoutSeconds (0: none), and while a CUDA queue synchronizes,
/// every communicator's asynchronous error and the timeout are checked.
Status createNcclCommunicator(std::unique_ptr<Communicator> &Bootstrap,
                              int Device, double TimeoutSeconds);

} // namespace weft

#endif // WEFT_RUNTIME_COMM_NCCLCOMMUNICATOR_H
