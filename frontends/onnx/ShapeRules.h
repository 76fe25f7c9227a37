//===- ShapeRules.h - ONNX shape rules shared by folding and import -*- C++
//-*-===//
//
// The result shapes of ONNX's shape-moving ops, as the ONNX spec defines
// them, for constants (HostTensor.cpp) and for the static shapes of
// imported values (ImportOnnx.cpp) alike. Each returns an error message,
// or "" on success.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_FRONTENDS_ONNX_SHAPERULES_H
#define WEFT_FRONTENDS_ONNX_SHAPERULES_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace weft {
namespace onnximport {

struct HostTensor;

std::string shapeString(const std::vector<int64_t> &shape);

/// Reshape's output: `target` may hold one -1 (inferred) and 0s (copy the
/// input dim unless `allowZero`).
std::string reshapeTarget(const std::vector<int64_t> &in,
                          const std::vector<int64_t> &target, bool allowZero,
                          std::vector<int64_t> &out);

std::string unsqueezeShape(const std::vector<int64_t> &in,
                           const std::vector<int64_t> &axes,
                           std::vector<int64_t> &out);
/// Squeeze: every size-1 dim when `axes` is empty.
std::string squeezeShape(const std::vector<int64_t> &in,
                         const std::vector<int64_t> &axes,
                         std::vector<int64_t> &out);
/// Transpose: the reversed dims when `perm` is empty.
std::string transposeShape(const std::vector<int64_t> &in,
                           const std::vector<int64_t> &perm,
                           std::vector<int64_t> &out);

/// A Slice, per dim: the first index, the step and the result size.
struct SliceSpec {
  std::vector<int64_t> start, step, shape;
};
std::string sliceSpec(const std::vector<int64_t> &in,
                      const std::vector<int64_t> &starts,
                      const std::vector<int64_t> &ends,
                      const std::vector<int64_t> &axes,
                      const std::vector<int64_t> &steps, SliceSpec &out);

/// Shape's output (int64 [n]) for dims [start, end) of `in`.
std::string shapeTensor(const std::vector<int64_t> &in, int64_t start,
                        std::optional<int64_t> end, HostTensor &out);

} // namespace onnximport
} // namespace weft

#endif // WEFT_FRONTENDS_ONNX_SHAPERULES_H
