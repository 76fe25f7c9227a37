//===- DeviceWaitTest.cpp - NCCL failures end the wait, on the CPU --------===//
//
// runtime/comm/DeviceWait.h's waits against a stand-in for NCCL's entry
// points (ncclCommGetAsyncError, ncclCommAbort) that fails, hangs or is
// slow on cue: the logic the NCCL communicator runs on a GPU, tested where
// there is none.
//
//===----------------------------------------------------------------------===//
#include "runtime/comm/DeviceWait.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

using namespace weft;

namespace {

/// A stand-in communicator: in progress for Busy looks, then done or
/// failed; how often it was looked at and aborted.
struct FakeComm {
  int Busy = 0;       // looks that say "in progress" (-1: forever)
  bool Fails = false; // after them, an asynchronous error
  int Looks = 0, Aborts = 0;
};

Expected<Progress> fakeAsyncError(void *C) {
  auto *F = static_cast<FakeComm *>(C);
  ++F->Looks;
  if (F->Aborts)
    return Status::error("ncclCommGetAsyncError: the communicator was aborted");
  if (F->Busy < 0 || F->Looks <= F->Busy)
    return Progress::Running;
  if (F->Fails)
    return Status::error("unhandled system error (remote process exited)");
  return Progress::Done;
}
void fakeAbort(void *C) { ++static_cast<FakeComm *>(C)->Aborts; }

NcclWaitApi fakeApi() {
  NcclWaitApi A;
  A.AsyncError = fakeAsyncError;
  A.Abort = fakeAbort;
  return A;
}

bool has(const std::string &S, const std::string &Part) {
  return S.find(Part) != std::string::npos;
}

TEST(DeviceWait, AnInitThatCompletesIsWaitedFor) {
  FakeComm C;
  C.Busy = 5;
  Status S = waitForComm(fakeApi(), &C, 10, "init");
  EXPECT_TRUE(S.ok()) << S.message();
  EXPECT_EQ(C.Looks, 6);
  EXPECT_EQ(C.Aborts, 0);
}

TEST(DeviceWait, AnInitThatFailsIsAbortedAndNamed) {
  FakeComm C;
  C.Busy = 2;
  C.Fails = true;
  Status S = waitForComm(fakeApi(), &C, 10,
                         "the NCCL communicator of group (world ranks 0,1)");
  ASSERT_FALSE(S.ok());
  EXPECT_TRUE(has(S.message(), "the NCCL communicator of group (world ranks "
                               "0,1): unhandled system error"))
      << S.message();
  EXPECT_EQ(C.Aborts, 1);
}

// A peer that never calls init leaves this rank's init in progress: the
// timeout ends it instead of a hang.
TEST(DeviceWait, AnInitThatHangsTimesOutAndIsAborted) {
  FakeComm C;
  C.Busy = -1;
  const auto Start = std::chrono::steady_clock::now();
  Status S =
      waitForComm(fakeApi(), &C, 0.05, "init of group (world ranks 0,1)");
  const double Took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - Start)
          .count();
  ASSERT_FALSE(S.ok());
  EXPECT_TRUE(has(S.message(), "still in progress after 0.05 s"))
      << S.message();
  EXPECT_EQ(C.Aborts, 1);
  EXPECT_LT(Took, 2.0);
}

// The device's work waits on a collective; one communicator reports a
// failed peer: every communicator is aborted, and the message names the
// rank, the group and its last call.
TEST(DeviceWait, AnAsyncErrorEndsTheDeviceWait) {
  FakeComm A, B;
  A.Busy = B.Busy = -1;
  std::vector<CommInFlight> Comms = {{&A, "world ranks 0,1", "ncclAllReduce"},
                                     {&B, "world ranks 0,2", "ncclSend"}};
  int Looks = 0;
  Status S = waitPolling(
      [&]() -> Expected<Progress> {
        if (++Looks == 4)
          B.Busy = 0, B.Fails = true; // the peer dies mid-step
        return Progress::Running;
      },
      [&](double Waited) {
        return checkCommunicators(fakeApi(), Comms, Waited, 600, 3,
                                  "waiting for the device");
      });
  ASSERT_FALSE(S.ok());
  EXPECT_TRUE(has(S.message(), "rank 3, waiting for the device: NCCL reports "
                               "an error on the communicator of group (world "
                               "ranks 0,2), which last ran ncclSend: "
                               "unhandled system error"))
      << S.message();
  EXPECT_EQ(A.Aborts, 1);
  EXPECT_EQ(B.Aborts, 1);
  EXPECT_EQ(Comms[0].Comm, nullptr);
  EXPECT_EQ(Comms[1].Comm, nullptr);
}

// A stopped peer reports nothing: past the collective timeout the wait ends,
// naming the communicators with a call pending; all are aborted.
TEST(DeviceWait, AStoppedPeerTimesTheDeviceWaitOut) {
  FakeComm A, B;
  A.Busy = B.Busy = -1;
  std::vector<CommInFlight> Comms = {
      {&A, "world ranks 0,1", "ncclAllGather", true},
      {&B, "world ranks 0,2", "ncclSend", false}};
  Status S =
      waitPolling([]() -> Expected<Progress> { return Progress::Running; },
                  [&](double Waited) {
                    return checkCommunicators(fakeApi(), Comms, Waited, 0.05, 1,
                                              "waiting for the device");
                  });
  ASSERT_FALSE(S.ok());
  EXPECT_TRUE(has(S.message(), "rank 1, waiting for the device: not complete "
                               "after 0.05 s (--collective-timeout)"))
      << S.message();
  EXPECT_TRUE(has(S.message(), "pending: group (world ranks 0,1), which "
                               "last ran ncclAllGather)"))
      << S.message();
  EXPECT_FALSE(has(S.message(), "ncclSend")) << S.message();
  EXPECT_EQ(A.Aborts, 1);
  EXPECT_EQ(B.Aborts, 1);
}

// A long wait for compute alone (no call pending) is not a stuck collective.
TEST(DeviceWait, ALongComputeWaitDoesNotTimeOut) {
  FakeComm A;
  A.Busy = -1;
  std::vector<CommInFlight> Comms = {{&A, "world ranks 0,1", "ncclAllReduce"}};
  int Looks = 0;
  Status S = waitPolling(
      [&]() -> Expected<Progress> {
        return ++Looks < 400 ? Progress::Running : Progress::Done;
      },
      [&](double Waited) {
        return checkCommunicators(fakeApi(), Comms, Waited, 0.01, 0, "sync");
      });
  EXPECT_TRUE(S.ok()) << S.message();
  EXPECT_EQ(A.Aborts, 0);
}

// Work that completes ends the wait; nothing is aborted, and a look's own
// error (a CUDA error) is returned as it is.
TEST(DeviceWait, CompletedWorkEndsTheWaitAndErrorsPassThrough) {
  FakeComm A;
  std::vector<CommInFlight> Comms = {{&A, "world ranks 0,1", ""}};
  int Looks = 0;
  auto Check = [&](double Waited) {
    return checkCommunicators(fakeApi(), Comms, Waited, 600, 0, "sync");
  };
  Status S = waitPolling(
      [&]() -> Expected<Progress> {
        return ++Looks < 3 ? Progress::Running : Progress::Done;
      },
      Check);
  EXPECT_TRUE(S.ok()) << S.message();
  EXPECT_EQ(A.Aborts, 0);
  S = waitPolling(
      []() -> Expected<Progress> {
        return Status::error("cudaStreamQuery: an illegal memory access");
      },
      Check);
  ASSERT_FALSE(S.ok());
  EXPECT_EQ(S.message(), "cudaStreamQuery: an illegal memory access");
  EXPECT_EQ(A.Aborts, 0);
}

} // namespace
