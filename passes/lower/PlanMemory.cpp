//===- PlanMemory.cpp - weft-plan-memory: liveness-based arena placement --===//
//
// Each value gets arena bytes from its op to its last use, best fit. A
// pipeline stage holds several micro-batches at once (slots), so its arena
// has two parts: what a micro-batch keeps from one run to another (its
// forward's stashed activations, what it sends or receives) lies in the
// per-slot part, instanced once per slot; the step's values and what a run
// writes and reads itself (its scratch) lie past it, once.
//
//===----------------------------------------------------------------------===//
#include "dialect/AttrNames.h"
#include "dialect/WeftDialect.h"
#include "passes/Passes.h"
#include "passes/lower/DirectGradients.h"
#include "program/PipelineSchedule.h"

#include "mlir/IR/Builders.h"

#include <functional>
#include <map>
#include <optional>

namespace weft {
#define GEN_PASS_DEF_WEFTPLANMEMORY
#include "passes/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {
constexpr int64_t kAlignment = 64;

/// The arena's bound: every offset + size stays far from int64's limit.
constexpr int64_t kMaxArenaBytes = int64_t(1) << 60;

/// The aligned bytes of a value; checkTensorSizes has bounded its type, so
/// this is at most 2^51.
int64_t byteSize(Value v) {
  int64_t bytes = *tensorBytes(v.getType());
  return std::max<int64_t>(kAlignment,
                           (bytes + kAlignment - 1) / kAlignment * kAlignment);
}

/// Best-fit allocator over [0, kMaxArenaBytes) that remembers its
/// high-water mark.
class Arena {
public:
  /// The offset of `size` new bytes; std::nullopt when the arena would grow
  /// past kMaxArenaBytes.
  std::optional<int64_t> allocate(int64_t size) {
    // Best fit (the smallest hole that holds it, the lowest such offset):
    // on eight GPT-2 and Llama layouts its arenas were 0-13% smaller than
    // first fit's, never larger.
    auto it = free.end();
    for (auto hole = free.begin(); hole != free.end(); ++hole)
      if (hole->second >= size &&
          (it == free.end() || hole->second < it->second))
        it = hole;
    if (it != free.end()) {
      int64_t offset = it->first, rest = it->second - size;
      free.erase(it);
      if (rest)
        free[offset + size] = rest;
      return offset;
    }
    // Grow: extend a free block that ends at the top, if any.
    int64_t offset = top;
    if (!free.empty()) {
      auto last = std::prev(free.end());
      if (last->first + last->second == top) {
        offset = last->first;
        free.erase(last);
      }
    }
    if (size > kMaxArenaBytes - offset)
      return std::nullopt;
    top = offset + size;
    return offset;
  }

  void release(int64_t offset, int64_t size) {
    auto [it, inserted] = free.emplace(offset, size);
    (void)inserted;
    auto next = std::next(it);
    if (next != free.end() && it->first + it->second == next->first) {
      it->second += next->second;
      free.erase(next);
    }
    if (it != free.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second == it->first) {
        prev->second += it->second;
        free.erase(it);
      }
    }
  }

  int64_t peak() const { return top; }

private:
  std::map<int64_t, int64_t> free; // offset -> size, coalesced
  int64_t top = 0;
};

struct PlanMemory : weft::impl::WeftPlanMemoryBase<PlanMemory> {
  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    if (failed(checkTensorSizes(fn)))
      return signalPassFailure();
    Block &body = fn.getBody().front();

    // Index ops; a value dies after the last op that uses it. The returned
    // loss lives to the end.
    DenseMap<Operation *, int64_t> index;
    for (Operation &op : body)
      index[&op] = index.size();
    std::function<int64_t(Value)> lastUse = [&](Value v) {
      int64_t last = -1;
      for (Operation *user : v.getUsers()) {
        last = std::max(last, index.lookup(body.findAncestorOpInBlock(*user)));
        // An asynchronous collective reads its input until its result is
        // first used (docs/program-format.md): keep the input's bytes alive.
        if (isa<AllReduceOp, AllGatherOp, ReduceScatterOp, RingShiftOp>(user) &&
            user->hasAttr(weft::attrname::kAsync))
          last = std::max(last, lastUse(user->getResult(0)));
      }
      return last;
    };

    // Micro-batches: ops before the first forward op run once per step (the
    // prologue, marked), then forward and backward once per micro-batch up
    // to the optimizer. A prologue value the loop reads (a ZeRO-3 parameter
    // gathered once per step) lives through the loop's last op.
    int64_t loopBegin = -1, loopEnd = -1;
    for (Operation &op : body) {
      auto mark = op.getAttrOfType<StringAttr>(weft::attrname::kFragment);
      if (isa<AdamWOp>(op) || (mark && mark.getValue() == "optimizer"))
        break;
      // A pipeline stage's function marks its forward and backward ops.
      bool perMicrobatch = !mark || mark.getValue() == "forward" ||
                           mark.getValue() == "backward" ||
                           mark.getValue() == "weight";
      if (loopBegin < 0 && perMicrobatch && !isa<ParamOp, ConstantOp>(op))
        loopBegin = index[&op];
      loopEnd = index[&op];
    }
    std::function<int64_t(Value)> planUse = lastUse;
    lastUse = [&, planUse](Value v) {
      int64_t last = planUse(v);
      Operation *def = v.getDefiningOp();
      auto mark =
          def ? def->getAttrOfType<StringAttr>(weft::attrname::kFragment)
              : StringAttr();
      if (mark && mark.getValue() == "prologue" && last >= loopBegin)
        last = std::max(last, loopEnd);
      return last;
    };

    // Two parts when the stage holds several micro-batches: values a run
    // keeps for another go to the per-slot part. Splitting loses the reuse
    // of bytes between the parts, so a stage takes it only when the split
    // arena, its per-slot part once per slot, is the smaller (gpt-tiny's
    // pp=2 stage 0 at 2 slots is 2% larger split; Llama 3 405B's pp=16
    // stage 0 at 16 slots is 2.4x smaller).
    const int64_t slots = slotsOf(fn);
    Plan joint = place(body, index, lastUse, /*split=*/false);
    if (!joint.ok)
      return signalPassFailure();
    std::optional<Plan> split;
    if (slots > 1) {
      split = place(body, index, lastUse, /*split=*/true);
      if (!split->ok)
        return signalPassFailure();
      // Both at most 2^60 each, so in doubles the comparison is exact
      // enough and cannot overflow.
      if (double(split->slotBytes) * double(slots) +
              double(split->sharedBytes) >=
          double(joint.slotBytes) * double(slots))
        split.reset();
    }
    const Plan &plan = split ? *split : joint;
    OpBuilder b(fn);
    for (auto &[op, placed] : plan.offsets)
      op->setAttr(weft::attrname::kOffsets, b.getDenseI64ArrayAttr(placed));
    fn->setAttr(weft::attrname::kArenaBytes,
                b.getI64IntegerAttr(plan.slotBytes + plan.sharedBytes));
    if (split)
      fn->setAttr(weft::attrname::kSlotBytes,
                  b.getI64IntegerAttr(plan.slotBytes));
  }

  struct Plan {
    bool ok = false;
    int64_t slotBytes = 0, sharedBytes = 0;
    /// Each placed op's result offsets, in block order.
    SmallVector<std::pair<Operation *, SmallVector<int64_t>>> offsets;
  };

  // Every result's bytes from its op to its last use, best fit; split puts
  // what a run keeps for another (keptBetweenRuns) in a per-slot part and
  // the rest in a shared part after it (the whole arena is per slot
  // otherwise).
  template <typename LastUse>
  static Plan place(Block &body, const DenseMap<Operation *, int64_t> &index,
                    const LastUse &lastUse, bool split) {
    Plan plan;
    Arena arenas[2];
    DenseMap<Value, int64_t> offsets;
    DenseMap<Value, bool> shared;
    // The values that own arena bytes, by the index of the op after which
    // they die. Values written into a grad buffer, or into a pack's buffer
    // (released with the pack's result), own none.
    DenseMap<int64_t, SmallVector<Value>> dies;
    const DenseMap<Value, PackSlot> intoPack = packedInPlace(body, split);
    DenseMap<Operation *, int64_t> packAt; // a pack's buffer, once placed
    auto allocate = [&](Operation &op, Value r, bool inShared) -> bool {
      std::optional<int64_t> offset = arenas[inShared].allocate(byteSize(r));
      if (!offset) {
        op.emitError() << "the activation arena would exceed 2^60 bytes "
                          "placing this op's result of "
                       << byteSize(r) << " bytes (high-water mark "
                       << arenas[inShared].peak() << " bytes)";
        return false;
      }
      offsets[r] = *offset;
      shared[r] = inShared;
      dies[lastUse(r)].push_back(r);
      return true;
    };
    // Frees what dies at op `at`: by its index, not by the op's operands,
    // since an asynchronous collective's input dies at a reader of its
    // result and a prologue value at the loop's end (ops that never name it).
    auto releaseDead = [&](int64_t at) {
      auto it = dies.find(at);
      if (it == dies.end())
        return;
      for (Value v : it->second)
        arenas[shared[v]].release(offsets[v], byteSize(v));
      dies.erase(it);
    };
    for (Operation &op : body) {
      // A stored gradient is read from its grad buffer, not the arena, and
      // a constant from its own buffer.
      if (isa<ParamOp, StoredGradOp, ConstantOp>(op) ||
          op.getNumResults() == 0) {
        releaseDead(index.lookup(&op));
        continue;
      }
      for (Value r : op.getResults()) {
        // Written into its grad buffer, not the arena (weft-emit-program
        // ignores its offset).
        if (r.hasOneUse())
          if (auto store = dyn_cast<ParamGradOp>(*r.getUsers().begin());
              store && weft::storedDirectly(store)) {
            offsets[r] = 0;
            shared[r] = false;
            continue;
          }
        // A pack's buffer is placed by its first input written into it.
        auto pack = dyn_cast<PackOp>(op);
        Value packed = pack ? pack.getResult() : Value();
        if (auto it = intoPack.find(r); it != intoPack.end())
          packed = it->second.pack->getResult(0);
        if (packed && !packAt.count(packed.getDefiningOp())) {
          if (!allocate(op, packed, split && !keptBetweenRuns(packed)))
            return plan;
          packAt[packed.getDefiningOp()] = offsets[packed];
        }
        if (pack) {
          offsets[r] = packAt[pack.getOperation()];
          shared[r] = split && !keptBetweenRuns(r);
        } else if (auto it = intoPack.find(r); it != intoPack.end()) {
          offsets[r] = packAt[it->second.pack] + it->second.at;
          shared[r] = split && !keptBetweenRuns(packed);
        } else if (!allocate(op, r, split && !keptBetweenRuns(r))) {
          return plan;
        }
      }
      plan.offsets.push_back({&op, {}});
      releaseDead(index.lookup(&op));
      // Results nobody reads (e.g. an unused split part) die at once.
      releaseDead(-1);
    }
    // The shared part follows the per-slot one.
    plan.slotBytes = arenas[0].peak();
    plan.sharedBytes = arenas[1].peak();
    if (plan.sharedBytes > kMaxArenaBytes - plan.slotBytes) {
      body.getParentOp()->emitError()
          << "the activation arena would exceed 2^60 bytes: " << plan.slotBytes
          << " per slot and " << plan.sharedBytes << " shared";
      return plan;
    }
    for (auto &[op, placed] : plan.offsets)
      for (Value r : op->getResults())
        placed.push_back(offsets[r] + (shared[r] ? plan.slotBytes : 0));
    plan.ok = true;
    return plan;
  }

  /// Where a value is written into a pack's buffer.
  struct PackSlot {
    Operation *pack;
    int64_t at; // bytes from the buffer's start
  };

  // A gradient bucket's inputs (weft-bucket-gradients) written straight
  // into the pack's buffer, as DDP's gradient_as_bucket_view: the pack then
  // copies nothing of them. Each must be computed in the arena for the pack
  // alone, start at a 64-byte boundary of the flat buffer (a program's
  // arena offsets are), and lie in the pack's part of the arena. Not a
  // blocked pack, whose inputs are interleaved.
  static DenseMap<Value, PackSlot> packedInPlace(Block &body, bool split) {
    DenseMap<Value, PackSlot> into;
    for (Operation &op : body) {
      auto pack = dyn_cast<PackOp>(op);
      if (!pack || pack.getBlocks() != 1)
        continue;
      int64_t at = 0;
      for (Value v : pack.getInputs()) {
        Operation *def = v.getDefiningOp();
        if (at % kAlignment == 0 && def && def->getBlock() == &body &&
            v.hasOneUse() && !movesBytes(def) &&
            (!split || keptBetweenRuns(v) == keptBetweenRuns(pack.getResult())))
          into[v] = {pack.getOperation(), at};
        at += *tensorBytes(v.getType());
      }
    }
    return into;
  }

  // Ops that do not just compute a fresh result: parameters, stored
  // gradients and constants have buffers of their own; a collective, a
  // transfer, a pack or an unpack moves bytes, which the runtime may do in
  // place or after the op (an async one).
  static bool movesBytes(Operation *def) {
    return isa<ParamOp, StoredGradOp, ConstantOp, RecvOp, SendOp, PackOp,
               UnpackOp, AllReduceOp, AllGatherOp, ReduceScatterOp, AllToAllOp,
               RingShiftOp>(def);
  }

  // The micro-batches a pipeline stage function holds at once (1 for any
  // other function), as weft-emit-program will schedule it.
  static int64_t slotsOf(func::FuncOp fn) {
    auto schedule = fn->getAttrOfType<PipelineScheduleAttr>(
        weft::attrname::kPipelineSchedule);
    auto stage = fn->getAttrOfType<IntegerAttr>(weft::attrname::kStage);
    auto stages = fn->getAttrOfType<IntegerAttr>(weft::attrname::kNumStages);
    auto m = fn->getAttrOfType<IntegerAttr>(weft::attrname::kMicrobatches);
    weft::PipelineSchedule kind;
    if (!schedule || !stage || !stages || !m ||
        !weft::parsePipelineSchedule(schedule.spec(), kind).ok())
      return 1;
    return weft::pipelineSlots(kind, stage.getInt(), stages.getInt(),
                               m.getInt());
  }

  // Whether a value made once per micro-batch lives past its run: read in
  // another fragment (its forward's activation, read by its backward),
  // received, or sent (an asynchronous send reads it after the run).
  static bool keptBetweenRuns(Value v) {
    Operation *def = v.getDefiningOp();
    auto fragment = [](Operation *op) {
      auto mark = op->getAttrOfType<StringAttr>(weft::attrname::kFragment);
      auto chunk = op->getAttrOfType<IntegerAttr>(weft::attrname::kChunk);
      return std::make_pair(mark ? mark.getValue() : StringRef(),
                            chunk ? chunk.getInt() : int64_t(0));
    };
    auto [mark, chunk] = fragment(def);
    if (mark != "forward" && mark != "backward" && mark != "weight")
      return false; // once per step
    if (isa<RecvOp>(def))
      return true;
    return llvm::any_of(v.getUsers(), [&](Operation *user) {
      return isa<SendOp>(user) || fragment(user) != std::make_pair(mark, chunk);
    });
  }
};
} // namespace
