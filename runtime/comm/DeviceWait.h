//===- DeviceWait.h - Waits for a device that cannot hang a job -*- C++ -*-===//
//
// A rank waiting for its GPU (cudaStreamSynchronize) while an NCCL kernel
// waits for a peer that failed would wait forever, out of the watchdog's
// sight (runtime/comm/Watchdog.h watches communicator calls, and NCCL's
// return at once). These waits poll instead: between looks at the device
// they ask NCCL for each communicator's asynchronous error and check the
// collective timeout, and either ends the wait: every communicator is
// aborted (so that its kernels stop and the stream drains) and the error
// names the rank's groups and what they ran last; weft-run then ends the
// job. A non-blocking NCCL init is waited for the same way, so that a rank
// whose peer failed before init does not stay in it.
//
// Nothing here calls CUDA or NCCL: the NCCL communicator passes its entry
// points (NcclWaitApi), and test/unit/DeviceWaitTest.cpp stands in for
// them with failing, hanging and slow ones.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_RUNTIME_COMM_DEVICEWAIT_H
#define WEFT_RUNTIME_COMM_DEVICEWAIT_H

#include "program/Status.h"

#include <functional>
#include <string>
#include <vector>

namespace weft {

/// What one look at the device (or a communicator) found.
enum class Progress { Done, Running };

/// Looks until Look says Done or fails, sleeping between looks (10 us,
/// doubling up to 200 us: a wait ends at most that late). Between looks Check
/// (if set), given the seconds waited, may end the wait with an error.
Status waitPolling(const std::function<Expected<Progress>()> &Look,
                   const std::function<Status(double Waited)> &Check);

/// The NCCL entry points the waits call, over opaque communicators.
struct NcclWaitApi {
  /// ncclCommGetAsyncError: Running while ncclInProgress, Done on success,
  /// else an error carrying NCCL's message.
  Expected<Progress> (*AsyncError)(void *Comm) = nullptr;
  /// ncclCommAbort.
  void (*Abort)(void *Comm) = nullptr;
};

/// A communicator of the rank: its group, the call it last started, and
/// whether that call is still running on the device.
struct CommInFlight {
  void *Comm = nullptr;
  std::string Group, LastCall;
  bool Pending = false;
};

/// waitPolling's check for a rank's NCCL communicators: ends the wait when
/// one reports an asynchronous error, or after TimeoutSeconds (0: never)
/// while one has a call pending (a wait for compute alone never times out).
/// Then every communicator of Comms is aborted (and its Comm cleared) and
/// the error names Rank, What was waited for, the group and its last call.
Status checkCommunicators(const NcclWaitApi &Api,
                          std::vector<CommInFlight> &Comms, double Waited,
                          double TimeoutSeconds, int Rank,
                          const std::string &What);

/// Waits while Comm is in progress (a non-blocking init, or a call NCCL
/// is still enqueueing); past TimeoutSeconds (0: never) aborts it. What
/// names the wait in the error.
Status waitForComm(const NcclWaitApi &Api, void *Comm, double TimeoutSeconds,
                   const std::string &What);

} // namespace weft

#endif // WEFT_RUNTIME_COMM_DEVICEWAIT_H
