//===- StagedCommTest.cpp - Collectives on device memory through staging --===//
//
// The staged communicator (runtime/comm/StagedCommunicator.h) over MPI, on
// a fake device: memory mapped PROT_NONE except while its queue works, so
// a host library handed a device pointer faults, and a queue that defers
// every copy to synchronize(), as an asynchronous device does, so a
// staging buffer read before the queue has run, or changed before a copy
// from it has run, gives wrong values. Registered under `mpirun -np 2`;
// every test holds for any world size (alone, the staged calls go through
// the local communicator). Values are small integers: every sum is exact
// in bf16 too, and results compare with ==.
//
//===----------------------------------------------------------------------===//
#include "program/Bf16.h"
#include "runtime/comm/Communicator.h"
#include "runtime/comm/StagedCommunicator.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

using namespace weft;

namespace {

Communicator *World = nullptr;

/// Memory the host cannot read or write except while Open.
class FakeDevice {
public:
  ~FakeDevice() {
    for (auto &[P, N] : Regions)
      munmap(P, N);
  }
  void *allocate(size_t Bytes) {
    const size_t Page = size_t(sysconf(_SC_PAGESIZE));
    size_t N = (std::max<size_t>(Bytes, 1) + Page - 1) / Page * Page;
    void *P = mmap(nullptr, N, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(P, MAP_FAILED);
    Regions[P] = N;
    return P;
  }
  void protect(int Prot) {
    for (auto &[P, N] : Regions)
      EXPECT_EQ(mprotect(P, N, Prot), 0);
  }

private:
  std::map<void *, size_t> Regions;
};

/// A queue on FakeDevice memory that runs its work only when synchronized,
/// with the memory open.
class DeferredQueue final : public Queue {
public:
  explicit DeferredQueue(FakeDevice &D) : Dev(D) {}
  bool hostMemory() const override { return false; }
  Status copyToDevice(void *D, const void *H, size_t N) override {
    return later([=] { std::memmove(D, H, N); });
  }
  Status copyToHost(void *H, const void *D, size_t N) override {
    return later([=] { std::memmove(H, D, N); });
  }
  Status copyOnDevice(void *D, const void *S, size_t N) override {
    return later([=] { std::memmove(D, S, N); });
  }
  Status fillZero(void *D, size_t N) override {
    return later([=] { std::memset(D, 0, N); });
  }
  Status record(Event &) override { return Status::success(); }
  Status waitFor(const Event &) override { return Status::success(); }
  Status synchronize() override {
    Dev.protect(PROT_READ | PROT_WRITE);
    for (auto &W : Work)
      W();
    Work.clear();
    Dev.protect(PROT_NONE);
    return Status::success();
  }
  size_t pending() const { return Work.size(); }

private:
  Status later(std::function<void()> W) {
    Work.push_back(std::move(W));
    return Status::success();
  }
  FakeDevice &Dev;
  std::vector<std::function<void()>> Work;
};

double value(int64_t Rank, int64_t I) {
  return double((Rank * 7 + I * 3) % 50);
}

std::vector<char> encode(DType T, const std::vector<double> &V) {
  std::vector<char> B(V.size() * dtypeBytes(T));
  for (size_t I = 0; I < V.size(); ++I) {
    if (T == DType::F32) {
      float F = float(V[I]);
      std::memcpy(&B[I * 4], &F, 4);
    } else if (T == DType::F64) {
      std::memcpy(&B[I * 8], &V[I], 8);
    } else {
      uint16_t H = floatToBf16(float(V[I]));
      std::memcpy(&B[I * 2], &H, 2);
    }
  }
  return B;
}

std::vector<double> decode(DType T, const std::vector<char> &B) {
  std::vector<double> V(B.size() / dtypeBytes(T));
  for (size_t I = 0; I < V.size(); ++I) {
    if (T == DType::F32) {
      float F;
      std::memcpy(&F, &B[I * 4], 4);
      V[I] = F;
    } else if (T == DType::F64) {
      std::memcpy(&V[I], &B[I * 8], 8);
    } else {
      uint16_t H;
      std::memcpy(&H, &B[I * 2], 2);
      V[I] = bf16ToFloat(H);
    }
  }
  return V;
}

/// One test's device, queue and helpers.
struct Fixture {
  FakeDevice Dev;
  DeferredQueue Q{Dev};
  DType T;
  explicit Fixture(DType T) : T(T) {}
  void *upload(const std::vector<double> &V) {
    void *P = Dev.allocate(V.size() * dtypeBytes(T));
    std::vector<char> B = encode(T, V);
    EXPECT_TRUE(Q.copyToDevice(P, B.data(), B.size()).ok());
    EXPECT_TRUE(Q.synchronize().ok());
    return P;
  }
  std::vector<double> download(const void *P, size_t Count) {
    std::vector<char> B(Count * dtypeBytes(T));
    EXPECT_TRUE(Q.copyToHost(B.data(), P, B.size()).ok());
    EXPECT_TRUE(Q.synchronize().ok());
    return decode(T, B);
  }
};

int rank() { return World->rank(); }
int size() { return World->size(); }

const CommGroup &worldGroup() {
  Mesh M;
  M.Axes = {"w"};
  M.Dims = {World->size()};
  return **World->group(M, {"w"});
}

/// value(Rank, Offset + I) for I < Count.
std::vector<double> values(int64_t Rank, size_t Count, size_t Offset = 0) {
  std::vector<double> V(Count);
  for (size_t I = 0; I < Count; ++I)
    V[I] = value(Rank, int64_t(Offset + I));
  return V;
}

std::vector<double> sums(size_t Count, size_t Offset = 0) {
  std::vector<double> V(Count, 0.0);
  for (int R = 0; R < size(); ++R)
    for (size_t I = 0; I < Count; ++I)
      V[I] += value(R, int64_t(Offset + I));
  return V;
}

std::vector<double> gathered(size_t Count) {
  std::vector<double> V;
  for (int R = 0; R < size(); ++R) {
    std::vector<double> C = values(R, Count);
    V.insert(V.end(), C.begin(), C.end());
  }
  return V;
}

const DType Types[] = {DType::F32, DType::F64, DType::BF16};
// Small, and past the MPI communicator's shared-memory threshold (4 KiB).
const size_t Counts[] = {5, 3000};

#define EACH_CASE                                                              \
  for (DType T : Types)                                                        \
    for (size_t Count : Counts)
#define WHERE dtypeName(T) << " count " << Count

TEST(StagedComm, NameSaysStaged) {
  EXPECT_EQ(std::string(World->name()).rfind("staged-", 0), 0u)
      << World->name();
}

TEST(StagedComm, AllReduce) {
  const CommGroup &G = worldGroup();
  EACH_CASE {
    Fixture F(T);
    void *Send = F.upload(values(rank(), Count));
    void *Recv = F.upload(std::vector<double>(Count, -1.0));
    Status S = World->allReduce(G, Send, Recv, Count, T, F.Q);
    ASSERT_TRUE(S.ok()) << S.message();
    EXPECT_EQ(F.Q.pending(), 0u) << WHERE; // its copy back was synchronized
    EXPECT_EQ(F.download(Recv, Count), sums(Count)) << WHERE;
    EXPECT_EQ(F.download(Send, Count), values(rank(), Count)) << WHERE;
    // In place.
    S = World->allReduce(G, Send, Send, Count, T, F.Q);
    ASSERT_TRUE(S.ok()) << S.message();
    EXPECT_EQ(F.download(Send, Count), sums(Count)) << WHERE;
  }
}

TEST(StagedComm, IallReduceThenWait) {
  const CommGroup &G = worldGroup();
  EACH_CASE {
    Fixture F(T);
    void *Send = F.upload(values(rank(), Count));
    void *Recv = F.upload(std::vector<double>(Count, -1.0));
    CommRequest R;
    Status S = World->reserveRequest(R, Count, T);
    ASSERT_TRUE(S.ok()) << S.message();
    for (int Round = 0; Round < 2; ++Round) { // a request starts again
      S = World->iallReduce(G, Send, Recv, Count, T, F.Q, R);
      ASSERT_TRUE(S.ok()) << S.message();
      S = World->wait(R, F.Q);
      ASSERT_TRUE(S.ok()) << S.message();
      EXPECT_FALSE(R.Active);
      EXPECT_EQ(F.download(Recv, Count), sums(Count)) << WHERE;
    }
    // In place, completed by test().
    S = World->iallReduce(G, Send, Send, Count, T, F.Q, R);
    ASSERT_TRUE(S.ok()) << S.message();
    bool Done = false;
    while (!Done) {
      S = World->test(R, Done);
      ASSERT_TRUE(S.ok()) << S.message();
    }
    EXPECT_FALSE(R.Active);
    S = World->wait(R, F.Q); // inactive: at once
    ASSERT_TRUE(S.ok()) << S.message();
    EXPECT_EQ(F.download(Send, Count), sums(Count)) << WHERE;
  }
}

TEST(StagedComm, AllGather) {
  const CommGroup &G = worldGroup();
  EACH_CASE {
    Fixture F(T);
    const size_t Total = Count * size_t(size());
    void *Send = F.upload(values(rank(), Count));
    void *Recv = F.upload(std::vector<double>(Total, -1.0));
    Status S = World->allGather(G, Send, Recv, Count, T, F.Q);
    ASSERT_TRUE(S.ok()) << S.message();
    EXPECT_EQ(F.download(Recv, Total), gathered(Count)) << WHERE;
    // In place: this rank's chunk is already at its place.
    std::vector<double> Mine(Total, -1.0);
    for (size_t I = 0; I < Count; ++I)
      Mine[size_t(rank()) * Count + I] = value(rank(), int64_t(I));
    void *InPlace = F.upload(Mine);
    S = World->allGather(G, nullptr, InPlace, Count, T, F.Q);
    ASSERT_TRUE(S.ok()) << S.message();
    EXPECT_EQ(F.download(InPlace, Total), gathered(Count)) << WHERE;
  }
}

TEST(StagedComm, IallGatherThenWait) {
  const CommGroup &G = worldGroup();
  EACH_CASE {
    Fixture F(T);
    const size_t Total = Count * size_t(size());
    void *Send = F.upload(values(rank(), Count));
    void *Recv = F.upload(std::vector<double>(Total, -1.0));
    CommRequest R;
    Status S = World->reserveRequest(R, Count, T);
    ASSERT_TRUE(S.ok()) << S.message();
    S = World->iallGather(G, Send, Recv, Count, T, F.Q, R);
    ASSERT_TRUE(S.ok()) << S.message();
    S = World->wait(R, F.Q);
    ASSERT_TRUE(S.ok()) << S.message();
    EXPECT_EQ(F.download(Recv, Total), gathered(Count)) << WHERE;

    std::vector<double> Mine(Total, -1.0);
    for (size_t I = 0; I < Count; ++I)
      Mine[size_t(rank()) * Count + I] = value(rank(), int64_t(I));
    void *InPlace = F.upload(Mine);
    S = World->iallGather(G, nullptr, InPlace, Count, T, F.Q, R);
    ASSERT_TRUE(S.ok()) << S.message();
    S = World->wait(R, F.Q);
    ASSERT_TRUE(S.ok()) << S.message();
    EXPECT_EQ(F.download(InPlace, Total), gathered(Count)) << WHERE;
  }
}

TEST(StagedComm, ReduceScatter) {
  const CommGroup &G = worldGroup();
  EACH_CASE {
    Fixture F(T);
    const size_t Total = Count * size_t(size());
    void *Send = F.upload(values(rank(), Total));
    void *Recv = F.upload(std::vector<double>(Count, -1.0));
    Status S = World->reduceScatter(G, Send, Recv, Count, T, F.Q);
    ASSERT_TRUE(S.ok()) << S.message();
    EXPECT_EQ(F.download(Recv, Count), sums(Count, size_t(G.Rank) * Count))
        << WHERE;
  }
}

TEST(StagedComm, BroadcastFromEachEnd) {
  const CommGroup &G = worldGroup();
  EACH_CASE {
    for (int Root : {0, size() - 1}) {
      Fixture F(T);
      void *Buf = F.upload(G.Rank == Root ? values(Root, Count)
                                          : std::vector<double>(Count, -1.0));
      Status S = World->broadcast(G, Buf, Count, T, Root, F.Q);
      ASSERT_TRUE(S.ok()) << S.message();
      EXPECT_EQ(F.download(Buf, Count), values(Root, Count))
          << WHERE << " root " << Root;
    }
  }
}

TEST(StagedComm, ReduceToRootOnly) {
  const CommGroup &G = worldGroup();
  EACH_CASE {
    const int Root = size() - 1;
    Fixture F(T);
    void *Send = F.upload(values(rank(), Count));
    void *Recv = F.upload(std::vector<double>(Count, -1.0));
    Status S = World->reduce(G, Send, Recv, Count, T, Root, F.Q);
    ASSERT_TRUE(S.ok()) << S.message();
    EXPECT_EQ(F.download(Recv, Count),
              G.Rank == Root ? sums(Count) : std::vector<double>(Count, -1.0))
        << WHERE;
    // In place on the root.
    S = World->reduce(G, Send, Send, Count, T, Root, F.Q);
    ASSERT_TRUE(S.ok()) << S.message();
    EXPECT_EQ(F.download(Send, Count),
              G.Rank == Root ? sums(Count) : values(rank(), Count))
        << WHERE;
  }
}

// A ring: each rank sends two buffers (of different sizes) to the next and
// receives two from the previous, posted in one call, sends listed first on
// every rank.
TEST(StagedComm, TransfersAroundARing) {
  const CommGroup &G = worldGroup();
  EACH_CASE {
    Fixture F(T);
    const int Next = (G.Rank + 1) % G.Size;
    const int Prev = (G.Rank + G.Size - 1) % G.Size;
    const size_t Small = 7;
    void *SendA = F.upload(values(rank(), Count));
    void *SendB = F.upload(values(rank(), Small, 100));
    void *RecvA = F.upload(std::vector<double>(Count, -1.0));
    void *RecvB = F.upload(std::vector<double>(Small, -1.0));
    std::vector<Transfer> Ops = {
        {Transfer::Send, Next, SendA, Count, T},
        {Transfer::Send, Next, SendB, Small, T},
        {Transfer::Recv, Prev, RecvA, Count, T},
        {Transfer::Recv, Prev, RecvB, Small, T},
    };
    CommRequest R;
    for (int Round = 0; Round < 2; ++Round) {
      Status S = World->startTransfers(G, Ops, F.Q, R);
      ASSERT_TRUE(S.ok()) << S.message();
      S = World->wait(R, F.Q);
      ASSERT_TRUE(S.ok()) << S.message();
      EXPECT_FALSE(R.Active);
      EXPECT_EQ(F.download(RecvA, Count),
                values(G.Members[size_t(Prev)], Count))
          << WHERE;
      EXPECT_EQ(F.download(RecvB, Small),
                values(G.Members[size_t(Prev)], Small, 100))
          << WHERE;
    }
  }
}

// Calls on the host queue are the host communicator's, unchanged.
TEST(StagedComm, HostQueueCallsAreForwarded) {
  const CommGroup &G = worldGroup();
  std::vector<double> V = values(rank(), 10);
  Status S = World->allReduce(G, V.data(), V.data(), V.size(), DType::F64,
                              hostQueue());
  ASSERT_TRUE(S.ok()) << S.message();
  EXPECT_EQ(V, sums(10));
  std::vector<double> All(10 * size_t(size()), -1.0);
  CommRequest R;
  std::vector<double> Mine = values(rank(), 10);
  S = World->iallGather(G, Mine.data(), All.data(), 10, DType::F64, hostQueue(),
                        R);
  ASSERT_TRUE(S.ok()) << S.message();
  S = World->wait(R, hostQueue());
  ASSERT_TRUE(S.ok()) << S.message();
  EXPECT_EQ(All, gathered(10));
}

TEST(StagedComm, ErrorsNameTheCall) {
  const CommGroup &G = worldGroup();
  Fixture F(DType::F32);
  void *Buf = F.upload(values(rank(), 4));
  CommRequest R;
  std::vector<Transfer> Bad = {{Transfer::Send, G.Size, Buf, 4, DType::F32}};
  Status S = World->startTransfers(G, Bad, F.Q, R);
  ASSERT_FALSE(S.ok());
  EXPECT_EQ(S.message().rfind("staged startTransfers: transfers[0]: send to "
                              "peer " +
                                  std::to_string(G.Size),
                              0),
            0u)
      << S.message();
  EXPECT_FALSE(R.Active);
  if (size() > 1) {
    // An all-reduce with peers is in flight until waited for.
    S = World->iallReduce(G, Buf, Buf, 4, DType::F32, F.Q, R);
    ASSERT_TRUE(S.ok()) << S.message();
    ASSERT_TRUE(R.Active);
    Status Again = World->iallReduce(G, Buf, Buf, 4, DType::F32, F.Q, R);
    EXPECT_EQ(Again.message().rfind("staged iallReduce: the request is still "
                                    "in flight",
                                    0),
              0u)
        << Again.message();
    S = World->wait(R, F.Q);
    ASSERT_TRUE(S.ok()) << S.message();
    EXPECT_EQ(F.download(Buf, 4), sums(4));
  }
}

} // namespace

int main(int Argc, char **Argv) {
  ::testing::InitGoogleTest(&Argc, Argv);
  Expected<std::unique_ptr<Communicator>> C = createCommunicator();
  if (!C.ok()) {
    std::fprintf(stderr, "weft-staged-comm-tests: %s\n", C.message().c_str());
    return 1;
  }
  std::unique_ptr<Communicator> Staged = createStagedCommunicator(C.take());
  World = Staged.get();
  // Only rank 0 reports; every rank's exit code counts.
  if (World->rank() != 0) {
    auto &L = ::testing::UnitTest::GetInstance()->listeners();
    delete L.Release(L.default_result_printer());
  }
  return RUN_ALL_TESTS();
}
