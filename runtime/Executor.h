//===- Executor.h - Memory for a program and running its instructions -*- C++
//-*-===//
//
// Allocates, once, the arena (arena_bytes, 64-byte aligned) and the
// persistent state: per parameter its value, gradient and Adam m/v, plus the
// token/target inputs. All of it is pre-faulted. Every instruction is bound
// to memory at creation, so running a range is a loop over a table.
//
// All of that is device memory (docs/design.md, "The device boundary"): the
// executor never reads or writes it. Kernels, collectives, fills and copies
// are work on its queue; init, batches, the loss, checkpoints and checks
// reach tensors only through copies to and from host memory.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_RUNTIME_EXECUTOR_H
#define WEFT_RUNTIME_EXECUTOR_H

#include "program/Program.h"
#include "runtime/Backend.h"
#include "runtime/comm/Communicator.h"
#include "runtime/data/Data.h"
#include "runtime/trace/Timeline.h"

#include <algorithm>
#include <array>
#include <deque>
#include <memory>

namespace weft {

struct ReducedBucket;

class Executor {
public:
  /// Takes a validated program. With no backend, uses the CPU backend;
  /// with no communicator, a local one of one rank. Refuses a program whose
  /// mesh product is not the communicator's world size.
  static Expected<std::unique_ptr<Executor>>
  create(Program P, std::unique_ptr<Backend> B = nullptr,
         Communicator *Comm = nullptr);
  ~Executor();
  Executor(const Executor &) = delete;
  Executor &operator=(const Executor &) = delete;

  const Program &program() const { return Prog; }

  /// Deterministic init of every parameter (computed on the host, copied
  /// in); zeroes grads and Adam state.
  Status initParams(uint64_t Seed);
  /// Runs instructions [Begin, End) as they are bound now (the inputs of
  /// the micro-batch selected last; micro-batch 0 at first).
  Status run(int64_t Begin, int64_t End, const StepContext &Ctx);

  // The stage's schedule (format version 3): the actions before the
  // optimizer's (prologue, then forward and backward per micro-batch)
  // compute the step's gradients; the optimizer's applies them.
  /// Loads step Step's batch from Data: this rank's block of every
  /// micro-batch (micro-batch k holds the step's global rows
  /// [k*B/M, (k+1)*B/M)), staged on the host and copied in.
  Status loadBatch(const BatchSource &Data, int64_t Step);
  /// What the kernels read of step Step's whole batch beside its tokens
  /// (packed documents' positions, token types, attention-mask spans);
  /// loadBatch does it, a forward-only run calls it itself.
  Status loadRowData(const BatchSource &Data, int64_t Step);
  /// Sets micro-batch K's inputs from host arrays of localBatch() x
  /// localSeq() ids each, localBatch() targets when the program reads one
  /// per sample, the float targets' bytes for a regression (no targets in a
  /// forward-only program: null).
  Status setInputs(int64_t K, const int32_t *Tokens, const int32_t *Targets);
  /// A masked loss's divisor for inputs set by setInputs (which leaves it
  /// unknown, refused by the loss): the step's counted targets over every
  /// rank and micro-batch (loadBatch counts them itself).
  void setCountedTargets(int64_t N) { CountedTargets = N; }
  /// Sets a forward-only program's tensor input, buffer Buffer (format
  /// version 8), from host memory: exactly its bytes, of the program's
  /// float dtype.
  Status setTensorInput(size_t Buffer, const void *Data, size_t Bytes);
  /// Runs every action before the optimizer; loss() is then the step's
  /// loss, the sum of the micro-batches' (each divided by the whole step's
  /// rows).
  Status runGradients(const StepContext &Ctx);
  /// Runs the optimizer's action.
  Status runUpdate(const StepContext &Ctx);
  /// Runs only the forward actions, one per micro-batch: loss() is the
  /// step's loss (0 in a forward-only program: outputBytes holds what it
  /// computed) and no gradient changes. One stage only.
  Status runForward(const StepContext &Ctx);
  /// A forward-only program's output I (format version 7), copied to the
  /// host after runForward: its buffer's bytes, whole on every rank.
  Expected<std::vector<char>> outputBytes(size_t I) const;
  int64_t microbatches() const { return Prog.Microbatches; }
  /// This rank's pipeline stage (0 without a pipeline). Prog is then the
  /// stage's view (stageView).
  int64_t stage() const { return std::max<int64_t>(Prog.StageIndex, 0); }
  /// Whether this rank holds param P's tensor K: its value where it owns
  /// the param or a replica, its grad and Adam moments where it trains it;
  /// the other stages' tensors take no memory here.
  bool holds(size_t P, BufferKind K) const {
    return K == BufferKind::Param ? Owned[P] : StateOwned[P];
  }
  /// The stage that trains param P (holds its grad).
  int64_t paramStage(size_t P) const { return OwnerStage[P]; }

  Communicator &comm() const { return *Comm; }
  int64_t rank() const { return Comm->rank(); }
  const Mesh &mesh() const { return Prog.Devices; }
  /// The local shape and layout of param P's value, grad, m or v (from its
  /// buffers; the param's when no buffer names it).
  const BufferSpec &stateSpec(size_t P, BufferKind K) const {
    return StateSpecs[P][stateSlot(K)];
  }
  /// Copies param P's value, grad, m or v (stateSpec(P, K).numel()
  /// elements of the program dtype) to or from host memory.
  Status readState(size_t P, BufferKind K, void *Host) const;
  Status writeState(size_t P, BufferKind K, const void *Host);
  /// A host copy of param P's state K.
  Expected<std::vector<char>> stateBytes(size_t P, BufferKind K) const;
  /// The first non-finite element of param P's state K (At = -1: none),
  /// found by the backend on the device.
  Status findNonFinite(size_t P, BufferKind K, int64_t &At,
                       double &Value) const;
  /// The rank's block of the global batch: rows [BatchOffset, +LocalBatch),
  /// positions [SeqOffset, +LocalSeq).
  int64_t globalBatch() const { return GlobalBatch; }
  int64_t globalSeq() const { return GlobalSeq; }
  int64_t localBatch() const { return LocalBatch; }
  int64_t localSeq() const { return LocalSeq; }
  int64_t batchOffset() const { return BatchOffset; }
  /// The seed of the program's dropout masks (weft-run --seed): with the
  /// step it keys every mask (program/Dropout.h).
  void setDropoutSeed(uint64_t Seed) { DropoutSeed = Seed; }
  /// How the run reads its batches (TokenData::describe()), written into
  /// each checkpoint's trainer_state.json so a resumed run can check it
  /// reads them the same way.
  void setBatchesDescription(std::string D) { Batches = std::move(D); }
  /// Seconds this rank spent blocked in collectives, their waits and
  /// pipeline transfers since the last resetCommBytes (the rest of a step
  /// is its own work: findStraggler compares it across ranks).
  double waitSeconds() const { return double(WaitNs) * 1e-9; }
  const std::string &batchesDescription() const { return Batches; }
  int64_t seqOffset() const { return SeqOffset; }

  /// Bytes sent by collectives since the last reset, per "<op>/<axes>" key
  /// (ring formulas of docs/program-format.md), in first-use order.
  std::vector<std::pair<std::string, double>> commBytes() const;
  /// Whether a collective's group spans nodes and runs hierarchically
  /// (its bytes are then the sum of its three steps, CommGroup).
  bool hierarchicalComm() const;
  /// Of commBytes(), the collectives' bytes sent between nodes (0 where no
  /// group spans nodes).
  double commBytesAcrossNodes() const { return AcrossTotal; }
  void resetCommBytes();

  /// The step's loss after runGradients or runForward (summed over the
  /// micro-batches).
  double loss() const { return StepLoss; }
  /// One element of param P's value or gradient, copied (for gradient
  /// checks and tests); NaN when the copy fails.
  double paramElement(size_t P, int64_t I) const;
  Status setParamElement(size_t P, int64_t I, double V);
  double gradElement(size_t P, int64_t I) const;

  /// The activation arena: its per-slot part once per slot (micro-batch in
  /// flight), its shared part once.
  size_t arenaBytes() const { return size_t(arenaAllocation(Prog)); }
  /// Parameters, grads, Adam m/v, inputs and kernel scratch.
  size_t persistentBytes() const { return PersistentBytes + ScratchBytes; }
  size_t peakBytes() const { return arenaBytes() + persistentBytes(); }
  /// 2*M*N*K summed over the matmul instructions of one step.
  double matmulFlopsPerStep() const { return MatmulFlops; }

  /// Per-op wall time, accumulated by run() while profiling is on.
  void setProfiling(bool On) { Timing = On; }
  std::string profileReport() const;
  /// Also keeps every span (instructions, waits, async collectives in
  /// flight), up to MaxSpans, for `weft-run --trace`.
  void setTracing(size_t MaxSpans) {
    Timing = true;
    Times.keepSpans(MaxSpans);
  }
  const Timeline &timeline() const { return Times; }

private:
  Executor(Program P, std::unique_ptr<Backend> B);
  Status bind();
  void *state(size_t P, BufferKind K) const {
    const ParamState &S = State[P];
    void *const Ptrs[4] = {S.Param, S.Grad, S.M, S.V};
    return Ptrs[stateSlot(K)];
  }
  int32_t *tokens(int64_t K) const { return Tokens + K * InputStride; }
  int32_t *targets(int64_t K) const { return Targets + K * InputStride; }
  double element(const void *Device, int64_t I) const;
  Status runInstruction(size_t K, const StepContext &Ctx);
  /// Points each reduced bucket's all-reduce at its grads, where they lie
  /// end to end, and marks its unpack Elided.
  void elideBucketUnpacks(const std::vector<ReducedBucket> &Buckets);
  /// Rebinds the instructions that read an input to micro-batch K's.
  void selectMicrobatch(int64_t K);
  /// Runs the schedule's actions [Begin, End) (Only: those of that fragment);
  /// copies the loss after every forward to LossHost. After an error,
  /// pipeline transfers may stay in flight: the job must end.
  Status runActions(size_t Begin, size_t End, const StepContext &Ctx,
                    int64_t Only = -1);
  /// StepLoss = the sum of the copied losses (after the queue has run),
  /// from the last stage to every stage of a pipeline.
  Status sumLosses();
  /// Pipeline transfers (PipelineTransfers.cpp). The consecutive transfer
  /// actions from A (before End) of the schedule: started, and completed
  /// at once (grouped) or where needed (asynchronous); returns the action
  /// after them in Next.
  Status runTransfers(size_t A, size_t End, size_t &Next);
  /// At load: the staging buffers and where each group's receives
  /// complete.
  Status planTransfers();
  Status runGroupedTransfers(size_t A, size_t E);
  Status startTransfers(size_t A, size_t E);
  /// A free send or receive buffer, the oldest group of that direction
  /// retired first when all are in flight.
  Status takeTransferBuffer(bool Recv, size_t &Index);
  /// Completes InFlight[I] (a receive: copied into place) and drops it.
  Status retire(size_t I);
  /// Tests the transfers in flight (progressing them); retires sends done.
  Status progressTransfers();
  /// Completes the receives needed before schedule action Before (all of
  /// them: SIZE_MAX), copying them into place.
  Status completeReceives(size_t Before);
  /// Completes every transfer in flight (the end of a range of actions).
  Status finishTransfers();
  /// A span of the transfer group starting at schedule action A, of this
  /// step (times, counts and bytes left to the caller).
  Span transferSpan(size_t A) const;
  /// Device address of buffer Id for micro-batch K (its slot's instance).
  void *bufferAt(int64_t Id, int64_t K) const;
  /// N rounded up to a multiple of 64 (every device block's alignment).
  static size_t align64(size_t N) { return (N + 63) / 64 * 64; }
  static size_t stateSlot(BufferKind K) {
    return K == BufferKind::Grad    ? 1
           : K == BufferKind::AdamM ? 2
           : K == BufferKind::AdamV ? 3
                                    : 0;
  }

  /// What runs around or instead of a kernel under a mesh (MeshOps.cpp).
  struct MeshStep {
    const CommGroup *Group = nullptr;        // collectives, adamw's shards
    int Key = -1;                            // into CommKeys
    double Bytes = 0;                        // per run
    double AcrossBytes = 0;                  // of them, between nodes
    int64_t Outer = 1, Inner = 1, Chunk = 0; // collective along a dim
    int Request = -1;      // async all_reduce/all_gather: its slot in Requests
    int64_t WaitsFor = -1; // wait: the start it completes
  };
  Status planMeshSteps();
  void placeRows(BoundInstruction &BI, const Shape &X);
  int commKey(const std::string &Op, const AxesList &Axes);
  Status runCollective(size_t K);
  /// Async collectives (MeshOps.cpp): their name in messages, waiting for
  /// one (its time counted as its op's when profiling), completing the
  /// start A at its wait, polling all, waiting for all.
  std::string asyncName(size_t A) const;
  Status waitFor(size_t A, bool RecordWait = true);
  /// Instruction K's async collective has started: pending from now.
  void startedAsync(size_t K);
  Status finish(size_t A);
  Status pollPending();
  Status waitPending();

  struct ParamState {
    void *Param, *Grad, *M, *V;
  };
  Program Prog;
  std::unique_ptr<Backend> Impl;
  std::unique_ptr<Queue> Q;
  std::unique_ptr<Communicator> OwnedComm;
  Communicator *Comm = nullptr;
  std::vector<std::array<BufferSpec, 4>> StateSpecs;
  int64_t LocalBatch = 0, LocalSeq = 0, BatchOffset = 0, SeqOffset = 0;
  uint64_t DropoutSeed = 0;
  int64_t WaitNs = 0;
  /// Packed documents: each position's index in its document, for the
  /// step's global batch (loadBatch).
  std::vector<int32_t> DocPositions;
  /// Key padding: each global row's tokens [F, E) (runtime/data/Data.h).
  std::vector<int32_t> KeySpans;
  /// The step's token types, each global row's (runtime/data/Data.h).
  std::vector<int32_t> TokenTypes;
  std::string Batches;
  int64_t GlobalBatch = 0, GlobalSeq = 0;
  std::vector<MeshStep> Steps; // parallel to Bound
  bool HasMeshSteps = false;
  std::vector<CommRequest> Requests; // one per async collective
  std::vector<size_t> Pending; // instructions in flight; capacity reserved
  std::vector<std::string> CommKeys;
  std::vector<double> CommTotals;
  double AcrossTotal = 0; // collectives' bytes between nodes, since reset
  void *Arena = nullptr;
  void *Persistent = nullptr;
  size_t PersistentBytes = 0, ScratchBytes = 0;
  std::vector<ParamState> State;
  int32_t *Tokens = nullptr, *Targets = nullptr;
  int64_t InputStride = 0; // int32 elements between micro-batches' inputs
  /// Every (instruction, in[] position) that reads tokens (Targets false)
  /// or targets (true), rebound per micro-batch.
  struct InputUse {
    size_t Inst, Pos;
    bool Targets;
  };
  std::vector<InputUse> InputUses;
  int64_t BoundMicrobatch = 0;
  /// Slot instances: every (instruction, operand) bound to a
  /// per-micro-batch arena buffer, rebased per micro-batch's slot.
  struct SlotUse {
    size_t Inst, Pos;
    bool Out;
    int64_t Offset;
  };
  std::vector<SlotUse> SlotUses;
  std::vector<bool> PerMicrobatch; // per buffer: an instance per slot
  std::vector<bool> Owned;         // per param: its value
  std::vector<bool> Elided;        // per instruction: skipped (an unpack
                                   // its all-reduce did in place)
  std::vector<bool> StateOwned;    // per param: its grad and Adam state
  std::vector<int64_t> OwnerStage; // per param
  std::vector<void *> Where;       // per buffer, slot 0
  const CommGroup *Pipeline = nullptr;
  CommRequest TransferRequest;
  int TransferKey = -1; // into CommKeys: "send/<pipeline axis>"
  std::vector<Transfer> TransferOps;
  /// An all_to_all's transfers (blocking: started and waited for at once).
  CommRequest AllToAllRequest;
  std::vector<Transfer> AllToAllOps;
  /// A ring_shift's two transfers; its _start form runs asynchronously
  /// when AsyncAllowed.
  std::vector<Transfer> RingOps;
  /// Not under WEFT_NO_ASYNC=1: async collectives, ring shifts and
  /// pipeline transfers run asynchronously.
  bool AsyncAllowed = true;
  void *Staging = nullptr; // grouped: receives of groups that also send
  struct StagedRecv {
    void *To;
    size_t Offset, Bytes;
  };
  std::vector<StagedRecv> Staged;
  /// Asynchronous transfers (a communicator whose transfers complete
  /// independently, not under WEFT_NO_ASYNC=1): a group's sends leave from
  /// a staging copy, its receives land in staging and are copied into place
  /// before their run, except where place is safe (planTransfers). At most
  /// MaxTransferBuffers groups of each direction are in flight, each with
  /// its buffer, made at load.
  bool AsyncTransfers = false;
  static constexpr size_t MaxTransferBuffers = 2;
  struct TransferBuffer {
    void *Data = nullptr; // staging, SendBufferBytes or RecvBufferBytes
    CommRequest Request;
    bool InUse = false;
  };
  std::deque<TransferBuffer> SendBuffers, RecvBuffers; // stable addresses
  size_t SendBufferBytes = 0, RecvBufferBytes = 0;
  /// Per schedule action starting a group: the run before which its
  /// receives complete (their attached run; SIZE_MAX: the range's end),
  /// and whether its sends and receives go without staging.
  std::vector<size_t> ReceivedBy;
  std::vector<bool> SendDirect, RecvDirect;
  /// A group's sends or its receives, started and not yet retired.
  struct InFlightTransfers {
    bool Recv = false;
    size_t Buffer = 0;
    size_t Begin = 0, End = 0; // the group's schedule actions
    int64_t StartNs = 0, DoneNs = -1;
  };
  std::vector<InFlightTransfers> InFlight;
  int64_t Ctx0Step = 0;   // the step runActions runs
  size_t UpdateBegin = 0; // Stage::updateBegin of the schedule
  double StepLoss = 0;
  const void *LossData = nullptr;
  /// The loss of each forward of a step, copied from the device (one
  /// element of the loss's dtype each) and summed once the queue has run.
  std::vector<char> LossHost;
  size_t LossCopies = 0;
  std::vector<int32_t> HostInputs; // staging for loadBatch
  int64_t CountedTargets = 0;      // a masked loss's divisor this step
  bool MaskedLoss = false;         // Prog.maskedLoss(), once
  std::vector<BoundInstruction> Bound;
  double MatmulFlops = 0;
  bool Timing = false; // profiling or tracing: spans go to Times
  Timeline Times;
  int64_t CurrentStep = 0;
  std::vector<int64_t> AsyncStartNs; // per instruction, while timing
  /// Records instruction K's span of kind Kind from StartNs to now.
  /// StartNs < 0: a span of no time, now.
  void recordSpan(size_t K, SpanKind Kind, int64_t StartNs);
};

} // namespace weft

#endif // WEFT_RUNTIME_EXECUTOR_H
