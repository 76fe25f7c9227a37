//===- onnx.cpp - Fuzz the ONNX initializer reader ------------------------===//
//
// `weft-run --load model.onnx`: a ModelProto's initializers as weights. A
// file that parses has every tensor converted to f32 and f64, as the
// loader would. The model's folder does not exist, so external data is
// never read.
//
//===----------------------------------------------------------------------===//
#include "runtime/checkpoint/OnnxWeights.h"

#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *Data, size_t Size) {
  weft::Expected<weft::SafetensorsFile> F = weft::parseOnnxInitializers(
      std::string(reinterpret_cast<const char *>(Data), Size),
      "/nonexistent-weft-fuzz/model.onnx");
  if (!F.ok())
    return 0;
  for (const weft::SafeTensor &T : F->tensors()) {
    std::vector<double> Out(size_t(weft::numElements(T.Dims)) + 1);
    (void)F->convert(T, weft::DType::F64, Out.data());
    (void)F->convert(T, weft::DType::F32, Out.data());
  }
  return 0;
}
