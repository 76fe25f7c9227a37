//===- Base64.cpp - RFC 4648 base64 ---------------------------------------===//
#include "program/Base64.h"

#include <cstdint>

namespace weft {

namespace {
constexpr char Alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int valueOf(char C) {
  if (C >= 'A' && C <= 'Z')
    return C - 'A';
  if (C >= 'a' && C <= 'z')
    return C - 'a' + 26;
  if (C >= '0' && C <= '9')
    return C - '0' + 52;
  return C == '+' ? 62 : C == '/' ? 63 : -1;
}
} // namespace

std::string base64Encode(const void *Data, size_t Size) {
  const auto *P = static_cast<const unsigned char *>(Data);
  std::string Out;
  Out.reserve((Size + 2) / 3 * 4);
  for (size_t I = 0; I < Size; I += 3) {
    uint32_t W = uint32_t(P[I]) << 16;
    if (I + 1 < Size)
      W |= uint32_t(P[I + 1]) << 8;
    if (I + 2 < Size)
      W |= P[I + 2];
    Out += Alphabet[(W >> 18) & 63];
    Out += Alphabet[(W >> 12) & 63];
    Out += I + 1 < Size ? Alphabet[(W >> 6) & 63] : '=';
    Out += I + 2 < Size ? Alphabet[W & 63] : '=';
  }
  return Out;
}

std::optional<std::vector<char>> base64Decode(std::string_view Text) {
  if (Text.size() % 4 != 0)
    return std::nullopt;
  std::vector<char> Out;
  Out.reserve(Text.size() / 4 * 3);
  for (size_t I = 0; I < Text.size(); I += 4) {
    const bool Last = I + 4 == Text.size();
    int Pad = 0;
    if (Last)
      Pad = Text[I + 3] != '=' ? 0 : Text[I + 2] != '=' ? 1 : 2;
    uint32_t W = 0;
    for (int J = 0; J < 4; ++J) {
      int V = J >= 4 - Pad ? 0 : valueOf(Text[I + size_t(J)]);
      if (V < 0)
        return std::nullopt; // outside the alphabet, or '=' mid-text
      W = W << 6 | uint32_t(V);
    }
    // The bits padding drops must be zero (one encoding per byte string).
    if ((Pad == 1 && (W & 0xff)) || (Pad == 2 && (W & 0xffff)))
      return std::nullopt;
    Out.push_back(char(W >> 16));
    if (Pad < 2)
      Out.push_back(char(W >> 8 & 0xff));
    if (Pad < 1)
      Out.push_back(char(W & 0xff));
  }
  return Out;
}

} // namespace weft
