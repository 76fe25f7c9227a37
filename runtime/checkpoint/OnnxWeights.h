//===- OnnxWeights.h - an ONNX model's initializers as weights --*- C++ -*-===//
//
// `weft-run --load model.onnx` (issue 13): the initializers of an ONNX
// ModelProto, by name, as a weight source. They become an in-memory
// safetensors file, so the loader treats them as any checkpoint: names
// with or without "transformer.", sharded placement on any mesh, unused
// tensors refused by name, a tied lm_head equal to the embedding accepted.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_RUNTIME_ONNXWEIGHTS_H
#define WEFT_RUNTIME_ONNXWEIGHTS_H

#include "runtime/checkpoint/Safetensors.h"

namespace weft {

/// The float initializers (FLOAT, DOUBLE, FLOAT16, BFLOAT16; raw_data,
/// the typed repeated fields, or external data files beside the model) of
/// the ONNX model at Path. Initializers of other types (integer shape
/// constants, boolean masks) hold no weights and are left out. Errors name
/// the file and the initializer: a file that is not a ModelProto, a
/// tensor whose bytes do not match its shape, external data out of range,
/// a sparse initializer.
Expected<SafetensorsFile> readOnnxInitializers(const std::string &Path);

/// The same for a model's bytes; Path names it in errors, and its folder
/// holds any external data files.
Expected<SafetensorsFile> parseOnnxInitializers(const std::string &Bytes,
                                                const std::string &Path);

} // namespace weft

#endif // WEFT_RUNTIME_ONNXWEIGHTS_H
