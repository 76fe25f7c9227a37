//===- Executor.cpp - Allocation, binding and instruction loop ------------===//
#include "runtime/Executor.h"
#include "program/Shard.h"
#include "runtime/Init.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace weft {

namespace {
size_t align64(size_t N) { return (N + 63) / 64 * 64; }

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
  if (!B)
    B = createCpuBackend(P.Type);
  std::unique_ptr<Executor> E(new Executor(std::move(P), std::move(B)));
  E->OwnedComm = std::move(Owned);
  E->Comm = Comm;
  E->Q = E->Impl->createQueue();
  WEFT_RETURN_IF_ERROR(E->bind());
  return E;
}

Status Executor::bind() {
  const size_t Elem = dtypeBytes(Prog.Type);
  // Each persistent tensor's local shape and layout: from its buffers, else
  // the param's.
  StateSpecs.resize(Prog.Params.size());
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
    if (B.Kind == BufferKind::Input) {
      LocalBatch = B.Dims[0];
      LocalSeq = B.Dims[1];
      GlobalBatch = B.Place.Global[0] * Prog.Microbatches;
      GlobalSeq = B.Place.Global[1];
      BatchOffset = Prog.Devices.shardIndex(Comm->rank(), B.Place.Sharding[0]) *
                    LocalBatch;
      SeqOffset =
          Prog.Devices.shardIndex(Comm->rank(), B.Place.Sharding[1]) * LocalSeq;
    } else if (B.Kind != BufferKind::Arena) {
      StateSpecs[size_t(B.Param)][stateSlot(B.Kind)] = B;
    }
  }
  // One block: params, grads, m, v (each 64-aligned), then the two inputs.
  size_t Total = 0;
  std::vector<size_t> Offsets;
  for (size_t P = 0; P < Prog.Params.size(); ++P)
    for (int K = 0; K < 4; ++K) {
      Offsets.push_back(Total);
      Total += align64(size_t(StateSpecs[P][size_t(K)].numel()) * Elem);
    }
  // Inputs: one slot per micro-batch, tokens then targets.
  size_t InputBytes = align64(size_t(LocalBatch * LocalSeq) * 4);
  InputStride = int64_t(InputBytes / 4);
  size_t AllInputs = InputBytes * size_t(Prog.Microbatches);
  size_t TokensOff = Total, TargetsOff = Total + AllInputs;
  Total += 2 * AllInputs;
  PersistentBytes = Total;
  Persistent = Impl->allocate(Total);
  Arena = Impl->allocate(size_t(Prog.ArenaBytes));
  if (!Persistent || !Arena)
    return Status::error("cannot allocate " + std::to_string(Total) +
                         " bytes of state and " +
                         std::to_string(Prog.ArenaBytes) + " arena bytes");
  char *Base = static_cast<char *>(Persistent);
  for (size_t P = 0; P < Prog.Params.size(); ++P)
    State.push_back({Base + Offsets[4 * P], Base + Offsets[4 * P + 1],
                     Base + Offsets[4 * P + 2], Base + Offsets[4 * P + 3]});
  Tokens = reinterpret_cast<int32_t *>(Base + TokensOff);
  Targets = reinterpret_cast<int32_t *>(Base + TargetsOff);

  std::vector<void *> Where(Prog.Buffers.size());
  for (size_t I = 0; I < Prog.Buffers.size(); ++I) {
    const BufferSpec &B = Prog.Buffers[I];
    switch (B.Kind) {
    case BufferKind::Input:
      Where[I] = B.Name == "tokens" ? Tokens : Targets;
      break;
    case BufferKind::Arena:
      Where[I] = static_cast<char *>(Arena) + B.Offset;
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
  LossData = Where[Prog.Loss];
  LossHost.resize(size_t(Prog.Microbatches) *
                  dtypeBytes(Prog.Buffers[size_t(Prog.Loss)].Type));
  HostInputs.resize(size_t(2 * Prog.Microbatches * InputStride));
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
      if (Prog.Buffers[size_t(Id)].Kind == BufferKind::Input)
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
  const Stage &St = Prog.Stages.front();
  const int64_t Opt = St.find(FragmentOptimizer);
  for (size_t A = 0; A < St.Schedule.size(); ++A)
    if (St.Schedule[A].Frag == Opt)
      OptimizerAction = A;
  WEFT_RETURN_IF_ERROR(planMeshSteps());
  std::vector<BoundInstruction> Kernels;
  for (const BoundInstruction &BI : Bound)
    if (!isCollective(BI.Op))
      Kernels.push_back(BI);
  Expected<size_t> Scratch = Impl->prepare(Kernels);
  if (!Scratch.ok())
    return Scratch.status();
  ScratchBytes = *Scratch;
  return Status::success();
}

Status Executor::initParams(uint64_t Seed) {
  const size_t Elem = dtypeBytes(Prog.Type);
  std::vector<char> Host;
  for (size_t P = 0; P < Prog.Params.size(); ++P) {
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
      WEFT_RETURN_IF_ERROR(
          Q->fillZero(state(P, K), size_t(stateSpec(P, K).numel()) * Elem));
  }
  return Q->synchronize();
}

Status Executor::readState(size_t P, BufferKind K, void *Host) const {
  const size_t Bytes = size_t(stateSpec(P, K).bytes());
  WEFT_RETURN_IF_ERROR(Q->copyToHost(Host, state(P, K), Bytes));
  return Q->synchronize();
}

Status Executor::writeState(size_t P, BufferKind K, const void *Host) {
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
  const BufferSpec &S = stateSpec(P, K);
  return Impl->findNonFinite(state(P, K), S.numel(), S.Type, *Q, At, Value);
}

Status Executor::runInstruction(size_t K, const StepContext &Ctx) {
  if (!HasMeshSteps)
    return Impl->run(Bound[K], Ctx, *Q);
  if (isCollective(Bound[K].Op))
    return runCollective(K);
  return Impl->run(Bound[K], Ctx, *Q);
}

void Executor::recordSpan(size_t K, SpanKind Kind, int64_t StartNs) {
  Span S;
  S.StartNs = StartNs;
  S.DurNs = Timeline::nowNs() - StartNs;
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
  for (int64_t K = Begin; K < End; ++K) {
    int64_t T0 = Timing ? Timeline::nowNs() : 0;
    Status S = runInstruction(size_t(K), Ctx);
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
  BoundMicrobatch = K;
}

Status Executor::loadBatch(const TokenData &Data, int64_t Step) {
  const int64_t Rows = GlobalBatch / Prog.Microbatches;
  // Staged on the host: tokens of every micro-batch, then targets (the
  // layout of the device inputs), one copy in.
  int32_t *Toks = HostInputs.data();
  int32_t *Tgts = Toks + Prog.Microbatches * InputStride;
  for (int64_t K = 0; K < Prog.Microbatches; ++K)
    Data.fillBlock(Step, GlobalBatch, GlobalSeq, K * Rows + BatchOffset,
                   LocalBatch, SeqOffset, LocalSeq, Toks + K * InputStride,
                   Tgts + K * InputStride);
  WEFT_RETURN_IF_ERROR(Q->copyToDevice(Tokens, HostInputs.data(),
                                       HostInputs.size() * sizeof(int32_t)));
  return Q->synchronize();
}

Status Executor::setInputs(int64_t K, const int32_t *Toks,
                           const int32_t *Tgts) {
  if (K < 0 || K >= Prog.Microbatches)
    return Status::error("micro-batch " + std::to_string(K) +
                         " is not in [0, " + std::to_string(Prog.Microbatches) +
                         ")");
  const size_t Bytes = size_t(LocalBatch * LocalSeq) * sizeof(int32_t);
  WEFT_RETURN_IF_ERROR(Q->copyToDevice(tokens(K), Toks, Bytes));
  WEFT_RETURN_IF_ERROR(Q->copyToDevice(targets(K), Tgts, Bytes));
  return Q->synchronize();
}

Status Executor::runActions(size_t Begin, size_t End, const StepContext &Ctx,
                            int64_t Only) {
  const Stage &St = Prog.Stages.front();
  const int64_t Fwd = St.find(FragmentForward);
  for (size_t A = Begin; A < End; ++A) {
    const Action &Act = St.Schedule[A];
    if (Only >= 0 && Act.Frag != Only)
      continue;
    const Fragment &F = St.Fragments[size_t(Act.Frag)];
    if (Act.Microbatch >= 0)
      selectMicrobatch(Act.Microbatch);
    Status S = run(F.Begin, F.End, Ctx);
    if (!S.ok())
      return Act.Microbatch < 0 ? S
                                : S.withContext("micro-batch " +
                                                std::to_string(Act.Microbatch));
    if (Act.Frag == Fwd) {
      // Copied now (the next micro-batch overwrites it), read after the
      // queue has run.
      const size_t E = dtypeBytes(Prog.Buffers[size_t(Prog.Loss)].Type);
      WEFT_RETURN_IF_ERROR(
          Q->copyToHost(LossHost.data() + LossCopies * E, LossData, E));
      ++LossCopies;
    }
  }
  return Status::success();
}

Status Executor::sumLosses() {
  WEFT_RETURN_IF_ERROR(Q->synchronize());
  StepLoss = 0;
  const DType T = Prog.Buffers[size_t(Prog.Loss)].Type;
  for (size_t K = 0; K < LossCopies; ++K)
    StepLoss +=
        T == DType::F64
            ? reinterpret_cast<const double *>(LossHost.data())[K]
            : double(reinterpret_cast<const float *>(LossHost.data())[K]);
  LossCopies = 0;
  return Status::success();
}

Status Executor::runGradients(const StepContext &Ctx) {
  LossCopies = 0;
  WEFT_RETURN_IF_ERROR(runActions(0, OptimizerAction, Ctx));
  return sumLosses();
}

Status Executor::runUpdate(const StepContext &Ctx) {
  WEFT_RETURN_IF_ERROR(runActions(OptimizerAction, OptimizerAction + 1, Ctx));
  return Q->synchronize();
}

Status Executor::runForward(const StepContext &Ctx) {
  LossCopies = 0;
  WEFT_RETURN_IF_ERROR(runActions(0, OptimizerAction, Ctx,
                                  Prog.Stages.front().find(FragmentForward)));
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
  return element(State[P].Param, I);
}

double Executor::gradElement(size_t P, int64_t I) const {
  return element(State[P].Grad, I);
}

Status Executor::setParamElement(size_t P, int64_t I, double V) {
  const size_t E = dtypeBytes(Prog.Type);
  double D = V;
  float F = float(V);
  const void *Host = Prog.Type == DType::F64 ? static_cast<void *>(&D) : &F;
  WEFT_RETURN_IF_ERROR(Q->copyToDevice(
      static_cast<char *>(State[P].Param) + I * int64_t(E), Host, E));
  return Q->synchronize();
}

} // namespace weft
