//===- WeftAttrs.cpp - the sharding attribute's helpers -------------------===//
#include "dialect/WeftDialect.h"
#include "program/PipelineSchedule.h"

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

std::string PipelineScheduleAttr::spec() const {
  if (getKind() == "interleaved")
    return "interleaved:" + std::to_string(getVirtualStages());
  if (getKind() == "custom")
    return "custom:" + getRuns().str();
  return getKind().str();
}

PipelineScheduleAttr PipelineScheduleAttr::fromSpec(MLIRContext *ctx,
                                                    StringRef spec) {
  weft::PipelineSchedule parsed;
  if (!weft::parsePipelineSchedule(spec.str(), parsed).ok())
    return {};
  StringRef kind = weft::pipelineScheduleName(parsed.Kind);
  StringRef runs = spec.starts_with("custom:") ? spec.drop_front(7) : "";
  int64_t chunks = parsed.Kind == weft::PipelineScheduleKind::Interleaved
                       ? parsed.VirtualStages
                       : 1;
  return get(ctx, kind, chunks, runs);
}

LogicalResult
PipelineScheduleAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                             StringRef kind, int64_t virtualStages,
                             StringRef runs) {
  if (kind != "gpipe" && kind != "1f1b" && kind != "interleaved" &&
      kind != "zb-h1" && kind != "custom")
    return emitError() << "schedule kind must be gpipe, 1f1b, interleaved, "
                          "zb-h1 or custom, got '"
                       << kind << "'";
  if ((kind == "interleaved") != (virtualStages > 1) || virtualStages < 1)
    return emitError() << "schedule '" << kind << "' with virtual_stages "
                       << virtualStages
                       << ": interleaved needs 2 or more, the others 1";
  if ((kind == "custom") != !runs.empty())
    return emitError() << "schedule '" << kind << "' "
                       << (runs.empty() ? "needs its runs" : "takes no runs");
  weft::PipelineSchedule parsed;
  std::string spec = kind == "interleaved"
                         ? "interleaved:" + std::to_string(virtualStages)
                     : kind == "custom" ? "custom:" + runs.str()
                                        : kind.str();
  if (weft::Status s = weft::parsePipelineSchedule(spec, parsed); !s.ok())
    return emitError() << "schedule: " << s.message();
  return success();
}
