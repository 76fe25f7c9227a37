//===- TensorSizes.cpp - bounds on tensor sizes before size arithmetic ----===//
#include "passes/Passes.h"

#include "mlir/IR/BuiltinTypes.h"

#include <string>

using namespace mlir;

namespace weft {

namespace {
/// Why `type`'s shape is out of bounds, or "" (also for non-tensor types).
std::string shapeProblem(Type type) {
  auto t = dyn_cast<RankedTensorType>(type);
  if (!t)
    return "";
  int64_t elements = 1;
  for (int64_t dim : t.getShape()) {
    if (ShapedType::isDynamic(dim))
      return "has a dynamic dimension (weft needs static shapes)";
    if (dim > kMaxTensorElements)
      return "has a dimension " + std::to_string(dim) +
             " past 2^48 (weft's bound on tensor sizes)";
    // Saturating and sticky: a zero dimension after a product past 2^48
    // does not make the shape acceptable.
    if (elements <= kMaxTensorElements)
      elements = dim && elements > kMaxTensorElements / dim
                     ? kMaxTensorElements + 1
                     : elements * dim;
  }
  if (elements > kMaxTensorElements)
    return "has more than 2^48 elements (weft's bound on tensor sizes)";
  if (t.getElementTypeBitWidth() > 64)
    return "has elements of " + std::to_string(t.getElementTypeBitWidth()) +
           " bits (at most 64)";
  return "";
}

std::string typeString(Type type) {
  std::string s;
  llvm::raw_string_ostream os(s);
  type.print(os);
  return s;
}
} // namespace

LogicalResult checkTensorSizes(Operation *root) {
  LogicalResult result = success();
  root->walk([&](Operation *op) {
    for (Value v : op->getResults()) {
      std::string problem = shapeProblem(v.getType());
      if (!problem.empty()) {
        op->emitError() << "result #" << cast<OpResult>(v).getResultNumber()
                        << " of '" << op->getName() << "' of type "
                        << typeString(v.getType()) << " " << problem;
        result = failure();
        return WalkResult::interrupt();
      }
    }
    for (Region &region : op->getRegions())
      for (Block &block : region)
        for (BlockArgument arg : block.getArguments()) {
          std::string problem = shapeProblem(arg.getType());
          if (!problem.empty()) {
            emitError(arg.getLoc())
                << "argument #" << arg.getArgNumber() << " of '"
                << op->getName() << "' of type " << typeString(arg.getType())
                << " " << problem;
            result = failure();
            return WalkResult::interrupt();
          }
        }
    return WalkResult::advance();
  });
  return result;
}

std::optional<int64_t> tensorBytes(Type type) {
  auto t = dyn_cast<RankedTensorType>(type);
  if (!t || !shapeProblem(type).empty())
    return std::nullopt;
  // At most 2^48 elements of at most 64 bits: at most 2^51 bytes.
  return t.getNumElements() * t.getElementTypeBitWidth() / 8;
}

} // namespace weft
