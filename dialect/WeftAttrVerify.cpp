//===- WeftAttrVerify.cpp - verify the attributes passes exchange ---------===//
//
// `weft.sharding` (on a param or a function argument) and `weft.shardings`
// (one per result of an op) are how layout, propagation and partition talk;
// the other names of AttrNames.h carry storage layouts, offsets and the
// optimizer. Each is checked here and any other `weft.*` name refused.
// A malformed one used to crash weft-partition (a cast of a non-sharding),
// and an axis the mesh lacks verified and failed later on another op; the
// verifier now refuses both where they are written.
//
//===----------------------------------------------------------------------===//
#include "dialect/AttrNames.h"
#include "dialect/WeftDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace weft;

namespace {

LogicalResult verifySharding(Operation *op, Attribute attr, Type type,
                             const Twine &what) {
  auto fail = [&]() { return op->emitOpError() << what << " "; };
  auto s = dyn_cast<ShardingAttr>(attr);
  if (!s)
    return fail() << "must be a #weft.sharding, got " << attr;
  // A null type: a storage layout, which ZeRO may flatten (any rank).
  if (type) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!tensor)
      return fail() << "shards a " << type << ", not a ranked tensor";
    if (int64_t(s.getDims().size()) != tensor.getRank())
      return fail() << "has " << s.getDims().size() << " dims for a " << tensor;
  }
  if (s.getBlocks() &&
      int64_t(s.getBlocks().size()) != int64_t(s.getDims().size()))
    return fail() << "has " << s.getBlocks().size() << " blocks for "
                  << s.getDims().size() << " dims";
  if (s.getBlocks())
    for (int64_t b : s.getBlocks().asArrayRef())
      if (b < 1)
        return fail() << "has a block count " << b << " < 1";
  MeshOp mesh = meshFor(op);
  llvm::StringSet<> seen;
  auto checkAxes = [&](Attribute list, const Twine &where) -> LogicalResult {
    auto axes = dyn_cast<ArrayAttr>(list);
    if (!axes)
      return fail() << where << " must be a list of axis names";
    for (Attribute a : axes) {
      auto name = dyn_cast<StringAttr>(a);
      if (!name)
        return fail() << where << " holds " << a << ", not an axis name";
      if (!seen.insert(name.getValue()).second)
        return fail() << "names mesh axis '" << name.getValue() << "' twice";
      if (!mesh)
        return fail() << "names mesh axis '" << name.getValue()
                      << "' but no mesh is in scope (the function names "
                         "none with weft.mesh and the module has not "
                         "exactly one weft.mesh)";
      if (mesh.axisSize(name.getValue()) < 0)
        return fail() << "names axis '" << name.getValue() << "', which mesh @"
                      << mesh.getSymName() << " does not have";
    }
    return success();
  };
  for (auto [d, dim] : llvm::enumerate(s.getDims()))
    if (failed(checkAxes(dim, "dim " + Twine(d))))
      return failure();
  return checkAxes(s.getPartial(), "partial");
}

} // namespace

LogicalResult WeftDialect::verifyOperationAttribute(Operation *op,
                                                    NamedAttribute attr) {
  namespace an = weft::attrname;
  StringRef name = attr.getName().getValue();
  Attribute value = attr.getValue();
  auto fail = [&]() { return op->emitOpError() << name << " "; };
  if (name == an::kSharding) {
    if (op->getNumResults() != 1)
      return fail() << "needs an op of one result, this one has "
                    << op->getNumResults();
    return verifySharding(op, value, op->getResult(0).getType(), name);
  }
  if (name == an::kShardings) {
    auto list = dyn_cast<ArrayAttr>(value);
    if (!list || list.size() != op->getNumResults())
      return fail() << "must list one #weft.sharding per result ("
                    << op->getNumResults() << "), got " << value;
    for (auto [i, s] : llvm::enumerate(list))
      if (failed(verifySharding(op, s, op->getResult(i).getType(),
                                name + "[" + Twine(i) + "]")))
        return failure();
    return success();
  }
  if (name == an::kAsync) {
    if (!isa<AllReduceOp, AllGatherOp, ReduceScatterOp, RingShiftOp>(op))
      return fail() << "belongs on an all_reduce, all_gather, "
                       "reduce_scatter or ring_shift";
    if (!isa<UnitAttr>(value))
      return fail() << "must be a unit attribute, got " << value;
    return success();
  }
  if (name == an::kShardAxes) {
    if (!isa<AdamWOp>(op))
      return fail() << "belongs on a weft.adamw";
    auto axes = dyn_cast<ArrayAttr>(value);
    if (!axes ||
        !llvm::all_of(axes, [](Attribute a) { return isa<StringAttr>(a); }))
      return fail() << "must be a list of mesh axis names, got " << value;
    MeshOp mesh = meshFor(op);
    for (Attribute a : axes) {
      StringRef axis = cast<StringAttr>(a).getValue();
      if (!mesh || mesh.axisSize(axis) < 0)
        return fail() << "names axis '" << axis
                      << "', which the mesh in scope does not have";
    }
    return success();
  }
  if (name == an::kTpRole) {
    auto role = dyn_cast<TpRoleAttr>(value);
    auto param = dyn_cast<ParamOp>(op);
    if (!param)
      return fail() << "belongs on a weft.param";
    if (!role)
      return fail() << "must be a #weft.tp_role, got " << value;
    ArrayRef<int64_t> shape = param.getType().getShape();
    if (role.getDim() >= int64_t(shape.size()))
      return fail() << "splits dim " << role.getDim() << " of a "
                    << param.getType() << " of rank " << shape.size();
    if (shape[role.getDim()] % role.getBlocks() != 0)
      return fail() << "has " << role.getBlocks() << " blocks, which do not "
                    << "divide dim " << role.getDim() << " (size "
                    << shape[role.getDim()] << ")";
    return success();
  }
  for (StringRef storage :
       {an::kStorage, an::kGradStorage, an::kStateStorage, an::kStorageSharding,
        an::kGradStorageSharding, an::kStateStorageSharding})
    if (name == storage) {
      if (!isa<ParamOp>(op))
        return fail() << "belongs on a weft.param";
      return verifySharding(op, value, Type(), name);
    }
  if (name == an::kLogicalRows) {
    auto rows = dyn_cast<IntegerAttr>(value);
    auto param = dyn_cast<ParamOp>(op);
    if (!param || !rows || param.getType().getRank() < 1)
      return fail() << "must be a weft.param's rows in the model, got "
                    << value;
    // After weft-partition the type is a shard: its global shape bounds.
    auto global = op->getAttrOfType<DenseI64ArrayAttr>(an::kGlobalShape);
    int64_t stored =
        global && !global.empty() ? global[0] : param.getType().getShape()[0];
    if (rows.getInt() < 1 || rows.getInt() > stored)
      return fail() << "is " << rows.getInt() << ", not in [1, " << stored
                    << "] (the stored rows)";
    return success();
  }
  if (name == an::kGlobalShape) {
    auto shape = dyn_cast<DenseI64ArrayAttr>(value);
    if (!isa<ParamOp>(op) || !shape ||
        int64_t(shape.size()) !=
            cast<ShapedType>(op->getResult(0).getType()).getRank())
      return fail() << "must be a weft.param's global shape, one size per "
                       "dim, got "
                    << value;
    for (int64_t d : shape.asArrayRef())
      if (d < 1)
        return fail() << "has a size " << d << " < 1";
    return success();
  }
  if (name == an::kOffsets) {
    auto offsets = dyn_cast<DenseI64ArrayAttr>(value);
    if (!offsets || offsets.size() != int64_t(op->getNumResults()))
      return fail() << "must hold one arena offset per result ("
                    << op->getNumResults() << "), got " << value;
    return success();
  }
  if (name == an::kArenaBytes) {
    auto bytes = dyn_cast<IntegerAttr>(value);
    if (!bytes || bytes.getInt() < 0)
      return fail() << "must be a non-negative integer, got " << value;
    return success();
  }
  if (name == an::kRegather) {
    if (!isa<AllGatherOp>(op) || !isa<UnitAttr>(value))
      return fail() << "must be a unit attribute on a weft.all_gather";
    return success();
  }
  if (name == an::kSlotBytes) {
    auto bytes = dyn_cast<IntegerAttr>(value);
    auto arena = op->getAttrOfType<IntegerAttr>(an::kArenaBytes);
    if (!isa<func::FuncOp>(op) || !bytes || bytes.getInt() < 0 ||
        bytes.getInt() % 64 != 0 || (arena && bytes.getInt() > arena.getInt()))
      return fail() << "must be a function's per-slot arena bytes, a "
                       "multiple of 64 up to its weft.arena_bytes, got "
                    << value;
    return success();
  }
  if (name == an::kMicrobatches) {
    auto m = dyn_cast<IntegerAttr>(value);
    if (!isa<func::FuncOp>(op) || !m || m.getInt() < 1 ||
        m.getInt() > (int64_t(1) << 20))
      return fail() << "must be a function's micro-batch count, 1 to 2^20, "
                       "got "
                    << value;
    return success();
  }
  if (name == an::kSeqChunks) {
    auto c = dyn_cast<IntegerAttr>(value);
    if (!isa<func::FuncOp>(op) || !c || c.getInt() < 2 || c.getInt() % 2 ||
        c.getInt() > (int64_t(1) << 20))
      return fail() << "must be a function's chunk count per sequence, even, "
                       "2 to 2^20, got "
                    << value;
    return success();
  }
  if (name == an::kContextParallel) {
    auto m = dyn_cast<StringAttr>(value);
    if (!isa<func::FuncOp>(op) || !m ||
        (m.getValue() != "all-to-all" && m.getValue() != "ring"))
      return fail() << "must be a function's \"all-to-all\" or \"ring\", got "
                    << value;
    return success();
  }
  if (name == an::kVocab || name == an::kLabels) {
    auto v = dyn_cast<IntegerAttr>(value);
    if (!isa<func::FuncOp>(op) || !v || v.getInt() < 1 ||
        v.getInt() > INT32_MAX)
      return fail() << "must be a function's vocabulary, 1 to 2^31-1, got "
                    << value;
    return success();
  }
  if (name == an::kDocuments) {
    auto d = dyn_cast<DictionaryAttr>(value);
    auto id = d ? d.getAs<IntegerAttr>("eos") : nullptr;
    auto given = d ? d.getAs<BoolAttr>("given_targets") : nullptr;
    auto mask = d ? d.getAs<BoolAttr>("attention_mask") : nullptr;
    bool byEos = id && id.getInt() >= 0 && id.getInt() <= INT32_MAX && !mask;
    bool byMask = mask && mask.getValue() && !id && given && given.getValue();
    if (!isa<func::FuncOp>(op) || !d || d.size() != 2 || !given ||
        !(byEos || byMask))
      return fail() << "must be a function's {eos (a token id, 0 to "
                       "2^31-1), given_targets (a bool)} or {attention_mask "
                       "= true, given_targets = true}, got "
                    << value;
    return success();
  }
  if (name == an::kMaskedLm) {
    auto d = dyn_cast<DictionaryAttr>(value);
    auto token = d ? d.getAs<IntegerAttr>("mask_token") : nullptr;
    auto prob = d ? d.getAs<FloatAttr>("mask_prob") : nullptr;
    auto seed = d ? d.getAs<IntegerAttr>("seed") : nullptr;
    if (!isa<func::FuncOp>(op) || !d || d.size() != 3 || !token || !prob ||
        !seed || token.getInt() < 0 || token.getInt() > INT32_MAX ||
        !(prob.getValueAsDouble() > 0 && prob.getValueAsDouble() <= 1) ||
        seed.getInt() < 0)
      return fail() << "must be a function's {mask_token (0 to 2^31-1), "
                       "mask_prob (in (0, 1]), seed (>= 0)}, got "
                    << value;
    return success();
  }
  if (name == an::kMesh) {
    auto ref = dyn_cast<FlatSymbolRefAttr>(value);
    if (!isa<func::FuncOp>(op) || !ref)
      return fail() << "must be a function's mesh, a symbol, got " << value;
    auto module = op->getParentOfType<ModuleOp>();
    Operation *target =
        module ? SymbolTable::lookupSymbolIn(module, ref.getAttr()) : nullptr;
    if (!isa_and_nonnull<MeshOp>(target))
      return fail() << "names " << ref << ", which is not a weft.mesh";
    return success();
  }
  if (name == an::kFragment) {
    auto f = dyn_cast<StringAttr>(value);
    if (!f || !llvm::is_contained(ArrayRef<StringRef>{"prologue", "forward",
                                                      "backward", "weight",
                                                      "optimizer"},
                                  f.getValue()))
      return fail() << "must be \"prologue\", \"forward\", \"backward\", "
                       "\"weight\" or \"optimizer\", got "
                    << value;
    return success();
  }
  if (name == an::kChunk) {
    auto c = dyn_cast<IntegerAttr>(value);
    auto f = op->getAttrOfType<StringAttr>(an::kFragment);
    if (!c || c.getInt() < 0 || c.getInt() >= 1024 || !f ||
        (f.getValue() != "forward" && f.getValue() != "backward"))
      return fail() << "must be the model chunk (0 to 1023) of an op in a "
                       "forward or backward fragment, got "
                    << value;
    return success();
  }
  if (name == an::kLayer) {
    auto l = dyn_cast<IntegerAttr>(value);
    if (!l || l.getInt() < -1)
      return fail() << "must be the op's layer (an integer >= -1), got "
                    << value;
    return success();
  }
  if (name == an::kReplica)
    return isa<ParamOp>(op) && isa<UnitAttr>(value)
               ? success()
               : LogicalResult(fail() << "must be a unit attribute on a "
                                         "weft.param, got "
                                      << value);
  if (name == an::kStage || name == an::kNumStages) {
    auto n = dyn_cast<IntegerAttr>(value);
    if (!isa<func::FuncOp>(op) || !n || n.getInt() < 0 ||
        n.getInt() > (int64_t(1) << 20))
      return fail() << "must be a function's stage index or count (0 to "
                       "2^20), got "
                    << value;
    return success();
  }
  if (name == an::kPipelineSchedule)
    return isa<func::FuncOp>(op) && isa<PipelineScheduleAttr>(value)
               ? success()
               : LogicalResult(fail() << "must be a function's "
                                         "#weft.schedule, got "
                                      << value);
  if (name == an::kPipelineAxis || name == an::kStageLayers)
    return isa<func::FuncOp>(op) && isa<StringAttr>(value)
               ? success()
               : LogicalResult(fail()
                               << "must be a function's string, got " << value);
  if (name == an::kTokenTypes)
    return isa<ConstantOp>(op) && isa<UnitAttr>(value)
               ? success()
               : LogicalResult(fail() << "must be a unit attribute on a "
                                         "weft.constant, got "
                                      << value);
  if (name == an::kIfPadding) {
    auto c = dyn_cast<ConstantOp>(op);
    auto d = dyn_cast<DenseElementsAttr>(value);
    if (!c || !d || d.getType() != c.getValue().getType())
      return fail() << "must be a weft.constant's value if padded (a dense "
                       "attribute of the constant's type), got "
                    << value;
    return success();
  }
  if (name == an::kModel)
    return isa<StringAttr>(value)
               ? success()
               : LogicalResult(fail() << "must be a string, got " << value);
  if (name == an::kOptimizer)
    return isa<DictionaryAttr>(value)
               ? success()
               : LogicalResult(fail() << "must be a dictionary, got " << value);
  return op->emitOpError("has unknown attribute '")
         << name
         << "' (weft's are declared in dialect/AttrNames.h; a misspelt one "
            "would be ignored)";
}

LogicalResult WeftDialect::verifyRegionArgAttribute(Operation *op,
                                                    unsigned region,
                                                    unsigned arg,
                                                    NamedAttribute attr) {
  if (attr.getName().getValue() == weft::attrname::kInput) {
    auto name = dyn_cast<StringAttr>(attr.getValue());
    Region &r = op->getRegion(region);
    Type type = r.empty() || arg >= r.front().getNumArguments()
                    ? Type()
                    : r.front().getArgument(arg).getType();
    auto tensor = dyn_cast_or_null<RankedTensorType>(type);
    if (!name || name.getValue().empty() || !tensor ||
        !isa<FloatType>(tensor.getElementType()))
      return op->emitOpError("argument ")
             << arg << "'s weft.input must name a float tensor argument (a "
             << "non-empty string), got " << attr.getValue() << " on " << type;
    return success();
  }
  if (attr.getName().getValue() != weft::attrname::kSharding)
    return success();
  Region &r = op->getRegion(region);
  if (r.empty() || arg >= r.front().getNumArguments())
    return success();
  return verifySharding(op, attr.getValue(),
                        r.front().getArgument(arg).getType(),
                        "argument " + Twine(arg) + "'s weft.sharding");
}

LogicalResult WeftDialect::verifyRegionResultAttribute(Operation *op,
                                                       unsigned region,
                                                       unsigned result,
                                                       NamedAttribute attr) {
  if (attr.getName().getValue() != weft::attrname::kOutput)
    return success();
  auto name = dyn_cast<StringAttr>(attr.getValue());
  if (!name || name.getValue().empty())
    return op->emitOpError("result ")
           << result << "'s weft.output must be a non-empty string, got "
           << attr.getValue();
  return success();
}
