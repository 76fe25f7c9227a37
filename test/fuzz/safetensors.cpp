//===- safetensors.cpp - Fuzz the safetensors parser ----------------------===//
//
// A file that parses has every tensor converted to f32 and f64, as a
// checkpoint or --init-from load would.
//
//===----------------------------------------------------------------------===//
#include "runtime/checkpoint/Safetensors.h"

#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *Data, size_t Size) {
  weft::Expected<weft::SafetensorsFile> F = weft::SafetensorsFile::parse(
      std::string(reinterpret_cast<const char *>(Data), Size), "fuzz");
  if (!F.ok())
    return 0;
  for (const weft::SafeTensor &T : F->tensors()) {
    size_t N = T.Bytes ? T.Bytes : 1; // at least numel elements of 1 byte
    std::vector<double> Out(N);
    (void)F->convert(T, weft::DType::F64, Out.data());
    (void)F->convert(T, weft::DType::F32, Out.data());
  }
  return 0;
}
