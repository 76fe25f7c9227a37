//===- HostTensor.h - ONNX values known at import ---------------*- C++ -*-===//
//
// The ONNX import folds every value that depends on no graph input and no
// parameter: shape arithmetic (Shape, Range, Concat of dims), position ids
// and the causal mask. A HostTensor holds one such value; foldNode computes a
// node's outputs from its constant inputs, exactly as ONNX defines the op
// (floats rounded to f32 where the type is f32).
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_FRONTENDS_ONNX_HOSTTENSOR_H
#define WEFT_FRONTENDS_ONNX_HOSTTENSOR_H

#include <cstdint>
#include <string>
#include <vector>

namespace onnx {
class AttributeProto;
class NodeProto;
class TensorProto;
} // namespace onnx

namespace weft {
namespace onnximport {

/// The element types folding knows; ONNX's TensorProto codes.
enum class HostType { F32 = 1, I32 = 6, I64 = 7, Bool = 9, F64 = 11 };

/// A dense row-major tensor: floats in `reals`, integers and bools in `ints`.
struct HostTensor {
  HostType type = HostType::I64;
  std::vector<int64_t> shape;
  std::vector<double> reals;
  std::vector<int64_t> ints;

  bool isFloat() const {
    return type == HostType::F32 || type == HostType::F64;
  }
  int64_t numel() const;
  /// Element i as a double (ints converted).
  double real(int64_t i) const {
    return isFloat() ? reals[i] : double(ints[i]);
  }
};

/// Elements a folded tensor may have (the causal mask of a long sequence is
/// the largest); past it the import refuses the node by name.
constexpr int64_t kMaxFoldedElements = int64_t(1) << 26;

/// Whether ONNX type code `code` is one HostType names.
bool hostTypeOf(int code, HostType &type);
const char *hostTypeName(HostType type);
/// How messages name a node: "Cast node 'cast_3'", or for a node without a
/// name (graphs built by hand) "Cast node writing 'xb'", its first output.
std::string nodeLabel(const onnx::NodeProto &node);
/// "16 (BFLOAT16)": an ONNX type code and its name, for messages.
std::string onnxTypeString(int64_t code);

/// A TensorProto's value (raw_data or the typed fields; not external data).
/// Returns an error message, or "".
/// modelDir: where an external tensor's data file lies ("": refuse one).
std::string tensorFromProto(const onnx::TensorProto &proto, HostTensor &out,
                            const std::string &modelDir = "");

/// Whether foldNode knows `opType`.
bool canFold(const std::string &opType);

/// The outputs of `node` (op type `opType`, the model's opset `opset`) from
/// its inputs, all constant (an absent optional input is nullptr). Returns
/// an error message naming the node, or "".
std::string foldNode(const onnx::NodeProto &node, int64_t opset,
                     const std::vector<const HostTensor *> &inputs,
                     std::vector<HostTensor> &outputs);

/// ONNX's multidirectional broadcast of two shapes; false when they do not.
bool broadcastShapes(const std::vector<int64_t> &a,
                     const std::vector<int64_t> &b, std::vector<int64_t> &out);

/// Node's attribute KEY, or null.
const onnx::AttributeProto *findAttribute(const onnx::NodeProto &node,
                                          const char *key);

/// A list that moved from attribute KEY to input INDEX at opset SINCE
/// (Squeeze's and Unsqueeze's axes and Split's sizes at 13, ReduceSum's
/// axes at 13, ReduceMean's at 18). Before SINCE, reads the attribute into
/// Out (FromAttr: whether there was one) and refuses the input
/// (HasInput); from SINCE on, refuses the attribute, and the caller reads
/// the input. Returns why not, or "".
std::string listBeforeInput(const onnx::NodeProto &node, int64_t opset,
                            int64_t since, const char *key, bool hasInput,
                            bool &fromAttr, std::vector<int64_t> &out);

/// Slice before opset 10: starts and ends (required) and axes (optional)
/// are attributes, and the node reads one input. Returns why not, or "".
std::string sliceAttrs(const onnx::NodeProto &node, size_t inputs,
                       std::vector<int64_t> &starts, std::vector<int64_t> &ends,
                       std::vector<int64_t> &axes);

} // namespace onnximport
} // namespace weft

#endif // WEFT_FRONTENDS_ONNX_HOSTTENSOR_H
