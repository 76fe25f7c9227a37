//===- DeviceBoundaryTest.cpp - The executor never touches tensor memory --===//
//
// The device boundary (docs/design.md): everything that reads or writes a
// tensor is work on the backend's queue. A backend whose memory the host
// cannot touch proves it: the guarded backend below maps its memory
// PROT_NONE and opens it only while its queue or its kernels run, so a
// single host read or write of a tensor anywhere else (executor, trainer,
// checks, checkpoints) is a segmentation fault. Training, gradient checks
// and checkpoints through it must match the plain CPU backend bit for bit.
//
//===----------------------------------------------------------------------===//
#include "HostState.h"
#include "TestPrograms.h"
#include "runtime/Trainer.h"
#include "runtime/TrainingChecks.h"
#include "runtime/checkpoint/Checkpoint.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>

using namespace weft;
using namespace weft::test;

namespace {

/// The mapped regions of a guarded backend, closed except while work runs.
struct Guard {
  std::map<void *, size_t> Regions;
  int Depth = 0;
  size_t Opens = 0;
  void protect(int Prot) {
    for (auto &[P, N] : Regions)
      EXPECT_EQ(mprotect(P, N, Prot), 0);
  }
  void open() {
    if (Depth++ == 0) {
      protect(PROT_READ | PROT_WRITE);
      ++Opens;
    }
  }
  void close() {
    if (--Depth == 0)
      protect(PROT_NONE);
  }
  template <typename F> Status during(F &&Work) {
    open();
    Status S = Work();
    close();
    return S;
  }
};

/// The CPU's queue, run with the guarded memory open.
class GuardedQueue final : public Queue {
public:
  explicit GuardedQueue(Guard &G) : G(G), Inner(createHostQueue()) {}
  bool hostMemory() const override { return true; }
  Status copyToDevice(void *D, const void *H, size_t N) override {
    return G.during([&] { return Inner->copyToDevice(D, H, N); });
  }
  Status copyToHost(void *H, const void *D, size_t N) override {
    return G.during([&] { return Inner->copyToHost(H, D, N); });
  }
  Status copyOnDevice(void *D, const void *S, size_t N) override {
    return G.during([&] { return Inner->copyOnDevice(D, S, N); });
  }
  Status fillZero(void *D, size_t N) override {
    return G.during([&] { return Inner->fillZero(D, N); });
  }
  Status record(Event &E) override { return Inner->record(E); }
  Status waitFor(const Event &E) override { return Inner->waitFor(E); }
  Status synchronize() override { return Inner->synchronize(); }

private:
  Guard &G;
  std::unique_ptr<Queue> Inner;
};

/// The CPU kernels on memory mapped PROT_NONE between calls.
class GuardedBackend final : public Backend {
public:
  explicit GuardedBackend(DType T) : Inner(createCpuBackend(T)) {}
  ~GuardedBackend() override {
    for (auto &[P, N] : G.Regions)
      munmap(P, N);
  }
  const char *name() const override { return "guarded-cpu"; }
  std::vector<OpKind> missingKernels(DType T) const override {
    return Inner->missingKernels(T);
  }
  void *allocate(size_t Bytes) override {
    const size_t Page = size_t(sysconf(_SC_PAGESIZE));
    size_t N = (std::max<size_t>(Bytes, 1) + Page - 1) / Page * Page;
    void *P = mmap(nullptr, N, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (P == MAP_FAILED)
      return nullptr;
    G.Regions[P] = N;
    if (G.Depth > 0)
      mprotect(P, N, PROT_READ | PROT_WRITE);
    return P;
  }
  void release(void *P) override {
    auto It = G.Regions.find(P);
    if (It == G.Regions.end())
      return;
    munmap(P, It->second);
    G.Regions.erase(It);
  }
  std::unique_ptr<Queue> createQueue() override {
    return std::make_unique<GuardedQueue>(G);
  }
  Expected<size_t>
  prepare(const std::vector<BoundInstruction> &Insts) override {
    return Inner->prepare(Insts); // reads shapes only; its scratch is its own
  }
  Status run(const BoundInstruction &I, const StepContext &Ctx,
             Queue &Q) override {
    return G.during([&] { return Inner->run(I, Ctx, Q); });
  }
  Status findNonFinite(const void *Data, int64_t N, DType T, Queue &Q,
                       int64_t &At, double &Value) override {
    return G.during(
        [&] { return Inner->findNonFinite(Data, N, T, Q, At, Value); });
  }
  Guard G;

private:
  std::unique_ptr<Backend> Inner;
};

std::unique_ptr<Executor> make(const GptConfig &C, bool Guarded,
                               GuardedBackend **Out = nullptr) {
  Expected<Program> P = parseProgram(gptProgram(C).file());
  EXPECT_TRUE(P.ok()) << P.message();
  if (!P.ok())
    return nullptr;
  std::unique_ptr<Backend> B;
  if (Guarded) {
    auto G = std::make_unique<GuardedBackend>(P->Type);
    if (Out)
      *Out = G.get();
    B = std::move(G);
  }
  Expected<std::unique_ptr<Executor>> E =
      Executor::create(P.take(), std::move(B));
  EXPECT_TRUE(E.ok()) << E.message();
  return E.ok() ? E.take() : nullptr;
}

TEST(DeviceBoundary, TheGuardCatchesAHostRead) {
  GuardedBackend B(DType::F32);
  volatile char *P = static_cast<char *>(B.allocate(100));
  ASSERT_NE(P, nullptr);
  EXPECT_DEATH({ (void)*P; }, "");
  B.G.open();
  EXPECT_EQ(*P, 0); // zeroed, as allocate promises
  B.G.close();
}

TEST(DeviceBoundary, TrainingThroughTheQueueMatchesTheCpuBackendBitForBit) {
  for (bool F64 : {false, true}) {
    GptConfig C;
    C.DType = F64 ? "f64" : "f32";
    GuardedBackend *GB = nullptr;
    auto Guarded = make(C, true, &GB), Plain = make(C, false);
    ASSERT_TRUE(Guarded && Plain);
    ASSERT_TRUE(Guarded->initParams(7).ok());
    ASSERT_TRUE(Plain->initParams(7).ok());
    TrainOptions O;
    O.Steps = 3;
    auto A = train(*Guarded, gptTokens(C), O),
         B = train(*Plain, gptTokens(C), O);
    ASSERT_TRUE(A.ok()) << A.message();
    ASSERT_TRUE(B.ok()) << B.message();
    for (size_t S = 0; S < 3; ++S)
      EXPECT_EQ((*A)[S].Loss, (*B)[S].Loss) << C.DType << " step " << S;
    for (size_t P = 0; P < Plain->program().Params.size(); ++P)
      for (BufferKind K : {BufferKind::Param, BufferKind::Grad,
                           BufferKind::AdamM, BufferKind::AdamV})
        ASSERT_EQ(hostState<char>(*Guarded, P, K),
                  hostState<char>(*Plain, P, K))
            << C.DType << " param " << P;
    EXPECT_GT(GB->G.Opens, 100u); // every kernel and copy opened it
  }
}

TEST(DeviceBoundary, ChecksGradCheckAndCheckpointsGoThroughCopies) {
  GptConfig C;
  C.DType = "f64";
  auto E = make(C, true);
  ASSERT_TRUE(E);
  ASSERT_TRUE(E->initParams(3).ok());
  GradCheckOptions GO;
  GO.PerParam = 3;
  Expected<GradCheckReport> R = gradCheck(*E, gptTokens(C), GO);
  ASSERT_TRUE(R.ok()) << R.message();
  EXPECT_TRUE(R->passed());
  Expected<std::string> Bad = firstNonFinite(*E);
  ASSERT_TRUE(Bad.ok()) << Bad.message();
  EXPECT_EQ(*Bad, "");
  setGradElement(*E, 1, 0, NAN);
  Bad = firstNonFinite(*E);
  ASSERT_TRUE(Bad.ok()) << Bad.message();
  EXPECT_NE(Bad->find("the gradient of '" + E->program().Params[1].Name +
                      "' is not finite"),
            std::string::npos)
      << *Bad;

  const std::string Dir = ::testing::TempDir() + "weft_device_boundary";
  std::filesystem::remove_all(Dir);
  ASSERT_TRUE(saveCheckpoint(*E, Dir, 4).ok());
  auto Loaded = make(C, true);
  ASSERT_TRUE(Loaded && Loaded->initParams(99).ok());
  Expected<int64_t> Step = loadCheckpoint(*Loaded, Dir);
  ASSERT_TRUE(Step.ok()) << Step.message();
  EXPECT_EQ(*Step, 4);
  for (size_t P = 0; P < E->program().Params.size(); ++P)
    for (BufferKind K :
         {BufferKind::Param, BufferKind::AdamM, BufferKind::AdamV})
      EXPECT_EQ(hostState<double>(*Loaded, P, K), hostState<double>(*E, P, K))
          << "param " << P;
  Status S = saveGradients(*E, Dir + "/grads");
  EXPECT_TRUE(S.ok()) << S.message();
  std::filesystem::remove_all(Dir);
}

} // namespace
