//===- HostPlans.h - The CUDA backend's decisions, free of CUDA -*- C++ -*-===//
//
// What the CUDA backend decides on the host, as plain functions that the
// unit tests check on any machine (test/unit/CudaHostPlanTest.cpp): which
// dtype an instruction's kernel runs in, how a row-major GEMM maps onto
// column-major cuBLASLt, and how an overlapping device copy is cut into
// pieces that cudaMemcpy may take.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_RUNTIME_CUDA_HOSTPLANS_H
#define WEFT_RUNTIME_CUDA_HOSTPLANS_H

#include "runtime/Backend.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace weft {

/// How an instruction runs on the CUDA backend.
struct KernelChoice {
  enum Kind {
    Bytes,  // moves bytes whatever the dtype (copy, pack, split, cast, ...)
    Native, // its kernel in dtype Type (f32, f64 or bf16)
    Widen,  // bf16 operands widened to f32 scratch, the f32 kernel
  } How = Native;
  DType Type = DType::F32;
};

/// Whether operand K (of the outputs when IsOut) of Op is a cross entropy's
/// loss, the loss's gradient or statistics: f32 beside bf16 logits.
bool lossTypedOperand(OpKind Op, bool IsOut, size_t K);

/// The choice for I, or an error naming it when its dtypes mix in a way no
/// kernel takes (anything beyond f32 and bf16).
Expected<KernelChoice> chooseKernel(const BoundInstruction &I);

/// C[M,N] = op(A) op(B) row-major as one column-major GEMM: C^T = op(B)^T
/// op(A)^T. "First" is the column-major GEMM's first operand (our B),
/// "Second" its second (our A); Rows/Cols are each operand's stored
/// column-major shape and Ld its leading dimension.
struct ColumnMajorGemm {
  bool TransFirst = false, TransSecond = false;
  int64_t M = 0, N = 0, K = 0; // of the column-major product: C^T [N, M]
  int64_t FirstRows = 0, FirstCols = 0, SecondRows = 0, SecondCols = 0;
  int64_t LdFirst = 0, LdSecond = 0, LdC = 0;
};
ColumnMajorGemm columnMajorGemm(int64_t M, int64_t N, int64_t K, bool TransA,
                                bool TransB);

/// Pieces of a memmove of Bytes from Src to Dst (device addresses) such
/// that no piece's source overlaps its destination and copying them in
/// order equals memmove.
struct CopyPiece {
  size_t Offset, Bytes;
};
std::vector<CopyPiece> memmovePieces(uintptr_t Dst, uintptr_t Src,
                                     size_t Bytes);

} // namespace weft

#endif // WEFT_RUNTIME_CUDA_HOSTPLANS_H
