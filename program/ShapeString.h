//===- ShapeString.h - the one shape printer --------------------*- C++ -*-===//
#ifndef WEFT_PROGRAM_SHAPESTRING_H
#define WEFT_PROGRAM_SHAPESTRING_H

#include <cstddef>
#include <cstdint>
#include <string>

namespace weft {

/// The one shape printer: "[2,8]" (the program listing's compact form) or,
/// Spaced, "[2, 8]" (the compiler's diagnostics).
std::string shapeString(const int64_t *Dims, size_t Count, bool Spaced);

} // namespace weft

#endif // WEFT_PROGRAM_SHAPESTRING_H
