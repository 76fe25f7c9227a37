//===- WeftCollectives.cpp - the mesh and collective verifiers ------------===//
#include "dialect/AttrNames.h"
#include "dialect/WeftDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace weft;

LogicalResult MeshOp::verify() {
  if (getAxes().size() != getShape().size())
    return emitOpError("has ")
           << getAxes().size() << " axes but " << getShape().size() << " sizes";
  llvm::StringSet<> seen;
  for (auto [axis, size] : llvm::zip(getAxes(), getShape())) {
    StringRef name = cast<StringAttr>(axis).getValue();
    if (!seen.insert(name).second)
      return emitOpError("axis '") << name << "' appears twice";
    if (size <= 0)
      return emitOpError("axis '")
             << name << "' has size " << size << ", expected >= 1";
  }
  return success();
}

int64_t MeshOp::axisSize(StringRef axis) {
  for (auto [name, size] : llvm::zip(getAxes(), getShape()))
    if (cast<StringAttr>(name).getValue() == axis)
      return size;
  return -1;
}

int64_t MeshOp::numRanks() {
  int64_t n = 1;
  for (int64_t s : getShape())
    n *= s;
  return n;
}

MeshOp weft::meshFor(Operation *op) {
  auto module =
      isa<ModuleOp>(op) ? cast<ModuleOp>(op) : op->getParentOfType<ModuleOp>();
  if (!module)
    return nullptr;
  auto fn = isa<func::FuncOp>(op) ? cast<func::FuncOp>(op)
                                  : op->getParentOfType<func::FuncOp>();
  if (auto named =
          fn ? fn->getAttrOfType<FlatSymbolRefAttr>(weft::attrname::kMesh)
             : FlatSymbolRefAttr())
    return dyn_cast_or_null<MeshOp>(
        SymbolTable::lookupSymbolIn(module, named.getAttr()));
  MeshOp only;
  for (MeshOp mesh : module.getOps<MeshOp>()) {
    if (only)
      return nullptr; // several: the function must name one
    only = mesh;
  }
  return only;
}

namespace {
// The group size of `axes` on the op's mesh, or failure with a message.
FailureOr<int64_t> groupSize(Operation *op, ArrayAttr axes) {
  MeshOp mesh = meshFor(op);
  if (!mesh)
    return op->emitOpError("has no mesh: its function names none "
                           "(weft.mesh = @name) and its module has not "
                           "exactly one weft.mesh");
  if (axes.empty())
    return op->emitOpError("needs at least one mesh axis");
  int64_t n = 1;
  for (Attribute a : axes) {
    StringRef axis = cast<StringAttr>(a).getValue();
    int64_t size = mesh.axisSize(axis);
    if (size < 0)
      return op->emitOpError("unknown mesh axis '") << axis << "'";
    n *= size;
  }
  return n;
}

// all_gather grows `dim` by the group size, reduce_scatter and slice shrink it.
LogicalResult verifyResize(Operation *op, Value x, Value y, ArrayAttr axes,
                           int64_t dim, bool grows) {
  FailureOr<int64_t> n = groupSize(op, axes);
  if (failed(n))
    return failure();
  auto in = cast<RankedTensorType>(x.getType());
  auto out = cast<RankedTensorType>(y.getType());
  if (dim < 0 || dim >= in.getRank() || in.getRank() != out.getRank())
    return op->emitOpError("dim ")
           << dim << " is out of range for rank " << in.getRank();
  for (int64_t d = 0; d < in.getRank(); ++d) {
    int64_t expected = in.getDimSize(d);
    if (d == dim) {
      if (!grows && expected % *n != 0)
        return op->emitOpError("group size ") << *n << " does not divide dim "
                                              << dim << " of size " << expected;
      expected = grows ? expected * *n : expected / *n;
    }
    if (out.getDimSize(d) != expected)
      return op->emitOpError("result dim ")
             << d << " is " << out.getDimSize(d) << ", expected " << expected
             << " (group size " << *n << ")";
  }
  return success();
}
} // namespace

namespace {
// A collective whose result is shaped as its operand (all_reduce, ring_shift).
LogicalResult verifySameType(Operation *op, Value x, Value y, ArrayAttr axes) {
  if (failed(groupSize(op, axes)))
    return failure();
  if (x.getType() != y.getType())
    return op->emitOpError("result type must equal the operand type");
  return success();
}
} // namespace

LogicalResult AllReduceOp::verify() {
  return verifySameType(*this, getX(), getResult(), getAxes());
}

LogicalResult AllGatherOp::verify() {
  return verifyResize(*this, getX(), getResult(), getAxes(), getDim(), true);
}

LogicalResult ReduceScatterOp::verify() {
  return verifyResize(*this, getX(), getResult(), getAxes(), getDim(), false);
}

LogicalResult RingShiftOp::verify() {
  return verifySameType(*this, getX(), getResult(), getAxes());
}

LogicalResult AllToAllOp::verify() {
  FailureOr<int64_t> n = groupSize(*this, getAxes());
  if (failed(n))
    return failure();
  auto in = cast<RankedTensorType>(getX().getType());
  auto out = cast<RankedTensorType>(getResult().getType());
  int64_t split = getSplitDim(), concat = getConcatDim();
  if (split < 0 || split >= in.getRank() || concat < 0 ||
      concat >= in.getRank() || split == concat ||
      in.getRank() != out.getRank())
    return emitOpError("split_dim ")
           << split << " and concat_dim " << concat
           << " must be two different dims of rank " << in.getRank();
  if (in.getElementType() != out.getElementType())
    return emitOpError("result element type must equal the operand's");
  for (int64_t d = 0; d < in.getRank(); ++d) {
    int64_t expected = in.getDimSize(d);
    if (d == split) {
      if (expected % *n != 0)
        return emitOpError("group size ") << *n << " does not divide split_dim "
                                          << d << " of size " << expected;
      expected /= *n;
    }
    if (d == concat)
      expected *= *n;
    if (out.getDimSize(d) != expected)
      return emitOpError("result dim ")
             << d << " is " << out.getDimSize(d) << ", expected " << expected
             << " (group size " << *n << ")";
  }
  return success();
}

LogicalResult SliceOp::verify() {
  return verifyResize(*this, getX(), getResult(), getAxes(), getDim(), false);
}

namespace {
LogicalResult verifyPacking(Operation *op, TypeRange pieces, Type packed,
                            int64_t blocks) {
  auto flat = cast<RankedTensorType>(packed);
  if (flat.getRank() != 1)
    return op->emitOpError("packed buffer must be 1-D, got ") << flat;
  if (blocks < 1)
    return op->emitOpError("blocks must be at least 1, got ") << blocks;
  int64_t total = 0;
  for (auto [i, t] : llvm::enumerate(pieces)) {
    auto piece = cast<RankedTensorType>(t);
    if (piece.getElementType() != flat.getElementType())
      return op->emitOpError("mixes element types ")
             << piece.getElementType() << " and " << flat.getElementType();
    if (piece.getNumElements() % blocks != 0)
      return op->emitOpError("piece ")
             << i << " has " << piece.getNumElements()
             << " elements, not a multiple of blocks=" << blocks;
    total += piece.getNumElements();
  }
  if (total != flat.getDimSize(0))
    return op->emitOpError("packed buffer has ")
           << flat.getDimSize(0) << " elements, the pieces " << total;
  return success();
}
} // namespace

LogicalResult PackOp::verify() {
  return verifyPacking(*this, getInputs().getTypes(), getType(), getBlocks());
}

LogicalResult UnpackOp::verify() {
  return verifyPacking(*this, getResultTypes(), getPacked().getType(),
                       getBlocks());
}
