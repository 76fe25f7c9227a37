//===- Executor.cpp - Allocation, binding and instruction loop ------------===//
#include "runtime/Executor.h"
#include "program/Shard.h"
#include "runtime/Init.h"
#include "runtime/ReducedBuckets.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace weft {

namespace {

/// How often instruction K runs per step: the micro-batch count in a
/// per-micro-batch fragment, else once.
double runsPerStep(const Program &P, size_t K) {
  for (const Fragment &F : P.Stages.front().Fragments)
    if (int64_t(K) >= F.Begin && int64_t(K) < F.End)
      return F.PerMicrobatch ? double(P.Microbatches) : 1.0;
  return 1.0;
}
} // namespace

Executor::Executor(Program P, std::unique_ptr<Backend> B)
    : Prog(std::move(P)), Impl(std::move(B)) {}

Executor::~Executor() {
  if (Staging)
    Impl->release(Staging);
  for (const std::deque<TransferBuffer> *Pool : {&SendBuffers, &RecvBuffers})
    for (const TransferBuffer &B : *Pool)
      Impl->release(B.Data);
  Impl->release(Arena);
  Impl->release(Persistent);
}

Expected<std::unique_ptr<Executor>>
Executor::create(Program P, std::unique_ptr<Backend> B, Communicator *Comm) {
  resolveLayouts(P);
  WEFT_RETURN_IF_ERROR(validateProgram(P));
  std::unique_ptr<Communicator> Owned;
  if (!Comm) {
    Owned = createLocalCommunicator();
    Comm = Owned.get();
  }
  // Checked before anything is allocated or any step runs.
  int64_t Product = P.Devices.Axes.empty() ? 1 : P.Devices.size();
  if (Product != Comm->size())
    return Status::error(
        "world size " + std::to_string(Comm->size()) +
        " is not the mesh product " +
        (P.Devices.Axes.empty()
             ? std::string("(no mesh) = 1")
             : P.Devices.describe() + " = " + std::to_string(Product)));
  // A pipeline rank runs its stage: the stage of its coordinate on the
  // pipeline axis.
  if (!P.Devices.Pipeline.empty()) {
    const Mesh &M = P.Devices;
    const int64_t S = M.coords(Comm->rank())[size_t(M.axisIndex(M.Pipeline))];
    P = stageView(P, size_t(S));
  }
  if (!B)
    B = createCpuBackend(P.Type);
  std::unique_ptr<Executor> E(new Executor(std::move(P), std::move(B)));
  E->OwnedComm = std::move(Owned);
  E->Comm = Comm;
  E->Q = E->Impl->createQueue();
  if (!E->Q)
    return Status::error(std::string("the ") + E->Impl->name() +
                         " backend could not create its queue");
  WEFT_RETURN_IF_ERROR(E->bind());
  return E;
}

Status Executor::bind() {
  const size_t Elem = dtypeBytes(Prog.Type);
  const int64_t MyStage = stage();
  // A stage holds the params its buffers name, and the state (grad and
  // Adam moments) of those it trains; a program of one stage, all of them.
  // A replica (a tied embedding another stage trains) has a value only.
  Owned.assign(Prog.Params.size(), Prog.StageIndex < 0);
  // A forward-only program has no gradients or Adam moments.
  StateOwned.assign(Prog.Params.size(),
                    Prog.StageIndex < 0 && !Prog.forwardOnly());
  for (const BufferSpec &B : Prog.Buffers)
    if (B.StageIndex == MyStage && B.Kind == BufferKind::Param)
      Owned[size_t(B.Param)] = true;
    else if (B.StageIndex == MyStage && B.Kind == BufferKind::Grad)
      StateOwned[size_t(B.Param)] = true;
  // Each persistent tensor's local shape and layout: from its buffers, else
  // the param's.
  StateSpecs.resize(Prog.Params.size());
  OwnerStage.assign(Prog.Params.size(), MyStage);
  for (size_t P = 0; P < Prog.Params.size(); ++P) {
    const BufferKind Kinds[4] = {BufferKind::Param, BufferKind::Grad,
                                 BufferKind::AdamM, BufferKind::AdamV};
    for (int K = 0; K < 4; ++K) {
      BufferSpec &S = StateSpecs[P][size_t(K)];
      S.Kind = Kinds[K];
      S.Param = int64_t(P);
      S.Dims = Prog.Params[P].Dims;
      S.Type = Prog.Type;
      S.Place = Prog.Params[P].Place;
    }
  }
  // The inputs hold this rank's block of one micro-batch.
  GlobalBatch = Prog.Batch;
  LocalBatch = Prog.microbatchRows();
  LocalSeq = GlobalSeq = Prog.Seq;
  for (const BufferSpec &B : Prog.Buffers) {
    if (B.tensorInput() || B.Kind == BufferKind::Constant)
      continue; // placed after the token inputs
    if (B.Kind == BufferKind::Input) {
      if (B.Dims.size() == 1 || B.Type != DType::I32)
        continue; // labels or float targets: the tokens' rows (checkLayouts)
      LocalBatch = B.Dims[0];
      LocalSeq = B.Dims[1];
      GlobalBatch = B.Place.Global[0] * Prog.Microbatches;
      GlobalSeq = B.Place.Global[1];
      BatchOffset = Prog.Devices.shardIndex(Comm->rank(), B.Place.Sharding[0]) *
                    LocalBatch;
      SeqOffset =
          Prog.Devices.shardIndex(Comm->rank(), B.Place.Sharding[1]) * LocalSeq;
    } else if (B.Kind != BufferKind::Arena && B.Kind != BufferKind::Constant &&
               (B.StageIndex == MyStage || !holds(size_t(B.Param), B.Kind))) {
      // Another stage's tensors keep their owner's shapes and layouts
      // (checkpoints describe every tensor), without memory here.
      StateSpecs[size_t(B.Param)][stateSlot(B.Kind)] = B;
      if (B.Kind == BufferKind::Grad)
        OwnerStage[size_t(B.Param)] = B.StageIndex;
    }
  }
  // One block: params, m, v, then grads (each 64-aligned), then the two
  // inputs. The grads of each reduced bucket lie in its unpack's order, so
  // its all-reduce can write them in place (ReducedBuckets.h).
  size_t Total = 0;
  std::vector<size_t> Offsets(4 * Prog.Params.size(), 0);
  auto place = [&](size_t P, int K) {
    Offsets[4 * P + size_t(K)] = Total;
    if (holds(P, StateSpecs[P][size_t(K)].Kind))
      Total += align64(size_t(StateSpecs[P][size_t(K)].numel()) * Elem);
  };
  for (size_t P = 0; P < Prog.Params.size(); ++P)
    for (int K : {0, 2, 3})
      place(P, K);
  const std::vector<ReducedBucket> Buckets = findReducedBuckets(Prog);
  std::vector<bool> GradPlaced(Prog.Params.size(), false);
  for (const ReducedBucket &B : Buckets)
    for (int64_t P : B.Params) {
      place(size_t(P), 1);
      GradPlaced[size_t(P)] = true;
    }
  for (size_t P = 0; P < Prog.Params.size(); ++P)
    if (!GradPlaced[P])
      place(P, 1);
  // Inputs: one slot per micro-batch, tokens then targets (float targets,
  // a regression's, may be larger than the tokens).
  const BufferSpec *FloatTargets = Prog.floatTargets();
  size_t InputBytes = align64(
      std::max(size_t(LocalBatch * LocalSeq) * 4,
               FloatTargets ? size_t(FloatTargets->bytes()) : size_t(0)));
  InputStride = int64_t(InputBytes / 4);
  size_t AllInputs = InputBytes * size_t(Prog.Microbatches);
  size_t TokensOff = Total, TargetsOff = Total + AllInputs;
  Total += 2 * AllInputs;
  // A forward-only program's tensor inputs (version 8) and this stage's
  // constants (version 10), whole, one each.
  std::vector<size_t> TensorOff(Prog.Buffers.size(), 0);
  for (size_t I = 0; I < Prog.Buffers.size(); ++I) {
    const BufferSpec &B = Prog.Buffers[I];
    if (!B.tensorInput() &&
        !(B.Kind == BufferKind::Constant && B.StageIndex == MyStage))
      continue;
    TensorOff[I] = Total;
    // Each is at most 2^51 bytes (the loader's bound); their sum is not.
    if (__builtin_add_overflow(Total, align64(size_t(B.bytes())), &Total) ||
        Total > (size_t(1) << 60))
      return Status::error(
          "the tensor inputs and constants need more than 2^60 bytes "
          "(buffers[" +
          std::to_string(I) + "])");
  }
  PersistentBytes = Total;
  // The arena's per-slot part once per micro-batch in flight, its shared
  // part once (validateProgram bounded the sum by 2^60).
  const int64_t Slots = Prog.Stages.front().Slots;
  const size_t ArenaTotal = size_t(arenaAllocation(Prog));
  Persistent = Impl->allocate(Total);
  Arena = Impl->allocate(ArenaTotal);
  if (!Persistent || !Arena)
    return Status::error("cannot allocate " + std::to_string(Total) +
                         " bytes of state and " + std::to_string(ArenaTotal) +
                         " arena bytes");
  char *Base = static_cast<char *>(Persistent);
  for (size_t P = 0; P < Prog.Params.size(); ++P)
    State.push_back({Base + Offsets[4 * P], Base + Offsets[4 * P + 1],
                     Base + Offsets[4 * P + 2], Base + Offsets[4 * P + 3]});
  Tokens = reinterpret_cast<int32_t *>(Base + TokensOff);
  Targets = reinterpret_cast<int32_t *>(Base + TargetsOff);

  PerMicrobatch = perMicrobatchBuffers(Prog);
  // Those with an instance per slot: per micro-batch, in the per-slot part.
  for (size_t I = 0; I < Prog.Buffers.size(); ++I)
    if (Prog.Buffers[I].Offset >= slotBytes(Prog))
      PerMicrobatch[I] = false;
  Where.assign(Prog.Buffers.size(), nullptr);
  for (size_t I = 0; I < Prog.Buffers.size(); ++I) {
    const BufferSpec &B = Prog.Buffers[I];
    if (B.StageIndex != MyStage)
      continue; // another stage's: no instruction here touches it
    switch (B.Kind) {
    case BufferKind::Input:
      Where[I] = B.tensorInput()      ? static_cast<void *>(Base + TensorOff[I])
                 : B.Name == "tokens" ? Tokens
                                      : Targets;
      break;
    case BufferKind::Arena: // slot 0's instance, or the shared part
      Where[I] = static_cast<char *>(Arena) +
                 arenaAddress(Prog, PerMicrobatch, int64_t(I), 0);
      break;
    case BufferKind::Constant:
      Where[I] = Base + TensorOff[I];
      WEFT_RETURN_IF_ERROR(
          Q->copyToDevice(Where[I], B.Data.data(), B.Data.size()));
      break;
    case BufferKind::Param:
      Where[I] = State[B.Param].Param;
      break;
    case BufferKind::Grad:
      Where[I] = State[B.Param].Grad;
      break;
    case BufferKind::AdamM:
      Where[I] = State[B.Param].M;
      break;
    case BufferKind::AdamV:
      Where[I] = State[B.Param].V;
      break;
    }
  }
  if (Prog.Loss >= 0) {
    LossData = Where[Prog.Loss];
    LossHost.resize(size_t(Prog.Microbatches) *
                    dtypeBytes(Prog.Buffers[size_t(Prog.Loss)].Type));
  }
  HostInputs.resize(size_t(2 * Prog.Microbatches * InputStride));
  MaskedLoss = Prog.maskedLoss();
  auto Ref = [&](int64_t Id) {
    const BufferSpec &B = Prog.Buffers[Id];
    TensorRef R;
    R.Data = Where[Id];
    R.Spec = &B;
    R.Numel = B.numel();
    R.Last = B.Dims.empty() ? 1 : B.Dims.back();
    R.Rows = R.Last ? R.Numel / R.Last : 0;
    return R;
  };
  for (size_t K = 0; K < Prog.Instructions.size(); ++K) {
    const size_t K0 = K;
    const Instruction &I = Prog.Instructions[K];
    BoundInstruction BI{I.Op, &I.Attrs, K, {}, {}};
    for (int64_t Id : I.In) {
      if (Prog.Buffers[size_t(Id)].tokenInput())
        InputUses.push_back(
            {K, BI.In.size(), Prog.Buffers[size_t(Id)].Name == "targets"});
      BI.In.push_back(Ref(Id));
    }
    for (int64_t Id : I.Out)
      BI.Out.push_back(Ref(Id));
    if (I.Op == OpKind::Matmul) {
      const TensorRef &A = BI.In[0], &B = BI.In[1];
      double M = double(I.Attrs.TransposeA ? A.Last : A.Rows);
      double K = double(I.Attrs.TransposeA ? A.Rows : A.Last);
      double N = double(I.Attrs.TransposeB ? B.Rows : B.Last);
      // Per step: a micro-batch fragment's matmul runs once per micro-batch.
      MatmulFlops += 2 * M * N * K * runsPerStep(Prog, K0);
    }
    Bound.push_back(std::move(BI));
  }
  elideBucketUnpacks(Buckets);
  const Stage &St = Prog.Stages.front();
  UpdateBegin = St.updateBegin();
  WEFT_RETURN_IF_ERROR(planMeshSteps());
  if (Prog.NumStages > 1) {
    Expected<const CommGroup *> G =
        Comm->group(Prog.Devices, AxesList{Prog.Devices.Pipeline});
    if (!G.ok())
      return G.status();
    Pipeline = *G;
    // Bytes this rank sends to other stages, as "send/<axis>".
    TransferKey = commKey("send", AxesList{Prog.Devices.Pipeline});
    WEFT_RETURN_IF_ERROR(planTransfers());
  }
  // Operands in per-micro-batch buffers follow the micro-batch's slot
  // (selectMicrobatch), from their slot-0 addresses as bound.
  if (Slots > 1)
    for (size_t K = 0; K < Bound.size(); ++K)
      for (bool Out : {false, true}) {
        const std::vector<int64_t> &Ids =
            Out ? Prog.Instructions[K].Out : Prog.Instructions[K].In;
        std::vector<TensorRef> &Refs = Out ? Bound[K].Out : Bound[K].In;
        for (size_t Pos = 0; Pos < Ids.size(); ++Pos)
          if (PerMicrobatch[size_t(Ids[Pos])])
            SlotUses.push_back({K, Pos, Out,
                                static_cast<char *>(Refs[Pos].Data) -
                                    static_cast<char *>(Arena)});
      }
  std::vector<BoundInstruction> Kernels;
  for (const BoundInstruction &BI : Bound)
    if (!isCollective(BI.Op))
      Kernels.push_back(BI);
  Expected<size_t> Scratch = Impl->prepare(Kernels);
  if (!Scratch.ok())
    return Scratch.status();
  ScratchBytes += *Scratch;
  return Status::success();
}

void Executor::elideBucketUnpacks(const std::vector<ReducedBucket> &Buckets) {
  Elided.assign(Bound.size(), false);
  for (const ReducedBucket &B : Buckets) {
    // The grads must lie end to end, as the unpack's pieces do; with one
    // arena slot, selectMicrobatch never rebinds the all-reduce's result.
    const std::vector<TensorRef> &Pieces = Bound[B.Unpack].Out;
    bool EndToEnd = Prog.Stages.front().Slots == 1;
    for (size_t I = 0; I + 1 < Pieces.size(); ++I)
      EndToEnd &= static_cast<const char *>(Pieces[I].Data) +
                      Pieces[I].Numel * dtypeBytes(Pieces[I].Spec->Type) ==
                  Pieces[I + 1].Data;
    if (!EndToEnd)
      continue;
    Bound[B.Reduce].Out[0].Data = Pieces.front().Data;
    Elided[B.Unpack] = true;
  }
}

Status Executor::initParams(uint64_t Seed) {
  const size_t Elem = dtypeBytes(Prog.Type);
  std::vector<char> Host;
  for (size_t P = 0; P < Prog.Params.size(); ++P) {
    if (!Owned[P])
      continue;
    const ParamSpec &Spec = Prog.Params[P];
    const BufferSpec &Local = stateSpec(P, BufferKind::Param);
    Host.resize(size_t(Local.numel()) * Elem);
    if (!Spec.Place.sharded()) {
      initParam(Spec, Seed, Prog.Type, Host.data(), 0,
                uint64_t(numElements(Spec.Dims)));
    } else {
      // Every element takes the value of its global index.
      forEachRun(shardMap(Spec.Place, Prog.Devices, Comm->rank()),
                 [&](int64_t L, int64_t G, int64_t Count) {
                   initParam(Spec, Seed, Prog.Type, Host.data() + L * Elem,
                             uint64_t(G), uint64_t(Count));
                 });
    }
    WEFT_RETURN_IF_ERROR(writeState(P, BufferKind::Param, Host.data()));
    for (BufferKind K :
         {BufferKind::Grad, BufferKind::AdamM, BufferKind::AdamV})
      if (StateOwned[P])
        WEFT_RETURN_IF_ERROR(
            Q->fillZero(state(P, K), size_t(stateSpec(P, K).numel()) * Elem));
  }
  return Q->synchronize();
}

Status Executor::readState(size_t P, BufferKind K, void *Host) const {
  if (!holds(P, K))
    return Status::error("param '" + Prog.Params[P].Name +
                         "' is held by "
                         "another pipeline stage");
  const size_t Bytes = size_t(stateSpec(P, K).bytes());
  WEFT_RETURN_IF_ERROR(Q->copyToHost(Host, state(P, K), Bytes));
  return Q->synchronize();
}

Status Executor::writeState(size_t P, BufferKind K, const void *Host) {
  if (!holds(P, K))
    return Status::error("param '" + Prog.Params[P].Name +
                         "' is held by "
                         "another pipeline stage");
  const size_t Bytes = size_t(stateSpec(P, K).bytes());
  WEFT_RETURN_IF_ERROR(Q->copyToDevice(state(P, K), Host, Bytes));
  // The host buffer may change once this returns.
  return Q->synchronize();
}

Expected<std::vector<char>> Executor::stateBytes(size_t P, BufferKind K) const {
  std::vector<char> Host(size_t(stateSpec(P, K).bytes()));
  WEFT_RETURN_IF_ERROR(readState(P, K, Host.data()));
  return Host;
}

Status Executor::findNonFinite(size_t P, BufferKind K, int64_t &At,
                               double &Value) const {
  if (!holds(P, K)) {
    At = -1; // another stage checks it
    return Status::success();
  }
  const BufferSpec &S = stateSpec(P, K);
  return Impl->findNonFinite(state(P, K), S.numel(), S.Type, *Q, At, Value);
}

Status Executor::runInstruction(size_t K, const StepContext &Ctx) {
  if (!HasMeshSteps)
    return Impl->run(Bound[K], Ctx, *Q);
  if (isCollective(Bound[K].Op)) {
    // A wait's time is counted by waitFor, wherever it completes.
    if (Bound[K].Op == OpKind::Wait)
      return runCollective(K);
    const int64_t T0 = Timeline::nowNs();
    Status S = runCollective(K);
    WaitNs += Timeline::nowNs() - T0;
    return S;
  }
  return Impl->run(Bound[K], Ctx, *Q);
}

void Executor::recordSpan(size_t K, SpanKind Kind, int64_t StartNs) {
  Span S;
  const int64_t Now = Timeline::nowNs();
  S.StartNs = StartNs < 0 ? Now : StartNs;
  S.DurNs = Now - S.StartNs;
  S.Step = CurrentStep;
  S.Inst = int32_t(K);
  S.Op = Bound[K].Op;
  S.Kind = Kind;
  if (HasMeshSteps && Steps[K].Group && isCollective(Bound[K].Op)) {
    S.Bytes = Steps[K].Bytes;
    S.Group = &Steps[K].Group->Axes;
  }
  Times.record(S);
}

Status Executor::run(int64_t Begin, int64_t End, const StepContext &Ctx) {
  CurrentStep = Ctx.Step;
  StepContext Here = Ctx;
  Here.CountedTargets = CountedTargets;
  Here.Microbatch = std::max<int64_t>(BoundMicrobatch, 0);
  Here.Seed = DropoutSeed;
  if (!DocPositions.empty()) {
    Here.DocPos = DocPositions.data();
    Here.DocSeq = GlobalSeq;
  }
  if (!KeySpans.empty())
    Here.KeySpans = KeySpans.data();
  if (!TokenTypes.empty()) {
    Here.TokenTypes = TokenTypes.data();
    Here.DocSeq = GlobalSeq;
  }
  for (int64_t K = Begin; K < End; ++K) {
    if (Elided[size_t(K)]) {
      // Done in place by its all-reduce: a span of no time keeps every
      // instruction in the trace.
      if (Timing)
        recordSpan(size_t(K), SpanKind::Instruction, -1);
      continue;
    }
    int64_t T0 = Timing ? Timeline::nowNs() : 0;
    Status S = runInstruction(size_t(K), Here);
    if (Timing)
      recordSpan(size_t(K), SpanKind::Instruction, T0);
    // Testing is what progresses the async collectives in flight while
    // this rank computes.
    if (S.ok() && !Pending.empty()) {
      int64_t T1 = Timing ? Timeline::nowNs() : 0;
      S = pollPending();
      if (Timing)
        recordSpan(size_t(K), SpanKind::Test, T1);
    }
    if (S.ok() && !InFlight.empty())
      S = progressTransfers();
    if (!S.ok()) {
      // Leave nothing in flight; the first error is the one reported.
      (void)waitPending();
      return S.withContext("instructions[" + std::to_string(K) + "] (" +
                           instructionName(Prog.Instructions[size_t(K)]) + ")");
    }
  }
  // Every async collective is complete when the range returns.
  if (Pending.empty())
    return Status::success();
  return waitPending().withContext(
      "completing the async collectives of instructions [" +
      std::to_string(Begin) + ", " + std::to_string(End) + ")");
}

void Executor::selectMicrobatch(int64_t K) {
  if (K == BoundMicrobatch)
    return;
  for (const InputUse &U : InputUses)
    Bound[U.Inst].In[U.Pos].Data = U.Targets ? targets(K) : tokens(K);
  if (!SlotUses.empty()) {
    char *Base = static_cast<char *>(Arena) +
                 (K % Prog.Stages.front().Slots) * slotBytes(Prog);
    for (const SlotUse &U : SlotUses)
      (U.Out ? Bound[U.Inst].Out : Bound[U.Inst].In)[U.Pos].Data =
          Base + U.Offset;
  }
  BoundMicrobatch = K;
}

void *Executor::bufferAt(int64_t Id, int64_t K) const {
  char *W = static_cast<char *>(Where[size_t(Id)]);
  if (K >= 0 && PerMicrobatch[size_t(Id)])
    W += (K % Prog.Stages.front().Slots) * slotBytes(Prog);
  return W;
}

Status Executor::loadBatch(const BatchSource &Data, int64_t Step) {
  const int64_t Rows = GlobalBatch / Prog.Microbatches;
  // Staged on the host: tokens of every micro-batch, then targets (the
  // layout of the device inputs), one copy in.
  int32_t *Toks = HostInputs.data();
  int32_t *Tgts = Toks + Prog.Microbatches * InputStride;
  const MaskedLmSpec *M = Prog.MaskedLm.enabled() ? &Prog.MaskedLm : nullptr;
  if (Data.sampleTargets() != Prog.sampleTargets())
    return Status::error(
        Prog.sampleTargets()
            ? "the program reads one target per sample (a classifier's), but "
              "the batches hold one per token"
            : "the batches hold one target per sample, but the program reads "
              "one per token");
  const BufferSpec *FloatTargets = Prog.floatTargets();
  const size_t RowBytes =
      FloatTargets ? size_t(FloatTargets->bytes() / FloatTargets->Dims[0]) : 0;
  if (Data.floatTargetRowBytes() != RowBytes)
    return Status::error(
        "the program reads " +
        (RowBytes ? std::to_string(RowBytes) +
                        " bytes of float targets per sample (a regression's)"
                  : std::string("integer targets")) +
        ", but the batches hold " +
        (Data.floatTargetRowBytes()
             ? std::to_string(Data.floatTargetRowBytes()) +
                   " bytes of float targets per sample"
             : std::string("integer targets")));
  // Load-balanced context parallelism: whole rows, then the rank's stored
  // block (program/SeqChunks.h); the targets, one per token (the loader
  // refuses seq_chunks otherwise), follow their tokens.
  const bool Reorder = Prog.SeqChunks > 0;
  std::vector<int32_t> WholeToks, WholeTgts;
  if (Reorder) {
    WholeToks.resize(size_t(LocalBatch * GlobalSeq));
    WholeTgts.resize(WholeToks.size());
  }
  for (int64_t K = 0; K < Prog.Microbatches; ++K) {
    if (Reorder) {
      Data.fillStepBlock(Step, GlobalBatch, GlobalSeq, K * Rows + BatchOffset,
                         LocalBatch, 0, GlobalSeq, M, Prog.Vocab,
                         WholeToks.data(), WholeTgts.data());
      for (int64_t R = 0; R < LocalBatch; ++R)
        for (int64_t C = 0; C < LocalSeq; ++C) {
          const int64_t From =
              R * GlobalSeq +
              seqPosition(SeqOffset + C, GlobalSeq, Prog.SeqChunks);
          Toks[K * InputStride + R * LocalSeq + C] = WholeToks[size_t(From)];
          Tgts[K * InputStride + R * LocalSeq + C] = WholeTgts[size_t(From)];
        }
      continue;
    }
    Data.fillStepBlock(Step, GlobalBatch, GlobalSeq, K * Rows + BatchOffset,
                       LocalBatch, SeqOffset, LocalSeq, M, Prog.Vocab,
                       Toks + K * InputStride, Tgts + K * InputStride);
    if (RowBytes)
      Data.fillFloatTargets(Step, GlobalBatch, K * Rows + BatchOffset,
                            LocalBatch, Tgts + K * InputStride);
  }
  // Every rank counts the whole step's targets itself: a token file's
  // masking is a function of the position, and samples are whole on every
  // rank; no collective needed.
  if (MaskedLoss)
    CountedTargets = Data.countedTargets(Step, GlobalBatch, GlobalSeq, M);
  WEFT_RETURN_IF_ERROR(loadRowData(Data, Step));
  WEFT_RETURN_IF_ERROR(Q->copyToDevice(Tokens, HostInputs.data(),
                                       HostInputs.size() * sizeof(int32_t)));
  return Q->synchronize();
}

Status Executor::loadRowData(const BatchSource &Data, int64_t Step) {
  // Packed documents: every rank (every pipeline stage, holding tokens or
  // not) finds them in the step's whole batch.
  if (Prog.packsDocuments()) {
    DocPositions.resize(size_t(GlobalBatch * GlobalSeq));
    WEFT_RETURN_IF_ERROR(Data.fillDocumentPositions(
        Step, GlobalBatch, GlobalSeq, Prog.Vocab, DocPositions.data()));
  }
  if (Prog.ReadsTokenTypes) {
    TokenTypes.resize(size_t(GlobalBatch * GlobalSeq));
    WEFT_RETURN_IF_ERROR(
        Data.fillTokenTypes(Step, GlobalBatch, GlobalSeq, TokenTypes.data()));
  }
  if (Prog.ReadsKeyPadding) {
    KeySpans.resize(size_t(GlobalBatch * 2));
    WEFT_RETURN_IF_ERROR(
        Data.fillKeySpans(Step, GlobalBatch, GlobalSeq, KeySpans.data()));
  }
  return Status::success();
}

Status Executor::setInputs(int64_t K, const int32_t *Toks,
                           const int32_t *Tgts) {
  if (K < 0 || K >= Prog.Microbatches)
    return Status::error("micro-batch " + std::to_string(K) +
                         " is not in [0, " + std::to_string(Prog.Microbatches) +
                         ")");
  const size_t Bytes = size_t(LocalBatch * LocalSeq) * sizeof(int32_t);
  CountedTargets = -1; // a masked loss needs setCountedTargets for these
  WEFT_RETURN_IF_ERROR(Q->copyToDevice(tokens(K), Toks, Bytes));
  const BufferSpec *FloatTargets = Prog.floatTargets();
  if (Tgts)
    WEFT_RETURN_IF_ERROR(Q->copyToDevice(
        targets(K), Tgts,
        FloatTargets           ? size_t(FloatTargets->bytes())
        : Prog.sampleTargets() ? size_t(LocalBatch) * sizeof(int32_t)
                               : Bytes));
  return Q->synchronize();
}

Status Executor::setTensorInput(size_t Buffer, const void *Data, size_t Bytes) {
  if (Buffer >= Prog.Buffers.size() || !Prog.Buffers[Buffer].tensorInput())
    return Status::error("buffer " + std::to_string(Buffer) +
                         " is not a tensor input");
  const BufferSpec &B = Prog.Buffers[Buffer];
  if (Bytes != size_t(B.bytes()))
    return Status::error("input '" + B.Name + "' is " + dtypeName(B.Type) +
                         " " + shapeString(B.Dims) + " (" +
                         std::to_string(B.bytes()) + " bytes), given " +
                         std::to_string(Bytes) + " bytes");
  WEFT_RETURN_IF_ERROR(Q->copyToDevice(Where[Buffer], Data, Bytes));
  return Q->synchronize();
}

Expected<std::vector<char>> Executor::outputBytes(size_t I) const {
  if (I >= Prog.Outputs.size())
    return Status::error("the program has " +
                         std::to_string(Prog.Outputs.size()) +
                         " outputs, no output " + std::to_string(I));
  const int64_t Id = Prog.Outputs[I].Buffer;
  std::vector<char> Host(size_t(Prog.Buffers[size_t(Id)].bytes()));
  WEFT_RETURN_IF_ERROR(
      Q->copyToHost(Host.data(), Where[size_t(Id)], Host.size()));
  WEFT_RETURN_IF_ERROR(Q->synchronize());
  return Host;
}

Status Executor::runActions(size_t Begin, size_t End, const StepContext &Ctx,
                            int64_t Only) {
  const Stage &St = Prog.Stages.front();
  const int64_t Fwd = St.lastForward();
  Ctx0Step = Ctx.Step;
  // On an error, the transfers in flight are not waited for: a peer may
  // never take or send them, and the caller must report the error and end
  // the job (weft-run's abortJob) without first waiting out the collective
  // timeout. Those done are retired.
  auto Failed = [&](Status S) {
    (void)progressTransfers();
    return S;
  };
  for (size_t A = Begin; A < End;) {
    const Action &Act = St.Schedule[A];
    if (Act.isTransfer()) {
      size_t Next;
      if (Status S = runTransfers(A, End, Next); !S.ok())
        return Failed(S);
      A = Next;
      continue;
    }
    if (!InFlight.empty())
      if (Status S = completeReceives(A); !S.ok())
        return Failed(S);
    ++A;
    if (Only >= 0 && Act.Frag != Only)
      continue;
    const Fragment &F = St.Fragments[size_t(Act.Frag)];
    if (Act.Microbatch >= 0)
      selectMicrobatch(Act.Microbatch);
    Status S = run(F.Begin, F.End, Ctx);
    if (!S.ok())
      return Failed(
          Act.Microbatch < 0
              ? S
              : S.withContext("micro-batch " + std::to_string(Act.Microbatch)));
    if (Act.Frag == Fwd && Prog.Loss >= 0) {
      // Copied now (the next micro-batch overwrites it), read after the
      // queue has run.
      const size_t E = dtypeBytes(Prog.Buffers[size_t(Prog.Loss)].Type);
      WEFT_RETURN_IF_ERROR(Q->copyToHost(LossHost.data() + LossCopies * E,
                                         bufferAt(Prog.Loss, Act.Microbatch),
                                         E));
      ++LossCopies;
    }
  }
  return finishTransfers();
}

Status Executor::sumLosses() {
  WEFT_RETURN_IF_ERROR(Q->synchronize());
  StepLoss = 0;
  // A pipeline stage before the last computes no loss.
  const DType T =
      Prog.Loss >= 0 ? Prog.Buffers[size_t(Prog.Loss)].Type : Prog.Type;
  for (size_t K = 0; K < LossCopies; ++K)
    StepLoss +=
        T == DType::F64
            ? reinterpret_cast<const double *>(LossHost.data())[K]
            : double(reinterpret_cast<const float *>(LossHost.data())[K]);
  LossCopies = 0;
  // The last stage computed it; the others add their zero.
  if (Pipeline)
    return Comm->allReduce(*Pipeline, &StepLoss, &StepLoss, 1, DType::F64,
                           hostQueue());
  return Status::success();
}

Status Executor::runGradients(const StepContext &Ctx) {
  LossCopies = 0;
  WEFT_RETURN_IF_ERROR(runActions(0, UpdateBegin, Ctx));
  return sumLosses();
}

Status Executor::runUpdate(const StepContext &Ctx) {
  WEFT_RETURN_IF_ERROR(
      runActions(UpdateBegin, Prog.Stages.front().Schedule.size(), Ctx));
  return Q->synchronize();
}

Status Executor::runForward(const StepContext &Ctx) {
  // The gradient check (one rank) and forward-only programs (any mesh but
  // a pipeline's) run forwards alone.
  if (Prog.NumStages > 1)
    return Status::error("a pipeline program runs no forward-only step "
                         "(its stages exchange gradients within the step)");
  LossCopies = 0;
  WEFT_RETURN_IF_ERROR(
      runActions(0, UpdateBegin, Ctx, Prog.Stages.front().lastForward()));
  return sumLosses();
}

double Executor::element(const void *Device, int64_t I) const {
  const size_t E = dtypeBytes(Prog.Type);
  double D = 0;
  float F = 0;
  void *Host = Prog.Type == DType::F64 ? static_cast<void *>(&D) : &F;
  if (!Q->copyToHost(Host, static_cast<const char *>(Device) + I * int64_t(E),
                     E)
           .ok() ||
      !Q->synchronize().ok())
    return std::nan("");
  return Prog.Type == DType::F64 ? D : double(F);
}

std::string Executor::profileReport() const {
  return Times.profileReport(!Requests.empty());
}

double Executor::paramElement(size_t P, int64_t I) const {
  return Owned[P] ? element(State[P].Param, I) : std::nan("");
}

double Executor::gradElement(size_t P, int64_t I) const {
  return StateOwned[P] ? element(State[P].Grad, I) : std::nan("");
}

Status Executor::setParamElement(size_t P, int64_t I, double V) {
  if (!Owned[P])
    return Status::error("param '" + Prog.Params[P].Name +
                         "' is held by "
                         "another pipeline stage");
  const size_t E = dtypeBytes(Prog.Type);
  double D = V;
  float F = float(V);
  const void *Host = Prog.Type == DType::F64 ? static_cast<void *>(&D) : &F;
  WEFT_RETURN_IF_ERROR(Q->copyToDevice(
      static_cast<char *>(State[P].Param) + I * int64_t(E), Host, E));
  return Q->synchronize();
}

} // namespace weft
