//===- BucketGradients.cpp - weft-bucket-gradients ------------------------===//
#include "dialect/WeftDialect.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace weft {
#define GEN_PASS_DEF_WEFTBUCKETGRADIENTS
#include "passes/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {
int64_t bytesOf(Value v) {
  auto t = cast<RankedTensorType>(v.getType());
  return t.getNumElements() * t.getElementTypeBitWidth() / 8;
}

// An all-reduce whose only use stores a parameter's gradient.
bool reducesAGradient(AllReduceOp op) {
  return op->hasOneUse() && isa<ParamGradOp>(*op->getUsers().begin());
}

// The op after which all of `values` are defined (null: the block start).
Operation *lastDefinition(ValueRange values) {
  Operation *last = nullptr;
  for (Value v : values) {
    Operation *def = v.getDefiningOp();
    if (def && (!last || last->isBeforeInBlock(def)))
      last = def;
  }
  return last;
}

struct BucketGradients : weft::impl::WeftBucketGradientsBase<BucketGradients> {
  using WeftBucketGradientsBase::WeftBucketGradientsBase;

  void runOnOperation() override {
    // Gradients in the order backward computes them (last layer first).
    SmallVector<AllReduceOp> ready;
    getOperation().walk([&](AllReduceOp op) {
      if (reducesAGradient(op))
        ready.push_back(op);
    });
    llvm::stable_sort(ready, [](AllReduceOp a, AllReduceOp b) {
      Operation *da = a.getX().getDefiningOp(), *db = b.getX().getDefiningOp();
      return da && db && da->isBeforeInBlock(db);
    });
    SmallVector<AllReduceOp> bucket;
    int64_t bytes = 0;
    auto flush = [&] {
      if (!bucket.empty())
        emitBucket(bucket);
      bucket.clear();
      bytes = 0;
    };
    for (AllReduceOp op : ready) {
      if (!bucket.empty() && (bucket.front().getAxes() != op.getAxes() ||
                              bucket.front().getType().getElementType() !=
                                  op.getType().getElementType() ||
                              bytesOf(op.getX()) + bytes > bucketBytes))
        flush();
      bucket.push_back(op);
      bytes += bytesOf(op.getX());
    }
    flush();
  }

  // Starts the bucket's reduction as soon as its last gradient exists
  // (asynchronously: the runtime completes it when its result is read, so it
  // overlaps the rest of backward), and finishes it where the gradients are
  // stored. One gradient: its own all-reduce; several: pack, one all-reduce,
  // unpack. bucket-bytes=0 keeps one all-reduce per gradient.
  void emitBucket(SmallVector<AllReduceOp> group) {
    SmallVector<Value> pieces;
    for (AllReduceOp op : group)
      pieces.push_back(op.getX());
    OpBuilder b(&getContext());
    if (Operation *def = lastDefinition(pieces))
      b.setInsertionPointAfter(def);
    else
      b.setInsertionPointToStart(group.front()->getBlock());
    Location loc = group.back().getLoc();
    if (group.size() == 1 || bucketBytes <= 0) {
      for (AllReduceOp op : group) {
        op->moveBefore(b.getInsertionBlock(), b.getInsertionPoint());
        op->setAttr("async", b.getBoolAttr(true));
      }
      return;
    }
    int64_t elements = 0;
    SmallVector<Type> types;
    for (AllReduceOp op : group) {
      types.push_back(op.getType());
      elements += op.getType().getNumElements();
    }
    auto flat = RankedTensorType::get({elements},
                                      group.front().getType().getElementType());
    Value packed = PackOp::create(b, loc, flat, pieces);
    std::string reason = "gradient bucket of " + std::to_string(group.size()) +
                         " tensors (" + std::to_string(bytesOf(packed)) +
                         " bytes)";
    auto reduce = AllReduceOp::create(
        b, loc, flat, packed, group.front().getAxes(), b.getStringAttr(reason));
    reduce->setAttr("async", b.getBoolAttr(true));

    // Unpack where the first of the bucket's gradients is stored; the stores
    // follow it (all stores come before the optimizer).
    Operation *firstStore = nullptr;
    for (AllReduceOp op : group) {
      Operation *store = *op->getUsers().begin();
      if (!firstStore || store->isBeforeInBlock(firstStore))
        firstStore = store;
    }
    // (Not before the reduction itself: an input may be computed after some
    // other parameter's gradient was stored.)
    if (firstStore->isBeforeInBlock(reduce))
      b.setInsertionPointAfter(reduce);
    else
      b.setInsertionPoint(firstStore);
    auto unpack = UnpackOp::create(b, loc, types, reduce.getResult());
    Operation *after = unpack;
    for (auto [i, op] : llvm::enumerate(group)) {
      AllReduceOp single = op;
      Operation *store = *single->getUsers().begin();
      single.getResult().replaceAllUsesWith(unpack.getResult(i));
      single.erase();
      store->moveAfter(after);
      after = store;
    }
  }
};
} // namespace
