//===- PropagateSharding.cpp - weft-propagate-sharding --------------------===//
#include "dialect/AttrNames.h"
#include "passes/Passes.h"
#include "passes/sharding/ShardingUtils.h"

#include "mlir/IR/Builders.h"

namespace weft {
#define GEN_PASS_DEF_WEFTPROPAGATESHARDING
#include "passes/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {
struct Propagator {
  const MeshInfo &mesh;
  MLIRContext *ctx;
  DenseMap<Value, ShardingAttr> known;

  ShardingAttr lookup(Value v) const { return known.lookup(v); }

  bool set(Value v, ShardingAttr s) {
    if (!s || known.count(v))
      return false;
    known[v] = s;
    return true;
  }

  bool visit(Operation *op) {
    if (auto shard = dyn_cast<ShardOp>(op))
      return set(shard.getX(), shard.getSharding());
    auto ruled = dyn_cast<ShardingRuleOpInterface>(op);
    if (!ruled)
      return false;
    ShardingRule rule = ruled.getShardingRule();
    FactorAxes axes = assignOpFactors(
        op, rule, [&](Value v) { return lookup(v); }, mesh);
    bool changed = false;
    for (auto [i, v] : llvm::enumerate(op->getOperands())) {
      changed |= set(v, shardingFromFactors(ctx, rule, axes, rule.operands[i],
                                            operandBlocksOf(rule, i), false));
    }
    FactorAxes wanted = scatteredResults(rule, axes);
    for (auto [i, v] : llvm::enumerate(op->getResults()))
      if (!waitsForUsers(rule, axes, rule.results[i]))
        changed |=
            set(v, shardingFromFactors(ctx, rule, wanted, rule.results[i],
                                       resultBlocksOf(rule, i), false));
    return changed;
  }

  // The axes results are wanted split over: a pinned factor that is
  // `scatteredLike` a split factor takes its axes, so a result partial over
  // them is reduce-scattered along that dim where it is used, not
  // all-reduced (ShardingRule::Factor::scatteredLike).
  static FactorAxes scatteredResults(const ShardingRule &rule,
                                     FactorAxes axes) {
    for (auto [g, factor] : llvm::enumerate(rule.factors))
      if (factor.scatteredLike >= 0 && axes.axes[g].empty())
        axes.axes[g] = axes.axes[size_t(factor.scatteredLike)];
    return axes;
  }

  // A result factor that no operand carries (embedding_grad's vocab) can
  // only learn its axes from the result's users: until one offers some, the
  // result stays unknown rather than replicated.
  static bool waitsForUsers(const ShardingRule &rule, const FactorAxes &axes,
                            ArrayRef<int64_t> resultDims) {
    for (int64_t f : resultDims) {
      if (f == ShardingRule::kNone || !axes[f].empty() ||
          rule.factors[f].pinned)
        continue;
      bool inOperand = llvm::any_of(rule.operands, [&](const auto &dims) {
        return llvm::is_contained(dims, f);
      });
      if (!inOperand)
        return true;
    }
    return false;
  }
};

// Whether `op` contracts a factor along which a parameter operand is split
// (a vocab-parallel embedding's lookup): its result is then a partial sum,
// and a sharding constraint on that result is met by reduce-scattering the
// sum, as Megatron does under sequence parallelism. Seeding the result with
// the constraint instead would let the constraint's split take the mesh
// axis first and gather the whole parameter. A parameter's bf16 copy (a
// cast, under mixed precision) counts as the parameter: it was missed, and
// Llama 3 405B's embedding table (3.9 GiB in bf16) was gathered whole over
// tp for every micro-batch's lookup.
bool contractsASplitParameter(Operation *op) {
  auto ruled = dyn_cast_or_null<ShardingRuleOpInterface>(op);
  if (!ruled)
    return false;
  ShardingRule rule = ruled.getShardingRule();
  for (auto [i, v] : llvm::enumerate(op->getOperands())) {
    Value source = v;
    while (auto cast = source.getDefiningOp<CastOp>())
      source = cast->getOperand(0);
    auto param = source.getDefiningOp<ParamOp>();
    auto s = param
                 ? param->getAttrOfType<ShardingAttr>(weft::attrname::kSharding)
                 : ShardingAttr();
    if (!s || i >= rule.operands.size())
      continue;
    for (auto [d, f] : llvm::enumerate(rule.operands[i])) {
      if (f == ShardingRule::kNone || s.axesOf(d).empty())
        continue;
      bool kept = llvm::any_of(rule.results, [&, f = f](const auto &dims) {
        return llvm::is_contained(dims, f);
      });
      if (!kept)
        return true;
    }
  }
  return false;
}

struct PropagateSharding
    : weft::impl::WeftPropagateShardingBase<PropagateSharding> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    for (auto fn : module.getOps<func::FuncOp>()) {
      if (fn.isExternal())
        continue;
      MeshInfo mesh = MeshInfo::of(fn); // the function's (weft.mesh)
      Propagator p{mesh, &getContext(), {}};
      // User annotations first: they are never overridden.
      for (BlockArgument arg : fn.getArguments())
        if (auto s = fn.getArgAttrOfType<ShardingAttr>(
                arg.getArgNumber(), weft::attrname::kSharding))
          p.known[arg] = s;
      llvm::StringMap<ShardingAttr> paramShardings;
      fn.walk([&](Operation *op) {
        if (auto param = dyn_cast<ParamOp>(op)) {
          auto s =
              param->getAttrOfType<ShardingAttr>(weft::attrname::kSharding);
          p.known[param.getResult()] =
              s ? s
                : ShardingAttr::replicated(&getContext(),
                                           param.getType().getRank());
          paramShardings[param.getName()] = p.known[param.getResult()];
        }
        // A gradient is wanted split like its parameter: a factor only the
        // gradient has (embedding_grad's vocab) learns its axes here, so an
        // untied vocab-parallel table's gradient is computed per shard
        // rather than whole and reduce-scattered.
        if (auto grad = dyn_cast<ParamGradOp>(op))
          if (ShardingAttr s = paramShardings.lookup(grad.getName()))
            p.known.try_emplace(grad.getOperand(), s);
        // A constant is whole on every rank: the program holds one copy of
        // it (a user that wants it split slices it locally).
        if (auto c = dyn_cast<ConstantOp>(op))
          p.known[c.getResult()] = ShardingAttr::replicated(
              &getContext(), cast<RankedTensorType>(c.getType()).getRank());
        if (auto shard = dyn_cast<ShardOp>(op)) {
          p.known[shard.getResult()] = shard.getSharding();
          // A constraint is a user annotation on its operand too, unless
          // that value carries one of its own (an argument or parameter) or
          // is a partial sum over a split parameter.
          if (!contractsASplitParameter(shard.getX().getDefiningOp()))
            p.known.try_emplace(shard.getX(), shard.getSharding());
        }
      });
      SmallVector<Operation *> ops;
      fn.walk([&](Operation *op) {
        if (op != fn)
          ops.push_back(op);
      });
      // Forward then backward sweeps until a fixed point (bounded: each sweep
      // only fills unknown values, so at most one sweep per value is useful).
      for (size_t sweep = 0; sweep < ops.size() + 1; ++sweep) {
        bool changed = false;
        for (Operation *op : ops)
          changed |= p.visit(op);
        for (Operation *op : llvm::reverse(ops))
          changed |= p.visit(op);
        if (!changed)
          break;
      }
      OpBuilder b(&getContext());
      for (Operation *op : ops) {
        if (op->getNumResults() == 0 || isa<ParamOp>(op))
          continue;
        SmallVector<Attribute> shardings;
        for (Value r : op->getResults()) {
          ShardingAttr s = p.lookup(r);
          if (!s)
            s = ShardingAttr::replicated(
                &getContext(), cast<RankedTensorType>(r.getType()).getRank());
          shardings.push_back(s);
        }
        op->setAttr(weft::attrname::kShardings, b.getArrayAttr(shardings));
      }
    }
  }
};
} // namespace
