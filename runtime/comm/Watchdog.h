//===- Watchdog.h - Collectives that cannot hang a job forever --*- C++ -*-===//
//
// A rank that stops (SIGSTOP, a livelock, a dead peer the launcher missed)
// leaves its peers blocked in a collective. The watched communicator
// forwards every call and records the blocking one in flight; a watchdog
// thread ends the process when one has waited past the timeout, naming the
// rank, the op, its group and the step. The exit makes mpirun end the job
// (MPI_Abort may not be called from a second thread of an
// MPI_THREAD_FUNNELED process).
//
// The heartbeat: every rank's watchdog thread writes, every 100 ms, its
// time, step and current op into its slot of a small shared-memory board
// (/dev/shm, one per job, so ranks on one node see each other). The rank
// that times out reads the board and names the ranks that stopped beating
// (a stopped process) or are not in the collective (a rank stuck
// elsewhere).
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_RUNTIME_COMM_WATCHDOG_H
#define WEFT_RUNTIME_COMM_WATCHDOG_H

#include "runtime/comm/Communicator.h"

#include <memory>

namespace weft {

class WatchedCommunicator : public Communicator {
public:
  /// The step that collectives are attributed to (global, 1-based).
  virtual void setStep(int64_t Step) = 0;
};

/// Wraps Inner; TimeoutSeconds > 0. JobId names the heartbeat board shared
/// by the job's ranks (empty: no board).
std::unique_ptr<WatchedCommunicator>
watchCommunicator(std::unique_ptr<Communicator> Inner, double TimeoutSeconds,
                  const std::string &JobId);

/// The launcher's id of this job (PMIx namespace or Open MPI's job id), or
/// empty.
std::string mpiJobId();

} // namespace weft

#endif // WEFT_RUNTIME_COMM_WATCHDOG_H
