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

struct BucketGradients
    : weft::impl::WeftBucketGradientsBase<BucketGradients> {
  using WeftBucketGradientsBase::WeftBucketGradientsBase;

  void runOnOperation() override {
    if (bucketBytes <= 0)
      return;
    SmallVector<AllReduceOp> bucket;
    int64_t bytes = 0;
    SmallVector<SmallVector<AllReduceOp>> buckets;
    auto flush = [&] {
      if (bucket.size() > 1)
        buckets.push_back(bucket);
      bucket.clear();
      bytes = 0;
    };
    getOperation().walk([&](AllReduceOp op) {
      if (!reducesAGradient(op))
        return;
      if (!bucket.empty() &&
          (bucket.front().getAxes() != op.getAxes() ||
           bucket.front().getType().getElementType() !=
               op.getType().getElementType() ||
           bytes + bytesOf(op.getX()) > bucketBytes))
        flush();
      bucket.push_back(op);
      bytes += bytesOf(op.getX());
    });
    flush();
    for (auto &group : buckets)
      pack(group);
  }

  // pack -> one all-reduce -> unpack, where the bucket's last gradient is.
  void pack(ArrayRef<AllReduceOp> group) {
    AllReduceOp last = group.back();
    OpBuilder b(last);
    SmallVector<Value> pieces;
    SmallVector<Type> types;
    int64_t elements = 0;
    for (AllReduceOp op : group) {
      pieces.push_back(op.getX());
      types.push_back(op.getType());
      elements += op.getType().getNumElements();
    }
    auto flat = RankedTensorType::get({elements},
                                      last.getType().getElementType());
    Location loc = last.getLoc();
    Value packed = PackOp::create(b, loc, flat, pieces);
    std::string reason = "gradient bucket of " + std::to_string(group.size()) +
                         " tensors (" + std::to_string(bytesOf(packed)) +
                         " bytes)";
    Value reduced = AllReduceOp::create(b, loc, flat, packed, last.getAxes(),
                                        b.getStringAttr(reason));
    auto unpack = UnpackOp::create(b, loc, types, reduced);
    // The stores move after the unpack (still before the optimizer, which
    // comes after every store).
    Operation *after = unpack;
    for (auto [i, op] : llvm::enumerate(group)) {
      AllReduceOp reduce = op;
      Operation *store = *reduce->getUsers().begin();
      reduce.getResult().replaceAllUsesWith(unpack.getResult(i));
      reduce.erase();
      store->moveAfter(after);
      after = store;
    }
  }
};
} // namespace
