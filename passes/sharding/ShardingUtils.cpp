//===- ShardingUtils.cpp - factor assignment and local types --------------===//
#include "passes/sharding/ShardingUtils.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringSet.h"

#include <functional>

using namespace mlir;
using namespace weft;

int64_t MeshInfo::size(StringRef axis) const {
  for (auto [name, size] : llvm::zip(axes, sizes))
    if (name == axis)
      return size;
  return 0;
}

int64_t MeshInfo::count(ArrayRef<StringRef> names) const {
  int64_t n = 1;
  for (StringRef a : names)
    n *= std::max<int64_t>(1, size(a));
  return n;
}

MeshInfo MeshInfo::of(Operation *op) {
  MeshInfo info;
  if (MeshOp mesh = meshFor(op))
    for (auto [axis, size] : llvm::zip(mesh.getAxes(), mesh.getShape())) {
      info.axes.push_back(cast<StringAttr>(axis).getValue().str());
      info.sizes.push_back(size);
    }
  return info;
}

FactorAxes weft::assignFactors(const ShardingRule &rule,
                               ArrayRef<ShardingAttr> operands,
                               ArrayRef<bool> operandIsParam,
                               ArrayRef<ShardingAttr> results,
                               const MeshInfo &mesh) {
  FactorAxes result;
  auto &axes = result.axes;
  axes.resize(rule.factors.size());
  result.blocks.assign(rule.factors.size(), 1);
  SmallVector<bool> set(rule.factors.size(), false);
  llvm::StringSet<> taken;
  std::function<bool(int64_t)> roundFilter = [](int64_t) { return true; };

  auto offer = [&](int64_t f, ArrayRef<StringRef> offered, int64_t blocks,
                   int64_t ruleBlocks) {
    if (f == ShardingRule::kNone || offered.empty() || !roundFilter(f))
      return;
    if (set[f]) {
      // A finer split of the same major axes refines the factor: a row
      // split over cp meeting one over (cp, tp) (sequence parallelism
      // beside context parallelism) takes both, so the coarser operand is
      // sliced or reduce-scattered rather than the finer one gathered.
      const auto &have = axes[f];
      if (ruleBlocks > 1 || blocks > 1 || result.blocks[f] > 1 ||
          offered.size() <= have.size() ||
          !llvm::equal(have, offered.take_front(have.size())))
        return;
      ArrayRef<StringRef> extra = offered.drop_front(have.size());
      const ShardingRule::Factor &factor = rule.factors[f];
      for (StringRef a : extra)
        if (taken.contains(a) || mesh.size(a) == 0 ||
            (factor.contextOnly && a != kContextAxis))
          return;
      if (factor.size % (mesh.count(offered) * factor.granule) != 0)
        return;
      for (StringRef a : extra)
        taken.insert(a);
      axes[f].assign(offered.begin(), offered.end());
      return;
    }
    const ShardingRule::Factor &factor = rule.factors[f];
    // A dim the rule sees as k blocks must arrive split in k blocks; other
    // dims carry their blocks through to the factor.
    if (factor.pinned || (ruleBlocks > 1 && blocks != ruleBlocks))
      return;
    // The major axes the factor may take: a value split over (cp, tp) whose
    // tp another factor holds (sequence parallelism beside context
    // parallelism, before a column-parallel matmul) keeps its cp split and
    // is gathered over tp only.
    size_t usable = 0;
    while (usable < offered.size() && !taken.contains(offered[usable]) &&
           mesh.size(offered[usable]) != 0 &&
           (!factor.contextOnly || offered[usable] == kContextAxis))
      ++usable;
    if (usable < offered.size() && (ruleBlocks > 1 || blocks > 1))
      return;
    offered = offered.take_front(usable);
    int64_t c = mesh.count(offered);
    if (c <= 1 || factor.size % (c * factor.granule) != 0)
      return;
    for (StringRef a : offered)
      taken.insert(a);
    axes[f].assign(offered.begin(), offered.end());
    result.blocks[f] = ruleBlocks > 1 ? 1 : blocks;
    set[f] = true;
  };
  auto offerValue = [&](ShardingAttr s, ArrayRef<int64_t> dims,
                        std::optional<unsigned> operand, unsigned result) {
    if (!s)
      return;
    for (auto [d, f] : llvm::enumerate(dims)) {
      int64_t ruleBlocks =
          operand ? rule.blocksOf(*operand, d) : rule.resultBlocksOf(result, d);
      offer(f, s.axesOf(d), s.blocksOf(d), ruleBlocks);
    }
  };

  // Two rounds: first the factors some result keeps (splitting them costs
  // no communication), then the contracted ones (which leave partial sums).
  // GSPMD prefers the same; it keeps a weight gradient's matmul split like
  // its output rather than like its contracted sequence.
  llvm::SmallDenseSet<int64_t> kept;
  for (const auto &dims : rule.results)
    kept.insert(dims.begin(), dims.end());
  for (bool contractedRound : {false, true}) {
    roundFilter = [&](int64_t f) {
      return kept.contains(f) != contractedRound;
    };
    for (unsigned i = 0; i < operands.size(); ++i)
      if (operandIsParam[i])
        offerValue(operands[i], rule.operands[i], i, 0);
    for (unsigned i = 0; i < operands.size(); ++i)
      if (!operandIsParam[i])
        offerValue(operands[i], rule.operands[i], i, 0);
    for (unsigned i = 0; i < results.size(); ++i)
      offerValue(results[i], rule.results[i], std::nullopt, i);
  }

  // Tied factors (attention's query and key/value features) split together:
  // all take the first one's axes when each can; otherwise none is split.
  for (const auto &group : rule.tied) {
    SmallVector<StringRef> chosen;
    for (int64_t f : group)
      if (set[f]) {
        chosen = axes[f];
        break;
      }
    bool fits = !chosen.empty();
    int64_t c = mesh.count(chosen);
    for (int64_t f : group)
      fits &= rule.factors[f].size % (c * rule.factors[f].granule) == 0;
    for (int64_t f : group)
      axes[f] = fits ? chosen : SmallVector<StringRef>();
  }
  return result;
}

FactorAxes
weft::assignOpFactors(Operation *op, const ShardingRule &rule,
                      llvm::function_ref<ShardingAttr(Value)> shardingOf,
                      const MeshInfo &mesh) {
  SmallVector<ShardingAttr> ins, outs;
  SmallVector<bool> isParam;
  for (Value v : op->getOperands()) {
    ins.push_back(shardingOf(v));
    // A parameter's bf16 copy (weft-mixed-precision) and its gather from
    // ZeRO-3's storage (made by weft-partition when an earlier user, such
    // as that copy, was partitioned) weigh as the parameter itself: else
    // a sequence-parallel input's split would win over the weight's
    // (Llama under SP, ZeRO-3 and bf16 gathered every weight over tp).
    Value source = v;
    while (Operation *def = source.getDefiningOp()) {
      if (!isa<CastOp, AllGatherOp>(def))
        break;
      source = def->getOperand(0);
    }
    isParam.push_back(bool(source.getDefiningOp<ParamOp>()));
  }
  for (Value v : op->getResults())
    outs.push_back(shardingOf(v));
  return assignFactors(rule, ins, isParam, outs, mesh);
}

ShardingAttr weft::shardingFromFactors(MLIRContext *ctx,
                                       const ShardingRule &rule,
                                       const FactorAxes &axes,
                                       ArrayRef<int64_t> dims,
                                       ArrayRef<int64_t> ruleBlocks,
                                       bool partialFromMissing) {
  SmallVector<SmallVector<StringRef>> dimAxes;
  SmallVector<int64_t> dimBlocks;
  for (auto [d, f] : llvm::enumerate(dims)) {
    if (f == ShardingRule::kNone) {
      dimAxes.emplace_back();
      dimBlocks.push_back(1);
      continue;
    }
    dimAxes.emplace_back(axes[f]);
    int64_t rb = d < ruleBlocks.size() ? ruleBlocks[d] : 1;
    int64_t b = rb > 1 ? rb : axes.blocks[f];
    dimBlocks.push_back(dimAxes.back().empty() ? 1 : b);
  }
  // A factor split but absent from these dims was contracted: the value is a
  // partial sum over its axes. Tied factors are one split seen twice (query
  // and key/value heads), so one of them present means none was contracted.
  auto present = [&](int64_t f) {
    if (llvm::is_contained(dims, f))
      return true;
    for (const auto &group : rule.tied)
      if (llvm::is_contained(group, f))
        for (int64_t g : group)
          if (llvm::is_contained(dims, g))
            return true;
    return false;
  };
  SmallVector<StringRef> partial;
  if (partialFromMissing) {
    for (auto [f, a] : llvm::enumerate(axes.axes))
      if (!a.empty() && !present(f))
        partial.append(a.begin(), a.end());
  }
  return ShardingAttr::get(ctx, dimAxes, partial, dimBlocks);
}

RankedTensorType weft::localType(RankedTensorType global, ShardingAttr sharding,
                                 const MeshInfo &mesh) {
  if (!sharding)
    return global;
  SmallVector<int64_t> shape(global.getShape());
  for (int64_t d = 0; d < global.getRank(); ++d) {
    int64_t c = mesh.count(sharding.axesOf(d));
    int64_t b = sharding.blocksOf(d);
    if (shape[d] % (c * b) != 0)
      return nullptr;
    shape[d] /= c;
  }
  return RankedTensorType::get(shape, global.getElementType());
}

std::string weft::joinAxes(ArrayRef<StringRef> axes) {
  std::string s;
  for (StringRef a : axes)
    s += (s.empty() ? "" : ",") + a.str();
  return s;
}
