//===- TwinTables.h - Initializers holding the same values ------*- C++ -*-===//
//
// torch.onnx's TorchScript exporter writes a tied model's LM head as a second
// initializer holding the token embedding's values (often transposed, as
// `onnx::MatMul_<n>`). Imported as two parameters, it trains an untied model
// that starts where the tied one does: the import asks which is meant.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_FRONTENDS_ONNX_TWINTABLES_H
#define WEFT_FRONTENDS_ONNX_TWINTABLES_H

#include <string>

namespace onnx {
class TensorProto;
} // namespace onnx

namespace weft {
namespace onnximport {

/// How `other` holds the values of the 2-D float weight `table`.
enum class Twin { None, Same, Transposed };

/// Compares two float weights (f32 or f64; raw_data, the typed field or
/// external data beside the model) bit for bit, as stored and as `table`
/// transposed. Returns an error message ("" on success) when a value cannot
/// be read.
std::string twinOf(const onnx::TensorProto &table,
                   const onnx::TensorProto &other, const std::string &modelDir,
                   Twin &result);

} // namespace onnximport
} // namespace weft

#endif // WEFT_FRONTENDS_ONNX_TWINTABLES_H
