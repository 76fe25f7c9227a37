//===- PlanMemory.cpp - weft-plan-memory: liveness-based arena placement --===//
#include "dialect/AttrNames.h"
#include "dialect/WeftDialect.h"
#include "passes/Passes.h"

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
        if (isa<AllReduceOp, AllGatherOp, RingShiftOp>(user) &&
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

    Arena arena;
    DenseMap<Value, int64_t> offsets;
    OpBuilder b(fn);
    for (Operation &op : body) {
      // A stored gradient is read from its grad buffer, not the arena, and
      // a constant from its own buffer.
      if (isa<ParamOp, StoredGradOp, ConstantOp>(op) ||
          op.getNumResults() == 0) {
        releaseDead(op, index[&op], lastUse, offsets, arena);
        continue;
      }
      SmallVector<int64_t> placed;
      for (Value r : op.getResults()) {
        std::optional<int64_t> offset = arena.allocate(byteSize(r));
        if (!offset) {
          op.emitError() << "the activation arena would exceed 2^60 bytes "
                            "placing this op's result of "
                         << byteSize(r) << " bytes (high-water mark "
                         << arena.peak() << " bytes)";
          return signalPassFailure();
        }
        offsets[r] = *offset;
        placed.push_back(*offset);
      }
      op.setAttr(weft::attrname::kOffsets, b.getDenseI64ArrayAttr(placed));
      releaseDead(op, index[&op], lastUse, offsets, arena);
      // Results nobody reads (e.g. an unused split part) die at once.
      for (Value r : op.getResults())
        if (r.use_empty())
          arena.release(offsets[r], byteSize(r));
    }
    fn->setAttr(weft::attrname::kArenaBytes, b.getI64IntegerAttr(arena.peak()));
  }

  template <typename LastUse>
  static void releaseDead(Operation &op, int64_t at, const LastUse &lastUse,
                          DenseMap<Value, int64_t> &offsets, Arena &arena) {
    llvm::SmallDenseSet<Value> seen;
    for (Value v : op.getOperands()) {
      if (!offsets.count(v) || !seen.insert(v).second)
        continue;
      if (lastUse(v) == at)
        arena.release(offsets[v], byteSize(v));
    }
  }
};
} // namespace
