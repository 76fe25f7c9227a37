//===- OnnxExternalData.h - an ONNX tensor's bytes from its data file -*- C++
//-*-===//
//
// torch.onnx.export keeps large initializers in a file beside the model
// (`external_data`: location, offset, length). Both readers of initializers
// use this: the import, for the integer buffers it folds (position ids),
// and the weight reader (weft-run --load model.onnx). Header-only: each
// includer already links libonnx.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_PROGRAM_ONNXEXTERNALDATA_H
#define WEFT_PROGRAM_ONNXEXTERNALDATA_H

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace weft {

/// Reads the Want bytes an external tensor stores into *Out (or, with Out
/// null, checks only that they are there: weft-compile's check of the
/// weights it does not read). Returns "" or the error, starting with What.
/// The location must be a file beside the model (in ModelDir): no absolute
/// path, no "..".
template <typename TensorProto>
std::string readOnnxExternalData(const TensorProto &T, uint64_t Want,
                                 const std::filesystem::path &ModelDir,
                                 const std::string &What, std::string *Out) {
  std::string Location;
  uint64_t Offset = 0, Length = Want;
  bool HasLength = false;
  for (const auto &KV : T.external_data()) {
    const std::string &K = KV.key(), &V = KV.value();
    char *End = nullptr;
    errno = 0;
    unsigned long long N = std::strtoull(V.c_str(), &End, 10);
    bool Number = !V.empty() && *End == 0 && errno == 0 && V[0] != '-';
    if (K == "location")
      Location = V;
    else if ((K == "offset" || K == "length") && !Number)
      return What + ": external_data " + K + " '" + V + "' is not a byte count";
    else if (K == "offset")
      Offset = N;
    else if (K == "length")
      Length = N, HasLength = true;
  }
  std::filesystem::path File(Location);
  if (Location.empty() || File.is_absolute() ||
      File.lexically_normal().string().rfind("..", 0) == 0)
    return What + ": external_data location '" + Location +
           "' must be a file beside the model";
  if (HasLength && Length != Want)
    return What + ": external_data length " + std::to_string(Length) +
           ", expected " + std::to_string(Want) + " bytes for its shape";
  std::ifstream In(ModelDir / File, std::ios::binary);
  if (!In)
    return What + ": cannot open its external data file '" +
           (ModelDir / File).string() + "'";
  In.seekg(0, std::ios::end);
  const uint64_t Size = uint64_t(In.tellg());
  if (Offset > Size || Want > Size - Offset)
    return What + ": external data bytes [" + std::to_string(Offset) + ", " +
           std::to_string(Offset + Want) + ") past the end of '" + Location +
           "' (" + std::to_string(Size) + " bytes)";
  if (!Out)
    return "";
  Out->resize(size_t(Want));
  In.seekg(std::streamoff(Offset));
  In.read(Out->data(), std::streamsize(Want));
  return In ? "" : What + ": cannot read its external data";
}

} // namespace weft

#endif // WEFT_PROGRAM_ONNXEXTERNALDATA_H
