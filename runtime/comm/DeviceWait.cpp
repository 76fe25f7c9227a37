//===- DeviceWait.cpp - Waits for a device that cannot hang a job ---------===//
#include "runtime/comm/DeviceWait.h"

#include <algorithm>
#include <chrono>
#include <sstream>
#include <thread>

namespace weft {

namespace {

std::string seconds(double S) {
  std::ostringstream O;
  O << S;
  return O.str();
}

/// "group (world ranks 0,1), which last ran ncclAllReduce".
std::string describe(const CommInFlight &C) {
  return "group (" + C.Group + ")" +
         (C.LastCall.empty() ? "" : ", which last ran " + C.LastCall);
}

void abortAll(const NcclWaitApi &Api, std::vector<CommInFlight> &Comms) {
  for (CommInFlight &C : Comms)
    if (C.Comm) {
      Api.Abort(C.Comm);
      C.Comm = nullptr;
    }
}

} // namespace

Status waitPolling(const std::function<Expected<Progress>()> &Look,
                   const std::function<Status(double)> &Check) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point Start = Clock::now();
  std::chrono::microseconds Sleep(10);
  for (;;) {
    Expected<Progress> P = Look();
    if (!P.ok())
      return P.status();
    if (*P == Progress::Done)
      return Status::success();
    if (Check) {
      const double Waited =
          std::chrono::duration<double>(Clock::now() - Start).count();
      WEFT_RETURN_IF_ERROR(Check(Waited));
    }
    std::this_thread::sleep_for(Sleep);
    Sleep = std::min(Sleep * 2, std::chrono::microseconds(200));
  }
}

Status checkCommunicators(const NcclWaitApi &Api,
                          std::vector<CommInFlight> &Comms, double Waited,
                          double TimeoutSeconds, int Rank,
                          const std::string &What) {
  const std::string Who = "rank " + std::to_string(Rank) + ", " + What;
  for (CommInFlight &C : Comms) {
    if (!C.Comm)
      continue;
    Expected<Progress> P = Api.AsyncError(C.Comm);
    if (P.ok())
      continue;
    const std::string Where = describe(C);
    abortAll(Api, Comms);
    return Status::error(Who +
                         ": NCCL reports an error on the communicator "
                         "of " +
                         Where + ": " + P.message() +
                         " (every NCCL communicator of the rank is aborted)");
  }
  if (TimeoutSeconds <= 0 || Waited <= TimeoutSeconds)
    return Status::success();
  std::string Groups;
  for (const CommInFlight &C : Comms)
    if (C.Comm && C.Pending)
      Groups += (Groups.empty() ? "" : "; ") + describe(C);
  if (Groups.empty()) // the device computes; no collective waits
    return Status::success();
  abortAll(Api, Comms);
  return Status::error(
      Who + ": not complete after " + seconds(TimeoutSeconds) +
      " s (--collective-timeout): an NCCL collective waits for a peer that "
      "failed or stopped (pending: " +
      Groups + "); every NCCL communicator of the rank is aborted");
}

Status waitForComm(const NcclWaitApi &Api, void *Comm, double TimeoutSeconds,
                   const std::string &What) {
  bool Aborted = false;
  Status S = waitPolling([&]() { return Api.AsyncError(Comm); },
                         [&](double Waited) {
                           if (TimeoutSeconds <= 0 || Waited <= TimeoutSeconds)
                             return Status::success();
                           Api.Abort(Comm);
                           Aborted = true;
                           return Status::error(
                               What + ": still in progress after " +
                               seconds(TimeoutSeconds) +
                               " s (--collective-timeout): a peer failed or "
                               "stopped; the communicator is aborted");
                         });
  if (!S.ok() && !Aborted) {
    Api.Abort(Comm);
    return Status::error(What + ": " + S.message() +
                         " (the communicator is aborted)");
  }
  return S;
}

} // namespace weft
