//===- WeftAttrs.cpp - the sharding attribute's helpers -------------------===//
#include "dialect/WeftDialect.h"

using namespace mlir;
using namespace weft;

SmallVector<StringRef> ShardingAttr::axesOf(int64_t d) const {
  SmallVector<StringRef> axes;
  if (d < 0 || d >= int64_t(getDims().size()))
    return axes;
  for (Attribute a : cast<ArrayAttr>(getDims()[d]))
    axes.push_back(cast<StringAttr>(a).getValue());
  return axes;
}

int64_t ShardingAttr::blocksOf(int64_t d) const {
  if (!getBlocks())
    return 1;
  ArrayRef<int64_t> blocks = getBlocks().asArrayRef();
  return d < int64_t(blocks.size()) ? blocks[d] : 1;
}

SmallVector<StringRef> ShardingAttr::partialAxes() const {
  SmallVector<StringRef> axes;
  for (Attribute a : getPartial())
    axes.push_back(cast<StringAttr>(a).getValue());
  return axes;
}

bool ShardingAttr::isReplicated() const {
  if (!getPartial().empty())
    return false;
  for (Attribute d : getDims())
    if (!cast<ArrayAttr>(d).empty())
      return false;
  return true;
}

ShardingAttr ShardingAttr::replicated(MLIRContext *ctx, int64_t rank) {
  SmallVector<SmallVector<StringRef>> dims(rank);
  return get(ctx, dims, {}, {});
}

ShardingAttr ShardingAttr::get(MLIRContext *ctx,
                               ArrayRef<SmallVector<StringRef>> dims,
                               ArrayRef<StringRef> partial,
                               ArrayRef<int64_t> blocks) {
  Builder b(ctx);
  SmallVector<Attribute> dimAttrs;
  for (const auto &axes : dims)
    dimAttrs.push_back(b.getStrArrayAttr(axes));
  bool anyBlocks = llvm::any_of(blocks, [](int64_t v) { return v != 1; });
  return get(ctx, b.getArrayAttr(dimAttrs), b.getStrArrayAttr(partial),
             anyBlocks ? b.getDenseI64ArrayAttr(blocks) : DenseI64ArrayAttr());
}

LogicalResult TpRoleAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                 StringRef kind, int64_t dim, int64_t blocks) {
  if (kind != "column" && kind != "row" && kind != "vocab" &&
      kind != "replicated")
    return emitError() << "tp_role kind must be column, row, vocab or "
                          "replicated, got '"
                       << kind << "'";
  if (dim < 0)
    return emitError() << "tp_role dim must be >= 0, got " << dim;
  if (blocks < 1)
    return emitError() << "tp_role blocks must be >= 1, got " << blocks;
  return success();
}
