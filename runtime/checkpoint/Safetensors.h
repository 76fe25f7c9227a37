//===- Safetensors.h - Read and write safetensors files --------*- C++ -*-===//
#ifndef WEFT_RUNTIME_SAFETENSORS_H
#define WEFT_RUNTIME_SAFETENSORS_H

#include "program/Program.h"
#include "program/Status.h"

#include <string>
#include <vector>

namespace weft {

struct SafeTensor {
  std::string Name;
  std::string Type; // safetensors dtype: F32, F64, F16, BF16, ...
  Shape Dims;
  size_t Offset = 0; // into the data section
  size_t Bytes = 0;
};

/// A whole safetensors file in memory, with its header validated (every
/// tensor's byte range inside the file and matching its shape and dtype).
class SafetensorsFile {
public:
  static Expected<SafetensorsFile> read(const std::string &Path);
  static Expected<SafetensorsFile> parse(std::string FileBytes,
                                         const std::string &What);
  const std::vector<SafeTensor> &tensors() const { return Tensors; }
  const SafeTensor *find(const std::string &Name) const;
  /// Converts a F32/F64/F16/BF16 tensor to Out (f32 or f64, numel elements).
  Status convert(const SafeTensor &T, DType To, void *Out) const;

private:
  std::string Bytes;
  size_t DataStart = 0;
  std::vector<SafeTensor> Tensors;
};

struct TensorToWrite {
  std::string Name;
  DType Type; // F32 or F64
  Shape Dims;
  const void *Data;
};

/// Writes a safetensors file (header padded to 8 bytes).
Status writeSafetensors(const std::string &Path,
                        const std::vector<TensorToWrite> &Tensors);

} // namespace weft

#endif // WEFT_RUNTIME_SAFETENSORS_H
