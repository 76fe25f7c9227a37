//===- TwinTables.cpp - Initializers holding the same values -------------===//
#include "frontends/onnx/TwinTables.h"
#include "program/OnnxExternalData.h"

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <cstring>

namespace weft {
namespace onnximport {
namespace {

// A float weight's values as stored: `width` bytes each.
struct StoredFloats {
  std::string bytes;
  int width = 4;

  // Element i's bits (f32 widened exactly to f64 keeps equality bitwise).
  double at(uint64_t i) const {
    if (width == 8) {
      double d;
      std::memcpy(&d, bytes.data() + i * 8, 8);
      return d;
    }
    float f;
    std::memcpy(&f, bytes.data() + i * 4, 4);
    return f;
  }
};

std::string read(const onnx::TensorProto &t, const std::string &modelDir,
                 StoredFloats &out) {
  const bool f64 = t.data_type() == onnx::TensorProto_DataType_DOUBLE;
  out.width = f64 ? 8 : 4;
  uint64_t numel = 1;
  for (int64_t d : t.dims())
    numel *= uint64_t(d); // sizes checked when the initializer was read
  const std::string what = "initializer '" + t.name() + "'";
  if (t.data_location() == onnx::TensorProto_DataLocation_EXTERNAL)
    return readOnnxExternalData(t, numel * out.width, modelDir, what,
                                &out.bytes);
  if (t.has_raw_data()) {
    out.bytes = t.raw_data();
    return "";
  }
  out.bytes.resize(numel * out.width);
  if (f64)
    std::memcpy(out.bytes.data(), t.double_data().data(), out.bytes.size());
  else
    std::memcpy(out.bytes.data(), t.float_data().data(), out.bytes.size());
  return "";
}

bool bitEqual(double a, double b) { return std::memcmp(&a, &b, 8) == 0; }
} // namespace

std::string twinOf(const onnx::TensorProto &table,
                   const onnx::TensorProto &other, const std::string &modelDir,
                   Twin &result) {
  result = Twin::None;
  if (table.dims_size() != 2 || other.dims_size() != 2 ||
      table.data_type() != other.data_type())
    return "";
  const uint64_t rows = uint64_t(table.dims(0)), cols = uint64_t(table.dims(1));
  const bool same =
      uint64_t(other.dims(0)) == rows && uint64_t(other.dims(1)) == cols;
  const bool transposed =
      uint64_t(other.dims(0)) == cols && uint64_t(other.dims(1)) == rows;
  if (!same && !transposed)
    return "";
  StoredFloats a, b;
  if (std::string e = read(table, modelDir, a); !e.empty())
    return e;
  if (std::string e = read(other, modelDir, b); !e.empty())
    return e;
  if (same && a.bytes == b.bytes) {
    result = Twin::Same;
    return "";
  }
  if (!transposed)
    return "";
  for (uint64_t r = 0; r < rows; ++r)
    for (uint64_t c = 0; c < cols; ++c)
      if (!bitEqual(a.at(r * cols + c), b.at(c * rows + r)))
        return "";
  result = Twin::Transposed;
  return "";
}

} // namespace onnximport
} // namespace weft
