//===- Watchdog.cpp - Collectives that cannot hang a job forever ----------===//
#include "runtime/comm/Watchdog.h"

#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <mutex>
#include <sys/mman.h>
#include <thread>
#include <unistd.h>

namespace weft {

namespace {

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// One rank's heartbeat, in shared memory: lock-free atomics only.
struct Slot {
  std::atomic<int64_t> BeatNs; // 0: never beat
  std::atomic<int64_t> Step;
  std::atomic<int64_t> OpStartNs; // 0: not in a blocking collective
  std::atomic<int64_t> OpCode;    // index into kOps
  std::atomic<int64_t> Pad[4];
};
static_assert(sizeof(Slot) == 64, "one cache line per rank");

const char *const kOps[] = {"none",           "all-reduce", "all-gather",
                            "reduce-scatter", "broadcast",  "reduce",
                            "barrier",        "wait",       "group creation"};
enum Op : int64_t {
  None,
  AllReduce,
  AllGather,
  ReduceScatter,
  Broadcast,
  Reduce,
  Barrier,
  Wait,
  GroupCreate
};
constexpr uint64_t kNumOps = sizeof(kOps) / sizeof(kOps[0]);
/// How long past the timeout a rank that cannot see every rank of its job
/// waits for another node's report naming the one that stopped.
constexpr int64_t kGraceNs = 1'500'000'000;
static_assert(kNumOps == uint64_t(GroupCreate) + 1, "a name per op");

std::string axesText(const AxesList &A) {
  std::string S = "(";
  for (size_t I = 0; I < A.size(); ++I)
    S += (I ? "," : "") + A[I];
  return S + ")";
}

class Watched final : public WatchedCommunicator {
public:
  Watched(std::unique_ptr<Communicator> Inner, double Timeout,
          const std::string &JobId)
      : Inner(std::move(Inner)), TimeoutNs(int64_t(Timeout * 1e9)) {
    if (const char *N = std::getenv("WEFT_NODE_ID"); N && *N)
      Node = std::string(" on node ") + N;
    openBoard(JobId);
    publish(); // present from the start, on the board's own clock
    Thread = std::thread([this] { watch(); });
  }
  ~Watched() override {
    {
      std::lock_guard<std::mutex> L(Mu);
      Stop = true;
    }
    Cv.notify_all();
    Thread.join();
    if (Board) {
      munmap(Board, BoardBytes);
      if (!Unlinked && Inner->rank() == 0)
        shm_unlink(BoardName.c_str());
    }
  }

  void setStep(int64_t S) override { Mine.Step = S; }
  const char *name() const override { return Inner->name(); }
  int rank() const override { return Inner->rank(); }
  int size() const override { return Inner->size(); }
  void abortJob(int Code) override { Inner->abortJob(Code); }

  Expected<const CommGroup *> group(const Mesh &M,
                                    const AxesList &Axes) override {
    Scope S(*this, GroupCreate, "for " + axesText(Axes));
    Expected<const CommGroup *> G = Inner->group(M, Axes);
    // The first group is made by every rank of the world (MPI_Comm_split),
    // so every rank has mapped the board by now: its name can go, and a
    // killed job leaves nothing behind in /dev/shm.
    if (G.ok() && Board && !Unlinked && rank() == 0)
      shm_unlink(BoardName.c_str());
    Unlinked = true;
    return G;
  }
  Status allReduce(const CommGroup &G, const void *Send, void *Recv,
                   size_t Count, DType T, Queue &Q) override {
    Scope S(*this, AllReduce, G);
    return Inner->allReduce(G, Send, Recv, Count, T, Q);
  }
  Status iallReduce(const CommGroup &G, const void *Send, void *Recv,
                    size_t Count, DType T, Queue &Q, CommRequest &R) override {
    noteRequest(R, "all-reduce", G);
    // A start may run the whole collective (shared memory, or the
    // hierarchical path complete at their start): watched as a blocking
    // call, as its wait is.
    Scope S(*this, AllReduce, G);
    return Inner->iallReduce(G, Send, Recv, Count, T, Q, R);
  }
  Status test(CommRequest &R, bool &Done) override {
    return Inner->test(R, Done);
  }
  Status wait(CommRequest &R, Queue &Q) override {
    Scope S(*this, Wait, "for " + requestText(R));
    return Inner->wait(R, Q);
  }
  Status reserveRequest(CommRequest &R, size_t Count, DType T) override {
    return Inner->reserveRequest(R, Count, T);
  }
  Status allGather(const CommGroup &G, const void *Send, void *Recv,
                   size_t Count, DType T, Queue &Q) override {
    Scope S(*this, AllGather, G);
    return Inner->allGather(G, Send, Recv, Count, T, Q);
  }
  Status iallGather(const CommGroup &G, const void *Send, void *Recv,
                    size_t Count, DType T, Queue &Q, CommRequest &R) override {
    noteRequest(R, "all-gather", G);
    // Watched as iallReduce is.
    Scope S(*this, AllGather, G);
    return Inner->iallGather(G, Send, Recv, Count, T, Q, R);
  }
  Status reduceScatter(const CommGroup &G, const void *Send, void *Recv,
                       size_t Count, DType T, Queue &Q) override {
    Scope S(*this, ReduceScatter, G);
    return Inner->reduceScatter(G, Send, Recv, Count, T, Q);
  }
  Status ireduceScatter(const CommGroup &G, const void *Send, void *Recv,
                        size_t Count, DType T, Queue &Q,
                        CommRequest &R) override {
    noteRequest(R, "reduce-scatter", G);
    // Watched as iallReduce is.
    Scope S(*this, ReduceScatter, G);
    return Inner->ireduceScatter(G, Send, Recv, Count, T, Q, R);
  }
  Status broadcast(const CommGroup &G, void *Buf, size_t Count, DType T,
                   int Root, Queue &Q) override {
    Scope S(*this, Broadcast, G);
    return Inner->broadcast(G, Buf, Count, T, Root, Q);
  }
  Status reduce(const CommGroup &G, const void *Send, void *Recv, size_t Count,
                DType T, int Root, Queue &Q) override {
    Scope S(*this, Reduce, G);
    return Inner->reduce(G, Send, Recv, Count, T, Root, Q);
  }
  Status startTransfers(const CommGroup &G, const std::vector<Transfer> &Ops,
                        Queue &Q, CommRequest &R) override {
    noteRequest(R, "transfers", G);
    return Inner->startTransfers(G, Ops, Q, R);
  }
  Status barrier(const CommGroup &G) override {
    Scope S(*this, Barrier, G);
    return Inner->barrier(G);
  }
  bool independentTransfers() const override {
    return Inner->independentTransfers();
  }

private:
  /// Marks a blocking call in flight for its lifetime.
  struct Scope {
    Scope(Watched &W, Op O, const CommGroup &G)
        : Scope(W, O, "over " + axesText(G.Axes)) {}
    Scope(Watched &W, Op O, std::string What) : W(W) {
      {
        std::lock_guard<std::mutex> L(W.Mu);
        W.What = std::move(What);
      }
      W.Mine.OpCode = O;
      W.Mine.OpStartNs = nowNs();
    }
    ~Scope() { W.Mine.OpStartNs = 0; }
    Watched &W;
  };

  void noteRequest(CommRequest &R, const char *Kind, const CommGroup &G) {
    std::lock_guard<std::mutex> L(Mu);
    Requests[&R] = std::string(Kind) + " over " + axesText(G.Axes);
  }
  std::string requestText(CommRequest &R) {
    std::lock_guard<std::mutex> L(Mu);
    auto It = Requests.find(&R);
    return It == Requests.end() ? "a request" : It->second;
  }

  void openBoard(const std::string &JobId) {
    if (JobId.empty())
      return;
    BoardName = "/weft-heartbeat-";
    for (char C : JobId)
      BoardName += std::isalnum((unsigned char)C) ? C : '_';
    BoardBytes = sizeof(Slot) * size_t(Inner->size());
    int Fd = shm_open(BoardName.c_str(), O_RDWR | O_CREAT, 0600);
    if (Fd < 0)
      return;
    // Every rank sizes it the same; a new file reads as zeros.
    if (ftruncate(Fd, off_t(BoardBytes)) == 0) {
      void *P =
          mmap(nullptr, BoardBytes, PROT_READ | PROT_WRITE, MAP_SHARED, Fd, 0);
      if (P != MAP_FAILED)
        Board = static_cast<Slot *>(P);
    }
    close(Fd);
  }

  void publish() {
    if (!Board)
      return;
    Slot &S = Board[rank()];
    S.Step = Mine.Step.load();
    S.OpCode = Mine.OpCode.load();
    S.OpStartNs = Mine.OpStartNs.load();
    S.BeatNs = nowNs();
  }

  /// What the board (this node's ranks) says about the other ranks;
  /// Silent: whether it names one that stopped responding; Unseen: the
  /// ranks it has no heartbeat of (on other nodes, or never started).
  std::string others(int64_t Now, bool &Silent, std::string &Unseen) {
    Silent = false;
    if (!Board)
      return "";
    std::string R;
    int64_t MyStep = Mine.Step;
    for (int Q = 0; Q < size(); ++Q) {
      if (Q == rank())
        continue;
      Slot &S = Board[Q];
      int64_t Beat = S.BeatNs, Start = S.OpStartNs, Step = S.Step;
      char Line[200];
      if (Beat == 0) {
        Unseen += (Unseen.empty() ? "" : ", ") + std::to_string(Q);
        continue;
      }
      if (Now - Beat > 2'000'000'000LL) {
        Silent = true;
        std::snprintf(Line, sizeof(Line),
                      "; rank %d%s stopped responding (no heartbeat for %.1f "
                      "s; its last one was at step %lld)",
                      Q, Node.c_str(), double(Now - Beat) / 1e9,
                      (long long)Step);
      } else if (Start == 0 || Step != MyStep)
        std::snprintf(Line, sizeof(Line),
                      "; rank %d is alive at step %lld but not in this "
                      "collective%s%s",
                      Q, (long long)Step, Start ? ": in " : "",
                      Start ? kOps[uint64_t(S.OpCode.load()) % kNumOps] : "");
      else
        continue;
      R += Line;
    }
    return R;
  }

  void watch() {
    std::unique_lock<std::mutex> L(Mu);
    while (!Stop) {
      Cv.wait_for(L, std::chrono::milliseconds(100));
      if (Stop)
        break;
      publish();
      int64_t Start = Mine.OpStartNs, Now = nowNs();
      if (Start == 0 || Now - Start < TimeoutNs)
        continue;
      bool Silent;
      std::string Unseen, Report = others(Now, Silent, Unseen);
      // Ranks on other nodes are watched by their own node's ranks: while
      // this node names none that stopped, give theirs the time to name
      // it first (the first report ends the job).
      if (!Silent && !Unseen.empty() && Now - Start < TimeoutNs + kGraceNs)
        continue;
      if (!Unseen.empty())
        Report += "; ranks " + Unseen +
                  " run on other nodes, whose heartbeats this node does not "
                  "see";
      std::string Msg =
          "weft-run: error: rank " + std::to_string(rank()) + ": " +
          kOps[uint64_t(Mine.OpCode.load()) % kNumOps] + " " + What +
          " at step " + std::to_string(Mine.Step.load()) +
          " did not complete within " +
          std::to_string(int64_t(TimeoutNs / 1'000'000'000)) +
          " s (--collective-timeout)" + Report + "; ending the job\n";
      std::fputs(Msg.c_str(), stderr);
      std::fflush(stderr);
      std::_Exit(1);
    }
  }

  std::unique_ptr<Communicator> Inner;
  int64_t TimeoutNs;
  Slot Mine{};
  Slot *Board = nullptr;
  /// " on node N" (WEFT_NODE_ID), for the ranks of this node's board.
  std::string Node;
  size_t BoardBytes = 0;
  std::string BoardName;
  std::mutex Mu; // guards What, Requests, Stop
  std::condition_variable Cv;
  std::string What;
  std::map<const CommRequest *, std::string> Requests;
  bool Stop = false, Unlinked = false;
  std::thread Thread;
};

} // namespace

std::unique_ptr<WatchedCommunicator>
watchCommunicator(std::unique_ptr<Communicator> Inner, double TimeoutSeconds,
                  const std::string &JobId) {
  return std::make_unique<Watched>(std::move(Inner), TimeoutSeconds, JobId);
}

std::string mpiJobId() {
  for (const char *V :
       {"PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "SLURM_JOB_ID"})
    if (const char *S = std::getenv(V))
      return S;
  return "";
}

} // namespace weft
