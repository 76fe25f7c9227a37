//===- Partition.cpp - weft-partition: the per-rank program ---------------===//
#include "dialect/AttrNames.h"
#include "passes/Passes.h"
#include "passes/sharding/ShardingUtils.h"

#include "mlir/IR/Builders.h"

#include <functional>
#include <map>
#include <tuple>

namespace weft {
#define GEN_PASS_DEF_WEFTPARTITION
#include "passes/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {

std::string describe(ShardingAttr s) {
  std::string out = "[";
  for (size_t d = 0; d < s.getDims().size(); ++d) {
    auto axes = s.axesOf(d);
    out += (d ? ", " : "") + (axes.empty() ? std::string("*") : joinAxes(axes));
  }
  out += "]";
  auto partial = s.partialAxes();
  if (!partial.empty())
    out += " partial(" + joinAxes(partial) + ")";
  return out;
}

class Partitioner {
public:
  Partitioner(func::FuncOp fn, const MeshInfo &mesh)
      : fn(fn), mesh(mesh), ctx(fn.getContext()), b(fn.getContext()) {}

  LogicalResult run() {
    Block &body = fn.getBody().front();
    // Rules read global shapes: take them all before any type turns local.
    for (Operation &op : body)
      if (auto ruled = dyn_cast<ShardingRuleOpInterface>(&op))
        rules[&op] = ruled.getShardingRule();
    for (BlockArgument arg : fn.getArguments()) {
      auto s = fn.getArgAttrOfType<ShardingAttr>(arg.getArgNumber(),
                                                 weft::attrname::kSharding);
      if (!s)
        s = replicated(arg);
      if (failed(localize(arg, s, fn.getLoc())))
        return failure();
      actual[arg] = s;
    }
    SmallVector<Operation *> ops;
    for (Operation &op : body)
      ops.push_back(&op);
    markForward(ops, body.getTerminator());
    for (Operation *op : ops)
      if (failed(partition(op)))
        return failure();
    if (fn->hasAttr(weft::attrname::kSeqChunks) && failed(checkSeqChunks()))
      return failure();
    for (Operation &op : body)
      op.removeAttr(weft::attrname::kShardings);
    SmallVector<Type> inputs(body.getArgumentTypes());
    fn.setType(FunctionType::get(ctx, inputs,
                                 body.getTerminator()->getOperandTypes()));
    return success();
  }

private:
  ShardingAttr replicated(Value v) {
    return ShardingAttr::replicated(
        ctx, cast<RankedTensorType>(v.getType()).getRank());
  }

  ShardingAttr targetOf(Value v) {
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      auto s = fn.getArgAttrOfType<ShardingAttr>(arg.getArgNumber(),
                                                 weft::attrname::kSharding);
      return s ? s : replicated(v);
    }
    Operation *def = v.getDefiningOp();
    if (auto p = dyn_cast<ParamOp>(def)) {
      auto s = p->getAttrOfType<ShardingAttr>(weft::attrname::kSharding);
      return s ? s : ShardingAttr::replicated(ctx, p.getType().getRank());
    }
    if (auto arr = def->getAttrOfType<ArrayAttr>(weft::attrname::kShardings))
      return cast<ShardingAttr>(arr[cast<OpResult>(v).getResultNumber()]);
    // A collective this pass made (a constraint's reshard, which replaced
    // the constraint's result) is wanted as it is.
    if (ShardingAttr made = actual.lookup(v))
      return made;
    return replicated(v);
  }

  LogicalResult localize(Value v, ShardingAttr s, Location loc) {
    auto global = cast<RankedTensorType>(v.getType());
    RankedTensorType local = localType(global, s, mesh);
    if (!local)
      return emitError(loc)
             << "sharding " << describe(s) << " does not divide the shape of a "
             << global << " value";
    v.setType(local);
    return success();
  }

  // Applies `each` to v's last dim `d` as a whole, or, for k > 1 blocks,
  // to each of its k equal blocks (split, `each`, concat).
  template <typename Fn> Value perBlock(Value v, size_t d, int64_t k, Fn each) {
    if (k <= 1)
      return each(v);
    auto type = cast<RankedTensorType>(v.getType());
    int64_t n = type.getShape()[d] / k;
    auto parts = SplitOp::create(
        b, v.getLoc(), v,
        b.getDenseI64ArrayAttr(SmallVector<int64_t>(size_t(k), n)));
    SmallVector<Value> done;
    for (Value part : parts.getResults())
      done.push_back(each(part));
    return ConcatOp::create(b, v.getLoc(), done);
  }

  // Emits the collectives that turn `v` (laid out as `from`) into `to`.
  FailureOr<Value> reshard(Value v, ShardingAttr from, ShardingAttr to,
                           Operation *user, StringRef why,
                           bool atDefinition = false) {
    if (from == to)
      return v;
    Location loc = user->getLoc();
    if (atDefinition)
      b.setInsertionPointAfterValue(v);
    else
      b.setInsertionPoint(user);
    std::string reason =
        why.str() + ": " + describe(from) + " -> " + describe(to);
    auto reasonAttr = b.getStringAttr(reason);
    auto type = cast<RankedTensorType>(v.getType());
    SmallVector<SmallVector<StringRef>> dims;
    for (size_t d = 0; d < from.getDims().size(); ++d)
      dims.push_back(from.axesOf(d));
    SmallVector<int64_t> blocks;
    for (size_t d = 0; d < dims.size(); ++d)
      blocks.push_back(from.blocksOf(d));

    for (StringRef p : to.partialAxes())
      if (!llvm::is_contained(from.partialAxes(), p))
        return emitError(loc) << "cannot make a value that is not a partial "
                                 "sum over '"
                              << p << "' into one (each rank's copy would "
                              << "count once per rank): " << reason;
    // 1. Pending partial sums: reduce-scatter where the consumer wants the
    //    axis on a dim, all-reduce otherwise.
    SmallVector<StringRef> allReduceAxes;
    for (StringRef p : from.partialAxes()) {
      if (llvm::is_contained(to.partialAxes(), p))
        continue; // stays a pending sum (ZeRO-1's unreduced gradients)
      std::optional<int64_t> scatterDim;
      for (size_t d = 0; d < dims.size(); ++d) {
        auto want = to.axesOf(d);
        if (llvm::is_contained(want, p) && dims[d].size() < want.size() &&
            want[dims[d].size()] == p && to.blocksOf(d) == 1)
          scatterDim = d;
      }
      if (!scatterDim) {
        allReduceAxes.push_back(p);
        continue;
      }
      SmallVector<int64_t> shape(type.getShape());
      shape[*scatterDim] /= mesh.size(p);
      type = RankedTensorType::get(shape, type.getElementType());
      v = ReduceScatterOp::create(b, loc, type, v, b.getStrArrayAttr({p}),
                                  *scatterDim, reasonAttr);
      dims[*scatterDim].push_back(p);
    }
    if (!allReduceAxes.empty())
      v = AllReduceOp::create(b, loc, type, v, b.getStrArrayAttr(allReduceAxes),
                              reasonAttr);

    // 2. The context axis moving from the end of one dim's split to the
    //    end of another's (attention's sequence to its heads and back,
    //    weft.context_parallel): one all-to-all sends each rank only the
    //    blocks it keeps, (c-1)/c of the gather's bytes.
    if (std::optional<std::pair<size_t, size_t>> move =
            contextMove(dims, blocks, to)) {
      auto [gathered, scattered] = *move;
      SmallVector<int64_t> shape(type.getShape());
      int64_t c = mesh.size(kContextAxis);
      shape[gathered] *= c;
      shape[scattered] /= c;
      return AllToAllOp::create(
                 b, loc, RankedTensorType::get(shape, type.getElementType()), v,
                 b.getStrArrayAttr({kContextAxis}), int64_t(scattered),
                 int64_t(gathered), reasonAttr)
          .getResult();
    }

    // 3. Dims: gather what is split differently on every dim first, then
    //    slice what is wanted. Slicing one dim before gathering another
    //    would be wrong when an axis moves between dims ([*, dp] -> [dp, *]):
    //    the gather would then join different rows from each rank. A dim
    //    split in k blocks (GPT-2's fused q|k|v) is gathered or sliced block
    //    by block (split, one collective per block, concat); it cannot keep
    //    part of its split.
    int64_t last = int64_t(dims.size()) - 1;
    auto blockedRefusal = [&](size_t d) {
      return emitError(loc)
             << "cannot reshard dim " << d << " from " << blocks[d]
             << " block(s) to " << to.blocksOf(d)
             << " block(s): blocked splits (GPT-2's fused q|k|v) move only on "
                "the last dim: "
             << reason;
    };
    for (size_t d = 0; d < dims.size(); ++d) {
      auto want = to.axesOf(d);
      if (dims[d] == want && (dims[d].empty() || blocks[d] == to.blocksOf(d)))
        continue;
      if (dims[d].empty())
        continue; // nothing to gather
      bool blockedFrom = blocks[d] > 1, blockedTo = to.blocksOf(d) > 1;
      if ((blockedFrom || blockedTo) && int64_t(d) != last)
        return blockedRefusal(d);
      bool prefix =
          !blockedFrom && !blockedTo && dims[d].size() <= want.size() &&
          llvm::equal(dims[d],
                      ArrayRef<StringRef>(want).take_front(dims[d].size()));
      if (prefix)
        continue;
      // Gather the minor axes only when the wanted split is a prefix of the
      // current one ([tp, dp] -> [tp]: gather over dp within tp).
      size_t keep = 0;
      if (!blockedFrom && !blockedTo && want.size() < dims[d].size() &&
          llvm::equal(want,
                      ArrayRef<StringRef>(dims[d]).take_front(want.size())))
        keep = want.size();
      SmallVector<StringRef> gathered(dims[d].begin() + keep, dims[d].end());
      v = perBlock(v, d, blockedFrom ? blocks[d] : 1, [&](Value part) {
        auto partType = cast<RankedTensorType>(part.getType());
        SmallVector<int64_t> shape(partType.getShape());
        shape[d] *= mesh.count(gathered);
        return AllGatherOp::create(
            b, loc, RankedTensorType::get(shape, partType.getElementType()),
            part, b.getStrArrayAttr(gathered), d, reasonAttr);
      });
      type = cast<RankedTensorType>(v.getType());
      dims[d].resize(keep);
      blocks[d] = 1;
    }
    for (size_t d = 0; d < dims.size(); ++d) {
      auto want = to.axesOf(d);
      if (dims[d].size() >= want.size())
        continue;
      int64_t k = to.blocksOf(d);
      if (k > 1 && (int64_t(d) != last || !dims[d].empty()))
        return blockedRefusal(d);
      SmallVector<StringRef> extra(want.begin() + dims[d].size(), want.end());
      v = perBlock(v, d, k, [&](Value part) {
        auto partType = cast<RankedTensorType>(part.getType());
        SmallVector<int64_t> shape(partType.getShape());
        shape[d] /= mesh.count(extra);
        return SliceOp::create(
            b, loc, RankedTensorType::get(shape, partType.getElementType()),
            part, b.getStrArrayAttr(extra), d, reasonAttr);
      });
      type = cast<RankedTensorType>(v.getType());
    }
    return v;
  }

  // Whether `have` (dims, blocks) differs from `to` only by the context
  // axis, last on one dim (from) and wanted last on another (into): the
  // dims' blocks whole, every other dim as wanted.
  std::optional<std::pair<size_t, size_t>>
  contextMove(ArrayRef<SmallVector<StringRef>> have, ArrayRef<int64_t> blocks,
              ShardingAttr to) {
    std::optional<size_t> from, into;
    for (size_t d = 0; d < have.size(); ++d) {
      auto want = to.axesOf(d);
      if (have[d] == want && blocks[d] == to.blocksOf(d))
        continue;
      if (blocks[d] != 1 || to.blocksOf(d) != 1)
        return std::nullopt;
      ArrayRef<StringRef> h(have[d]), w(want);
      if (!from && !h.empty() && h.back() == kContextAxis && h.drop_back() == w)
        from = d;
      else if (!into && !w.empty() && w.back() == kContextAxis &&
               w.drop_back() == h)
        into = d;
      else
        return std::nullopt;
    }
    if (!from || !into)
      return std::nullopt;
    return std::make_pair(*from, *into);
  }

  // The forward: the ops up to the one that computes the returned loss
  // (weft-autodiff appends the backward after it). Not on a pipeline mesh,
  // whose forward weft-cut-stages cuts into stages afterwards.
  void markForward(ArrayRef<Operation *> ops, Operation *terminator) {
    if (mesh.size("pp") > 0 || terminator->getNumOperands() == 0)
      return;
    Operation *loss = terminator->getOperand(0).getDefiningOp();
    if (!loss || !llvm::is_contained(ops, loss))
      return;
    for (Operation *op : ops) {
      forward.insert(op);
      if (op == loss)
        return;
    }
  }

  // Reshards operand `i` of `op` into `want`, reusing earlier reshards of the
  // same value, except for ZeRO-3 parameters, which are gathered at each use
  // so that the gathered copy dies right after it: once in the forward
  // (a tied embedding's table, read by the embedding and the head, is
  // gathered once and kept between them) and again in the backward.
  LogicalResult requireOperand(Operation *op, unsigned i, ShardingAttr want,
                               StringRef why, bool atDefinition = false) {
    Value v = op->getOperand(i);
    ShardingAttr have = actual.lookup(v);
    if (!have)
      have = replicated(v);
    bool perUse = v.getDefiningOp<ParamOp>() && !forward.contains(op);
    auto key =
        std::make_pair(v.getAsOpaquePointer(), want.getAsOpaquePointer());
    if (!perUse) {
      auto it = cache.find(key);
      if (it != cache.end()) {
        op->setOperand(i, it->second);
        return success();
      }
    }
    FailureOr<Value> r = reshard(v, have, want, op, why, atDefinition);
    if (failed(r))
      return failure();
    op->setOperand(i, *r);
    actual[*r] = want;
    if (!perUse)
      cache[key] = *r;
    return success();
  }

  std::string operandReason(Operation *op, unsigned i) {
    return (op->getName().getStringRef() + " operand " + Twine(i)).str();
  }

  LogicalResult partition(Operation *op) {
    if (auto param = dyn_cast<ParamOp>(op))
      return partitionParam(param);
    if (auto shard = dyn_cast<ShardOp>(op)) {
      if (failed(requireOperand(op, 0, shard.getSharding(),
                                "sharding constraint")))
        return failure();
      shard.getResult().replaceAllUsesWith(shard.getX());
      shard.erase();
      return success();
    }
    // A constant is whole on every rank (weft-propagate-sharding seeds it
    // replicated); a user wanting it split slices it locally.
    if (auto c = dyn_cast<ConstantOp>(op)) {
      actual[c.getResult()] = replicated(c.getResult());
      return success();
    }
    if (auto fill = dyn_cast<FillOp>(op)) {
      ShardingAttr s = targetOf(fill.getResult());
      actual[fill.getResult()] = s;
      return localize(fill.getResult(), s, op->getLoc());
    }
    if (auto grad = dyn_cast<ParamGradOp>(op)) {
      ParamOp p = paramsByName.lookup(grad.getName());
      if (!p)
        return op->emitOpError("names no weft.param");
      ShardingAttr storage = storageOf(p, weft::attrname::kGradStorage);
      ShardingAttr have = actual.lookup(grad.getOperand());
      if (have && !llvm::all_of(storage.partialAxes(), [&](StringRef a) {
            return llvm::is_contained(have.partialAxes(), a);
          })) {
        // ZeRO-1 stores a gradient unreduced (partial over dp), but this
        // layout computes it whole on every rank (its contraction is not
        // split over dp): store this rank's block of the optimizer state's
        // split instead, as ZeRO-2 does. A whole value cannot become a
        // partial sum without being counted once per rank.
        storage = storageOf(p, weft::attrname::kStateStorage);
        p->setAttr(weft::attrname::kGradStorage, storage);
        p->setAttr(weft::attrname::kGradStorageSharding, storage);
      }
      return requireOperand(op, 0, storage,
                            ("gradient of " + grad.getName()).str());
    }
    if (auto adam = dyn_cast<AdamWOp>(op))
      return partitionAdamW(adam);
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (unsigned i = 0; i < op->getNumOperands(); ++i)
        // Reduced right where it is computed, so the forward range of the
        // program ([0, forward_end)) yields the global loss.
        if (failed(requireOperand(op, i, replicated(op->getOperand(i)),
                                  fn->hasAttr(weft::attrname::kVocab)
                                      ? "returned output"
                                      : "returned loss",
                                  /*atDefinition=*/true)))
          return failure();
      return success();
    }
    auto rule = rules.find(op);
    if (rule == rules.end()) {
      if (op->getNumOperands() == 0 && op->getNumResults() == 0)
        return success();
      return op->emitOpError("has no sharding rule; cannot partition it");
    }
    return partitionRuled(op, rule->second);
  }

  ShardingAttr storageOf(ParamOp p, StringRef attr) {
    if (auto s = p->getAttrOfType<ShardingAttr>(attr))
      return s;
    if (attr == weft::attrname::kStateStorage)
      return storageOf(p, weft::attrname::kGradStorage);
    auto s = p->getAttrOfType<ShardingAttr>(weft::attrname::kSharding);
    return s ? s : ShardingAttr::replicated(ctx, p.getType().getRank());
  }

  LogicalResult partitionParam(ParamOp p) {
    paramsByName[p.getName()] = p;
    auto global = p.getType();
    b.setInsertionPoint(p);
    p->setAttr(weft::attrname::kGlobalShape,
               b.getDenseI64ArrayAttr(global.getShape()));
    ShardingAttr storage = storageOf(p, weft::attrname::kStorage);
    p->setAttr(weft::attrname::kStorageSharding, storage);
    for (StringRef kind :
         {weft::attrname::kGradStorage, weft::attrname::kStateStorage})
      p->setAttr(Twine(kind).concat("_sharding").str(), storageOf(p, kind));
    actual[p.getResult()] = storage;
    return localize(p.getResult(), storage, p.getLoc());
  }

  LogicalResult partitionAdamW(AdamWOp adam) {
    auto p = adam.getParam().getDefiningOp<ParamOp>();
    ShardingAttr param = storageOf(p, weft::attrname::kStorage);
    ShardingAttr state = storageOf(p, weft::attrname::kStateStorage);
    if (param == state)
      return success();
    // ZeRO-1/2: the state is split further than the parameter along dim 0;
    // the update runs on this rank's block and all-gathers the parameter.
    auto extra = state.axesOf(0);
    auto have = param.axesOf(0);
    if (!llvm::equal(ArrayRef<StringRef>(extra).take_front(have.size()), have))
      return adam.emitOpError("optimizer state sharding ")
             << describe(state) << " does not refine the parameter's "
             << describe(param);
    SmallVector<StringRef> axes(extra.begin() + have.size(), extra.end());
    b.setInsertionPoint(adam);
    adam->setAttr(weft::attrname::kShardAxes, b.getStrArrayAttr(axes));
    return success();
  }

  LogicalResult partitionRuled(Operation *op, const ShardingRule &rule) {
    // A sum of two partial sums over the same axes is a partial sum: defer
    // the all-reduce past the add (gradient accumulation of tied weights).
    if (isa<AddOp>(op)) {
      ShardingAttr lhs = actual.lookup(op->getOperand(0));
      if (lhs && lhs == actual.lookup(op->getOperand(1)) &&
          !lhs.partialAxes().empty()) {
        actual[op->getResult(0)] = lhs;
        return localize(op->getResult(0), lhs, op->getLoc());
      }
    }
    // Widening a partial sum (bf16 -> f32) is exact, so the sum can wait
    // past the cast: mixed precision's gradients are reduced in f32.
    if (auto c = dyn_cast<CastOp>(op)) {
      ShardingAttr in = actual.lookup(c.getX());
      if (in && !in.partialAxes().empty() &&
          c.getType().getElementTypeBitWidth() >
              c.getX().getType().getElementTypeBitWidth()) {
        actual[c.getResult()] = in;
        return localize(c.getResult(), in, op->getLoc());
      }
    }
    FactorAxes axes = assignOpFactors(
        op, rule, [&](Value v) { return targetOf(v); }, mesh);
    auto contextMode =
        fn->getAttrOfType<StringAttr>(weft::attrname::kContextParallel);
    if (contextMode && isa<AttentionOp, AttentionGradOp>(op)) {
      if (contextMode.getValue() == "ring") {
        FailureOr<bool> ring = ringAttention(op, rule, axes);
        if (failed(ring) || *ring)
          return failure(failed(ring));
      } else if (failed(headsOverContext(op, rule, axes))) {
        return failure();
      }
    }
    if (auto split = dyn_cast<SplitReductionOpInterface>(op)) {
      int64_t f = split.splitReductionFactor(rule);
      if (!axes[f].empty())
        return partitionSplitReduction(split, rule, axes, f);
    }

    if (failed(requireOperands(op, rule, axes)))
      return failure();
    for (auto [i, r] : llvm::enumerate(op->getResults())) {
      ShardingAttr s = shardingFromFactors(ctx, rule, axes, rule.results[i],
                                           resultBlocksOf(rule, i), true);
      actual[r] = s;
      if (failed(localize(r, s, op->getLoc())))
        return failure();
    }
    localAttributes(op, rule, axes);
    return success();
  }

  // All-to-all context parallelism (DeepSpeed's Ulysses): attention whose
  // queries' sequence is split over cp takes cp onto its query and
  // key/value heads instead, after the heads' other axes, and runs whole
  // sequences; its operands and results move through all-to-alls.
  LogicalResult headsOverContext(Operation *op, const ShardingRule &rule,
                                 FactorAxes &axes) {
    unsigned q = isa<AttentionGradOp>(op) ? 1 : 0;
    int64_t sq = rule.operands[q][1], fq = rule.operands[q][2],
            fk = rule.operands[q + 1][2];
    if (!llvm::is_contained(axes.axes[sq], kContextAxis))
      return success();
    int64_t heads = op->getAttrOfType<IntegerAttr>("num_heads").getInt();
    int64_t kvHeads = op->getAttrOfType<IntegerAttr>("num_kv_heads").getInt();
    int64_t ways = mesh.count(axes.axes[fq]) * mesh.size(kContextAxis);
    if (heads % ways != 0 || kvHeads % ways != 0) {
      std::string other = axes.axes[fq].empty()
                              ? ""
                              : " times the " +
                                    std::to_string(mesh.count(axes.axes[fq])) +
                                    " they are already split over";
      return op->emitOpError("all-to-all context parallelism splits the "
                             "heads over cp=")
             << mesh.size(kContextAxis) << other << ": num_heads=" << heads
             << " and num_kv_heads=" << kvHeads << " must both be divisible by "
             << ways << " (--context-parallel all-gather has no such need)";
    }
    llvm::erase(axes.axes[sq], kContextAxis);
    axes.axes[fq].push_back(kContextAxis);
    axes.axes[fk].push_back(kContextAxis);
    return success();
  }

  // Ring attention: the keys and values stay split over cp like the
  // queries, and attention (or its gradient) becomes c steps, each the
  // rank's queries against one block of keys while the next block comes
  // from the previous rank (an asynchronous ring_shift started before the
  // step, so the transfer overlaps it). Forward: the blocks' results merge
  // by their log-sum-exps. Backward: dq sums the steps; each block's dk and
  // dv travel with it around the ring, gaining every rank's share, and a
  // last shift brings them home. The backward reads the forward's output
  // and log-sum-exp, found by the same local q, k and v. Returns whether
  // it rewrote op (false: its queries are not split over cp).
  FailureOr<bool> ringAttention(Operation *op, const ShardingRule &rule,
                                FactorAxes &axes) {
    unsigned qi = isa<AttentionGradOp>(op) ? 1 : 0;
    int64_t sq = rule.operands[qi][1], sk = rule.operands[qi + 1][1];
    if (!llvm::is_contained(axes.axes[sq], kContextAxis))
      return false;
    // Packed documents, padded rows and key padding bound each query's
    // keys in the runtime (the step's positions and token spans), block by
    // block as attention bounds them.
    axes.axes[sk] = axes.axes[sq];
    if (failed(requireOperands(op, rule, axes)))
      return failure();
    // Each result is laid out as its operand (y and dq as q, dk as k, dv
    // as v): the ring sums over the other blocks itself, so no result is
    // a partial sum.
    for (auto [i, r] : llvm::enumerate(op->getResults())) {
      unsigned like = qi + unsigned(i);
      ShardingAttr s = shardingFromFactors(ctx, rule, axes, rule.operands[like],
                                           operandBlocksOf(rule, like), false);
      actual[r] = s;
      if (failed(localize(r, s, op->getLoc())))
        return failure();
    }
    localAttributes(op, rule, axes);
    b.setInsertionPoint(op);
    if (auto att = dyn_cast<AttentionOp>(op))
      ringForward(att);
    else if (failed(ringBackward(cast<AttentionGradOp>(op))))
      return failure();
    op->erase();
    return true;
  }

  // The attributes every ring step shares with the attention it replaces.
  SmallVector<NamedAttribute> ringAttrs(Operation *op, int64_t step) {
    SmallVector<NamedAttribute> attrs;
    for (StringRef name :
         {"num_heads", "num_kv_heads", "scale", "bidirectional", "window",
          "key_padding", "seq_axes", "dropout", "dropout_site", "dim_axes"})
      if (Attribute a = op->getAttr(name))
        attrs.push_back(b.getNamedAttr(name, a));
    attrs.push_back(b.getNamedAttr("ring_step", b.getI64IntegerAttr(step)));
    return attrs;
  }

  Value ringShift(Value x, Location loc, StringRef why) {
    auto shift = RingShiftOp::create(b, loc, x.getType(), x,
                                     b.getStrArrayAttr({kContextAxis}),
                                     b.getStringAttr(why));
    shift->setAttr(weft::attrname::kAsync, b.getUnitAttr());
    actual[shift.getResult()] = actual.lookup(x);
    return shift.getResult();
  }

  // The log-sum-exp is f32 where the queries are bf16.
  RankedTensorType lseType(Value q, int64_t heads) {
    auto t = cast<RankedTensorType>(q.getType());
    Type e =
        t.getElementType().isBF16() ? Type(b.getF32Type()) : t.getElementType();
    return RankedTensorType::get({t.getDimSize(0), heads, t.getDimSize(1)}, e);
  }

  void ringForward(AttentionOp att) {
    Location loc = att.getLoc();
    int64_t c = mesh.size(kContextAxis);
    Value q = att.getQ(), k = att.getK(), v = att.getV();
    RankedTensorType lse = lseType(q, att.getNumHeads());
    Value o, l;
    for (int64_t step = 0; step < c; ++step) {
      Value nextK, nextV;
      if (step + 1 < c) {
        nextK = ringShift(k, loc, "ring attention: the next key block");
        nextV = ringShift(v, loc, "ring attention: the next value block");
      }
      auto block =
          AttentionBlockOp::create(b, loc, TypeRange{q.getType(), lse},
                                   ValueRange{q, k, v}, ringAttrs(att, step));
      if (step == 0) {
        o = block.getO();
        l = block.getLse();
      } else {
        auto merged = SoftmaxMergeOp::create(
            b, loc, TypeRange{q.getType(), lse},
            ValueRange{o, l, block.getO(), block.getLse()},
            ArrayRef<NamedAttribute>{b.getNamedAttr(
                "num_heads", b.getI64IntegerAttr(att.getNumHeads()))});
        o = merged.getO();
        l = merged.getLse();
      }
      k = nextK;
      v = nextV;
    }
    actual[o] = actual.lookup(att.getResult());
    att.getResult().replaceAllUsesWith(o);
    ringOutputs[keyOf(att.getQ(), att.getK(), att.getV())] = {o, l};
  }

  LogicalResult ringBackward(AttentionGradOp grad) {
    Location loc = grad.getLoc();
    int64_t c = mesh.size(kContextAxis);
    Value q = grad.getQ(), k = grad.getK(), v = grad.getV();
    auto it = ringOutputs.find(keyOf(q, k, v));
    if (it == ringOutputs.end())
      return grad.emitOpError(
          "ring context parallelism found no forward attention of the same "
          "queries, keys and values (its output and log-sum-exp feed the "
          "gradient)");
    auto [o, l] = it->second;
    Value dq, dk, dv;
    for (int64_t step = 0; step < c; ++step) {
      Value nextK, nextV;
      if (step + 1 < c) {
        nextK =
            ringShift(k, loc, "ring attention gradient: the next key block");
        nextV =
            ringShift(v, loc, "ring attention gradient: the next value block");
      }
      auto block = AttentionBlockGradOp::create(
          b, loc, TypeRange{q.getType(), k.getType(), v.getType()},
          ValueRange{grad.getDy(), q, k, v, o, l}, ringAttrs(grad, step));
      auto add = [&](Value acc, Value x) {
        return acc ? AddOp::create(b, loc, acc, x).getResult() : x;
      };
      dq = add(dq, block.getDq());
      // The gradients of the block held now: the previous rank's sums for
      // it, arrived, plus this rank's share.
      dk = add(dk, block.getDk());
      dv = add(dv, block.getDv());
      dk = ringShift(dk, loc, "ring attention gradient: a key block's sum");
      dv = ringShift(dv, loc, "ring attention gradient: a value block's sum");
      k = nextK;
      v = nextV;
    }
    SmallVector<Value, 3> grads = {dq, dk, dv};
    for (auto [r, x] : llvm::zip(grad.getResults(), grads)) {
      actual[x] = actual.lookup(r);
      r.replaceAllUsesWith(x);
    }
    return success();
  }

  // Reshards every operand into what the op's factor axes ask of it.
  LogicalResult requireOperands(Operation *op, const ShardingRule &rule,
                                const FactorAxes &axes) {
    for (unsigned i = 0; i < op->getNumOperands(); ++i) {
      ShardingAttr want = shardingFromFactors(ctx, rule, axes, rule.operands[i],
                                              operandBlocksOf(rule, i), false);
      if (failed(requireOperand(op, i, want, operandReason(op, i))))
        return failure();
    }
    return success();
  }

  // An op that reduces over factor f, split over some axes, rewrites
  // itself into local work (SplitReductionOpInterface, e.g. Megatron's
  // vocab-parallel cross-entropy). A result shaped like the split operand
  // (its gradient) keeps that operand's sharding; any other has consumed the
  // factor.
  LogicalResult partitionSplitReduction(SplitReductionOpInterface split,
                                        const ShardingRule &rule,
                                        const FactorAxes &axes, int64_t f) {
    Operation *op = split;
    if (failed(requireOperands(op, rule, axes)))
      return failure();
    b.setInsertionPoint(op);
    FailureOr<Value> result = split.buildSplitReduction(
        b, rule, axes[f], mesh.count(axes[f]), shared);
    if (failed(result))
      return failure();
    FactorAxes rest = axes;
    rest.axes[f].clear();
    Value operand = op->getOperand(0);
    actual[*result] =
        result->getType() == operand.getType()
            ? actual.lookup(operand)
            : shardingFromFactors(ctx, rule, rest, rule.results[0], {}, true);
    op->getResult(0).replaceAllUsesWith(*result);
    op->erase();
    return success();
  }

  // Load-balanced context parallelism holds each sequence's chunks out of
  // order (weft.seq_chunks). Rope, positions, attention and dropout read
  // positions through that order; any other op that sees a sequence whole
  // (gathered or sliced over cp) would read it in the wrong order, and the
  // runtime's per-step documents, key padding and token types are in the
  // natural order: all are refused by name.
  LogicalResult checkSeqChunks() {
    auto refuse = [&](Operation *op, const Twine &what) -> LogicalResult {
      op->emitOpError()
          << what
          << ", but load-balanced context parallelism holds each sequence "
             "as "
          << fn->getAttrOfType<IntegerAttr>(weft::attrname::kSeqChunks).getInt()
          << " chunks out of order (weft.seq_chunks): only attention's "
             "keys and values may be gathered whole. A layout file's "
             "\"context_order\": \"natural\" keeps the order";
      return failure();
    };
    auto overCp = [](Operation *op) {
      auto axes = op->getAttrOfType<ArrayAttr>("axes");
      return axes && llvm::any_of(axes, [](Attribute a) {
               return cast<StringAttr>(a).getValue() == kContextAxis;
             });
    };
    if (fn->hasAttr(weft::attrname::kDocuments))
      return refuse(fn, "packs documents, whose bounds the runtime finds in "
                        "the sequence's natural order");
    WalkResult walk = fn.walk([&](Operation *op) -> WalkResult {
      // All-to-all context parallelism: the whole sequence, in the stored
      // order, goes to attention only (whose runtime reads each row's
      // position), and only attention's results go back to blocks.
      if (auto a2a = dyn_cast<AllToAllOp>(op); a2a && overCp(op)) {
        auto attention = [](Operation *o) {
          return o && isa<AttentionOp, AttentionGradOp>(o);
        };
        bool ok = a2a.getConcatDim() == 1
                      ? llvm::all_of(op->getUsers(), attention)
                      : a2a.getSplitDim() == 1 &&
                            attention(a2a.getX().getDefiningOp());
        if (!ok)
          return refuse(op, "moves a sequence over cp between an op other "
                            "than attention and its rank's blocks");
        return WalkResult::advance();
      }
      if (auto att = dyn_cast<AttentionOp>(op); att && att.getKeyPadding())
        return refuse(op, "reads key padding from the step's attention mask");
      if (auto pos = dyn_cast<PositionEmbeddingOp>(op);
          pos && pos.getTokenTypes())
        return refuse(op, "reads the step's token types");
      // A parameter gathered over cp is whole (its storage split), in its
      // own order; one sliced over cp is cut as if the sequence were in
      // natural order (a position table added to the stream).
      if (!isa<AllGatherOp, SliceOp>(op) || !overCp(op) ||
          (isa<AllGatherOp>(op) && op->getOperand(0).getDefiningOp<ParamOp>()))
        return WalkResult::advance();
      // Attention's keys and values, sliced or gathered along other dims.
      std::function<Operation *(Value)> notKeys = [&](Value v) -> Operation * {
        for (OpOperand &use : v.getUses()) {
          Operation *user = use.getOwner();
          if (isa<SliceOp, AllGatherOp>(user) && !overCp(user)) {
            if (Operation *other = notKeys(user->getResult(0)))
              return other;
            continue;
          }
          unsigned first = isa<AttentionGradOp>(user) ? 2 : 1;
          if (!isa<AttentionOp, AttentionGradOp>(user) ||
              (use.getOperandNumber() != first &&
               use.getOperandNumber() != first + 1))
            return user;
        }
        return nullptr;
      };
      // A slice over cp cuts a whole value in its natural order.
      Operation *user = isa<SliceOp>(op) ? op : notKeys(op->getResult(0));
      if (user) {
        auto reason = op->getAttrOfType<StringAttr>("reason");
        return refuse(user, Twine("reads a value ") +
                                (isa<SliceOp>(op) ? "sliced" : "gathered") +
                                " over cp (" +
                                (reason ? reason.getValue() : "") + ")");
      }
      return WalkResult::advance();
    });
    return failure(walk.wasInterrupted());
  }

  // Attributes that describe the local problem: the op's own business
  // (LocalizeOpInterface, dialect/WeftLocalize.cpp).
  void localAttributes(Operation *op, const ShardingRule &rule,
                       const FactorAxes &axes) {
    auto local = dyn_cast<LocalizeOpInterface>(op);
    if (!local)
      return;
    FactorSplit split;
    for (const auto &a : axes.axes) {
      split.axes.push_back(a);
      split.shards.push_back(mesh.count(a));
    }
    local.localize(rule, split);
  }

  func::FuncOp fn;
  const MeshInfo &mesh;
  MLIRContext *ctx;
  OpBuilder b;
  DenseMap<Value, ShardingAttr> actual;
  DenseMap<Operation *, ShardingRule> rules;
  std::map<std::pair<void *, const void *>, Value> cache;
  DenseSet<Operation *> forward; // markForward
  // What split reductions build alike (vocab-parallel CE's statistics).
  SharedValues shared;
  // Ring attention's forward output and log-sum-exp, by its local q, k, v.
  using Triple = std::tuple<void *, void *, void *>;
  std::map<Triple, std::pair<Value, Value>> ringOutputs;
  static Triple keyOf(Value q, Value k, Value v) {
    return {q.getAsOpaquePointer(), k.getAsOpaquePointer(),
            v.getAsOpaquePointer()};
  }
  llvm::StringMap<ParamOp> paramsByName;
};

struct Partition : weft::impl::WeftPartitionBase<Partition> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    for (auto fn : llvm::make_early_inc_range(module.getOps<func::FuncOp>())) {
      MeshInfo mesh = MeshInfo::of(fn); // the function's (weft.mesh)
      if (!fn.isExternal() && failed(Partitioner(fn, mesh).run()))
        return signalPassFailure();
    }
  }
};
} // namespace
