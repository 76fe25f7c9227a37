//===- Base64.h - RFC 4648 base64, for a program's constant tensors -------===//
//
// A constant buffer (format version 10) carries its elements' little-endian
// bytes as standard base64 with padding: exact, where JSON numbers cannot
// hold an infinity or a NaN (an attention mask's -inf).
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_PROGRAM_BASE64_H
#define WEFT_PROGRAM_BASE64_H

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace weft {

std::string base64Encode(const void *Data, size_t Size);

/// The bytes of Text, or nullopt if it is not canonical base64 (a length
/// that is not a multiple of 4, a character outside the alphabet, padding
/// anywhere but the end, or nonzero bits in the padding).
std::optional<std::vector<char>> base64Decode(std::string_view Text);

} // namespace weft

#endif // WEFT_PROGRAM_BASE64_H
