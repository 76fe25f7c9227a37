//===- Backend.h - Where instructions run ----------------------*- C++ -*-===//
//
// The executor resolves every instruction's buffer ids to memory once, at
// load, and hands the backend BoundInstructions. A backend owns the device
// memory, the kernels (and their scratch) and the queues of one device kind.
// The executor never reads or writes what allocate() returns: kernels,
// copies and fills are work on a Queue (runtime/Queue.h). CPU today; a CUDA
// backend allocates with cudaMalloc, makes its queues on streams and
// launches its own kernels behind the same calls (docs/design.md, "The
// device boundary").
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_RUNTIME_BACKEND_H
#define WEFT_RUNTIME_BACKEND_H

#include "program/Dropout.h"
#include "program/Program.h"
#include "program/Status.h"
#include "runtime/AdamWParams.h"
#include "runtime/Queue.h"

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace weft {

/// A buffer bound to memory, with the 2-D view kernels use.
struct TensorRef {
  void *Data = nullptr;
  const BufferSpec *Spec = nullptr;
  int64_t Numel = 0;
  int64_t Rows = 1; // product of the leading dims
  int64_t Last = 1; // the last dim (1 for scalars)
  template <typename T> T *as() const { return static_cast<T *>(Data); }
};

struct BoundInstruction {
  OpKind Op;
  const OpAttrs *Attrs;
  size_t Index = 0; // position in the program; backends key plans by it
  std::vector<TensorRef> In, Out;
  /// Ops with `vocab_axes`: the first vocab id of this rank's shard, and the
  /// whole vocab (0: the local one). Set at load (MeshOps.cpp).
  int64_t VocabFirst = 0, VocabTotal = 0;
  /// Ops with `seq_axes`: the rank's first global position. Set at load.
  int64_t SeqFirst = 0;
  /// Load-balanced context parallelism (Program::SeqChunks): the position
  /// in the sequence of each local row along the sequence (dim 1 of the
  /// input; empty: the natural order, SeqFirst + row), and for attention
  /// the chunk count by which its keys are ordered. Set at load.
  std::vector<int32_t> SeqPos;
  int64_t SeqChunks = 0;
  /// attention_block(_grad): the global position of each key of the block
  /// it receives on its ring step (and SeqPos its queries', always set).
  std::vector<int32_t> KeyPos;
  /// dropout, and attention(_grad) with dropout: per dim of the input (q),
  /// the rank's first global index and the global size, and the step's rows
  /// per micro-batch (micro-batch k's first row is k * MicrobatchRows +
  /// DimFirst[0]). Set at load (MeshOps.cpp).
  std::vector<int64_t> DimFirst, DimTotal;
  int64_t MicrobatchRows = 0;
};

/// "instructions[3] (embedding)", for messages.
std::string describeInstruction(const BoundInstruction &I);

/// The whole vocab of an op with `vocab_axes`; else its local one.
inline int64_t vocabTotal(const BoundInstruction &I, int64_t Local) {
  return I.VocabTotal > 0 ? I.VocabTotal : Local;
}

/// pack's and unpack's layout, for every backend: Each(Piece, PieceOffset,
/// FlatOffset, Bytes) for every contiguous run between a piece and the flat
/// buffer, in order. attrs.blocks = n: block b of every piece, for
/// b = 0..n-1 (n = 1: the pieces end to end).
template <typename F>
void forEachPackedRun(const BoundInstruction &I, F &&Each) {
  const std::vector<TensorRef> &Pieces = I.Op == OpKind::Pack ? I.In : I.Out;
  const int64_t N = I.Attrs->Blocks;
  size_t Flat = 0;
  for (int64_t B = 0; B < N; ++B)
    for (const TensorRef &Piece : Pieces) {
      size_t Bytes = size_t(Piece.Numel / N) * dtypeBytes(Piece.Spec->Type);
      Each(Piece, size_t(B) * Bytes, Flat, Bytes);
      Flat += Bytes;
    }
}

/// Where an instruction's bf16 operands go in f32 scratch when a backend
/// runs its f32 kernel on them (docs/design.md decision 15): per input and
/// output the offset in floats, or -1 for an operand that is not bf16; an
/// operand read and written in place gets one slot. Slots start at
/// multiples of AlignFloats; Floats is the scratch they need.
struct WideningPlan {
  std::vector<int64_t> InAt, OutAt;
  int64_t Floats = 0;
};
WideningPlan planBf16Widening(const BoundInstruction &I, int64_t AlignFloats);

/// Per-step values the optimizer and loss instructions read.
struct StepContext {
  double Lr = 0.0;
  int64_t Step = 1; // 1-based optimizer step
  const OptimizerSpec *Optimizer = nullptr;
  /// A masked-LM program: the targets of the step's global batch that are
  /// not ignored (the loss's divisor), set by the executor per batch.
  int64_t CountedTargets = 0;
  /// Dropout masks: the run's seed (weft-run --seed) and the micro-batch
  /// being run (0 outside per-micro-batch fragments).
  uint64_t Seed = 0;
  int64_t Microbatch = 0;
  /// Rows that pack documents: each position's index in its document, for
  /// the step's global batch [rows, DocSeq] (null: one sequence a row).
  const int32_t *DocPos = nullptr;
  int64_t DocSeq = 0;
  /// Key padding: each row's tokens [F, E) in the step's attention mask,
  /// for the step's global batch [rows, 2] (null: no attention reads it).
  const int32_t *KeySpans = nullptr;
  /// The step's token types [rows, DocSeq] (null: no table reads them).
  const int32_t *TokenTypes = nullptr;
};

/// Packed documents: the positions of instruction I's local row 0 (its
/// global row in this micro-batch, from its first global position), or
/// null when the program packs none. Rows follow at Ctx.DocSeq apart.
/// Where instruction I's local row 0 starts in a step-wide [rows, DocSeq]
/// array (its global row in this micro-batch, its first global position);
/// null for a null array.
inline const int32_t *localRow(const int32_t *Global, const BoundInstruction &I,
                               const StepContext &Ctx) {
  if (!Global || I.DimFirst.size() < 2)
    return nullptr;
  return Global +
         (I.DimFirst[0] + Ctx.Microbatch * I.MicrobatchRows) * Ctx.DocSeq +
         I.DimFirst[1];
}
inline const int32_t *documentRow(const BoundInstruction &I,
                                  const StepContext &Ctx) {
  return localRow(Ctx.DocPos, I, Ctx);
}

/// Token types: those of position_embedding(_grad) I's local row 0 (as
/// documentRow), or null when it reads positions.
inline const int32_t *tokenTypeRow(const BoundInstruction &I,
                                   const StepContext &Ctx) {
  return I.Attrs->TokenTypes ? localRow(Ctx.TokenTypes, I, Ctx) : nullptr;
}

/// Key padding: the token spans of attention instruction I's local rows
/// (its first global row's, in this micro-batch), 2 a row; null when it
/// reads none.
inline const int32_t *keySpans(const BoundInstruction &I,
                               const StepContext &Ctx) {
  if (!Ctx.KeySpans || !I.Attrs->KeyPadding || I.DimFirst.empty())
    return nullptr;
  return Ctx.KeySpans + 2 * (I.DimFirst[0] + Ctx.Microbatch * I.MicrobatchRows);
}

/// The mask of a dropout site at this step (program/Dropout.h).
DropoutKey dropoutKey(const BoundInstruction &I, const StepContext &Ctx);

/// The AdamW step an `adamw` instruction takes at this step.
AdamWParams adamwParams(const BoundInstruction &I, const StepContext &Ctx);

class Backend {
public:
  virtual ~Backend() = default;
  virtual const char *name() const = 0;
  /// The ops this backend has no kernel for at dtype T (runtime/
  /// KernelTable.h): prepare() refuses an instruction of one by name.
  virtual std::vector<OpKind> missingKernels(DType T) const = 0;
  /// Zeroed (and therefore pre-faulted) 64-byte-aligned device memory.
  virtual void *allocate(size_t Bytes) = 0;
  virtual void release(void *Ptr) = 0;
  /// A queue on this device (the executor makes one, at load).
  virtual std::unique_ptr<Queue> createQueue() = 0;
  /// Called once before any run: sizes the kernels' scratch for these
  /// instructions. Returns the scratch bytes it holds.
  virtual Expected<size_t>
  prepare(const std::vector<BoundInstruction> &Insts) = 0;
  /// Enqueues instruction I's kernel on Q.
  virtual Status run(const BoundInstruction &I, const StepContext &Ctx,
                     Queue &Q) = 0;
  /// At = the index of the first NaN or infinity among the N elements of
  /// type T at device memory Data, or -1; Value = that element. A reduction
  /// on the device; synchronizes Q to return its answer.
  virtual Status findNonFinite(const void *Data, int64_t N, DType T, Queue &Q,
                               int64_t &At, double &Value) = 0;
};

/// OpenBLAS + OpenMP kernels for f32 or f64 programs.
std::unique_ptr<Backend> createCpuBackend(DType Type);

/// cuBLASLt and weft's CUDA kernels on the current CUDA device
/// (runtime/cuda/CudaBackend.cpp); an error saying why not in a build
/// without CUDA or where no device is found.
Expected<std::unique_ptr<Backend>> createCudaBackend(DType Type);
/// The CUDA devices this process sees: 0 in a build without CUDA, or
/// without a driver or device.
int cudaDeviceCount();
/// Whether this build has the CUDA backend.
bool haveCuda();
/// The ops the CUDA backend has no kernel for in Type, in the op table's
/// order (runtime/KernelTable.h); needs the plugin, not a device.
Expected<std::vector<OpKind>> cudaMissingKernels(DType Type);

} // namespace weft

#endif // WEFT_RUNTIME_BACKEND_H
