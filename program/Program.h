//===- Program.h - The weft program file (docs/program-format.md) ---------===//
//
// In-memory form of a program file, its loader (container, JSON payload and
// full validation: a program that loads never hands a kernel a bad shape) and
// a readable dump.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_RUNTIME_PROGRAM_H
#define WEFT_RUNTIME_PROGRAM_H

#include "program/Activation.h"
#include "program/Hyperparams.h"
#include "program/Pointwise.h"
#include "program/SeqChunks.h"
#include "program/ShapeString.h"
#include "program/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace weft {

/// The version weft-compile writes; the loader reads it and the previous one:
/// version 3 made the step a schedule of fragments over micro-batches,
/// version 4 lists the mesh's communicator groups and gives each buffer its
/// dtype (bf16 activations), version 5 holds one stage per pipeline stage,
/// joined by send and recv actions, version 6 gives pack and unpack
/// `blocks` (a version-5 runtime would ignore it and unpack wrongly, so it
/// must refuse the file), version 7 adds forward-only programs (`outputs`),
/// version 8 their named tensor inputs and outputs of any name (a version-7
/// runtime would refuse them by name), version 9 masked-language-model
/// programs (`masked_lm`, and `masked` cross-entropies: a version-8 runtime
/// would train them on next-token batches), version 10 constant buffers
/// and select (a version-9 runtime would refuse them by name), version 11
/// `classes`, one target per sample (a sequence classifier's; a version-10
/// runtime would read [batch] targets as [batch, seq]), float targets and
/// mse_loss (a regression's), version 14 `seq_axes` on rope and attention
/// (context parallelism: a version-13 runtime would rotate and mask a
/// block of the sequence as if it were the whole); older files are
/// refused with a message to recompile.
constexpr uint32_t ProgramFormatVersion = 17;
constexpr uint32_t ProgramFormatMinVersion = 5;
constexpr size_t ProgramHeaderBytes = 28;

/// BF16: bfloat16 storage of activations in a mixed-precision program (its
/// float dtype, that of parameters and optimizer state, is f32).
enum class DType { F32, F64, I32, BF16 };
const char *dtypeName(DType T);
size_t dtypeBytes(DType T);

/// Constant (format version 10): a tensor known at compile time, whole on
/// every rank, its values in the file; no instruction writes it.
enum class BufferKind { Input, Param, Grad, AdamM, AdamV, Arena, Constant };
const char *bufferKindName(BufferKind K);

/// Every instruction op; the order is the dispatch-table index.
enum class OpKind {
  Embedding,
  EmbeddingGrad,
  PositionEmbedding,
  PositionEmbeddingGrad,
  Matmul,
  BiasAdd,
  ReduceRows,
  Add,
  Mul,
  Split,
  Concat,
  LayerNorm,
  LayerNormGrad,
  RmsNorm,
  RmsNormGrad,
  Gelu,
  GeluGrad,
  Silu,
  SiluGrad,
  Swiglu,
  SwigluGrad,
  Rope,
  Attention,
  AttentionGrad,
  CrossEntropy,
  CrossEntropyGrad,
  Fill,
  Copy,
  Pack,
  Unpack,
  AdamW,
  // Vocab-parallel cross-entropy (format version 2).
  CrossEntropyStats,
  CrossEntropyFromStats,
  CrossEntropyStatsGrad,
  // Collectives (format version 2); the executor runs them, not a backend.
  AllReduce,
  AllGather,
  ReduceScatter,
  Slice,
  // transformers' ACT2FN activations by name (attrs.kind).
  Act,
  ActGrad,
  // y += x (format version 3): gradients summed over micro-batches.
  Accumulate,
  // Completes the asynchronous collective that writes in[0] (format version
  // 3). An asynchronous collective is written all_reduce_start,
  // all_gather_start or reduce_scatter_start and held as AllReduce,
  // AllGather or ReduceScatter with Attrs.Async.
  Wait,
  // Moves the blocks of dim `dim` (one per rank of `axes`) to the front, so a
  // collective along an inner dim runs on contiguous blocks (format 3).
  BlockTranspose,
  // y = x converted to y's dtype (f32 <-> bf16; to bf16: round to nearest
  // even).
  Cast,
  // y = x + table[row] (format version 7; BERT's token-type embedding) and
  // its table gradient: v at row `row` of a zeroed [rows, n].
  AddRow,
  RowGrad,
  // The generic path (format version 7; docs/design.md decision 20): ops of
  // imported graphs no fused op covers. Shapes broadcast as NumPy's.
  Pointwise,     // y = fn(x) or fn(x, scalar)
  PointwiseGrad, // (x, dy) -> dx
  Binary,        // (a, b) -> a fn b, broadcast
  BinaryGrad,    // (a, b, dy) -> d(in[operand]), summed over stretched dims
  Broadcast,     // x stretched to out's shape
  Reduce,        // x summed into out's shape (which broadcasts to x's)
  Reshape,       // the same bytes in out's shape
  Transpose,     // out dim i = x dim perm[i] (attrs.perm)
  Softmax,       // over the last dim
  SoftmaxGrad,   // (y, dy) -> dx
  BatchMatmul,   // [b..., m, k] x [b..., k, n] (transpose flags: last 2 dims)
  // (cond, a, b) -> cond != 0 ? a : b, broadcast (format version 10).
  Select,
  // (cond, dy) -> dy where in[operand] was picked, summed over the dims it
  // was stretched along (out: its shape).
  SelectGrad,
  // (pred, target) -> mean((pred - target)^2) over the step's elements, and
  // (pred, target, dloss) -> dpred (format version 11: a regression loss on
  // float targets; attrs.denominator as cross_entropy's).
  MseLoss,
  MseLossGrad,
  // y = x * keep / (1 - p), keep drawn from (seed, step, site, the element's
  // global index) (format version 12; program/Dropout.h). Its own gradient.
  Dropout,
  // Block k of dim 0 to shard k of `axes`, block k of out from shard k
  // (all-to-all context parallelism; the program block_transposes around
  // it). A runtime that predates it refuses the name.
  AllToAll,
  // Ring attention (context parallelism, docs/program-format.md): the
  // rank's queries against ring step `ring_step`'s block of keys (out: o
  // and the log-sum-exp), the merge of two blocks by their log-sum-exps,
  // a block's gradient, and the collective that passes a block to the next
  // shard of `axes` (ring_shift, or ring_shift_start and a wait).
  AttentionBlock,
  SoftmaxMerge,
  AttentionBlockGrad,
  RingShift,
};
constexpr int NumOpKinds = static_cast<int>(OpKind::RingShift) + 1;
/// The ops that compare logits with the targets (plain or vocab-parallel),
/// and those that compare a prediction with float targets.
inline bool isCrossEntropy(OpKind K) {
  return K == OpKind::CrossEntropy || K == OpKind::CrossEntropyGrad ||
         K == OpKind::CrossEntropyStats || K == OpKind::CrossEntropyFromStats ||
         K == OpKind::CrossEntropyStatsGrad;
}
inline bool isMseLoss(OpKind K) {
  return K == OpKind::MseLoss || K == OpKind::MseLossGrad;
}
/// True for the ops the executor runs through the communicator, not a
/// backend: all_reduce, all_gather, reduce_scatter, all_to_all,
/// ring_shift, slice and wait.
bool isCollective(OpKind K);
const char *opName(OpKind K);
struct Instruction;
/// The op's name as the file spells it: all_reduce_start, all_gather_start
/// and reduce_scatter_start for the asynchronous forms.
std::string instructionName(const Instruction &I);
/// A transfer action as messages write it: "send buffers[B] to stage P" or
/// "recv buffers[B] from stage P".
struct Action;
std::string transferName(const Action &A);
/// Returns false when Name is not an op.
bool parseOpName(const std::string &Name, OpKind &K);
/// The attribute naming the communicator group an op of kind K runs over,
/// which mesh.groups must list: "axes" for all_reduce, all_gather,
/// reduce_scatter and slice, "shard_axes" for adamw (when set); else null.
const char *groupAttrName(OpKind K);

using Shape = std::vector<int64_t>;
/// The product of S's dimensions, or -1 when it overflows int64 (computed
/// without overflow). Shapes read from files pass checkShapeSize first.
int64_t numElements(const Shape &S);
/// The largest dimension and element count weft accepts from a file: byte
/// sizes of every dtype then fit int64 with room to add offsets.
constexpr int64_t MaxNumElements = int64_t(1) << 48;
/// Refuses a shape with a dimension below 1 (below 0 with AllowZero) or past
/// 2^48, or with more than 2^48 elements, naming What.
Status checkShapeSize(const Shape &S, const std::string &What,
                      bool AllowZero = false);
std::string shapeString(const Shape &S);

struct InitSpec {
  /// Loaded: no initial value of its own; the run loads it (--load), as
  /// for a model imported with its weights (weft-compile model.onnx).
  enum Kind { Normal, Zeros, Ones, Loaded } K = Zeros;
  double Std = 0.0;
};

/// A device mesh (format version 2): named axes, row-major ranks.
struct Mesh {
  std::vector<std::string> Axes;
  std::vector<int64_t> Dims;
  /// The communicator groups the program uses, each a list of axes, in the
  /// order every rank creates them at load (format version 4: "groups").
  std::vector<std::vector<std::string>> Groups;
  /// The axis whose coordinate is a rank's pipeline stage (format version
  /// 5: "pipeline"); empty when the program has one stage.
  std::string Pipeline;
  int64_t size() const;
  /// "dp=2 x tp=2"
  std::string describe() const;
  /// Index of Axis in Axes, or -1.
  int axisIndex(const std::string &Axis) const;
  /// Rank R's coordinate on every axis (the last axis varies fastest).
  std::vector<int64_t> coords(int64_t Rank) const;
  /// Product of the sizes of Names (1 for none); unknown names count 1.
  int64_t count(const std::vector<std::string> &Names) const;
  /// Rank R's shard index for Names: its coordinates read mixed-radix,
  /// the first name most significant.
  int64_t shardIndex(int64_t Rank, const std::vector<std::string> &Names) const;
  /// The ranks whose coordinates differ from R's only on Names, by shard
  /// index.
  std::vector<int64_t> group(int64_t Rank,
                             const std::vector<std::string> &Names) const;
};

using AxesList = std::vector<std::string>;
/// "[dp,tp]", as messages and --dump write an axes list.
std::string axesString(const AxesList &A);

/// How a local tensor sits in its global tensor: per dim the mesh axes it is
/// split over and the block count (docs/program-format.md, version 2).
struct Layout {
  Shape Global;
  std::vector<AxesList> Sharding; // per dim; empty = replicated
  std::vector<int64_t> Blocks;    // per dim, >= 1
  bool sharded() const;
  /// Replicated layout of a tensor of shape S.
  static Layout replicated(const Shape &S);
};

struct ParamSpec {
  std::string Name;
  Shape Dims;
  InitSpec Init;
  bool WeightDecay = false;
  Layout Place = {}; // global shape and sharding (replicated when absent)
  /// Version 15: the rows (dim 0) the parameter has in the model and its
  /// checkpoints, where the program stores more (a vocabulary padded so
  /// that tp divides it; the rows past them are zeros). 0: all of them.
  int64_t LogicalRows = 0;
};

struct OptimizerSpec : Hyperparams {
  std::string Kind = "adamw";
};

struct BufferSpec {
  BufferKind Kind = BufferKind::Arena;
  /// Inputs: "tokens" or "targets" (token ids), or any other name: a
  /// forward-only program's tensor input (version 8), whole on every rank.
  std::string Name;
  int64_t Param = -1; // param/grad/adam_m/adam_v: index into params
  int64_t Offset = 0; // arena: byte offset
  /// The pipeline stage whose ranks hold the buffer (format version 5).
  int64_t StageIndex = 0;
  Shape Dims;
  DType Type = DType::F32;
  /// Version 2: global_shape/sharding/blocks as written (HasLayout), else
  /// the param's layout (grad/adam) or replicated.
  bool HasLayout = false;
  Layout Place;
  /// Version 2, grad buffers: the buffer holds this rank's unreduced
  /// contribution; the gradient is its sum over these axes' group.
  AxesList Partial;
  /// Version 10, constant buffers: the elements' bytes (bytes() of them,
  /// little-endian), whole on every rank.
  std::vector<char> Data;
  int64_t numel() const { return numElements(Dims); }
  int64_t bytes() const { return numel() * int64_t(dtypeBytes(Type)); }
  /// An input the data loader fills with token ids (tokens or targets).
  bool tokenInput() const {
    return Kind == BufferKind::Input && (Name == "tokens" || Name == "targets");
  }
  /// A forward-only program's named float input (version 8).
  bool tensorInput() const {
    return Kind == BufferKind::Input && !tokenInput();
  }
};

/// Attributes of all ops in one struct; each op reads the ones it documents.
/// Boolean attributes default to false when absent.
struct OpAttrs {
  bool TransposeA = false, TransposeB = false, Inverse = false,
       WeightDecay = false;
  double Eps = 0.0, Theta = 10000.0, Value = 0.0;
  /// rope: per-pair frequencies (empty: theta^(-2i/hd)) and output scale.
  std::vector<double> InvFreq;
  double Scale = 1.0;
  /// attention(_grad): the scores' scale; 0 (absent): 1/sqrt(head_dim).
  double AttnScale = 0;
  /// attention(_grad): no causal mask (format version 7).
  bool Bidirectional = false;
  /// add_row, row_grad: the table row; row_grad: the table's rows.
  int64_t Row = 0, Rows = 0;
  /// pointwise(_grad): the function and its scalar; binary(_grad): the
  /// function; binary_grad: the operand (0 or 1) whose gradient it is.
  PointwiseFn Pointwise = PointwiseFn::Neg;
  double Scalar = 0.0;
  BinaryFn Binary = BinaryFn::Add;
  int64_t Operand = 0;
  /// transpose: out dim i is in dim Perm[i].
  std::vector<int64_t> Perm;
  Activation Act = Activation::Gelu; // act, act_grad
  int64_t NumHeads = 0, NumKvHeads = 0;
  std::vector<int64_t> Sizes;
  // Version 2.
  AxesList Axes;           // collectives, slice and block_transpose
  int64_t Dim = 0;         // all_gather, reduce_scatter, slice, block_transpose
  int64_t Denominator = 0; // cross_entropy(_grad), mse_loss(_grad); 0: local
  /// Cross-entropy ops of a masked-LM loss (version 9): a target of -100
  /// counts for nothing and the mean is over the step's counted targets.
  bool Masked = false;
  /// Cross-entropy ops over a padded vocabulary (version 15): the global
  /// columns from Classes on are padding, outside the softmax; 0: none.
  int64_t Classes = 0;
  AxesList SeqAxes;     // position_embedding(_grad), rope, attention(_grad)
  int64_t RingStep = 0; // attention_block(_grad): whose block, r - step
  AxesList VocabAxes;   // embedding(_grad), cross_entropy_stats(_grad)
  AxesList ShardAxes;   // adamw (ZeRO-1/2)
  /// pack, unpack: each piece in this many equal blocks, laid out block-major
  /// (a bucketed reduce-scatter's or all-gather's buffer); 1: end to end.
  int64_t Blocks = 1;
  /// all_reduce, all_gather written *_start: they only start, and a later
  /// `wait` on their output completes them (docs/program-format.md).
  bool Async = false;
  /// dropout: p and the site; attention(_grad): `dropout` p (0: none) and
  /// `dropout_site` (format version 12). dim_axes: per dim of the input (of
  /// q for attention), the mesh axes it is split over.
  double DropP = 0.0;
  int64_t DropSite = 0;
  /// attention(_grad): a sliding window W (version 12): query i reads keys
  /// j with i - W < j <= i; 0: none.
  int64_t Window = 0;
  /// attention(_grad): the keys are each row's run of tokens in the step's
  /// attention mask (version 13; an imported graph's attention_mask).
  bool KeyPadding = false;
  /// position_embedding(_grad): the rows are the step's token types
  /// (version 13; an imported graph's token_type_ids).
  bool TokenTypes = false;
  std::vector<AxesList> DimAxes;
};

struct Instruction {
  OpKind Op = OpKind::Copy;
  std::vector<int64_t> In, Out;
  OpAttrs Attrs;
};

/// A named instruction list of a stage: instructions [Begin, End) of the
/// program's table, which holds the fragments one after another.
struct Fragment {
  std::string Name;
  int64_t Begin = 0, End = 0;
  /// forward and backward run once per micro-batch; the others once per step.
  bool PerMicrobatch = false;
  /// A backward, or (Weight) the weight-gradient half of a split one.
  bool Backward = false, Weight = false;
  /// The model chunk of a forward or backward ("forward.1": 1; a stage of
  /// several chunks under an interleaved schedule), else 0.
  int64_t Chunk = 0;
};

/// One action of a stage's schedule: run fragment Frag, or send or receive
/// buffer Buffer to or from stage Peer (format version 5), for micro-batch
/// Microbatch (-1: once per step). A receive belongs to the next run of its
/// micro-batch and a send to the previous one (runs of other micro-batches
/// may lie between: an interleaved schedule exchanges a forward's and a
/// backward's transfers in one group).
/// Consecutive transfers are started together and complete together.
struct Action {
  enum Kind { Run, Send, Recv } K = Run;
  int64_t Frag = 0;
  int64_t Microbatch = -1;
  int64_t Buffer = -1, Peer = -1;
  bool isTransfer() const { return K != Run; }
};

/// A pipeline stage's program (format version 3). The fragments are, in
/// this order, prologue (only when gradients accumulate over micro-batches),
/// forward (ends with the loss on the last stage), backward and optimizer.
/// A stage of V > 1 model chunks (format version 5, interleaved pipelines)
/// has forward.0 .. forward.V-1 and then backward.V-1 .. backward.0 in
/// their place; a stage whose backward is split (ZB-H1) has `weight`, the
/// weight gradients, after `backward`. Each micro-batch runs them in that
/// order.
struct Stage {
  std::vector<Fragment> Fragments;
  std::vector<Action> Schedule;
  /// Micro-batches whose activations the stage holds at once (format
  /// version 5): micro-batch k's per-micro-batch arena buffers lie in
  /// instance k mod Slots of the arena.
  int64_t Slots = 1;
  /// Model chunks (V): 1 unless the fragments are suffixed.
  int64_t Chunks = 1;
  /// The stage's own activation arena per slot (format version 5, a
  /// pipeline stage's "arena_bytes"); -1: the program's arena_bytes.
  int64_t ArenaBytes = -1;
  /// The part of that arena instanced per slot (a pipeline stage's
  /// "slot_bytes"): a per-micro-batch buffer below it lies in instance
  /// k mod Slots; the arena from it on is one instance that the
  /// micro-batches share (once-per-step values, and what a run writes and
  /// reads itself: its scratch). -1: the whole arena.
  int64_t SlotBytes = -1;
  /// Index of the fragment named Name, or -1.
  int64_t find(const std::string &Name) const;
  /// Index of the forward (or backward) fragment of chunk C, or -1.
  int64_t find(bool Backward, int64_t C) const;
  /// The per-micro-batch fragments: the first (forward of chunk 0) and the
  /// last (backward of chunk 0, or weight).
  int64_t firstPerMicrobatch() const { return find(false, 0); }
  int64_t lastPerMicrobatch() const;
  /// The forward that ends with the loss on the last stage: the last chunk's.
  int64_t lastForward() const { return find(false, Chunks - 1); }
  /// The first action of the step's update: the optimizer's run, or the
  /// once-per-step transfers just before it (receives, and sends of a sum
  /// over the step's micro-batches). The runtime completes every stage's
  /// actions before it, and sums the loss over the stages, before any stage
  /// goes on (a barrier): transfers never group across it.
  size_t updateBegin() const;
  /// The run action transfer A belongs to: its micro-batch's next run for a
  /// receive, its previous for a send; -1 when there is none. A send in the
  /// update before the optimizer's run belongs to that run.
  int64_t attachedRun(size_t A) const;
};

/// The fragment names of format version 3, in table order.
constexpr const char *FragmentPrologue = "prologue";
constexpr const char *FragmentForward = "forward";
constexpr const char *FragmentBackward = "backward";
constexpr const char *FragmentWeight = "weight";
constexpr const char *FragmentOptimizer = "optimizer";

/// A value a forward-only program computes for its caller (format version
/// 7), whole on every rank: the logits [batch, seq, vocab], an encoder's
/// hidden states [batch, seq, N], or (version 8) any named float tensor.
struct OutputSpec {
  std::string Name;
  int64_t Buffer = -1;
};

/// How a masked-language-model program's batches hide tokens (version 9;
/// runtime/data/Data.h samples them, docs/program-format.md "Masked-LM
/// batches"). MaskToken < 0: a next-token program.
struct MaskedLmSpec {
  int64_t MaskToken = -1;
  double MaskProb = 0;
  int64_t Seed = 0;
  bool enabled() const { return MaskToken >= 0; }
};

struct Program {
  uint32_t Version = ProgramFormatVersion;
  /// Version 12: rows pack documents, each ending with this token id
  /// (docs/program-format.md, "Packed documents"); -1: one sequence a row.
  int64_t DocumentEos = -1;
  /// Version 12: padded rows: the documents are the runs of equal values
  /// of each sample's attention mask (1 a token, 0 padding), given beside
  /// the samples (weft-run --attention-mask).
  bool DocumentsFromMask = false;
  /// Whether a packed program's targets are the caller's (--tokens and
  /// --targets), not the token file's next tokens.
  bool DocumentTargetsGiven = false;
  bool packsDocuments() const { return DocumentEos >= 0 || DocumentsFromMask; }
  /// Version 14: load-balanced context parallelism holds each sequence as
  /// SeqChunks chunks in the order 0, C-1, 1, C-2, ... (0: natural order);
  /// positions are read through seqPosition.
  int64_t SeqChunks = 0;
  /// Version 13: some attention reads the step's attention mask as key
  /// padding (set from the instructions' key_padding when loaded).
  bool ReadsKeyPadding = false;
  /// Version 13: some table is read by the step's token types; they are
  /// below TokenTypeRows (the smallest such table's rows).
  bool ReadsTokenTypes = false;
  int64_t TokenTypeRows = 0;
  std::string Model;
  DType Type = DType::F32;
  /// The token ids' [batch, seq] and their bound; all 0 in a forward-only
  /// program that reads tensor inputs only (version 8).
  int64_t Batch = 0, Seq = 0, Vocab = 0;
  /// Version 11: the bound of the targets when it is not the vocabulary (a
  /// classifier's classes); 0: absent, the targets are token ids.
  int64_t Classes = 0;
  /// The targets' bound: [0, targetBound()) or -100 where ignored.
  int64_t targetBound() const { return Classes ? Classes : Vocab; }
  OptimizerSpec Optimizer;
  std::vector<ParamSpec> Params;
  int64_t ArenaBytes = 0;
  std::vector<BufferSpec> Buffers;
  /// Every fragment's instructions, fragment after fragment.
  std::vector<Instruction> Instructions;
  int64_t Loss = -1;
  MaskedLmSpec MaskedLm;
  /// Whether its cross-entropies are masked (version 9): targets of -100
  /// count for nothing and the mean divides by the step's counted ones.
  /// With MaskedLm's recipe the runtime masks a token file's batches;
  /// without (givenTargets), the caller gives inputs and targets.
  bool maskedLoss() const {
    for (const Instruction &I : Instructions)
      if (I.Attrs.Masked)
        return true;
    return false;
  }
  bool givenTargets() const {
    return maskedLoss() && !MaskedLm.enabled() &&
           (!packsDocuments() || DocumentTargetsGiven);
  }
  /// A forward-only program's outputs (then Loss is -1, and the program
  /// has no targets, gradients or optimizer).
  std::vector<OutputSpec> Outputs;
  bool forwardOnly() const { return !Outputs.empty(); }
  /// Version 11: one target per sample (a sequence classifier's: the
  /// targets input is [batch/microbatches], not [batch/microbatches, seq]).
  bool sampleTargets() const {
    const BufferSpec *T = targets();
    return T && T->Dims.size() == 1 && T->Type == DType::I32;
  }
  /// Version 11: float targets (a regression's: [batch/microbatches,
  /// ...] of the program's float dtype, the shape of what mse_loss
  /// compares them with); null when the targets are ids or labels.
  const BufferSpec *floatTargets() const {
    const BufferSpec *T = targets();
    return T && T->Type != DType::I32 ? T : nullptr;
  }
  /// The (first) targets input; null in a forward-only program.
  const BufferSpec *targets() const {
    for (const BufferSpec &B : Buffers)
      if (B.Kind == BufferKind::Input && B.Name == "targets")
        return &B;
    return nullptr;
  }
  /// Whether the program reads token ids (every training program does).
  bool readsTokens() const {
    for (const BufferSpec &B : Buffers)
      if (B.tokenInput())
        return true;
    return false;
  }
  /// Derived from the fragments: the end of forward and the start of the
  /// optimizer (ranges for Executor::run).
  int64_t ForwardEnd = 0, OptimizerBegin = 0;
  /// Micro-batches per step: the step's batch of `Batch` rows is cut into
  /// this many, each of Batch / Microbatches rows, whose gradients add up.
  int64_t Microbatches = 1;
  std::vector<Stage> Stages;
  /// -1 for a whole program; a stage's index in the view stageView made
  /// (Stages then holds that stage alone, Instructions its instructions).
  int64_t StageIndex = -1;
  int64_t NumStages = 1;
  /// The global rows of one micro-batch (Batch when Microbatches is not
  /// positive: checkSchedule refuses that program).
  int64_t microbatchRows() const {
    return Microbatches >= 1 ? Batch / Microbatches : Batch;
  }
  Mesh Devices; // empty: one rank
};

/// The shape a buffer of parameter P, stored as Global (the parameter's own
/// global shape, or ZeRO's flattened state), has in the model and its
/// checkpoints: Global without P's padding rows (a padded vocabulary,
/// version 15), which are its last elements in row-major order.
Shape logicalShape(const ParamSpec &P, const Shape &Global);

/// An input buffer's shape for one micro-batch on one rank holding it
/// whole: tokens and per-token targets [batch/microbatches, seq], per-sample
/// labels [batch/microbatches], float targets [batch/microbatches, ...] with
/// the buffer's own trailing dims (split along the rows only).
Shape unsplitInputShape(const Program &P, const BufferSpec &B);

/// Stage S of a validated program, as a program of one stage: its
/// instructions renumbered from 0, every buffer (ids kept; those of other
/// stages unused), the loss only on the last stage (else -1).
Program stageView(const Program &P, size_t S);
/// Whether arena buffer Id of a stage view holds one micro-batch's value
/// (instanced per slot): written first in a per-micro-batch fragment or
/// received for one.
std::vector<bool> perMicrobatchBuffers(const Program &View);
/// The per-slot part of a stage view's arena: its SlotBytes, or the whole
/// arena.
int64_t slotBytes(const Program &View);
/// The bytes a stage view's arena takes: the per-slot part once per slot,
/// the shared rest once (validateProgram bounds it by 2^60).
int64_t arenaAllocation(const Program &View);
/// Where arena buffer Id of a stage view begins, from the arena's start,
/// for micro-batch K (or -1: a once-per-step access): instance K mod Slots
/// of the per-slot part, or the shared part after the last instance.
int64_t arenaAddress(const Program &View, const std::vector<bool> &PerMb,
                     int64_t Id, int64_t K);
/// Format version 5 (program/ValidatePipeline.cpp): the pipeline axis and
/// one stage per coordinate, every instruction touching buffers of its own
/// stage, and the stages' schedules simulated together: every send matches
/// the receive its peer posts in the same order, of the same micro-batch,
/// shape and dtype, and no stage waits forever.
Status checkPipeline(const Program &P);
/// Parses and validates a whole program file image (container + payload).
Expected<Program> parseProgram(const std::string &FileBytes);
/// Reads PATH and parses it.
Expected<Program> loadProgramFile(const std::string &Path);
/// Parses and validates the JSON payload alone.
Expected<Program> parseProgramJson(const std::string &Json,
                                   uint32_t Version = ProgramFormatVersion);
/// Checks every cross-reference and every instruction's operand shapes.
Status validateProgram(const Program &P);
/// The stages, fragments and schedule (program/ValidateSchedule.cpp): one
/// stage; fragments named and ordered as Stage documents, covering the
/// instruction table; every micro-batch runs forward then backward exactly
/// once, one micro-batch in flight at a time (the arena holds one); the
/// once-per-step fragments run once, prologue before any forward and the
/// optimizer after every backward; ForwardEnd and OptimizerBegin are the
/// fragments' boundaries. validateProgram calls it first.
Status checkSchedule(const Program &P);
/// The instruction list as a whole (program/ValidateDataflow.cpp): not
/// empty, the loss written in the forward range, no arena buffer read before
/// it is written or sharing bytes with another live one, no op writing what
/// it reads unless in place, tokens and targets where they belong, and
/// cross-entropy denominators of batch*seq rows. validateProgram calls it.
Status checkDataflow(const Program &P);
/// Fills the layouts a program leaves implicit: params without one are
/// replicated; param buffers and same-shaped grad/adam buffers without their
/// own take the param's; inputs are blocks of [batch, seq]. The loader and
/// Executor::create call it.
void resolveLayouts(Program &P);
/// Version 2: every param's and buffer's layout against the mesh (axes
/// known and used once, sizes divisible, local = global / shards).
Status checkLayouts(const Program &P);
/// A mesh's axes (named once, not empty) and sizes (1 to 2^20 each, at most
/// 2^20 ranks in all).
Status checkMesh(const Mesh &M);
/// The mesh a user writes (--mesh, weft-opt's mesh=): "AXIS=N[,AXIS=N...]",
/// the last axis innermost; names of letters, digits and _ (not starting
/// with a digit), sizes 1 to 2^20, each axis once, no spaces. The one
/// parser of that spelling: weft-compile, weft-opt's passes and the
/// pipeline options all read a mesh through it.
Status parseMeshSpec(const std::string &Text, Mesh &M);
/// One tensor's layout against a mesh, without a local shape (a checkpoint's
/// layout.json): axes of the mesh, each used once, and every dim divisible
/// into its blocks x shards, with no overflow.
Status checkGlobalLayout(const Mesh &M, const Layout &L,
                         const std::string &Ctx);
/// Wraps a JSON payload in the container (what weft-compile writes).
std::string encodeProgramContainer(const std::string &Json,
                                   uint32_t Version = ProgramFormatVersion);
/// The readable listing printed by `weft-run --dump`.
std::string dumpProgram(const Program &P);

} // namespace weft

#endif // WEFT_RUNTIME_PROGRAM_H
