//===- OnnxWeights.cpp - an ONNX model's initializers as weights ----------===//
#include "runtime/checkpoint/OnnxWeights.h"
#include "program/OnnxBuffers.h"
#include "program/OnnxExternalData.h"

#ifdef WEFT_HAVE_ONNX
#include "program/TorchExportSignature.h"

#include <google/protobuf/io/coded_stream.h>
#include <onnx/onnx_pb.h>
#endif
#include <nlohmann/json.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <type_traits>

namespace weft {

#ifndef WEFT_HAVE_ONNX
Expected<SafetensorsFile> parseOnnxInitializers(const std::string &,
                                                const std::string &Path) {
  return Status::error("cannot read '" + Path +
                       "': this weft-run was built without ONNX support "
                       "(libonnx-dev and libprotobuf-dev)");
}

Expected<SafetensorsFile> readOnnxInitializers(const std::string &Path) {
  return parseOnnxInitializers("", Path);
}
#else
namespace {

namespace fs = std::filesystem;

struct Dtype {
  const char *Safetensors;
  size_t Bytes;
};

// Whether S is well-formed UTF-8 (no overlong forms, surrogates or code
// points past U+10FFFF): a name must be, to become a safetensors (JSON)
// header key. ONNX's proto2 strings are not checked by protobuf.
bool validUtf8(const std::string &S) {
  const auto *P = reinterpret_cast<const unsigned char *>(S.data());
  const size_t N = S.size();
  for (size_t I = 0; I < N;) {
    unsigned char C = P[I];
    if (C < 0x80) {
      ++I;
      continue;
    }
    size_t Len = C >= 0xF0 ? 4 : C >= 0xE0 ? 3 : C >= 0xC2 ? 2 : 0;
    if (Len == 0 || C > 0xF4 || I + Len > N)
      return false;
    uint32_t Cp = C & (0xFF >> (Len + 1));
    for (size_t K = 1; K < Len; ++K) {
      if ((P[I + K] & 0xC0) != 0x80)
        return false;
      Cp = Cp << 6 | (P[I + K] & 0x3F);
    }
    if ((Len == 3 && Cp < 0x800) || (Len == 4 && Cp < 0x10000) ||
        (Cp >= 0xD800 && Cp <= 0xDFFF) || Cp > 0x10FFFF)
      return false;
    I += Len;
  }
  return true;
}

// The float types a weight can have; others hold no weights.
bool floatType(int T, Dtype &D) {
  switch (T) {
  case onnx::TensorProto_DataType_FLOAT:
    D = {"F32", 4};
    return true;
  case onnx::TensorProto_DataType_DOUBLE:
    D = {"F64", 8};
    return true;
  case onnx::TensorProto_DataType_FLOAT16:
    D = {"F16", 2};
    return true;
  case onnx::TensorProto_DataType_BFLOAT16:
    D = {"BF16", 2};
    return true;
  default:
    return false;
  }
}

// The initializer's bytes (little-endian, as safetensors stores them), from
// raw_data, the typed repeated field, or an external data file.
Status tensorBytes(const onnx::TensorProto &T, const Dtype &D, uint64_t Numel,
                   const fs::path &ModelDir, const std::string &What,
                   std::string &Out) {
  const uint64_t Want = Numel * D.Bytes;
  if (T.data_location() == onnx::TensorProto_DataLocation_EXTERNAL) {
    std::string E = readOnnxExternalData(T, Want, ModelDir, What, &Out);
    return E.empty() ? Status::success() : Status::error(E);
  }
  if (T.has_raw_data()) {
    if (T.raw_data().size() != Want)
      return Status::error(
          What + ": raw_data holds " + std::to_string(T.raw_data().size()) +
          " bytes, expected " + std::to_string(Want) + " for its shape");
    Out = T.raw_data();
    return Status::success();
  }
  // The typed fields (x86-64 is little-endian, as safetensors).
  auto fromField = [&](const auto &Field, size_t ElemBytes) -> Status {
    if (uint64_t(Field.size()) != Numel)
      return Status::error(What + ": holds " + std::to_string(Field.size()) +
                           " values, expected " + std::to_string(Numel) +
                           " for its shape");
    Out.resize(size_t(Want));
    for (int I = 0; I < Field.size(); ++I) {
      auto V = Field.Get(I);
      // A 16-bit float's bits fill the low half of its int32 entry.
      if constexpr (std::is_same_v<decltype(V), int32_t>)
        if (V < 0 || V > 0xFFFF)
          return Status::error(What + ": int32_data[" + std::to_string(I) +
                               "] = " + std::to_string(V) +
                               " is not the 16 bits of a half float");
      std::memcpy(Out.data() + size_t(I) * ElemBytes, &V, ElemBytes);
    }
    return Status::success();
  };
  switch (T.data_type()) {
  case onnx::TensorProto_DataType_FLOAT:
    return fromField(T.float_data(), 4);
  case onnx::TensorProto_DataType_DOUBLE:
    return fromField(T.double_data(), 8);
  default: // FLOAT16, BFLOAT16: each 16 bits in an int32_data entry
    return fromField(T.int32_data(), 2);
  }
}

} // namespace

Expected<SafetensorsFile> readOnnxInitializers(const std::string &Path) {
  std::ifstream In(Path, std::ios::binary);
  if (!In)
    return Status::error("cannot open ONNX model '" + Path + "'");
  std::ostringstream SS;
  SS << In.rdbuf();
  return parseOnnxInitializers(SS.str(), Path);
}

Expected<SafetensorsFile> parseOnnxInitializers(const std::string &Bytes,
                                                const std::string &Path) {
  onnx::ModelProto Model;
  google::protobuf::io::CodedInputStream Stream(
      reinterpret_cast<const uint8_t *>(Bytes.data()),
      int(std::min<size_t>(Bytes.size(), size_t(INT32_MAX))));
  Stream.SetTotalBytesLimit(std::numeric_limits<int>::max());
  if (Bytes.size() > size_t(INT32_MAX) ||
      !Model.ParseFromCodedStream(&Stream) || !Stream.ConsumedEntireMessage())
    return Status::error(
        "'" + Path + "' is not an ONNX model: its " +
        std::to_string(Bytes.size()) +
        " bytes do not parse as a ModelProto (truncated, or another "
        "format; models over 2 GB keep their weights as external data)");
  const onnx::GraphProto &G = Model.graph();
  if (G.sparse_initializer_size() > 0)
    return Status::error("ONNX model '" + Path + "': sparse initializer '" +
                         G.sparse_initializer(0).values().name() +
                         "' is not supported as a weight");

  const fs::path ModelDir = fs::path(Path).parent_path();
  nlohmann::json Header = nlohmann::json::object();
  std::string Data;
  // What the compiler folded: integer and boolean constants, and what a
  // torch export's signature does not call a PARAMETER.
  const TorchExportSignature Signature =
      torchExportSignature<onnx::GraphProto, onnx::StringStringEntryProto>(G);
  for (const onnx::TensorProto &T : G.initializer()) {
    const std::string What =
        "ONNX model '" + Path + "': initializer '" + T.name() + "'";
    Dtype D{};
    if (!floatType(T.data_type(), D) || isOnnxBuffer(T.name()) ||
        !Signature.isWeight(T.name()))
      continue; // no weights
    if (T.name().empty())
      return Status::error("ONNX model '" + Path +
                           "': a float initializer has no name");
    if (!validUtf8(T.name()))
      return Status::error("ONNX model '" + Path +
                           "': an initializer's name is not valid UTF-8");
    if (Header.contains(T.name()))
      return Status::error(What + " appears twice");
    if (T.has_segment())
      return Status::error(What + " is segmented, which is not supported");
    Shape Dims;
    uint64_t Numel = 1;
    for (int64_t N : T.dims()) {
      if (N < 0 || N > MaxNumElements ||
          (N > 0 && Numel > uint64_t(MaxNumElements) / uint64_t(N)))
        return Status::error(What +
                             " has dims beyond 2^48 elements or a "
                             "negative dim (" +
                             std::to_string(N) + ")");
      Numel *= uint64_t(N);
      Dims.push_back(N);
    }
    std::string Bytes;
    WEFT_RETURN_IF_ERROR(tensorBytes(T, D, Numel, ModelDir, What, Bytes));
    Header[T.name()] = {
        {"dtype", D.Safetensors},
        {"shape", Dims},
        {"data_offsets", {Data.size(), Data.size() + Bytes.size()}}};
    Data += Bytes;
  }
  // The safetensors layout: 8-byte header length, header, data.
  std::string H = Header.dump();
  while (H.size() % 8 != 0)
    H.push_back(' ');
  std::string File(8, '\0');
  uint64_t Len = H.size();
  for (int I = 0; I < 8; ++I)
    File[size_t(I)] = char((Len >> (8 * I)) & 0xff);
  File += H;
  File += Data;
  return SafetensorsFile::parse(std::move(File), Path);
}
#endif

} // namespace weft
