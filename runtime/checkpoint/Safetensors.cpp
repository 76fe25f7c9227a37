//===- Safetensors.cpp - safetensors reader/writer ------------------------===//
#include "runtime/checkpoint/Safetensors.h"
#include "program/JsonDepth.h"

#include <nlohmann/json.hpp>

#include <algorithm>

#include <cstring>
#include <fstream>
#include <sstream>

using json = nlohmann::json;

namespace weft {

namespace {

size_t safeDTypeBytes(const std::string &T) {
  if (T == "F64" || T == "I64" || T == "U64")
    return 8;
  if (T == "F32" || T == "I32" || T == "U32")
    return 4;
  if (T == "F16" || T == "BF16" || T == "I16" || T == "U16")
    return 2;
  if (T == "I8" || T == "U8" || T == "BOOL" || T == "F8_E4M3" || T == "F8_E5M2")
    return 1;
  return 0;
}

float halfToFloat(uint16_t H) {
  uint32_t Sign = uint32_t(H & 0x8000) << 16;
  uint32_t Exp = (H >> 10) & 0x1f, Man = H & 0x3ff;
  uint32_t Bits;
  if (Exp == 0) {
    if (Man == 0) {
      Bits = Sign;
    } else { // subnormal: normalise
      int E = -1;
      do {
        ++E;
        Man <<= 1;
      } while (!(Man & 0x400));
      Bits = Sign | uint32_t(127 - 15 - E) << 23 | (Man & 0x3ff) << 13;
    }
  } else if (Exp == 31) {
    Bits = Sign | 0x7f800000u | Man << 13;
  } else {
    Bits = Sign | (Exp + 127 - 15) << 23 | Man << 13;
  }
  float F;
  std::memcpy(&F, &Bits, 4);
  return F;
}

template <typename Out>
void convertTo(const std::string &Type, const unsigned char *Src, size_t N,
               Out *Dst) {
  for (size_t I = 0; I < N; ++I) {
    if (Type == "F32") {
      float F;
      std::memcpy(&F, Src + 4 * I, 4);
      Dst[I] = Out(F);
    } else if (Type == "F64") {
      double D;
      std::memcpy(&D, Src + 8 * I, 8);
      Dst[I] = Out(D);
    } else if (Type == "F16") {
      uint16_t H = uint16_t(Src[2 * I] | Src[2 * I + 1] << 8);
      Dst[I] = Out(halfToFloat(H));
    } else { // BF16
      uint32_t Bits = uint32_t(Src[2 * I] | Src[2 * I + 1] << 8) << 16;
      float F;
      std::memcpy(&F, &Bits, 4);
      Dst[I] = Out(F);
    }
  }
}

} // namespace

Expected<SafetensorsFile> SafetensorsFile::read(const std::string &Path) {
  std::ifstream In(Path, std::ios::binary);
  if (!In)
    return Status::error("cannot open safetensors file '" + Path + "'");
  std::ostringstream SS;
  SS << In.rdbuf();
  return parse(SS.str(), Path);
}

Expected<SafetensorsFile> SafetensorsFile::parse(std::string B,
                                                 const std::string &What) {
  if (B.size() < 8)
    return Status::error(What + ": truncated safetensors file (" +
                         std::to_string(B.size()) + " bytes)");
  uint64_t HeaderLen = 0;
  for (int I = 7; I >= 0; --I)
    HeaderLen = HeaderLen << 8 | static_cast<unsigned char>(B[I]);
  if (HeaderLen > B.size() - 8)
    return Status::error(What + ": header length " + std::to_string(HeaderLen) +
                         " exceeds the file size " + std::to_string(B.size()));
  std::string Deep = jsonDepthError(
      std::string_view(B).substr(8, size_t(HeaderLen)), What + ": its header");
  if (!Deep.empty())
    return Status::error(Deep);
  json H = json::parse(B.begin() + 8, B.begin() + 8 + HeaderLen, nullptr,
                       /*allow_exceptions=*/false);
  if (H.is_discarded() || !H.is_object())
    return Status::error(What + ": malformed safetensors JSON header");
  SafetensorsFile F;
  F.DataStart = 8 + HeaderLen;
  size_t DataBytes = B.size() - F.DataStart;
  for (auto It = H.begin(); It != H.end(); ++It) {
    if (It.key() == "__metadata__")
      continue;
    const json &E = It.value();
    std::string Ctx = What + ": tensor '" + It.key() + "'";
    if (!E.is_object() || !E.contains("dtype") || !E["dtype"].is_string() ||
        !E.contains("shape") || !E["shape"].is_array() ||
        !E.contains("data_offsets") || !E["data_offsets"].is_array() ||
        E["data_offsets"].size() != 2)
      return Status::error(Ctx + " needs dtype, shape and data_offsets");
    SafeTensor T;
    T.Name = It.key();
    T.Type = E["dtype"].get<std::string>();
    for (const json &D : E["shape"]) {
      if (!D.is_number_unsigned())
        return Status::error(Ctx + " has a non-integer dimension");
      uint64_t Dim = D.get<uint64_t>();
      if (Dim > uint64_t(MaxNumElements))
        return Status::error(Ctx + " has a dimension " + std::to_string(Dim) +
                             " past 2^48");
      T.Dims.push_back(int64_t(Dim));
    }
    WEFT_RETURN_IF_ERROR(checkShapeSize(T.Dims, Ctx, /*AllowZero=*/true));
    const json &Off = E["data_offsets"];
    if (!Off[0].is_number_unsigned() || !Off[1].is_number_unsigned())
      return Status::error(Ctx + " has non-integer data_offsets");
    uint64_t Begin = Off[0].get<uint64_t>(), End = Off[1].get<uint64_t>();
    if (Begin > End || End > DataBytes)
      return Status::error(Ctx + " data_offsets [" + std::to_string(Begin) +
                           ", " + std::to_string(End) +
                           ") lie outside the data section of " +
                           std::to_string(DataBytes) + " bytes");
    size_t Elem = safeDTypeBytes(T.Type);
    if (Elem == 0)
      return Status::error(Ctx + " has unknown dtype '" + T.Type + "'");
    if (End - Begin != uint64_t(numElements(T.Dims)) * Elem)
      return Status::error(
          Ctx + " " + T.Type + " " + shapeString(T.Dims) + " needs " +
          std::to_string(numElements(T.Dims) * Elem) +
          " bytes, data_offsets give " + std::to_string(End - Begin));
    T.Offset = Begin;
    T.Bytes = End - Begin;
    F.Tensors.push_back(std::move(T));
  }
  // As the format requires (and the safetensors library checks): the
  // tensors tile the data section, no overlap, no hole. Two tensors sharing
  // bytes would otherwise load as aliases of each other.
  std::vector<const SafeTensor *> ByOffset;
  for (const SafeTensor &T : F.Tensors)
    ByOffset.push_back(&T);
  std::stable_sort(ByOffset.begin(), ByOffset.end(),
                   [](const SafeTensor *A, const SafeTensor *C) {
                     return A->Offset != C->Offset ? A->Offset < C->Offset
                                                   : A->Bytes < C->Bytes;
                   });
  size_t At = 0;
  for (const SafeTensor *T : ByOffset) {
    if (T->Offset != At)
      return Status::error(
          What + ": tensor '" + T->Name + "' data_offsets [" +
          std::to_string(T->Offset) + ", " +
          std::to_string(T->Offset + T->Bytes) +
          (T->Offset < At ? ") overlap" : ") leave a hole after") +
          " the bytes before them, which end at " + std::to_string(At));
    At += T->Bytes;
  }
  if (At != DataBytes)
    return Status::error(What + ": the tensors cover " + std::to_string(At) +
                         " of the data section's " + std::to_string(DataBytes) +
                         " bytes");
  F.Bytes = std::move(B);
  return F;
}

const SafeTensor *SafetensorsFile::find(const std::string &Name) const {
  for (const SafeTensor &T : Tensors)
    if (T.Name == Name)
      return &T;
  return nullptr;
}

Status SafetensorsFile::convert(const SafeTensor &T, DType To,
                                void *Out) const {
  if (T.Type != "F32" && T.Type != "F64" && T.Type != "F16" && T.Type != "BF16")
    return Status::error("tensor '" + T.Name + "' has dtype " + T.Type +
                         ", expected F32, F64, F16 or BF16");
  const auto *Src =
      reinterpret_cast<const unsigned char *>(Bytes.data() + DataStart) +
      T.Offset;
  size_t N = size_t(numElements(T.Dims));
  if (To == DType::F64)
    convertTo(T.Type, Src, N, static_cast<double *>(Out));
  else
    convertTo(T.Type, Src, N, static_cast<float *>(Out));
  return Status::success();
}

Status writeSafetensors(const std::string &Path,
                        const std::vector<TensorToWrite> &Tensors) {
  json H = json::object();
  uint64_t Offset = 0;
  for (const TensorToWrite &T : Tensors) {
    uint64_t Bytes = uint64_t(numElements(T.Dims)) * dtypeBytes(T.Type);
    H[T.Name] = {{"dtype", T.Type == DType::F64 ? "F64" : "F32"},
                 {"shape", T.Dims},
                 {"data_offsets", {Offset, Offset + Bytes}}};
    Offset += Bytes;
  }
  std::string Header = H.dump();
  while (Header.size() % 8 != 0)
    Header.push_back(' ');
  std::ofstream Out(Path, std::ios::binary | std::ios::trunc);
  if (!Out)
    return Status::error("cannot create '" + Path + "'");
  uint64_t Len = Header.size();
  char LenBytes[8];
  for (int I = 0; I < 8; ++I)
    LenBytes[I] = char((Len >> (8 * I)) & 0xff);
  Out.write(LenBytes, 8);
  Out.write(Header.data(), std::streamsize(Header.size()));
  for (const TensorToWrite &T : Tensors)
    Out.write(static_cast<const char *>(T.Data),
              std::streamsize(numElements(T.Dims) * dtypeBytes(T.Type)));
  Out.close();
  if (!Out)
    return Status::error("cannot write '" + Path + "'");
  return Status::success();
}

} // namespace weft
