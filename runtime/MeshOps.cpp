//===- MeshOps.cpp - Collectives and mesh attributes in the executor -----===//
//
// Under a mesh the executor runs the collective instructions itself,
// through the communicator on the executor's queue (slices are copies on
// it), and tells compute ops where their shard lies
// (bound once, at load):
//  - position_embedding(_grad) with `seq_axes`: the rank's first global
//    position;
//  - embedding(_grad) and cross_entropy_stats(_grad) with `vocab_axes`: the
//    kernels learn the rank's first vocab id and the whole vocab;
//  - adamw with `shard_axes`: the kernel sees the rank's contiguous block
//    of the param (and of a full-size grad); the program's own instructions
//    reduce-scatter a partial gradient before it and gather the param after.
// all_to_all sends block k of dim 0 to shard k and receives block k from
// it, every transfer posted at once (Communicator::startTransfers).
// All-gather and reduce-scatter move contiguous blocks (along dim 0, or a
// dim with only size-1 dims before it): the program block_transposes data
// along an inner dim itself.
//
// all_reduce_start, all_gather_start and reduce_scatter_start only start
// (Communicator::iallReduce, iallGather, ireduceScatter); the compiler's
// `wait` on their
// output completes them (the loader has checked that nothing touches their
// buffers in between and that each is waited for in its fragment). After
// every instruction the pending ones are tested: with a single-threaded rank
// that is what progresses Open MPI's collectives while it computes. Requests
// and the pending list are made at load. WEFT_NO_ASYNC=1 runs them blocking
// (their waits then have nothing to do).
//
//===----------------------------------------------------------------------===//
#include "runtime/Executor.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

namespace weft {

namespace {
std::string axesKey(const AxesList &A) {
  std::string R;
  for (size_t I = 0; I < A.size(); ++I)
    R += (I ? "," : "") + A[I];
  return R;
}

char *at(void *P, int64_t Elems, size_t E) {
  return static_cast<char *>(P) + Elems * int64_t(E);
}
} // namespace

int Executor::commKey(const std::string &Op, const AxesList &Axes) {
  std::string Key = Op + "/" + axesKey(Axes);
  for (size_t I = 0; I < CommKeys.size(); ++I)
    if (CommKeys[I] == Key)
      return int(I);
  CommKeys.push_back(Key);
  CommTotals.push_back(0);
  return int(CommKeys.size()) - 1;
}

std::vector<std::pair<std::string, double>> Executor::commBytes() const {
  std::vector<std::pair<std::string, double>> R;
  for (size_t I = 0; I < CommKeys.size(); ++I)
    R.emplace_back(CommKeys[I], CommTotals[I]);
  return R;
}

bool Executor::hierarchicalComm() const {
  for (const MeshStep &S : Steps)
    if (S.Key >= 0 && S.Group && S.Group->Hierarchical)
      return true;
  return false;
}

void Executor::resetCommBytes() {
  std::fill(CommTotals.begin(), CommTotals.end(), 0.0);
  AcrossTotal = 0;
  WaitNs = 0;
}

Status Executor::planMeshSteps() {
  Steps.assign(Bound.size(), MeshStep());
  const size_t E = dtypeBytes(Prog.Type);
  const Mesh &M = Prog.Devices;
  // The world group first (checkpoints and --save-grads gather over it),
  // then every group the program declares, in its order: creating one is
  // collective (MPI_Comm_split; ncclCommInitRank), so all ranks create them
  // at load, in the same order, before any step.
  if (!M.Axes.empty()) {
    Expected<const CommGroup *> W = Comm->group(M, M.Axes);
    if (!W.ok())
      return W.status();
    for (size_t G = 0; G < M.Groups.size(); ++G) {
      Expected<const CommGroup *> Made = Comm->group(M, M.Groups[G]);
      if (!Made.ok())
        return Made.status().withContext("mesh.groups[" + std::to_string(G) +
                                         "]");
    }
  }
  const char *NoAsync = std::getenv("WEFT_NO_ASYNC");
  const bool AsyncOn = !NoAsync || !*NoAsync || std::strcmp(NoAsync, "0") == 0;
  AsyncAllowed = AsyncOn;
  std::vector<size_t> Started; // starts not yet paired with their wait
  for (size_t K = 0; K < Bound.size(); ++K) {
    BoundInstruction &BI = Bound[K];
    const OpAttrs &A = *BI.Attrs;
    MeshStep &S = Steps[K];
    auto Group = [&](const AxesList &Axes) -> Status {
      Expected<const CommGroup *> G = Comm->group(Prog.Devices, Axes);
      if (!G.ok())
        return G.status().withContext("instructions[" + std::to_string(K) +
                                      "] (" + opName(BI.Op) + ")");
      S.Group = *G;
      return Status::success();
    };
    // An async collective's request, made now.
    auto Reserve = [&](const TensorRef &X) {
      S.Request = int(Requests.size());
      Requests.emplace_back();
      return Comm->reserveRequest(Requests.back(), size_t(X.Numel),
                                  X.Spec->Type);
    };
    if (A.Async)
      Started.push_back(K);
    switch (BI.Op) {
    case OpKind::Wait:
      HasMeshSteps = true;
      for (size_t J = 0; J < Started.size(); ++J)
        if (Prog.Instructions[Started[J]].Out[0] ==
            Prog.Instructions[K].In[0]) {
          S.WaitsFor = int64_t(Started[J]);
          Started.erase(Started.begin() + int64_t(J));
          break;
        }
      break;
    case OpKind::AllReduce:
    case OpKind::AllGather:
    case OpKind::ReduceScatter:
    case OpKind::Slice: {
      HasMeshSteps = true;
      WEFT_RETURN_IF_ERROR(Group(A.Axes));
      const TensorRef &X = BI.In[0], &Y = BI.Out[0];
      const size_t XE = dtypeBytes(X.Spec->Type);
      double N = double(std::max(X.Numel, Y.Numel)) * double(XE);
      if (BI.Op == OpKind::AllReduce) {
        S.Key = commKey("all_reduce", A.Axes);
        SentBytes Sent = sentBytes(true, N, S.Group->Size, S.Group->NodeOf,
                                   S.Group->Hierarchical);
        S.Bytes = Sent.Total;
        S.AcrossBytes = Sent.Across;
        if (A.Async && AsyncOn)
          WEFT_RETURN_IF_ERROR(Reserve(X));
        break;
      }
      const Shape &Small = (BI.Op == OpKind::AllGather ? X : Y).Spec->Dims;
      size_t D = size_t(A.Dim);
      S.Outer = numElements(Shape(Small.begin(), Small.begin() + D));
      S.Inner = numElements(Shape(Small.begin() + D + 1, Small.end()));
      S.Chunk = Small[D] * S.Inner;
      if (BI.Op == OpKind::Slice)
        break;
      S.Key = commKey(
          BI.Op == OpKind::AllGather ? "all_gather" : "reduce_scatter", A.Axes);
      SentBytes Sent = sentBytes(false, N, S.Group->Size, S.Group->NodeOf,
                                 S.Group->Hierarchical);
      S.Bytes = Sent.Total;
      S.AcrossBytes = Sent.Across;
      // Validated: along dim 0 or with only size-1 dims before it, so the
      // blocks are contiguous (the program block_transposes otherwise).
      if (A.Async && AsyncOn)
        WEFT_RETURN_IF_ERROR(Reserve(X));
      break;
    }
    case OpKind::RingShift: {
      // The rank's whole block goes to the next shard.
      HasMeshSteps = true;
      WEFT_RETURN_IF_ERROR(Group(A.Axes));
      const TensorRef &X = BI.In[0];
      S.Key = commKey("ring_shift", A.Axes);
      S.Bytes = double(X.Numel) * double(dtypeBytes(X.Spec->Type));
      S.AcrossBytes = ringShiftAcross(
          S.Bytes, S.Group->NodeOf, size_t(M.shardIndex(Comm->rank(), A.Axes)));
      S.Request = int(Requests.size());
      Requests.emplace_back();
      break;
    }
    case OpKind::AttentionBlock:
    case OpKind::AttentionBlockGrad: {
      // Global positions: the queries are this rank's block of seq_axes,
      // the keys the block of shard (r - ring_step) mod c; under load
      // balancing, stored blocks of the chunked order.
      const size_t Qi = BI.Op == OpKind::AttentionBlock ? 0 : 1;
      const int64_t Sq = BI.In[Qi].Spec->Dims[1],
                    Sk = BI.In[Qi + 1].Spec->Dims[1];
      const int64_t C = M.count(A.SeqAxes),
                    R = M.shardIndex(Comm->rank(), A.SeqAxes);
      const int64_t Origin = ((R - A.RingStep) % C + C) % C;
      auto Positions = [&](std::vector<int32_t> &Out, int64_t First,
                           int64_t N) {
        Out.resize(size_t(N));
        for (int64_t I = 0; I < N; ++I)
          Out[size_t(I)] =
              int32_t(Prog.SeqChunks > 0
                          ? seqPosition(First + I, Prog.Seq, Prog.SeqChunks)
                          : First + I);
      };
      Positions(BI.SeqPos, R * Sq, Sq);
      Positions(BI.KeyPos, Origin * Sk, Sk);
      // The mask is keyed by global (sample, head, q, k); packed documents
      // are read at the queries' global rows and positions.
      if (A.DropP > 0 || Prog.packsDocuments() || A.KeyPadding)
        placeRows(BI, BI.In[Qi].Spec->Dims);
      break;
    }
    case OpKind::AllToAll: {
      // Every block but the rank's own goes out: (c-1)/c of the buffer.
      HasMeshSteps = true;
      WEFT_RETURN_IF_ERROR(Group(A.Axes));
      const TensorRef &X = BI.In[0];
      const int64_t C = S.Group->Size;
      S.Key = commKey("all_to_all", A.Axes);
      S.Chunk = X.Numel / C;
      S.Bytes = double(X.Numel - S.Chunk) * double(dtypeBytes(X.Spec->Type));
      S.AcrossBytes = allToAllAcross(
          double(X.Numel) * double(dtypeBytes(X.Spec->Type)), S.Group->NodeOf,
          size_t(M.shardIndex(Comm->rank(), A.Axes)));
      AllToAllOps.reserve(size_t(2 * C));
      break;
    }
    case OpKind::Dropout:
    case OpKind::Attention:
    case OpKind::AttentionGrad:
    case OpKind::Rope:
    case OpKind::PositionEmbedding:
    case OpKind::PositionEmbeddingGrad: {
      if (!A.SeqAxes.empty()) // position_embedding(_grad): [B, S_local, D]
        BI.SeqFirst =
            M.shardIndex(Comm->rank(), A.SeqAxes) * BI.In[0].Spec->Dims[1];
      // Load-balanced context parallelism: the local rows' positions, by
      // their global index in the stored order. A dropout reads them for
      // its dim 1 where that is split over cp, the sequence of a [B, S,
      // ...] activation; cp on any other of its dims has no rule.
      if (Prog.SeqChunks > 0 && BI.In[0].Spec->Dims.size() >= 2) {
        const bool Dropout = BI.Op == OpKind::Dropout;
        auto OverCp = [&](size_t D) {
          return D < A.DimAxes.size() &&
                 std::find(A.DimAxes[D].begin(), A.DimAxes[D].end(),
                           ContextAxisName) != A.DimAxes[D].end();
        };
        const size_t Rank = BI.In[0].Spec->Dims.size();
        for (size_t D = 0; Dropout && D < Rank; ++D)
          if (OverCp(D) && (D != 1 || Rank < 3))
            return Status::error(
                describeInstruction(BI) + ": dim " + std::to_string(D) +
                " of a rank-" + std::to_string(Rank) +
                " dropout is split over cp, whose sequences are stored out "
                "of order (seq_chunks): only dim 1 of [B, S, ...] reads "
                "their positions");
        if (!Dropout || OverCp(1)) {
          const int64_t Rows = BI.In[0].Spec->Dims[1];
          const int64_t First =
              Dropout ? M.shardIndex(Comm->rank(), A.DimAxes[1]) * Rows
                      : BI.SeqFirst;
          BI.SeqPos.resize(size_t(Rows));
          for (int64_t R = 0; R < Rows; ++R)
            BI.SeqPos[size_t(R)] =
                int32_t(seqPosition(First + R, Prog.Seq, Prog.SeqChunks));
          BI.SeqChunks = Prog.SeqChunks;
        }
      }
      // Where the instruction's rows and positions lie in the step's
      // global batch: dropout masks and packed documents are keyed by it.
      if (A.DropP <= 0 && !Prog.packsDocuments() && !A.KeyPadding &&
          !A.TokenTypes)
        break;
      placeRows(BI, BI.In[BI.Op == OpKind::AttentionGrad ? 1 : 0].Spec->Dims);
      break;
    }
    case OpKind::Embedding:
    case OpKind::EmbeddingGrad:
    case OpKind::CrossEntropyStats:
    case OpKind::CrossEntropyStatsGrad: {
      if (A.VocabAxes.empty())
        break;
      int64_t Local = BI.Op == OpKind::Embedding       ? BI.In[0].Rows
                      : BI.Op == OpKind::EmbeddingGrad ? BI.Out[0].Rows
                                                       : BI.In[0].Last;
      BI.VocabFirst = M.shardIndex(Comm->rank(), A.VocabAxes) * Local;
      BI.VocabTotal = M.count(A.VocabAxes) * Local;
      break;
    }
    case OpKind::AdamW: {
      if (A.ShardAxes.empty())
        break;
      HasMeshSteps = true;
      WEFT_RETURN_IF_ERROR(Group(A.ShardAxes));
      int64_t Full = BI.In[0].Numel, Block = Full / S.Group->Size;
      int64_t First = int64_t(S.Group->Rank) * Block;
      // The kernel sees the rank's block of the param and of a full-size
      // grad (a block-size grad is the block); the program gathers the
      // param afterwards (an in-place all_gather).
      auto Narrow = [&](TensorRef &T, bool Offset) {
        if (Offset)
          T.Data = at(T.Data, First, E);
        T.Numel = Block;
        T.Rows = 1;
        T.Last = Block;
      };
      Narrow(BI.In[0], true);
      Narrow(BI.In[1], BI.In[1].Numel == Full);
      Narrow(BI.Out[0], true);
      break;
    }
    default:
      break;
    }
  }
  Pending.reserve(Requests.size());
  return Status::success();
}

// Global coordinates of the rank's block of X (the instruction's input,
// laid out by its dim_axes): dim 0 holds one micro-batch's rows of the
// step's batch. Dropout masks and packed documents are keyed by them.
void Executor::placeRows(BoundInstruction &BI, const Shape &X) {
  const OpAttrs &A = *BI.Attrs;
  const Mesh &M = Prog.Devices;
  BI.DimFirst.assign(X.size(), 0);
  BI.DimTotal = X;
  for (size_t D = 0; D < X.size() && D < A.DimAxes.size(); ++D) {
    BI.DimFirst[D] = M.shardIndex(Comm->rank(), A.DimAxes[D]) * X[D];
    BI.DimTotal[D] = M.count(A.DimAxes[D]) * X[D];
  }
  BI.MicrobatchRows = BI.DimTotal[0];
  BI.DimTotal[0] *= Prog.Microbatches;
}

Status Executor::runCollective(size_t K) {
  const BoundInstruction &BI = Bound[K];
  const MeshStep &S = Steps[K];
  if (BI.Op == OpKind::Wait) // no group and no output
    return finish(size_t(S.WaitsFor));
  const CommGroup &G = *S.Group;
  const TensorRef &X = BI.In[0], &Y = BI.Out[0];
  const DType T = X.Spec->Type;
  const size_t E = dtypeBytes(T);
  const int64_t C = G.Size, Chunk = S.Chunk, Outer = S.Outer;
  if (S.Key >= 0) {
    CommTotals[size_t(S.Key)] += S.Bytes;
    AcrossTotal += S.AcrossBytes;
  }
  switch (BI.Op) {
  case OpKind::AllReduce: {
    if (S.Request < 0)
      return Comm->allReduce(G, X.Data, Y.Data, size_t(X.Numel), T, *Q);
    CommRequest &R = Requests[size_t(S.Request)];
    WEFT_RETURN_IF_ERROR(
        Comm->iallReduce(G, X.Data, Y.Data, size_t(X.Numel), T, *Q, R));
    if (R.Active)
      startedAsync(K);
    return Status::success();
  }
  case OpKind::AllGather:
    if (X.Data == Y.Data) // in place: this rank's block of dim 0 is its own
      return Comm->allGather(G, nullptr, Y.Data, size_t(Y.Numel / C), T, *Q);
    if (S.Request >= 0) {
      CommRequest &R = Requests[size_t(S.Request)];
      WEFT_RETURN_IF_ERROR(
          Comm->iallGather(G, X.Data, Y.Data, size_t(X.Numel), T, *Q, R));
      if (R.Active)
        startedAsync(K);
      return Status::success();
    }
    return Comm->allGather(G, X.Data, Y.Data, size_t(X.Numel), T, *Q);
  case OpKind::ReduceScatter:
    if (S.Request >= 0) {
      CommRequest &R = Requests[size_t(S.Request)];
      WEFT_RETURN_IF_ERROR(
          Comm->ireduceScatter(G, X.Data, Y.Data, size_t(Y.Numel), T, *Q, R));
      if (R.Active)
        startedAsync(K);
      return Status::success();
    }
    return Comm->reduceScatter(G, X.Data, Y.Data, size_t(Y.Numel), T, *Q);
  case OpKind::AllToAll: {
    // Posted together (startTransfers), so no pair of ranks can deadlock
    // whatever order they list their peers in; the own block is a copy.
    AllToAllOps.clear();
    for (int P = 0; P < C; ++P)
      if (P != G.Rank) {
        AllToAllOps.push_back(
            {Transfer::Send, P, at(X.Data, P * Chunk, E), size_t(Chunk), T});
        AllToAllOps.push_back(
            {Transfer::Recv, P, at(Y.Data, P * Chunk, E), size_t(Chunk), T});
      }
    WEFT_RETURN_IF_ERROR(Q->copyOnDevice(at(Y.Data, G.Rank * Chunk, E),
                                         at(X.Data, G.Rank * Chunk, E),
                                         size_t(Chunk) * E));
    WEFT_RETURN_IF_ERROR(
        Comm->startTransfers(G, AllToAllOps, *Q, AllToAllRequest));
    return Comm->wait(AllToAllRequest, *Q);
  }
  case OpKind::RingShift: {
    const int Next = (G.Rank + 1) % int(C),
              Prev = (G.Rank + int(C) - 1) % int(C);
    RingOps.assign({{Transfer::Send, Next, X.Data, size_t(X.Numel), T},
                    {Transfer::Recv, Prev, Y.Data, size_t(X.Numel), T}});
    CommRequest &R = Requests[size_t(S.Request)];
    WEFT_RETURN_IF_ERROR(Comm->startTransfers(G, RingOps, *Q, R));
    if (BI.Attrs->Async && AsyncAllowed && R.Active) {
      startedAsync(K);
      return Status::success();
    }
    return Comm->wait(R, *Q);
  }
  case OpKind::Slice:
    for (int64_t O = 0; O < Outer; ++O)
      WEFT_RETURN_IF_ERROR(Q->copyOnDevice(
          at(Y.Data, O * Chunk, E), at(X.Data, (O * C + G.Rank) * Chunk, E),
          size_t(Chunk) * E));
    return Status::success();
  default:
    return Status::error(std::string("not a collective: ") + opName(BI.Op));
  }
}

std::string Executor::asyncName(size_t A) const {
  return "instructions[" + std::to_string(A) + "] (" +
         instructionName(Prog.Instructions[A]) + ")";
}

void Executor::startedAsync(size_t K) {
  Pending.push_back(K); // within the capacity reserved at load
  if (Timing) {
    if (AsyncStartNs.size() < Bound.size())
      AsyncStartNs.assign(Bound.size(), 0);
    AsyncStartNs[K] = Timeline::nowNs();
  }
}

Status Executor::waitFor(size_t A, bool RecordWait) {
  int64_t T0 = Timing ? Timeline::nowNs() : 0;
  const int64_t W0 = Timeline::nowNs();
  Status S = Comm->wait(Requests[size_t(Steps[A].Request)], *Q)
                 .withContext("waiting for " + asyncName(A));
  WaitNs += Timeline::nowNs() - W0;
  if (Timing) {
    if (RecordWait)
      recordSpan(A, SpanKind::Wait, T0);
    recordSpan(A, SpanKind::InFlight, AsyncStartNs[A]);
  }
  return S;
}

Status Executor::finish(size_t A) {
  auto It = std::find(Pending.begin(), Pending.end(), A);
  if (It == Pending.end())
    return Status::success(); // ran blocking, or completed while polled
  Pending.erase(It);
  return waitFor(A, /*RecordWait=*/false); // the wait instruction's own span
}

Status Executor::pollPending() {
  size_t Kept = 0;
  Status S = Status::success();
  for (size_t A : Pending) {
    bool Done = false;
    if (S.ok()) {
      S = Comm->test(Requests[size_t(Steps[A].Request)], Done)
              .withContext("testing " + asyncName(A));
      if (Done) {
        if (Timing)
          recordSpan(A, SpanKind::InFlight, AsyncStartNs[A]);
        continue;
      }
    }
    Pending[Kept++] = A;
  }
  Pending.resize(Kept);
  return S;
}

Status Executor::waitPending() {
  Status First = Status::success();
  for (size_t A : Pending) {
    Status S = waitFor(A);
    if (First.ok())
      First = S;
  }
  Pending.clear();
  return First;
}

} // namespace weft
