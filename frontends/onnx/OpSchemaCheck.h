//===- OpSchemaCheck.h - A node's attributes against ONNX's schema -*- C++
//-*-===//
//
// An attribute an op does not have (axis on ReduceMean) would be ignored, and
// a flag out of its domain (Reshape allowzero=2^40) read as some other
// value: both are refused by name, as the onnx checker refuses them.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_FRONTENDS_ONNX_OPSCHEMACHECK_H
#define WEFT_FRONTENDS_ONNX_OPSCHEMACHECK_H

#include <cstdint>
#include <string>

namespace onnx {
class NodeProto;
} // namespace onnx

namespace weft {
namespace onnximport {

/// "" or why node `n` (named `where` in messages) is refused: an attribute
/// its op's schema at `opset` lacks (past the opsets the linked ONNX
/// release defines: one no version of the op has and no later opset added),
/// or a 0/1 flag of another value.
std::string checkNodeAttributes(const onnx::NodeProto &n, int64_t opset,
                                const std::string &where);

} // namespace onnximport
} // namespace weft

#endif // WEFT_FRONTENDS_ONNX_OPSCHEMACHECK_H
