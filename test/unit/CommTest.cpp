//===- CommTest.cpp - Collectives, groups, sharded training under mpirun --===//
//
// Registered as `mpirun -np 2` and `-np 4` (test/unit/CMakeLists.txt). Every
// rank runs every test; the serial reference is computed on each rank from
// values that depend only on (rank, index). Without MPI, or started without
// mpirun, the tests skip.
//
//===----------------------------------------------------------------------===//
#include "HostState.h"
#include "program/Bf16.h"
#include "program/Shard.h"
#include "runtime/Executor.h"
#include "runtime/Trainer.h"
#include "runtime/TrainingChecks.h"
#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/checkpoint/Safetensors.h"
#include "runtime/comm/Communicator.h"
#include "runtime/data/Data.h"
#include "test/unit/MeshPrograms.h"
#include "test/unit/TestPrograms.h"

#ifdef WEFT_HAVE_MPI
#include "runtime/comm/MpiTypes.h"
#endif

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

using namespace weft;
using namespace weft::test;

namespace {

Communicator *World = nullptr;

#define NEED_RANKS(N)                                                          \
  do {                                                                         \
    if (!haveMpi())                                                            \
      GTEST_SKIP() << "built without MPI";                                     \
    if (!World || World->size() == 1)                                          \
      GTEST_SKIP() << "needs mpirun (world size 1)";                           \
    if ((N) > 0 && World->size() != (N))                                       \
      GTEST_SKIP() << "needs exactly " << (N) << " ranks, world has "          \
                   << World->size();                                           \
  } while (false)

float value(int64_t Rank, int64_t I) { return float(Rank * 1000 + I) * 0.5f; }

const CommGroup &worldGroup() {
  return **World->group(Mesh{{"w"}, {World->size()}}, {"w"});
}

TEST(MpiTypes, F32IsMpiFloat) {
#ifdef WEFT_HAVE_MPI
  EXPECT_EQ(mpi::datatype(DType::F32), MPI_FLOAT);
#else
  GTEST_SKIP() << "built without MPI";
#endif
}
TEST(MpiTypes, F64IsMpiDouble) {
#ifdef WEFT_HAVE_MPI
  EXPECT_EQ(mpi::datatype(DType::F64), MPI_DOUBLE);
#else
  GTEST_SKIP() << "built without MPI";
#endif
}
TEST(MpiTypes, I32IsMpiInt32) {
#ifdef WEFT_HAVE_MPI
  EXPECT_EQ(mpi::datatype(DType::I32), MPI_INT32_T);
#else
  GTEST_SKIP() << "built without MPI";
#endif
}
TEST(MpiTypes, SumIsMpiSum) {
#ifdef WEFT_HAVE_MPI
  EXPECT_EQ(mpi::reduceOp(ReduceOp::Sum), MPI_SUM);
#else
  GTEST_SKIP() << "built without MPI";
#endif
}
TEST(MpiTypes, EveryDTypeHasARow) {
#ifdef WEFT_HAVE_MPI
  EXPECT_EQ(std::size(mpi::DTypeTable), 4u);
  for (DType T : {DType::F32, DType::F64, DType::I32, DType::BF16})
    EXPECT_NE(mpi::datatype(T), MPI_DATATYPE_NULL) << dtypeName(T);
#else
  GTEST_SKIP() << "built without MPI";
#endif
}

// Blocking all-reduce, reduce-scatter and all-gather of large messages
// within a node take the shared-memory path (runtime/comm/ShmCollectives.h),
// which moves a message through two small slots per rank in pipeline steps.
// Values are small integers, so every sum is exact and results compare
// with ==.
double ival(int64_t Rank, int64_t I) {
  return double((Rank * 131 + I * 7) % 1000);
}

enum class Coll { AllReduce, ReduceScatter, AllGather };

struct CollCase {
  Coll Kind;
  DType T;
  size_t Count; // all-reduce: the message; the others: one rank's block
  bool InPlace;
};

std::string describe(const CollCase &C) {
  const char *K = C.Kind == Coll::AllReduce       ? "all-reduce"
                  : C.Kind == Coll::ReduceScatter ? "reduce-scatter"
                                                  : "all-gather";
  return std::string(K) + " " + dtypeName(C.T) + " count " +
         std::to_string(C.Count) + (C.InPlace ? " in place" : "");
}

/// Index of the first difference, or -1.
template <typename T>
int64_t firstMismatch(const std::vector<T> &Got, const std::vector<T> &Want) {
  if (Got.size() != Want.size())
    return 0;
  for (size_t I = 0; I < Got.size(); ++I)
    if (Got[I] != Want[I])
      return int64_t(I);
  return -1;
}

/// Runs C on group G of Comm and compares with the serial reference.
template <typename T>
void checkCase(Communicator &Comm, const CommGroup &G, const CollCase &C) {
  SCOPED_TRACE(describe(C) + " on " + std::to_string(G.Size) + " ranks");
  const int64_t N = G.Size, R = G.Rank, Count = int64_t(C.Count);
  std::vector<T> Got, Want;
  switch (C.Kind) {
  case Coll::AllReduce: {
    std::vector<T> X(C.Count), Y(C.Count, T(-1));
    Want.assign(C.Count, T(0));
    for (int64_t I = 0; I < Count; ++I) {
      X[I] = T(ival(R, I));
      for (int64_t Q = 0; Q < N; ++Q)
        Want[I] += T(ival(Q, I));
    }
    T *Out = C.InPlace ? X.data() : Y.data();
    ASSERT_TRUE(
        Comm.allReduce(G, X.data(), Out, C.Count, C.T, hostQueue()).ok());
    Got = C.InPlace ? X : Y;
    break;
  }
  case Coll::ReduceScatter: {
    std::vector<T> X(size_t(N * Count));
    Got.assign(C.Count, T(-1));
    Want.assign(C.Count, T(0));
    for (int64_t I = 0; I < N * Count; ++I)
      X[I] = T(ival(R, I));
    for (int64_t I = 0; I < Count; ++I)
      for (int64_t Q = 0; Q < N; ++Q)
        Want[I] += T(ival(Q, R * Count + I));
    ASSERT_TRUE(
        Comm.reduceScatter(G, X.data(), Got.data(), C.Count, C.T, hostQueue())
            .ok());
    break;
  }
  case Coll::AllGather: {
    std::vector<T> X(C.Count);
    Got.assign(size_t(N * Count), T(-1));
    Want.resize(size_t(N * Count));
    for (int64_t I = 0; I < Count; ++I)
      X[I] = T(ival(R, I));
    for (int64_t Q = 0; Q < N; ++Q)
      for (int64_t I = 0; I < Count; ++I)
        Want[Q * Count + I] = T(ival(Q, I));
    if (C.InPlace)
      std::copy(X.begin(), X.end(), Got.begin() + R * Count);
    ASSERT_TRUE(Comm.allGather(G, C.InPlace ? nullptr : X.data(), Got.data(),
                               C.Count, C.T, hostQueue())
                    .ok());
    break;
  }
  }
  int64_t At = firstMismatch(Got, Want);
  EXPECT_EQ(At, -1) << "element " << At << ": got "
                    << (At >= 0 ? double(Got[At]) : 0) << ", want "
                    << (At >= 0 ? double(Want[At]) : 0);
}

void checkCase(Communicator &Comm, const CommGroup &G, const CollCase &C) {
  switch (C.T) {
  case DType::F32:
    return checkCase<float>(Comm, G, C);
  case DType::F64:
    return checkCase<double>(Comm, G, C);
  case DType::I32:
    return checkCase<int32_t>(Comm, G, C);
  }
}

/// A second MPI communicator (MPI is already initialised, so it does not
/// own it) made under the given environment: WEFT_SHM_MIN_KB and
/// WEFT_SHM_SLOT_KB are read when a communicator is made.
std::unique_ptr<Communicator> communicatorWith(const char *MinKB,
                                               const char *SlotKB) {
  setenv("WEFT_SHM_MIN_KB", MinKB, 1);
  setenv("WEFT_SHM_SLOT_KB", SlotKB, 1);
  Expected<std::unique_ptr<Communicator>> C = createCommunicator();
  unsetenv("WEFT_SHM_MIN_KB");
  unsetenv("WEFT_SHM_SLOT_KB");
  return C.ok() ? std::move(*C) : nullptr;
}

/// Every combination the shared-memory path serves, back to back without a
/// barrier between calls (the slots alternate across calls): counts of
/// 1 element, below one slot, not divisible by the slot or the rank count,
/// and many slots long.
std::vector<CollCase> mixedCases(size_t Long) {
  std::vector<CollCase> Cases;
  for (size_t Count : {size_t(1), size_t(7), size_t(1000), size_t(4099), Long})
    for (DType T : {DType::F32, DType::F64}) {
      Cases.push_back({Coll::AllReduce, T, Count, false});
      Cases.push_back({Coll::AllReduce, T, Count + 3, true});
      Cases.push_back({Coll::ReduceScatter, T, Count + 1, false});
      Cases.push_back({Coll::AllGather, T, Count, false});
      Cases.push_back({Coll::AllGather, T, Count + 5, true});
    }
  Cases.push_back({Coll::AllGather, DType::I32, 12347, false});
  Cases.push_back({Coll::AllGather, DType::I32, 3, true});
  return Cases;
}

// Small slots (4 KiB: 2 KiB regions on 2 ranks, 1 KiB on 4) and no size
// threshold: every call runs through the shared-memory path in many steps.
TEST(Comm, ShmCollectivesInSmallSlotsMatchASerialReference) {
  NEED_RANKS(0);
  std::unique_ptr<Communicator> C = communicatorWith("0", "4");
  ASSERT_TRUE(C);
  const CommGroup &G = **C->group(Mesh{{"w"}, {C->size()}}, {"w"});
  for (const CollCase &Case : mixedCases(100003))
    checkCase(*C, G, Case);
  // The same again in the other order: other slot parities per call.
  std::vector<CollCase> Cases = mixedCases(50001);
  for (auto It = Cases.rbegin(); It != Cases.rend(); ++It)
    checkCase(*C, G, *It);
}

// Groups that are not the world: each has its own windows, ranked by shard
// index.
TEST(Comm, ShmCollectivesOnSubGroupsOf2x2) {
  NEED_RANKS(4);
  std::unique_ptr<Communicator> C = communicatorWith("0", "4");
  ASSERT_TRUE(C);
  const Mesh M{{"dp", "tp"}, {2, 2}};
  for (const AxesList &Axes : {AxesList{"dp"}, AxesList{"tp"}}) {
    const CommGroup &G = **C->group(M, Axes);
    ASSERT_EQ(G.Size, 2);
    for (const CollCase &Case : mixedCases(20011))
      checkCase(*C, G, Case);
  }
}

// The default slot size and threshold, as the runtime runs them: 12 MiB
// messages of f32 (3 * 2^20 + 7 elements, divisible by neither the slot
// nor the rank count) and 24 MiB of f64 (Recv is written with non-temporal
// stores from 16 MiB), then, back to back, messages just above the 4 KiB
// threshold and below one slot, and one just below the threshold (plain MPI).
TEST(Comm, LargeCollectivesMatchASerialReference) {
  NEED_RANKS(0);
  const CommGroup &G = worldGroup();
  const size_t N = size_t(G.Size), Count = (size_t(3) << 20) + 7;
  for (DType T : {DType::F32, DType::F64})
    for (bool InPlace : {false, true}) {
      checkCase(*World, G, {Coll::AllReduce, T, Count, InPlace});
      checkCase(*World, G, {Coll::AllGather, T, Count / N, InPlace});
    }
  for (DType T : {DType::F32, DType::F64})
    checkCase(*World, G, {Coll::ReduceScatter, T, Count / N, false});
  // 20 MiB of f32: reduce-scatter's non-temporal f32 sums.
  checkCase(
      *World, G,
      {Coll::ReduceScatter, DType::F32, (size_t(5) << 20) / N + 3, false});
  for (size_t Small : {size_t(1025), size_t(5001), size_t(1023)}) {
    checkCase(*World, G, {Coll::AllReduce, DType::F32, Small, true});
    checkCase(*World, G, {Coll::ReduceScatter, DType::F32, Small / N, false});
    checkCase(*World, G, {Coll::AllGather, DType::F32, Small / N + 1, false});
    checkCase(*World, G, {Coll::AllReduce, DType::F64, Small, false});
  }
}

TEST(Comm, CollectivesMatchASerialReference) {
  NEED_RANKS(0);
  const int N = World->size(), R = World->rank();
  const CommGroup &G = worldGroup();
  ASSERT_EQ(G.Size, N);
  const int64_t Count = 1000;
  std::vector<float> X(Count), Y(Count * N);
  for (int64_t I = 0; I < Count; ++I)
    X[I] = value(R, I);
  // all_reduce, out of place and in place.
  ASSERT_TRUE(
      World->allReduce(G, X.data(), Y.data(), Count, DType::F32, hostQueue())
          .ok());
  for (int64_t I = 0; I < Count; ++I) {
    float Want = 0;
    for (int Q = 0; Q < N; ++Q)
      Want += value(Q, I);
    ASSERT_EQ(Y[I], Want) << I;
  }
  std::vector<float> Z = X;
  ASSERT_TRUE(
      World->allReduce(G, Z.data(), Z.data(), Count, DType::F32, hostQueue())
          .ok());
  EXPECT_EQ(std::vector<float>(Y.begin(), Y.begin() + Count), Z);
  // all_gather, out of place and in place.
  ASSERT_TRUE(
      World->allGather(G, X.data(), Y.data(), Count, DType::F32, hostQueue())
          .ok());
  for (int Q = 0; Q < N; ++Q)
    for (int64_t I = 0; I < Count; ++I)
      ASSERT_EQ(Y[Q * Count + I], value(Q, I));
  std::vector<float> In(Count * N, -1);
  std::copy(X.begin(), X.end(), In.begin() + R * Count);
  ASSERT_TRUE(
      World->allGather(G, nullptr, In.data(), Count, DType::F32, hostQueue())
          .ok());
  EXPECT_EQ(In, Y);
  // reduce_scatter: chunk R of the sum of every rank's [N*Count].
  std::vector<double> Big(Count * N), Out(Count);
  for (int64_t I = 0; I < Count * N; ++I)
    Big[I] = double(value(R, I));
  ASSERT_TRUE(World
                  ->reduceScatter(G, Big.data(), Out.data(), Count, DType::F64,
                                  hostQueue())
                  .ok());
  for (int64_t I = 0; I < Count; ++I) {
    double Want = 0;
    for (int Q = 0; Q < N; ++Q)
      Want += double(value(Q, R * Count + I));
    ASSERT_EQ(Out[I], Want);
  }
  // broadcast from the last rank, reduce to rank 0, send/recv in a ring.
  std::vector<int32_t> B(10, R);
  ASSERT_TRUE(
      World->broadcast(G, B.data(), 10, DType::I32, N - 1, hostQueue()).ok());
  EXPECT_EQ(B, std::vector<int32_t>(10, N - 1));
  std::vector<int32_t> One(3, R + 1), Sum(3, 0);
  ASSERT_TRUE(
      World->reduce(G, One.data(), Sum.data(), 3, DType::I32, 0, hostQueue())
          .ok());
  if (R == 0)
    EXPECT_EQ(Sum, std::vector<int32_t>(3, N * (N + 1) / 2));
  int32_t Msg = R * 10, Got = -1;
  CommRequest Ring;
  std::vector<Transfer> Ops = {
      {Transfer::Send, (R + 1) % N, &Msg, 1, DType::I32},
      {Transfer::Recv, (R + N - 1) % N, &Got, 1, DType::I32}};
  ASSERT_TRUE(World->startTransfers(G, Ops, hostQueue(), Ring).ok());
  ASSERT_TRUE(World->wait(Ring, hostQueue()).ok());
  EXPECT_EQ(Got, ((R + N - 1) % N) * 10);
  EXPECT_TRUE(World->barrier(G).ok());
}

// 1F1B's steady state: every stage sends an activation to the next stage
// and a gradient to the previous one while receiving both, each rank
// listing its receives last. Blocking sends of messages this large (above
// every eager limit) would deadlock; one grouped start cannot. Messages
// between a pair match in the order they were started, with no tags: the
// second transfer to a peer carries the second message.
void checkGroupedTransfers(Communicator &C, const CommGroup &G) {
  const int N = G.Size, R = G.Rank;
  const size_t Count = size_t(1) << 20; // 4 MiB of f32 per message
  const int Next = (R + 1) % N, Prev = (R + N - 1) % N;
  std::vector<float> ToNext1(Count, float(R) + 0.25f),
      ToNext2(Count, float(R) + 0.5f), ToPrev(Count, float(-R));
  std::vector<float> FromPrev1(Count, -1), FromPrev2(Count, -1),
      FromNext(Count, -1);
  std::vector<Transfer> Ops = {
      {Transfer::Send, Next, ToNext1.data(), Count, DType::F32},
      {Transfer::Send, Prev, ToPrev.data(), Count, DType::F32},
      {Transfer::Send, Next, ToNext2.data(), Count, DType::F32},
      {Transfer::Recv, Prev, FromPrev1.data(), Count, DType::F32},
      {Transfer::Recv, Next, FromNext.data(), Count, DType::F32},
      {Transfer::Recv, Prev, FromPrev2.data(), Count, DType::F32}};
  if (N == 1) {
    // Alone, this rank is its own neighbour: its sends to itself pair
    // with its receives from itself in order, as in a ring of N.
    Ops = {Ops[0], Ops[2], Ops[3], Ops[5]};
    FromNext.assign(Count, 0.0f);
  }
  CommRequest Req;
  Status S = C.startTransfers(G, Ops, hostQueue(), Req);
  ASSERT_TRUE(S.ok()) << S.message();
  S = C.wait(Req, hostQueue());
  ASSERT_TRUE(S.ok()) << S.message();
  EXPECT_FALSE(Req.Active);
  for (size_t I = 0; I < Count; I += 4099) {
    ASSERT_EQ(FromPrev1[I], float(Prev) + 0.25f) << I;
    ASSERT_EQ(FromPrev2[I], float(Prev) + 0.5f) << I;
    if (N > 1)
      ASSERT_EQ(FromNext[I], float(-Next)) << I;
  }
  // A request can start again once it is complete.
  ASSERT_TRUE(C.startTransfers(G, Ops, hostQueue(), Req).ok());
  ASSERT_TRUE(C.wait(Req, hostQueue()).ok());
}

TEST(Comm, GroupedTransfersCannotDeadlockAndKeepTheirOrder) {
  NEED_RANKS(0);
  checkGroupedTransfers(*World, worldGroup());
}

TEST(Comm, LocalTransfersPairSendsWithReceivesInOrder) {
  std::unique_ptr<Communicator> Local = createLocalCommunicator();
  Expected<const CommGroup *> G = Local->group(Mesh(), {});
  ASSERT_TRUE(G.ok());
  checkGroupedTransfers(*Local, **G);
  // A send to itself with no receive would never complete.
  float X = 1;
  CommRequest Req;
  Status S = Local->startTransfers(
      **G, {{Transfer::Send, 0, &X, 1, DType::F32}}, hostQueue(), Req);
  ASSERT_FALSE(S.ok());
  EXPECT_NE(S.message().find("1 send(s) to and 0 receive(s)"),
            std::string::npos)
      << S.message();
}
TEST(Comm, TransfersToAPeerOutsideTheGroupAreRefused) {
  NEED_RANKS(0);
  const CommGroup &G = worldGroup();
  float X = 0;
  CommRequest Req;
  Status S = World->startTransfers(
      G, {{Transfer::Send, G.Size, &X, 1, DType::F32}}, hostQueue(), Req);
  ASSERT_FALSE(S.ok());
  EXPECT_NE(
      S.message().find("transfers[0]: send to peer " + std::to_string(G.Size)),
      std::string::npos)
      << S.message();
  EXPECT_FALSE(Req.Active);
}

// bf16 (mixed precision's tensor-parallel activations): MPI has no such type,
// so sums go through weft's own op, f32 adds rounded to bf16. Small integers
// are exact in bf16; 1.1 is not, and N ranks' bf16(1.1) add up to N times it
// within bf16's rounding (the order of the adds is MPI's).
TEST(Comm, Bf16SumsAddInF32AndRound) {
  NEED_RANKS(0);
  const int N = World->size(), R = World->rank();
  const CommGroup &G = worldGroup();
  const size_t Count = 3000; // past the shared-memory threshold too
  std::vector<uint16_t> X(Count), Y(Count);
  for (size_t I = 0; I < Count; ++I)
    X[I] = floatToBf16(float(int(I % 7) + R));
  ASSERT_TRUE(
      World->allReduce(G, X.data(), Y.data(), Count, DType::BF16, hostQueue())
          .ok());
  for (size_t I = 0; I < Count; ++I)
    ASSERT_EQ(bf16ToFloat(Y[I]), float(N * int(I % 7) + N * (N - 1) / 2)) << I;
  std::vector<uint16_t> Block(Count / size_t(N));
  std::vector<uint16_t> Full(Block.size() * size_t(N));
  for (size_t I = 0; I < Full.size(); ++I)
    Full[I] = floatToBf16(float(I % 5));
  ASSERT_TRUE(World
                  ->reduceScatter(G, Full.data(), Block.data(), Block.size(),
                                  DType::BF16, hostQueue())
                  .ok());
  for (size_t I = 0; I < Block.size(); ++I)
    ASSERT_EQ(bf16ToFloat(Block[I]),
              float(N * int((size_t(R) * Block.size() + I) % 5)))
        << I;
  uint16_t One = floatToBf16(1.1f), Sum = 0;
  ASSERT_TRUE(
      World->allReduce(G, &One, &Sum, 1, DType::BF16, hostQueue()).ok());
  const float Want = float(N) * bf16ToFloat(One);
  EXPECT_NEAR(bf16ToFloat(Sum), Want, Want * 0x1p-7);
  EXPECT_NE(bf16ToFloat(Sum), 0.0f);
}

// Completes Req by testing alone (round 0) or by waiting (later rounds).
void complete(CommRequest &Req, int Round) {
  if (Round == 0) {
    bool Done = false;
    while (!Done)
      ASSERT_TRUE(World->test(Req, Done).ok());
  } else {
    ASSERT_TRUE(World->wait(Req, hostQueue()).ok());
  }
  EXPECT_FALSE(Req.Active);
}

TEST(Comm, NonblockingAllReduceInChunks) {
  NEED_RANKS(0);
  const int N = World->size(), R = World->rank();
  const CommGroup &G = worldGroup();
  // 600000 floats: three 1 MiB chunks, the last one partial.
  const int64_t Count = 600000;
  std::vector<float> X(Count), Y(Count, -1);
  for (int64_t I = 0; I < Count; ++I)
    X[I] = float((R + 1) * (I % 1000));
  CommRequest Req;
  ASSERT_TRUE(World->reserveRequest(Req, Count, DType::F32).ok());
  for (int Round = 0; Round < 2; ++Round) {
    std::fill(Y.begin(), Y.end(), -1.0f);
    ASSERT_TRUE(World
                    ->iallReduce(G, X.data(), Y.data(), Count, DType::F32,
                                 hostQueue(), Req)
                    .ok());
    // Over MPI (WEFT_NO_SHM=1: the comm-mpirun-np2-no-shm test) the chunks
    // are in flight; through shared memory, on one node, the reduction
    // completed at its start.
    if (std::getenv("WEFT_NO_SHM"))
      EXPECT_TRUE(Req.Active);
    if (Req.Active) {
      Status Again = World->iallReduce(G, X.data(), Y.data(), Count, DType::F32,
                                       hostQueue(), Req);
      EXPECT_FALSE(Again.ok());
    }
    complete(Req, Round);
    for (int64_t I = 0; I < Count; ++I)
      ASSERT_EQ(Y[I], float(N * (N + 1) / 2 * (I % 1000))) << I;
  }
  bool Done = false;
  ASSERT_TRUE(World->test(Req, Done).ok()); // inactive: done
  EXPECT_TRUE(Done);
  ASSERT_TRUE(World->wait(Req, hostQueue()).ok());
}

// Several nonblocking collectives in flight at once, of odd counts, waited
// for in the reverse order. On a group across nodes (two_nodes.py runs this
// binary on two simulated nodes, WEFT_EXPECT_NODES=2) they run
// hierarchically, each step on its own communicator in the order the ops
// started: a step started in another order on one rank would mismatch.
TEST(Comm, ManyNonblockingCollectivesInFlight) {
  NEED_RANKS(0);
  const int N = World->size(), R = World->rank();
  const CommGroup &G = worldGroup();
  if (const char *Nodes = std::getenv("WEFT_EXPECT_NODES")) {
    EXPECT_EQ(G.spread().Nodes, std::atoi(Nodes));
    EXPECT_TRUE(G.Hierarchical);
  }
  const int64_t Counts[3] = {300001, 7, 65537}; // none a multiple of ranks
  std::vector<std::vector<double>> X(3), Y(3);
  std::vector<std::vector<float>> GX(2), GY(2);
  std::vector<CommRequest> Reqs(5);
  for (int Round = 0; Round < 2; ++Round) {
    for (int K = 0; K < 3; ++K) {
      X[K].assign(size_t(Counts[K]), 0);
      Y[K].assign(size_t(Counts[K]), -1);
      for (int64_t I = 0; I < Counts[K]; ++I)
        X[K][size_t(I)] = double((R + 1) * (I % 977) + K);
      ASSERT_TRUE(World
                      ->iallReduce(G, X[K].data(), Y[K].data(),
                                   size_t(Counts[K]), DType::F64, hostQueue(),
                                   Reqs[size_t(K)])
                      .ok());
      if (K < 2) {
        GX[K].assign(size_t(Counts[K + 1]), float(R * 10 + K));
        GY[K].assign(size_t(N * Counts[K + 1]), -1);
        ASSERT_TRUE(World
                        ->iallGather(G, GX[K].data(), GY[K].data(),
                                     size_t(Counts[K + 1]), DType::F32,
                                     hostQueue(), Reqs[size_t(3 + K)])
                        .ok());
      }
    }
    for (int K = 4; K >= 0; --K)
      ASSERT_TRUE(World->wait(Reqs[size_t(K)], hostQueue()).ok()) << K;
    for (int K = 0; K < 3; ++K)
      for (int64_t I = 0; I < Counts[K]; ++I)
        ASSERT_EQ(Y[K][size_t(I)], double(N * (N + 1) / 2 * (I % 977) + N * K))
            << "all-reduce " << K << " element " << I;
    for (int K = 0; K < 2; ++K)
      for (int Q = 0; Q < N; ++Q)
        for (int64_t I = 0; I < Counts[K + 1]; ++I)
          ASSERT_EQ(GY[K][size_t(Q * Counts[K + 1] + I)], float(Q * 10 + K))
              << "all-gather " << K << " rank " << Q << " element " << I;
  }
}

TEST(Comm, NonblockingAllGather) {
  NEED_RANKS(0);
  const int N = World->size(), R = World->rank();
  const CommGroup &G = worldGroup();
  const int64_t Count = 300000;
  std::vector<float> X(Count), Y(size_t(N * Count), -1);
  for (int64_t I = 0; I < Count; ++I)
    X[I] = float(R * 1000 + I % 1000);
  CommRequest Req;
  ASSERT_TRUE(World->reserveRequest(Req, Count, DType::F32).ok());
  for (int Round = 0; Round < 3; ++Round) {
    std::fill(Y.begin(), Y.end(), -1.0f);
    if (Round == 2) // in place: this rank's chunk already in Y
      std::copy(X.begin(), X.end(), Y.begin() + R * Count);
    const void *Send = Round == 2 ? nullptr : X.data();
    ASSERT_TRUE(
        World
            ->iallGather(G, Send, Y.data(), Count, DType::F32, hostQueue(), Req)
            .ok());
    EXPECT_TRUE(Req.Active);
    EXPECT_FALSE(
        World
            ->iallGather(G, Send, Y.data(), Count, DType::F32, hostQueue(), Req)
            .ok());
    complete(Req, Round);
    for (int64_t K = 0; K < N; ++K)
      for (int64_t I = 0; I < Count; ++I)
        ASSERT_EQ(Y[size_t(K * Count + I)], float(K * 1000 + I % 1000))
            << "round " << Round << " rank " << K << " element " << I;
  }
}

// ireduceScatter: rank r's chunk of the sum. Over MPI (the
// comm-mpirun-np2-no-shm test) it is in flight until tested or waited for;
// through shared memory it completes at its start.
TEST(Comm, NonblockingReduceScatter) {
  NEED_RANKS(0);
  const int N = World->size(), R = World->rank();
  const CommGroup &G = worldGroup();
  const int64_t Count = 300000;
  std::vector<float> X(size_t(N * Count)), Y(size_t(Count), -1);
  for (int64_t I = 0; I < N * Count; ++I)
    X[size_t(I)] = float((R + 1) * (I % 997));
  CommRequest Req;
  ASSERT_TRUE(World->reserveRequest(Req, Count, DType::F32).ok());
  for (int Round = 0; Round < 2; ++Round) {
    std::fill(Y.begin(), Y.end(), -1.0f);
    ASSERT_TRUE(World
                    ->ireduceScatter(G, X.data(), Y.data(), Count, DType::F32,
                                     hostQueue(), Req)
                    .ok());
    if (std::getenv("WEFT_NO_SHM"))
      EXPECT_TRUE(Req.Active);
    complete(Req, Round);
    // Sum over ranks of (q + 1) * (i % 997) = N (N + 1) / 2 * (i % 997).
    for (int64_t I = 0; I < Count; ++I)
      ASSERT_EQ(Y[size_t(I)],
                float(N * (N + 1) / 2) * float((R * Count + I) % 997))
          << "round " << Round << " element " << I;
  }
}

TEST(Comm, SubCommunicatorsOf2x2) {
  NEED_RANKS(4);
  const Mesh M{{"dp", "tp"}, {2, 2}};
  const int R = World->rank();
  for (const AxesList &Axes : {AxesList{"dp"}, AxesList{"tp"},
                               AxesList{"dp", "tp"}, AxesList{"tp", "dp"}}) {
    auto G = World->group(M, Axes);
    ASSERT_TRUE(G.ok()) << G.message();
    // Gather the world ranks through the sub-communicator itself: they
    // must be the group's members in shard-index order.
    int32_t Me = R;
    std::vector<int32_t> Members((*G)->Size);
    ASSERT_TRUE(
        World->allGather(**G, &Me, Members.data(), 1, DType::I32, hostQueue())
            .ok());
    std::vector<int64_t> Got(Members.begin(), Members.end());
    EXPECT_EQ(Got, (*G)->Members) << Axes[0];
  }
  // dp groups {0,2} {1,3}; tp groups {0,1} {2,3}.
  EXPECT_EQ((*World->group(M, {"dp"}))->Members,
            (std::vector<int64_t>{R % 2, R % 2 + 2}));
  EXPECT_EQ((*World->group(M, {"tp"}))->Members,
            (std::vector<int64_t>{R / 2 * 2, R / 2 * 2 + 1}));
}

TokenData tokens() {
  std::vector<uint16_t> T(2000);
  for (size_t I = 0; I < T.size(); ++I)
    T[I] = uint16_t((I * 7 + I / 3) % 16);
  return TokenData::fromTokens(T, 16, 4).take();
}

std::unique_ptr<Executor> meshExec(const MeshTinyConfig &C) {
  Expected<Program> P = parseProgramJson(programJson(meshTinyProgram(C)));
  EXPECT_TRUE(P.ok()) << P.message();
  if (!P.ok())
    return nullptr;
  auto E = Executor::create(P.take(), nullptr, World);
  EXPECT_TRUE(E.ok()) << E.message();
  return E.ok() ? E.take() : nullptr;
}

std::unique_ptr<Executor> oneRank() {
  return Executor::create(
             parseProgramJson(tinyProgram("f32", 4, 4, 16, 8).payload()).take())
      .take();
}

/// Each layout of the world trains like the 1-rank program: same losses,
/// and every rank's param shards equal the 1-rank params' slices.
void expectTrainsLikeOneRank(const MeshTinyConfig &C) {
  auto E = meshExec(C);
  ASSERT_TRUE(E);
  auto One = oneRank();
  EXPECT_TRUE(E->initParams(3).ok());
  EXPECT_TRUE(One->initParams(3).ok());
  TokenData D = tokens();
  TrainOptions O;
  O.Steps = 4;
  auto A = train(*One, D, O), B = train(*E, D, O);
  ASSERT_TRUE(A.ok()) << A.message();
  ASSERT_TRUE(B.ok()) << B.message();
  for (size_t I = 0; I < 4; ++I)
    EXPECT_NEAR((*A)[I].Loss, (*B)[I].Loss, 2e-5) << "step " << I;
  for (size_t P = 0; P < 2; ++P) {
    ShardMap M = shardMap(E->stateSpec(P, BufferKind::Param).Place, E->mesh(),
                          E->rank());
    std::vector<float> Want(size_t(M.localNumel()));
    extractShard(M, hostState(*One, P).data(), Want.data(), 4);
    std::vector<float> Got = hostState(*E, P);
    for (size_t I = 0; I < Want.size(); ++I)
      ASSERT_NEAR(Got[I], Want[I], 1e-5) << "param " << P << " element " << I;
  }
}

TEST(MeshTraining, DataParallel) {
  NEED_RANKS(0);
  MeshTinyConfig C;
  C.Dp = World->size();
  expectTrainsLikeOneRank(C);
}

TEST(MeshTraining, TensorParallel) {
  NEED_RANKS(0);
  MeshTinyConfig C;
  C.Tp = World->size();
  expectTrainsLikeOneRank(C);
}

TEST(MeshTraining, VocabParallelCrossEntropy) {
  NEED_RANKS(0);
  MeshTinyConfig C;
  C.Tp = World->size();
  C.VocabParallel = true;
  expectTrainsLikeOneRank(C);
  if (World->size() == 4) {
    C.Dp = C.Tp = 2;
    expectTrainsLikeOneRank(C);
  }
}

TEST(MeshTraining, DataTensor2x2) {
  NEED_RANKS(4);
  MeshTinyConfig C;
  C.Dp = C.Tp = 2;
  expectTrainsLikeOneRank(C);
}

TEST(MeshTraining, ZeroShardedAdamWEqualsTheUnshardedUpdate) {
  NEED_RANKS(0);
  MeshTinyConfig C;
  C.Dp = World->size();
  C.Zero1 = C.Zero2 = true;
  expectTrainsLikeOneRank(C);
  if (World->size() == 4) {
    C.Dp = C.Tp = 2;
    expectTrainsLikeOneRank(C);
  }
}

TEST(MeshTraining, ZeroOneReduceScattersAPartialGradient) {
  NEED_RANKS(0);
  MeshTinyConfig C;
  C.Dp = World->size();
  C.Zero1Partial = true;
  expectTrainsLikeOneRank(C);
  // And like plain data parallelism (all_reduce, unsharded adamw) to 1e-6.
  MeshTinyConfig Dp;
  Dp.Dp = C.Dp;
  auto Z = meshExec(C), Plain = meshExec(Dp);
  ASSERT_TRUE(Z && Plain);
  EXPECT_TRUE(Z->initParams(3).ok());
  EXPECT_TRUE(Plain->initParams(3).ok());
  TokenData D = tokens();
  TrainOptions O;
  O.Steps = 4;
  auto A = train(*Plain, D, O), B = train(*Z, D, O);
  ASSERT_TRUE(A.ok()) << A.message();
  ASSERT_TRUE(B.ok()) << B.message();
  for (size_t I = 0; I < 4; ++I)
    EXPECT_NEAR((*A)[I].Loss, (*B)[I].Loss, 1e-6) << "step " << I;
  for (size_t P = 0; P < 2; ++P) {
    std::vector<float> Got = hostState(*Z, P), Want = hostState(*Plain, P);
    for (int64_t I = 0; I < Z->stateSpec(P, BufferKind::Param).numel(); ++I)
      ASSERT_NEAR(Got[I], Want[I], 1e-6) << "param " << P << " element " << I;
  }
  if (World->size() == 4) {
    C.Dp = C.Tp = 2;
    expectTrainsLikeOneRank(C);
  }
}

TEST(MeshTraining, ZeroOneMovesTheBytesOfOneAllReduce) {
  NEED_RANKS(0);
  auto Bytes = [](const MeshTinyConfig &C) {
    auto E = meshExec(C);
    std::map<std::string, double> Got;
    if (!E)
      return Got;
    EXPECT_TRUE(E->initParams(1).ok());
    TrainOptions O;
    O.Steps = 1;
    EXPECT_TRUE(train(*E, tokens(), O).ok());
    for (auto &[K, V] : E->commBytes())
      Got[K] = V;
    return Got;
  };
  MeshTinyConfig C;
  C.Dp = World->size();
  auto Plain = Bytes(C);
  C.Zero1Partial = true;
  auto Z = Bytes(C);
  // Gradients: wte 16x8x4 + head 8x16x4 = 1024 bytes. Plain DP all-reduces
  // them (2(c-1)/c n); ZeRO-1 reduce-scatters them and all-gathers the
  // params ((c-1)/c n each). Only the loss stays an all_reduce (4 bytes).
  const double C1 = double(C.Dp - 1) / double(C.Dp);
  EXPECT_EQ(Plain["all_reduce/dp"], 2 * C1 * 4 + 2 * C1 * 1024);
  EXPECT_EQ(Z["all_reduce/dp"], 2 * C1 * 4);
  EXPECT_EQ(Z["reduce_scatter/dp"], C1 * 1024);
  EXPECT_EQ(Z["all_gather/dp"], C1 * 1024);
  EXPECT_EQ(Z["reduce_scatter/dp"] + Z["all_gather/dp"] + Z["all_reduce/dp"],
            Plain["all_reduce/dp"]);
  if (World->size() == 2)
    EXPECT_EQ(Z["reduce_scatter/dp"], 512);
}

TEST(MeshTraining, CommBytesFollowTheRingFormulas) {
  NEED_RANKS(2);
  MeshTinyConfig C;
  C.Dp = 2;
  auto E = meshExec(C);
  ASSERT_TRUE(E);
  EXPECT_TRUE(E->initParams(1).ok());
  TrainOptions O;
  O.Steps = 1;
  ASSERT_TRUE(train(*E, tokens(), O).ok());
  std::map<std::string, double> Got;
  for (auto &[K, V] : E->commBytes())
    Got[K] = V;
  // all_reduce over dp (c=2): 2(c-1)/c n = n. loss 4 B, head grad 8x16x4,
  // wte grad 16x8x4. all_gather/slice over tp (c=1): 0.
  EXPECT_EQ(Got["all_reduce/dp"], 4 + 512 + 512);
  EXPECT_EQ(Got["all_gather/tp"], 0);
  EXPECT_EQ(Got["all_reduce/tp"], 0);
}

// Trains the two programs 4 steps from the same weights: losses, parameters
// (bit for bit) and comm bytes must agree.
void expectSameTraining(const MeshTinyConfig &BlockingConfig,
                        const MeshTinyConfig &AsyncConfig) {
  auto Blocking = meshExec(BlockingConfig);
  auto Async = meshExec(AsyncConfig);
  ASSERT_TRUE(Blocking && Async);
  EXPECT_TRUE(Blocking->initParams(3).ok());
  EXPECT_TRUE(Async->initParams(3).ok());
  TokenData D = tokens();
  TrainOptions O;
  O.Steps = 4;
  auto A = train(*Blocking, D, O), B = train(*Async, D, O);
  ASSERT_TRUE(A.ok()) << A.message();
  ASSERT_TRUE(B.ok()) << B.message();
  for (size_t I = 0; I < 4; ++I)
    EXPECT_EQ((*A)[I].Loss, (*B)[I].Loss) << "step " << I;
  for (size_t P = 0; P < 2; ++P) {
    EXPECT_EQ(hostState<uint32_t>(*Async, P), hostState<uint32_t>(*Blocking, P))
        << "param " << P;
  }
  EXPECT_EQ(Async->commBytes(), Blocking->commBytes());
}

TEST(MeshTraining, AsyncGradientAllReduceIsBitForBitTheBlockingOne) {
  NEED_RANKS(0);
  MeshTinyConfig C;
  C.Dp = World->size();
  MeshTinyConfig Async = C;
  Async.AsyncGrads = true;
  expectSameTraining(C, Async);
}

TEST(MeshTraining, AsyncAllReduceWaitsBeforeItsInputBytesAreOverwritten) {
  NEED_RANKS(0);
  // 4 MiB: four chunks in flight when the next instruction writes over the
  // input's arena bytes.
  const int64_t N = 1 << 20;
  Expected<Program> P =
      parseProgramJson(programJson(asyncOverwriteProgram(World->size(), N)));
  ASSERT_TRUE(P.ok()) << P.message();
  auto E = Executor::create(P.take(), nullptr, World);
  ASSERT_TRUE(E.ok()) << E.message();
  StepContext Ctx;
  for (int Step = 0; Step < 3; ++Step) {
    ASSERT_TRUE((*E)->run(0, 5, Ctx).ok());
    for (int64_t I = 0; I < N; ++I)
      ASSERT_EQ((*E)->gradElement(0, I), double(World->size()))
          << "step " << Step << " element " << I;
  }
}

TEST(MeshTraining, AsyncParamGatherIsBitForBitTheBlockingOne) {
  NEED_RANKS(0);
  MeshTinyConfig C;
  C.Dp = World->size();
  C.Zero3 = true;
  MeshTinyConfig Async = C;
  Async.AsyncGather = Async.AsyncGrads = true;
  expectSameTraining(C, Async);
  // And ZeRO-3 trains like one rank.
  expectTrainsLikeOneRank(Async);
}

TEST(MeshTraining, AsyncAllGatherWaitsBeforeItsInputBytesAreOverwritten) {
  NEED_RANKS(0);
  const int64_t N = 1 << 20;
  Expected<Program> P = parseProgramJson(
      programJson(asyncOverwriteProgram(World->size(), N, /*Gather=*/true)));
  ASSERT_TRUE(P.ok()) << P.message();
  auto E = Executor::create(P.take(), nullptr, World);
  ASSERT_TRUE(E.ok()) << E.message();
  StepContext Ctx;
  for (int Step = 0; Step < 3; ++Step) {
    ASSERT_TRUE((*E)->run(0, 5, Ctx).ok());
    for (int64_t I = 0; I < World->size() * N; ++I)
      ASSERT_EQ((*E)->gradElement(0, I), 1.0)
          << "step " << Step << " element " << I;
  }
}

/// Deterministic optimizer state: a function of the global index.
float mOf(int64_t G) { return float(G % 97) * 0.01f; }
float vOf(int64_t G) { return float(G % 89) * 0.02f + 1; }

void setOptimizerState(Executor &E) {
  for (size_t P = 0; P < 2; ++P)
    for (BufferKind K : {BufferKind::AdamM, BufferKind::AdamV}) {
      const BufferSpec &S = E.stateSpec(P, K);
      std::vector<float> Out(size_t(S.numel()));
      forEachRun(shardMap(S.Place, E.mesh(), E.rank()),
                 [&](int64_t L, int64_t G, int64_t N) {
                   for (int64_t I = 0; I < N; ++I)
                     Out[size_t(L + I)] =
                         K == BufferKind::AdamM ? mOf(G + I) : vOf(G + I);
                 });
      setHostState(E, P, K, Out);
    }
}

void expectGlobalState(const Executor &E, const Executor &One,
                       const std::string &What) {
  for (size_t P = 0; P < 2; ++P)
    for (BufferKind K :
         {BufferKind::Param, BufferKind::AdamM, BufferKind::AdamV}) {
      const BufferSpec &S = E.stateSpec(P, K);
      std::vector<float> Got = hostState(E, P, K), Ref = hostState(One, P);
      forEachRun(shardMap(S.Place, E.mesh(), E.rank()),
                 [&](int64_t L, int64_t G, int64_t N) {
                   for (int64_t I = 0; I < N; ++I) {
                     float Want = K == BufferKind::Param   ? Ref[G + I]
                                  : K == BufferKind::AdamM ? mOf(G + I)
                                                           : vOf(G + I);
                     ASSERT_EQ(Got[L + I], Want)
                         << What << ": param " << P << " kind "
                         << bufferKindName(K) << " global " << G + I;
                   }
                 });
    }
}

TEST(MeshCheckpoint, SaveOn2x2LoadOn4x1And1x4AndOneRank) {
  NEED_RANKS(4);
  namespace fs = std::filesystem;
  std::string Dir = (fs::temp_directory_path() / "weft_mesh_ckpt").string();
  if (World->rank() == 0)
    fs::remove_all(Dir);
  ASSERT_TRUE(World->barrier(worldGroup()).ok()); // removed before any save
  auto One = oneRank();
  EXPECT_TRUE(One->initParams(11).ok());
  {
    MeshTinyConfig C;
    C.Dp = C.Tp = 2;
    C.HeadBlocks = 2;
    C.Zero1 = true;
    auto E = meshExec(C);
    ASSERT_TRUE(E);
    EXPECT_TRUE(E->initParams(11).ok());
    setOptimizerState(*E);
    Status S = saveCheckpoint(*E, Dir, 7);
    ASSERT_TRUE(S.ok()) << S.message();
  }
  for (auto [Dp, Tp] : {std::pair<int, int>{4, 1}, {1, 4}, {2, 2}}) {
    MeshTinyConfig C;
    C.Dp = Dp;
    C.Tp = Tp;
    C.Zero2 = Dp > 1;
    auto E = meshExec(C);
    ASSERT_TRUE(E);
    EXPECT_TRUE(E->initParams(12345).ok()); // overwritten by the load
    Expected<int64_t> Step = loadCheckpoint(*E, Dir);
    ASSERT_TRUE(Step.ok()) << Step.message();
    EXPECT_EQ(*Step, 7);
    expectGlobalState(*E, *One,
                      "dp=" + std::to_string(Dp) + " tp=" + std::to_string(Tp));
  }
  // One rank (no mesh), on every rank.
  auto Single = oneRank();
  EXPECT_TRUE(Single->initParams(12345).ok());
  Expected<int64_t> Step = loadCheckpoint(*Single, Dir);
  ASSERT_TRUE(Step.ok()) << Step.message();
  expectGlobalState(*Single, *One, "one rank");
  // And back: an unsharded checkpoint loads on a mesh.
  std::string Plain = Dir + "-plain" + std::to_string(World->rank());
  ASSERT_TRUE(saveCheckpoint(*Single, Plain, 3).ok());
  MeshTinyConfig C;
  C.Dp = C.Tp = 2;
  C.HeadBlocks = 2;
  C.Zero1 = C.Zero2 = true;
  auto E = meshExec(C);
  ASSERT_TRUE(E);
  Step = loadCheckpoint(*E, Plain);
  ASSERT_TRUE(Step.ok()) << Step.message();
  EXPECT_EQ(*Step, 3);
  expectGlobalState(*E, *One, "unsharded into 2x2");
  ASSERT_TRUE(World->barrier(worldGroup()).ok());
}

/// After one forward/backward, saveGradients writes the 1-rank gradients.
void expectSavedGradsAreGlobal(const MeshTinyConfig &C,
                               const std::string &Dir) {
  auto E = meshExec(C);
  ASSERT_TRUE(E);
  auto One = oneRank();
  EXPECT_TRUE(E->initParams(5).ok());
  EXPECT_TRUE(One->initParams(5).ok());
  TokenData D = tokens();
  StepContext Ctx;
  Ctx.Optimizer = &E->program().Optimizer;
  std::vector<int32_t> Toks(size_t(E->localBatch() * E->localSeq())),
      Tgts(Toks.size());
  D.fillBlock(0, 4, 4, E->batchOffset(), E->localBatch(), E->seqOffset(),
              E->localSeq(), Toks.data(), Tgts.data());
  ASSERT_TRUE(E->setInputs(0, Toks.data(), Tgts.data()).ok());
  ASSERT_TRUE(E->run(0, E->program().OptimizerBegin, Ctx).ok());
  Toks.resize(16);
  Tgts.resize(16);
  D.fillBatch(0, 4, 4, Toks.data(), Tgts.data());
  ASSERT_TRUE(One->setInputs(0, Toks.data(), Tgts.data()).ok());
  ASSERT_TRUE(One->run(0, One->program().OptimizerBegin, Ctx).ok());
  Status S = saveGradients(*E, Dir);
  ASSERT_TRUE(S.ok()) << S.message();
  if (World->rank() == 0) {
    auto F = SafetensorsFile::read(Dir + "/grads.safetensors");
    ASSERT_TRUE(F.ok()) << F.message();
    for (size_t P = 0; P < 2; ++P) {
      const SafeTensor *T = F->find(One->program().Params[P].Name);
      ASSERT_TRUE(T);
      std::vector<float> G(size_t(numElements(T->Dims)));
      ASSERT_TRUE(F->convert(*T, DType::F32, G.data()).ok());
      // EXPECT, not ASSERT: the other ranks wait in the barrier below.
      for (size_t I = 0; I < G.size(); ++I)
        if (std::abs(G[I] - One->gradElement(P, int64_t(I))) > 1e-6) {
          ADD_FAILURE() << "param " << P << " element " << I << ": " << G[I]
                        << " vs " << One->gradElement(P, int64_t(I));
          break;
        }
    }
  }
  ASSERT_TRUE(World->barrier(worldGroup()).ok());
}

TEST(MeshCheckpoint, SaveGradsWritesTheGlobalGradients) {
  NEED_RANKS(0);
  namespace fs = std::filesystem;
  MeshTinyConfig C;
  C.Dp = World->size() == 4 ? 2 : 1;
  C.Tp = World->size() / C.Dp;
  C.Zero2 = C.Dp > 1;
  expectSavedGradsAreGlobal(
      C, (fs::temp_directory_path() / "weft_mesh_grads").string());
}

TEST(MeshCheckpoint, SaveGradsSumsAPartialGradient) {
  NEED_RANKS(0);
  namespace fs = std::filesystem;
  std::string Dir =
      (fs::temp_directory_path() / "weft_mesh_partial_grads").string();
  MeshTinyConfig C;
  C.Dp = World->size();
  C.Zero1Partial = true;
  expectSavedGradsAreGlobal(C, Dir);
  if (World->size() == 4) {
    C.Dp = C.Tp = 2;
    expectSavedGradsAreGlobal(C, Dir);
  }
}

} // namespace

int main(int Argc, char **Argv) {
  ::testing::InitGoogleTest(&Argc, Argv);
  Expected<std::unique_ptr<Communicator>> C = createCommunicator();
  if (!C.ok()) {
    std::fprintf(stderr, "weft-comm-tests: %s\n", C.message().c_str());
    return 1;
  }
  World = C->get();
  // Only rank 0 reports; every rank's exit code counts.
  if (World->rank() != 0) {
    auto &L = ::testing::UnitTest::GetInstance()->listeners();
    delete L.Release(L.default_result_printer());
  }
  int Rc = RUN_ALL_TESTS();
  return Rc;
}

namespace {
// A replica that drifts (here: one element of rank 1's copy) is named, with
// the parameter; identical replicas pass. Issue 9.
TEST(TrainingChecks, ReplicaDriftNamesTheParameterAndTheRank) {
  NEED_RANKS(2);
  MeshTinyConfig C;
  C.Dp = 2;
  auto E = meshExec(C);
  ASSERT_TRUE(E);
  EXPECT_TRUE(E->initParams(5).ok());
  Expected<std::string> R = checkReplicas(*E);
  ASSERT_TRUE(R.ok()) << R.message();
  EXPECT_EQ(*R, "");
  if (World->rank() == 1)
    ASSERT_TRUE(E->setParamElement(1, 3, E->paramElement(1, 3) + 1e-6).ok());
  R = checkReplicas(*E);
  ASSERT_TRUE(R.ok()) << R.message();
  EXPECT_EQ(*R, "parameter '" + E->program().Params[1].Name +
                    "' on rank(s) 1 differs from its replica(s) on rank(s) 0 "
                    "(replicated over dp)");
}

// A non-finite gradient on one rank stops every rank, naming that rank.
TEST(TrainingChecks, NonFiniteGradientOnOneRankIsSeenByAll) {
  NEED_RANKS(2);
  MeshTinyConfig C;
  C.Dp = 2;
  auto E = meshExec(C);
  ASSERT_TRUE(E);
  EXPECT_TRUE(E->initParams(5).ok());
  Expected<std::string> R = firstNonFinite(*E);
  ASSERT_TRUE(R.ok()) << R.message();
  EXPECT_EQ(*R, "");
  if (World->rank() == 1)
    setGradElement(*E, 0, 2, INFINITY);
  R = firstNonFinite(*E);
  ASSERT_TRUE(R.ok()) << R.message();
  std::string Want = "the gradient of '" + E->program().Params[0].Name +
                     "' is not finite on rank 1";
  EXPECT_EQ(R->substr(0, Want.size()), Want) << *R;
}
} // namespace
