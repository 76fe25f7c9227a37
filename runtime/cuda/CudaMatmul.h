//===- CudaMatmul.h - Row-major GEMMs on cuBLASLt ---------------*- C++ -*-===//
//
// C[M,N] = op(A) op(B), row-major, as cpu::matmul. cuBLASLt is column-major:
// a row-major X is the column-major X^T, so C^T = op(B)^T op(A)^T is one
// column-major GEMM with the operands swapped. A plan (descriptors and the
// heuristic's algorithm) is made once per instruction at load.
// f32 computes in f32 (CUBLAS_COMPUTE_32F: no TF32, so a GPU run agrees
// with the CPU to f32's rounding), f64 in f64, bf16 inputs and output with
// f32 accumulation.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_RUNTIME_CUDA_CUDAMATMUL_H
#define WEFT_RUNTIME_CUDA_CUDAMATMUL_H

#include "program/Program.h"
#include "program/Status.h"

#include <cublasLt.h>

#include <cstdint>
#include <memory>

namespace weft {

struct GemmShape {
  int64_t M = 0, N = 0, K = 0;
  bool TransA = false, TransB = false;
  DType Type = DType::F32; // of A, B and C
};

class CudaMatmulPlan {
public:
  /// Descriptors for Shape and the first algorithm the heuristic offers
  /// within WorkspaceBytes.
  static Expected<std::unique_ptr<CudaMatmulPlan>>
  create(cublasLtHandle_t Handle, const GemmShape &Shape,
         size_t WorkspaceBytes);
  ~CudaMatmulPlan();
  Status run(cublasLtHandle_t Handle, const void *A, const void *B, void *C,
             void *Workspace, size_t WorkspaceBytes, cudaStream_t Stream) const;

private:
  CudaMatmulPlan() = default;
  GemmShape Shape;
  cublasLtMatmulDesc_t Desc = nullptr;
  cublasLtMatrixLayout_t LayoutA = nullptr, LayoutB = nullptr,
                         LayoutC = nullptr;
  cublasLtMatmulAlgo_t Algo{};
};

/// "what: CUBLAS_STATUS_X", or success.
Status cublasStatus(cublasStatus_t S, const char *What);

} // namespace weft

#endif // WEFT_RUNTIME_CUDA_CUDAMATMUL_H
