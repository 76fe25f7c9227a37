//===- WeftAttrVerify.cpp - verify the attributes passes exchange ---------===//
//
// `weft.sharding` (on a param or a function argument) and `weft.shardings`
// (one per result of an op) are how layout, propagation and partition talk.
// A malformed one used to crash weft-partition (a cast of a non-sharding),
// and an axis the mesh lacks verified and failed later on another op; the
// verifier now refuses both where they are written.
//
//===----------------------------------------------------------------------===//
#include "dialect/WeftDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace weft;

namespace {

/// The module's mesh, or null.
MeshOp meshOf(Operation *op) {
  auto module =
      isa<ModuleOp>(op) ? cast<ModuleOp>(op) : op->getParentOfType<ModuleOp>();
  if (!module)
    return nullptr;
  for (MeshOp mesh : module.getOps<MeshOp>())
    return mesh;
  return nullptr;
}

LogicalResult verifySharding(Operation *op, Attribute attr, Type type,
                             const Twine &what) {
  auto fail = [&]() { return op->emitOpError() << what << " "; };
  auto s = dyn_cast<ShardingAttr>(attr);
  if (!s)
    return fail() << "must be a #weft.sharding, got " << attr;
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor)
    return fail() << "shards a " << type << ", not a ranked tensor";
  if (int64_t(s.getDims().size()) != tensor.getRank())
    return fail() << "has " << s.getDims().size() << " dims for a " << tensor;
  if (s.getBlocks() &&
      int64_t(s.getBlocks().size()) != int64_t(s.getDims().size()))
    return fail() << "has " << s.getBlocks().size() << " blocks for "
                  << s.getDims().size() << " dims";
  if (s.getBlocks())
    for (int64_t b : s.getBlocks().asArrayRef())
      if (b < 1)
        return fail() << "has a block count " << b << " < 1";
  MeshOp mesh = meshOf(op);
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
                      << "' but the module has no weft.mesh";
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
  StringRef name = attr.getName().getValue();
  if (name == "weft.sharding") {
    if (op->getNumResults() != 1)
      return op->emitOpError("weft.sharding needs an op of one result, this "
                             "one has ")
             << op->getNumResults();
    return verifySharding(op, attr.getValue(), op->getResult(0).getType(),
                          "weft.sharding");
  }
  if (name == "weft.shardings") {
    auto list = dyn_cast<ArrayAttr>(attr.getValue());
    if (!list || list.size() != op->getNumResults())
      return op->emitOpError("weft.shardings must list one #weft.sharding "
                             "per result (")
             << op->getNumResults() << "), got " << attr.getValue();
    for (auto [i, s] : llvm::enumerate(list))
      if (failed(verifySharding(op, s, op->getResult(i).getType(),
                                "weft.shardings[" + Twine(i) + "]")))
        return failure();
  }
  return success();
}

LogicalResult WeftDialect::verifyRegionArgAttribute(Operation *op,
                                                    unsigned region,
                                                    unsigned arg,
                                                    NamedAttribute attr) {
  if (attr.getName().getValue() != "weft.sharding")
    return success();
  Region &r = op->getRegion(region);
  if (r.empty() || arg >= r.front().getNumArguments())
    return success();
  return verifySharding(op, attr.getValue(),
                        r.front().getArgument(arg).getType(),
                        "argument " + Twine(arg) + "'s weft.sharding");
}
