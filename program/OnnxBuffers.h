//===- OnnxBuffers.h - ONNX initializers that are not parameters -*- C++
//-*-===//
//
// A torch export writes buffers as initializers too. The ones named here
// are constants, not trained: the import folds them (weft-compile) and the
// weight reader skips them (weft-run --load model.onnx). Today: transformers'
// rotary `inv_freq` (a non-persistent buffer; weft.rope computes it from
// theta, and weft-raise-onnx checks the tables it made against that).
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_PROGRAM_ONNXBUFFERS_H
#define WEFT_PROGRAM_ONNXBUFFERS_H

#include <string>

namespace weft {

inline bool isOnnxBuffer(const std::string &name) {
  static const std::string kInvFreq = "inv_freq";
  return name == kInvFreq ||
         (name.size() > kInvFreq.size() &&
          name.compare(name.size() - kInvFreq.size() - 1, std::string::npos,
                       "." + kInvFreq) == 0);
}

} // namespace weft

#endif // WEFT_PROGRAM_ONNXBUFFERS_H
