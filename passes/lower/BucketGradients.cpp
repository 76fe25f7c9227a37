//===- BucketGradients.cpp - weft-bucket-gradients ------------------------===//
#include "dialect/AttrNames.h"
#include "dialect/WeftDialect.h"
#include "passes/Passes.h"
#include "passes/sharding/ShardingUtils.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringSet.h"

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

// Whether two ops run in the same fragment, of the same model chunk.
bool inTheSameFragment(Operation *a, Operation *b) {
  return a->getAttr(weft::attrname::kFragment) ==
             b->getAttr(weft::attrname::kFragment) &&
         a->getAttr(weft::attrname::kChunk) ==
             b->getAttr(weft::attrname::kChunk);
}

// Whether collective `op` may join a bucket started by `first`: over the
// same axes, of the same element type, in the same fragment (of the same
// model chunk, under an interleaved schedule).
template <typename CollectiveOp>
bool sameBucket(CollectiveOp first, CollectiveOp op) {
  return first.getAxes() == op.getAxes() &&
         first.getType().getElementType() == op.getType().getElementType() &&
         inTheSameFragment(first, op);
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

// The ranks of a collective's group.
int64_t groupSize(ArrayAttr axes, const MeshInfo &mesh) {
  return mesh.count(llvm::to_vector(llvm::map_range(
      axes, [](Attribute a) { return cast<StringAttr>(a).getValue(); })));
}

// Ops made in place of `from` run in its fragment (with micro-batches, a
// reduction deferred to the optimizer fragment stays there).
void inFragmentOf(Operation *from, ArrayRef<Operation *> made) {
  for (StringRef name : {weft::attrname::kFragment, weft::attrname::kChunk})
    if (Attribute value = from->getAttr(name))
      for (Operation *op : made)
        op->setAttr(name, value);
}

// The bucket's collectives, each replaced by its piece of `unpack`.
template <typename OpT>
void replaceByPieces(MutableArrayRef<OpT> group, UnpackOp unpack) {
  for (auto [i, op] : llvm::enumerate(group)) {
    OpT single = op;
    single.getResult().replaceAllUsesWith(unpack.getResult(i));
    single.erase();
  }
}

// The rows of a position table's gradient that can be nonzero anywhere in
// `fn` (the sequence: every position_embedding_grad writes zeros past it),
// when `g` is one, widened to f32, or its stored sum over micro-batches.
std::optional<int64_t> usedRows(Value g, func::FuncOp fn,
                                const MeshInfo &mesh) {
  auto rowsOf = [&](Value v) -> std::optional<int64_t> {
    if (auto cast = v.getDefiningOp<CastOp>())
      v = cast.getX();
    auto grad = v.getDefiningOp<PositionEmbeddingGradOp>();
    if (!grad)
      return std::nullopt;
    SmallVector<StringRef> axes;
    if (auto a = grad->getAttrOfType<ArrayAttr>("seq_axes"))
      for (Attribute x : a)
        axes.push_back(cast<StringAttr>(x).getValue());
    auto dy = cast<RankedTensorType>(grad.getDy().getType());
    return dy.getDimSize(dy.getRank() - 2) * mesh.count(axes);
  };
  auto stored = g.getDefiningOp<StoredGradOp>();
  if (!stored)
    return rowsOf(g);
  std::optional<int64_t> rows; // every store of that gradient must say so
  bool all = true;
  fn.walk([&](ParamGradOp store) {
    if (store.getName() != stored.getName() || !store.getAccumulate())
      return;
    std::optional<int64_t> r = rowsOf(store.getGrad());
    all &= r.has_value() && (!rows || *rows == *r);
    rows = r;
  });
  return all ? rows : std::nullopt;
}

// A reduction the pass made: its first op (the pack, or the collective),
// the collective, and the ops that read its result, in order (the unpack
// and the stores).
struct Reduction {
  Operation *begin;
  Operation *start;
  SmallVector<Operation *> finish;
};

struct BucketGradients : weft::impl::WeftBucketGradientsBase<BucketGradients> {
  using WeftBucketGradientsBase::WeftBucketGradientsBase;

  // A position table's gradient is zero past the sequence on every rank, so
  // only its first rows are reduced: unpack them, all-reduce them
  // (asynchronously, in no bucket), and pack them back with zeros. GPT-2 at
  // seq 256 sends a quarter of the table instead of all of it.
  void trimZeroRows(AllReduceOp op, const MeshInfo &mesh) {
    auto type = cast<RankedTensorType>(op.getType());
    std::optional<int64_t> rows = usedRows(op.getX(), getOperation(), mesh);
    if (!rows || type.getRank() != 2 || *rows <= 0 ||
        *rows >= type.getDimSize(0))
      return;
    OpBuilder b(op);
    Location loc = op.getLoc();
    Type elem = type.getElementType();
    int64_t cols = type.getDimSize(1), total = type.getNumElements();
    auto flatType = RankedTensorType::get({total}, elem);
    auto usedType = RankedTensorType::get({*rows, cols}, elem);
    auto restType =
        RankedTensorType::get({type.getDimSize(0) - *rows, cols}, elem);
    Value flat = PackOp::create(b, loc, flatType, ValueRange{op.getX()});
    auto parts = UnpackOp::create(b, loc, TypeRange{usedType, restType}, flat);
    std::string reason = "gradient rows 0.." + std::to_string(*rows) + " of " +
                         std::to_string(type.getDimSize(0)) +
                         " (the rest are zero)";
    if (auto why = op.getReasonAttr())
      reason = why.getValue().str() + ", " + reason;
    auto reduce = AllReduceOp::create(b, loc, usedType, parts.getResult(0),
                                      op.getAxes(), b.getStringAttr(reason));
    reduce->setAttr(weft::attrname::kAsync, b.getUnitAttr());
    Operation *store = *op->getUsers().begin();
    b.setInsertionPoint(store);
    Value zeros = FillOp::create(b, loc, restType, b.getF64FloatAttr(0.0));
    Value joined =
        PackOp::create(b, loc, flatType, ValueRange{reduce.getResult(), zeros});
    auto whole = UnpackOp::create(b, loc, TypeRange{type}, joined);
    inFragmentOf(op, {flat.getDefiningOp(), parts.getOperation(),
                      reduce.getOperation(), zeros.getDefiningOp(),
                      joined.getDefiningOp(), whole.getOperation()});
    op.getResult().replaceAllUsesWith(whole.getResult(0));
    op.erase();
  }

  void runOnOperation() override {
    MeshInfo mesh = MeshInfo::of(getOperation());
    SmallVector<AllReduceOp> gradients;
    getOperation().walk([&](AllReduceOp op) {
      if (reducesAGradient(op))
        gradients.push_back(op);
    });
    for (AllReduceOp op : gradients)
      trimZeroRows(op, mesh);

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
    SmallVector<Reduction> made;
    int64_t bytes = 0;
    auto flush = [&] {
      if (!bucket.empty())
        emitBucket(bucket, made);
      bucket.clear();
      bytes = 0;
    };
    for (AllReduceOp op : ready) {
      if (!bucket.empty() && (!sameBucket(bucket.front(), op) ||
                              bytesOf(op.getX()) + bytes > bucketBytes))
        flush();
      bucket.push_back(op);
      bytes += bytesOf(op.getX());
    }
    flush();
    finishBeforeTheNext(made);
    if (zeroBucketBytes > 0)
      bucketReduceScatters(mesh);
    startReduceScattersEarly();
    if (zeroBucketBytes > 0)
      bucketParameterGathers(mesh);
  }

  // ZeRO-2/3's gradient reduce-scatters (a bucket's, or one gradient's):
  // started asynchronously where they are, each finished (its unpack and
  // stores) where the next one begins, as DDP's all-reduce buckets above, so
  // each runs under the backward's next layer as FSDP's do.
  void startReduceScattersEarly() {
    SmallVector<Reduction> made;
    OpBuilder b(&getContext());
    for (Operation &op : getOperation().getBody().front()) {
      auto reduce = dyn_cast<ReduceScatterOp>(op);
      if (!reduce || reduce->hasAttr(weft::attrname::kAsync) ||
          !reduce->hasOneUse())
        continue;
      Operation *user = *reduce->getUsers().begin();
      auto unpack = dyn_cast<UnpackOp>(user);
      Reduction r{reduce, reduce, {}};
      if (unpack) {
        // Only stores may read the pieces.
        if (!llvm::all_of(unpack->getUsers(),
                          [](Operation *u) { return isa<ParamGradOp>(u); }))
          continue;
        if (auto pack = reduce.getX().getDefiningOp<PackOp>())
          r.begin = pack;
        r.finish.push_back(unpack);
        for (Operation *store : unpack->getUsers())
          if (!llvm::is_contained(r.finish, store))
            r.finish.push_back(store);
      } else if (isa<ParamGradOp>(user)) {
        r.finish.push_back(user);
      }
      if (r.finish.empty())
        continue;
      // The finishing ops in block order (unpack first).
      llvm::sort(r.finish, [](Operation *a, Operation *c) {
        return a->isBeforeInBlock(c);
      });
      reduce->setAttr(weft::attrname::kAsync, b.getUnitAttr());
      made.push_back(r);
    }
    finishBeforeTheNext(made);
  }

  // ZeRO-2/3 gradients (ZeRO-1's, in the optimizer fragment): consecutive
  // dim-0 reduce-scatters that only feed a store, in buckets of about
  // zero-bucket-bytes, as FSDP reduces a unit's gradients: one blocked pack
  // (rank r's block of every gradient together), one reduce-scatter, one
  // unpack.
  void bucketReduceScatters(const MeshInfo &mesh) {
    SmallVector<ReduceScatterOp> ready;
    getOperation().walk([&](ReduceScatterOp op) {
      if (op.getDim() == 0 && op->hasOneUse() &&
          isa<ParamGradOp>(*op->getUsers().begin()))
        ready.push_back(op);
    });
    llvm::stable_sort(ready, [](ReduceScatterOp a, ReduceScatterOp b) {
      Operation *da = a.getX().getDefiningOp(), *db = b.getX().getDefiningOp();
      return da && db && da->isBeforeInBlock(db);
    });
    SmallVector<ReduceScatterOp> bucket;
    int64_t bytes = 0;
    for (ReduceScatterOp op : ready) {
      if (!bucket.empty() && (!sameBucket(bucket.front(), op) ||
                              bytesOf(op.getX()) + bytes > zeroBucketBytes)) {
        emitReduceScatterBucket(bucket, mesh);
        bucket.clear();
        bytes = 0;
      }
      bucket.push_back(op);
      bytes += bytesOf(op.getX());
    }
    emitReduceScatterBucket(bucket, mesh);
  }

  void emitReduceScatterBucket(MutableArrayRef<ReduceScatterOp> group,
                               const MeshInfo &mesh) {
    if (group.size() < 2)
      return;
    SmallVector<Value> pieces;
    SmallVector<Type> shards;
    int64_t elements = 0;
    for (ReduceScatterOp op : group) {
      pieces.push_back(op.getX());
      shards.push_back(op.getType());
      elements += op.getType().getNumElements();
    }
    int64_t n = groupSize(group.front().getAxes(), mesh);
    OpBuilder b(&getContext());
    // After the pieces and not before the first collective (the group is in
    // its inputs' order): a ZB-H1 stage
    // reduces norm weights' gradients, made by the backward's ops, in the
    // weight fragment, which begins after the backward.
    Operation *def = lastDefinition(pieces);
    Operation *earliest = group.front();
    for (ReduceScatterOp op : group)
      if (op->isBeforeInBlock(earliest))
        earliest = op;
    if (def && earliest->isBeforeInBlock(def))
      b.setInsertionPointAfter(def);
    else
      b.setInsertionPoint(earliest);
    Location loc = group.back().getLoc();
    Type elem = group.front().getType().getElementType();
    auto packed = PackOp::create(
        b, loc, RankedTensorType::get({elements * n}, elem), pieces, n);
    std::string reason = "ZeRO gradient bucket of " +
                         std::to_string(group.size()) + " tensors (" +
                         std::to_string(bytesOf(packed)) + " bytes)";
    auto reduce = ReduceScatterOp::create(
        b, loc, RankedTensorType::get({elements}, elem), packed,
        group.front().getAxes(), 0, b.getStringAttr(reason));
    auto unpack = UnpackOp::create(b, loc, shards, reduce.getResult(), 1);
    inFragmentOf(group.front(), {packed.getOperation(), reduce.getOperation(),
                                 unpack.getOperation()});
    // A store that ran before the last piece was made now follows the
    // unpack (stores come before the optimizer, in the same fragment).
    Operation *after = unpack;
    for (ReduceScatterOp op : group) {
      Operation *store = *op->getUsers().begin();
      if (store->isBeforeInBlock(unpack)) {
        store->moveAfter(after);
        after = store;
      }
    }
    replaceByPieces(group, unpack);
  }

  // ZeRO-3: the parameters of one layer gathered at consecutive use sites
  // (the layer's forward, its backward, or the prologue with micro-batches)
  // are gathered together, up to about zero-bucket-bytes gathered, as FSDP
  // gathers a unit: their shards packed, one all-gather, a blocked unpack
  // (rank r's shards sit in block r) before the first use. The gathered
  // copies then live from the bucket's first use to each one's last.
  void bucketParameterGathers(const MeshInfo &mesh) {
    auto layerOf = [](AllGatherOp op) -> std::optional<int64_t> {
      auto param = op.getX().getDefiningOp<ParamOp>();
      if (!param || op.getDim() != 0)
        return std::nullopt;
      auto layer = param->getAttrOfType<IntegerAttr>(weft::attrname::kLayer);
      return layer ? std::optional<int64_t>(layer.getInt()) : std::nullopt;
    };
    SmallVector<AllGatherOp> bucket;
    std::optional<int64_t> bucketLayer;
    int64_t bytes = 0; // gathered, at most about bucket-bytes
    auto flush = [&] {
      emitGatherBucket(bucket, mesh);
      bucket.clear();
      bytes = 0;
    };
    for (Operation &op : getOperation().getBody().front()) {
      auto gather = dyn_cast<AllGatherOp>(op);
      if (!gather)
        continue;
      std::optional<int64_t> layer = layerOf(gather);
      if (!layer)
        continue;
      if (!bucket.empty() &&
          (*layer != *bucketLayer || !sameBucket(bucket.front(), gather) ||
           bytes + bytesOf(gather.getResult()) > zeroBucketBytes))
        flush();
      bucket.push_back(gather);
      bucketLayer = layer;
      bytes += bytesOf(gather.getResult());
    }
    flush();
  }

  void emitGatherBucket(MutableArrayRef<AllGatherOp> group,
                        const MeshInfo &mesh) {
    if (group.size() < 2)
      return;
    SmallVector<Value> shards;
    SmallVector<Type> wholes;
    int64_t elements = 0;
    for (AllGatherOp op : group) {
      shards.push_back(op.getX());
      wholes.push_back(op.getType());
      elements += cast<RankedTensorType>(op.getX().getType()).getNumElements();
    }
    int64_t n = groupSize(group.front().getAxes(), mesh);
    // The parameters (no operands) move up to dominate the pack.
    for (Value shard : shards) {
      Operation *param = shard.getDefiningOp();
      if (group.front()->isBeforeInBlock(param))
        param->moveBefore(group.front());
    }
    OpBuilder b(group.front());
    Location loc = group.front().getLoc();
    Type elem = group.front().getType().getElementType();
    auto packed = PackOp::create(
        b, loc, RankedTensorType::get({elements}, elem), shards, 1);
    auto layer = group.front()
                     .getX()
                     .getDefiningOp()
                     ->getAttrOfType<IntegerAttr>(weft::attrname::kLayer)
                     .getInt();
    std::string reason =
        "ZeRO-3 gather of " + std::to_string(group.size()) + " parameters" +
        (layer >= 0 ? " of layer " + std::to_string(layer) : "") + " (" +
        std::to_string(bytesOf(packed) * n) + " bytes)";
    auto gather = AllGatherOp::create(
        b, loc, RankedTensorType::get({elements * n}, elem), packed,
        group.front().getAxes(), 0, b.getStringAttr(reason));
    auto unpack = UnpackOp::create(b, loc, wholes, gather.getResult(), n);
    inFragmentOf(group.front(), {packed.getOperation(), gather.getOperation(),
                                 unpack.getOperation()});
    replaceByPieces(group, unpack);
  }

  // Starts the bucket's reduction as soon as its last gradient exists
  // (asynchronously: the runtime completes it when its result is read, so it
  // overlaps the rest of backward), and finishes it where the gradients are
  // stored. One gradient: its own all-reduce; several: pack, one all-reduce,
  // unpack. bucket-bytes=0 keeps one all-reduce per gradient. Appends what
  // it made to `made`, a reduction per entry.
  void emitBucket(SmallVector<AllReduceOp> group,
                  SmallVector<Reduction> &made) {
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
        op->setAttr(weft::attrname::kAsync, b.getUnitAttr());
        made.push_back({op, op, {*op->getUsers().begin()}});
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
    reduce->setAttr(weft::attrname::kAsync, b.getUnitAttr());

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
    // In the gradients' fragment (the optimizer's, for the once-per-step
    // reductions of micro-batches' sums), as finishBeforeTheNext compares.
    inFragmentOf(group.front(), {packed.getDefiningOp(), reduce.getOperation(),
                                 unpack.getOperation()});
    Reduction r{packed.getDefiningOp(), reduce, {unpack}};
    Operation *after = unpack;
    for (auto [i, op] : llvm::enumerate(group)) {
      AllReduceOp single = op;
      Operation *store = *single->getUsers().begin();
      single.getResult().replaceAllUsesWith(unpack.getResult(i));
      single.erase();
      store->moveAfter(after);
      after = store;
      r.finish.push_back(store);
    }
    made.push_back(std::move(r));
  }

  // Each reduction is finished (its result read: unpacked, stored) just
  // before the next one begins, not where its gradients are stored:
  // weft-store-gradients-early puts each store right after its gradient, so
  // every wait followed its start and nothing overlapped (DDP's all-reduce
  // on a GPU). One reduction in flight while the next bucket's gradients are
  // computed; the last is finished where its gradients are stored.
  static void finishBeforeTheNext(ArrayRef<Reduction> made) {
    for (size_t k = 0; k + 1 < made.size(); ++k) {
      const Reduction &r = made[k];
      Operation *next = made[k + 1].begin;
      Block *block = r.finish.front()->getBlock();
      if (next->getBlock() != block ||
          !llvm::all_of(r.finish,
                        [&](Operation *op) {
                          return op->getBlock() == block &&
                                 op->isBeforeInBlock(next);
                        }) ||
          !inTheSameFragment(r.start, made[k + 1].start))
        continue;
      // Nothing in between may read what the finishing ops make, or read
      // or add to a gradient they store (added in another order, a sum
      // would round differently).
      llvm::SmallPtrSet<Operation *, 8> finishing(r.finish.begin(),
                                                  r.finish.end());
      llvm::StringSet<> names;
      for (Operation *op : r.finish)
        if (auto store = dyn_cast<ParamGradOp>(op))
          names.insert(store.getName());
      bool readInBetween = false;
      for (Operation *op = r.finish.front()->getNextNode(); op != next;
           op = op->getNextNode()) {
        if (finishing.contains(op))
          continue;
        if (auto stored = dyn_cast<StoredGradOp>(op))
          readInBetween |= names.contains(stored.getName());
        if (auto store = dyn_cast<ParamGradOp>(op))
          readInBetween |= names.contains(store.getName());
        for (Value operand : op->getOperands())
          readInBetween |= finishing.contains(operand.getDefiningOp());
      }
      if (readInBetween)
        continue;
      for (Operation *op : r.finish)
        op->moveBefore(next);
    }
  }
};
} // namespace
