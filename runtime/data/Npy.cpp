//===- Npy.cpp - Read and write NumPy .npy arrays -------------------------===//
//
// The format: "\x93NUMPY", major and minor version bytes, the header length
// (2 bytes little-endian in 1.0, 4 in 2.0 and 3.0), then a Python dict
// literal {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// padded with spaces to a multiple of 64 bytes and ending in '\n', then the
// data.
//
//===----------------------------------------------------------------------===//
#include "runtime/data/Npy.h"

#include <cstring>
#include <fstream>
#include <sstream>

namespace weft {
namespace {

size_t itemSize(const std::string &Descr) {
  if (Descr == "<i4" || Descr == "<u4" || Descr == "<f4")
    return 4;
  if (Descr == "<i8" || Descr == "<u8" || Descr == "<f8")
    return 8;
  if (Descr == "<u2" || Descr == "<i2")
    return 2;
  if (Descr == "|u1" || Descr == "|i1")
    return 1;
  return 0;
}

/// The quoted value after 'Key': in the header dict, or the raw text up to
/// the next top-level ',' or '}' (a tuple kept whole).
bool dictValue(const std::string &H, const std::string &Key, std::string &Out) {
  const std::string Quoted = "'" + Key + "':";
  size_t At = H.find(Quoted);
  if (At == std::string::npos)
    return false;
  At += Quoted.size();
  while (At < H.size() && H[At] == ' ')
    ++At;
  if (At >= H.size())
    return false;
  if (H[At] == '\'') {
    size_t End = H.find('\'', At + 1);
    if (End == std::string::npos)
      return false;
    Out = H.substr(At + 1, End - At - 1);
    return true;
  }
  size_t End = At;
  if (H[At] == '(') {
    End = H.find(')', At);
    if (End == std::string::npos)
      return false;
    ++End;
  } else {
    while (End < H.size() && H[End] != ',' && H[End] != '}')
      ++End;
  }
  Out = H.substr(At, End - At);
  return true;
}

/// "(2, 16)", "(5,)" or "()" to dims.
bool parseShape(const std::string &T, Shape &Dims) {
  if (T.size() < 2 || T.front() != '(' || T.back() != ')')
    return false;
  std::string Inner = T.substr(1, T.size() - 2);
  Dims.clear();
  size_t At = 0;
  while (At < Inner.size()) {
    while (At < Inner.size() && Inner[At] == ' ')
      ++At;
    if (At == Inner.size())
      break;
    int64_t D = 0;
    size_t Digits = 0;
    while (At < Inner.size() && Inner[At] >= '0' && Inner[At] <= '9') {
      if (D > (INT64_MAX - 9) / 10)
        return false;
      D = D * 10 + (Inner[At++] - '0');
      ++Digits;
    }
    if (!Digits)
      return false;
    Dims.push_back(D);
    while (At < Inner.size() && Inner[At] == ' ')
      ++At;
    if (At < Inner.size() && Inner[At] != ',')
      return false;
    ++At; // the comma
  }
  return true;
}

std::string shapeText(const Shape &Dims) {
  std::string S = "(";
  for (size_t I = 0; I < Dims.size(); ++I)
    S += std::to_string(Dims[I]) + (Dims.size() == 1 ? "," : "") +
         (I + 1 < Dims.size() ? ", " : "");
  return S + ")";
}

} // namespace

Expected<NpyArray> parseNpy(const std::string &B, const std::string &What) {
  if (B.size() < 10 || std::memcmp(B.data(), "\x93NUMPY", 6) != 0)
    return Status::error(What + ": not a .npy file (no \\x93NUMPY magic)");
  const unsigned Major = static_cast<unsigned char>(B[6]);
  size_t HeaderLen = 0, Start = 0;
  if (Major == 1) {
    HeaderLen = size_t(static_cast<unsigned char>(B[8])) |
                size_t(static_cast<unsigned char>(B[9])) << 8;
    Start = 10;
  } else if (Major == 2 || Major == 3) {
    if (B.size() < 12)
      return Status::error(What + ": truncated .npy header");
    for (int I = 3; I >= 0; --I)
      HeaderLen = HeaderLen << 8 | static_cast<unsigned char>(B[8 + I]);
    Start = 12;
  } else {
    return Status::error(What + ": .npy format version " +
                         std::to_string(Major) + " (expected 1, 2 or 3)");
  }
  if (HeaderLen > B.size() - Start)
    return Status::error(What + ": truncated .npy header (" +
                         std::to_string(HeaderLen) + " bytes declared, " +
                         std::to_string(B.size() - Start) + " present)");
  const std::string H = B.substr(Start, HeaderLen);
  NpyArray A;
  std::string Fortran, ShapeText;
  if (!dictValue(H, "descr", A.Descr) ||
      !dictValue(H, "fortran_order", Fortran) ||
      !dictValue(H, "shape", ShapeText))
    return Status::error(What +
                         ": .npy header is not numpy's dict of "
                         "descr, fortran_order and shape: " +
                         H);
  if (Fortran != "False")
    return Status::error(What + ": a Fortran-order array (fortran_order " +
                         Fortran +
                         "); save it C-ordered "
                         "(numpy.ascontiguousarray)");
  const size_t Item = itemSize(A.Descr);
  if (!Item)
    return Status::error(What + ": dtype '" + A.Descr +
                         "' (weft reads little-endian integers and floats: "
                         "|i1, |u1, <i2, <u2, <i4, <u4, <i8, <u8, <f4, <f8)");
  if (!parseShape(ShapeText, A.Dims))
    return Status::error(What + ": cannot read the .npy shape '" + ShapeText +
                         "'");
  size_t N = Item;
  for (int64_t D : A.Dims)
    if (__builtin_mul_overflow(N, size_t(D), &N))
      return Status::error(What + ": shape " + ShapeText +
                           " overflows a byte count");
  const size_t Have = B.size() - Start - HeaderLen;
  if (Have != N)
    return Status::error(What + ": shape " + ShapeText + " of " + A.Descr +
                         " needs " + std::to_string(N) +
                         " data bytes, the "
                         "file has " +
                         std::to_string(Have));
  A.Data.assign(B.begin() + std::ptrdiff_t(Start + HeaderLen), B.end());
  return A;
}

Expected<NpyArray> readNpy(const std::string &Path) {
  std::ifstream In(Path, std::ios::binary);
  if (!In)
    return Status::error("cannot open '" + Path + "'");
  std::ostringstream S;
  S << In.rdbuf();
  if (In.bad())
    return Status::error("cannot read '" + Path + "'");
  return parseNpy(S.str(), "'" + Path + "'");
}

Expected<std::vector<int32_t>> npyTokenIds(const NpyArray &A, const Shape &Want,
                                           int64_t Vocab,
                                           const std::string &What,
                                           bool AllowIgnored,
                                           const std::string &Bound) {
  if (A.Dims != Want)
    return Status::error(What + " has shape " + shapeText(A.Dims) +
                         ", the program reads token ids of shape " +
                         shapeText(Want) +
                         (Want.size() > 1 ? " [batch, seq]" : " [batch]"));
  const size_t Item = itemSize(A.Descr);
  if (!Item)
    return Status::error(What + ": dtype '" + A.Descr + "' is not an integer");
  if (A.Descr[1] == 'f')
    return Status::error(What + " holds " + A.Descr +
                         " floats; token ids are integers");
  const size_t N = A.Data.size() / Item;
  std::vector<int32_t> Ids(N);
  const bool Signed = A.Descr[1] == 'i';
  for (size_t I = 0; I < N; ++I) {
    uint64_t U = 0;
    std::memcpy(&U, A.Data.data() + I * Item, Item); // little-endian host
    int64_t V = int64_t(U);
    if (Signed && Item < 8 && (U >> (8 * Item - 1)) & 1)
      V = int64_t(U | ~uint64_t(0) << (8 * Item)); // sign-extend
    const bool Huge = !Signed && Item == 8 && U > uint64_t(INT64_MAX);
    // [row, column], or [row] for one label per sample.
    const int64_t Cols = Want.size() > 1 ? Want[1] : 1;
    if (Huge || ((V < 0 || V >= Vocab) && !(AllowIgnored && V == -100)))
      return Status::error(
          What + ": " + (Want.size() > 1 ? "id " : "label ") +
          (Huge ? std::to_string(U) : std::to_string(V)) + " at [" +
          std::to_string(int64_t(I) / Cols) +
          (Want.size() > 1 ? ", " + std::to_string(int64_t(I) % Cols) : "") +
          "] is outside " + Bound + " [0, " + std::to_string(Vocab) + ")" +
          (AllowIgnored ? " and is not -100 (ignored)" : ""));
    Ids[I] = int32_t(V);
  }
  return Ids;
}

Expected<std::vector<char>> npyFloats(const NpyArray &A, const Shape &Want,
                                      bool F64, const std::string &What) {
  if (A.Dims != Want)
    return Status::error(What + " has shape " + shapeText(A.Dims) +
                         ", the program's input is " + shapeText(Want));
  // float32 into an f64 program widens exactly; nothing is rounded.
  const bool Is32 = A.Descr == "<f4", Is64 = A.Descr == "<f8";
  if (!Is32 && !(Is64 && F64))
    return Status::error(
        What + " holds '" + A.Descr + "', the program's input is " +
        (F64 ? "float64 (give <f8, or <f4 to widen)"
             : "float32 (give <f4; weft does not round float64 to it)"));
  if (!F64 || Is64)
    return A.Data;
  const size_t N = A.Data.size() / 4;
  std::vector<char> Out(N * 8);
  for (size_t I = 0; I < N; ++I) {
    float V;
    std::memcpy(&V, A.Data.data() + I * 4, 4);
    const double D = V;
    std::memcpy(Out.data() + I * 8, &D, 8);
  }
  return Out;
}

std::string encodeNpy(const std::string &Descr, const Shape &Dims,
                      const void *Data, size_t Bytes) {
  std::string H = "{'descr': '" + Descr +
                  "', 'fortran_order': False, 'shape': " + shapeText(Dims) +
                  ", }";
  // Magic (6), version (2) and length (2), then the dict padded to 64.
  const size_t Total = (10 + H.size() + 1 + 63) / 64 * 64;
  H.append(Total - 10 - H.size() - 1, ' ');
  H += '\n';
  std::string Out("\x93NUMPY\x01\x00", 8);
  Out += char(H.size() & 0xff);
  Out += char(H.size() >> 8);
  Out += H;
  Out.append(static_cast<const char *>(Data), Bytes);
  return Out;
}

} // namespace weft
