//===- Npy.h - Read and write NumPy .npy arrays ------------------*- C++
//-*-===//
//
// The inputs and outputs of a forward-only program (weft-run --input
// tokens.npy --output logits.npy, or --input NAME=FILE for named tensors):
// NumPy's own format, versions 1.0-3.0, C order, little-endian, so numpy.load /
// numpy.save read and write them.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_RUNTIME_NPY_H
#define WEFT_RUNTIME_NPY_H

#include "program/Program.h"
#include "program/Status.h"

#include <string>
#include <vector>

namespace weft {

struct NpyArray {
  std::string Descr; // numpy's dtype string: "<i4", "<i8", "<f4", "<f8", ...
  Shape Dims;
  std::vector<char> Data; // numel * itemsize bytes, C order
};

/// Parses a whole .npy file image; What names it in messages. Refuses a
/// Fortran-order or big-endian array, a header that is not numpy's dict,
/// and data whose size is not the shape's (checked for overflow).
Expected<NpyArray> parseNpy(const std::string &Bytes, const std::string &What);
/// Reads Path and parses it.
Expected<NpyArray> readNpy(const std::string &Path);

/// Token ids from a .npy of integers (any size, signed or not), as int32,
/// checked: shape exactly Want, every id in [0, Vocab) (or -100, an ignored
/// target, with AllowIgnored). Bound names the range in messages (labels
/// of a classifier are bounded by its classes).
Expected<std::vector<int32_t>>
npyTokenIds(const NpyArray &A, const Shape &Want, int64_t Vocab,
            const std::string &What, bool AllowIgnored = false,
            const std::string &Bound = "the vocabulary");

/// A tensor input's bytes (format version 8) from a .npy of floats, checked:
/// shape exactly Want; float32 for an f32 program, float32 (widened) or
/// float64 for an f64 one.
Expected<std::vector<char>> npyFloats(const NpyArray &A, const Shape &Want,
                                      bool F64, const std::string &What);

/// The image of a .npy file (version 1.0) of Dims holding Data, whose dtype
/// is Descr ("<f4" or "<f8").
std::string encodeNpy(const std::string &Descr, const Shape &Dims,
                      const void *Data, size_t Bytes);

} // namespace weft

#endif // WEFT_RUNTIME_NPY_H
