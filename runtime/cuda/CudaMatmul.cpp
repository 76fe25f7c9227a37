//===- CudaMatmul.cpp - Row-major GEMMs on cuBLASLt -----------------------===//
#include "runtime/cuda/CudaMatmul.h"
#include "runtime/cuda/HostPlans.h"

#include <string>

namespace weft {

Status cublasStatus(cublasStatus_t S, const char *What) {
  if (S == CUBLAS_STATUS_SUCCESS)
    return Status::success();
  return Status::error(std::string(What) + ": " + cublasLtGetStatusName(S) +
                       " (" + cublasLtGetStatusString(S) + ")");
}

namespace {

struct TypeMap {
  cudaDataType_t Data, Scale;
  cublasComputeType_t Compute;
};

Expected<TypeMap> gemmTypes(DType T) {
  switch (T) {
  case DType::F32:
    return TypeMap{CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F};
  case DType::F64:
    return TypeMap{CUDA_R_64F, CUDA_R_64F, CUBLAS_COMPUTE_64F};
  case DType::BF16:
    return TypeMap{CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F};
  default:
    return Status::error(std::string("no cuBLASLt GEMM for ") + dtypeName(T) +
                         " operands");
  }
}

} // namespace

Expected<std::unique_ptr<CudaMatmulPlan>>
CudaMatmulPlan::create(cublasLtHandle_t Handle, const GemmShape &S,
                       size_t WorkspaceBytes) {
  Expected<TypeMap> Types = gemmTypes(S.Type);
  if (!Types.ok())
    return Types.status();
  std::unique_ptr<CudaMatmulPlan> P(new CudaMatmulPlan());
  P->Shape = S;
  WEFT_RETURN_IF_ERROR(cublasStatus(
      cublasLtMatmulDescCreate(&P->Desc, Types->Compute, Types->Scale),
      "cublasLtMatmulDescCreate"));
  // Column-major C^T [N,M] = op(B^T) [N,K] x op(A^T) [K,M].
  const ColumnMajorGemm G = columnMajorGemm(S.M, S.N, S.K, S.TransA, S.TransB);
  cublasOperation_t OpFirst = G.TransFirst ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t OpSecond = G.TransSecond ? CUBLAS_OP_T : CUBLAS_OP_N;
  WEFT_RETURN_IF_ERROR(cublasStatus(
      cublasLtMatmulDescSetAttribute(P->Desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                     &OpFirst, sizeof(OpFirst)),
      "cublasLtMatmulDescSetAttribute (transa)"));
  WEFT_RETURN_IF_ERROR(cublasStatus(
      cublasLtMatmulDescSetAttribute(P->Desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                     &OpSecond, sizeof(OpSecond)),
      "cublasLtMatmulDescSetAttribute (transb)"));
  WEFT_RETURN_IF_ERROR(
      cublasStatus(cublasLtMatrixLayoutCreate(&P->LayoutA, Types->Data,
                                              uint64_t(G.FirstRows),
                                              uint64_t(G.FirstCols), G.LdFirst),
                   "cublasLtMatrixLayoutCreate (B)"));
  WEFT_RETURN_IF_ERROR(cublasStatus(
      cublasLtMatrixLayoutCreate(&P->LayoutB, Types->Data,
                                 uint64_t(G.SecondRows), uint64_t(G.SecondCols),
                                 G.LdSecond),
      "cublasLtMatrixLayoutCreate (A)"));
  WEFT_RETURN_IF_ERROR(cublasStatus(
      cublasLtMatrixLayoutCreate(&P->LayoutC, Types->Data, uint64_t(G.M),
                                 uint64_t(G.N), G.LdC),
      "cublasLtMatrixLayoutCreate (C)"));

  cublasLtMatmulPreference_t Pref = nullptr;
  WEFT_RETURN_IF_ERROR(cublasStatus(cublasLtMatmulPreferenceCreate(&Pref),
                                    "cublasLtMatmulPreferenceCreate"));
  cublasStatus_t St = cublasLtMatmulPreferenceSetAttribute(
      Pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &WorkspaceBytes,
      sizeof(WorkspaceBytes));
  // weft's buffers are 64-byte aligned (arena offsets and allocations); the
  // heuristic assumes 256 unless told.
  const uint32_t Align = 64;
  for (auto Attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    if (St == CUBLAS_STATUS_SUCCESS)
      St = cublasLtMatmulPreferenceSetAttribute(Pref, Attr, &Align,
                                                sizeof(Align));
  // Split-K partial sums add in the compute type (f32), never in bf16: one
  // rounding of the f32 result, as the CPU's widened GEMM.
  const uint32_t Reduction =
      CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  if (St == CUBLAS_STATUS_SUCCESS)
    St = cublasLtMatmulPreferenceSetAttribute(
        Pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &Reduction,
        sizeof(Reduction));
  cublasLtMatmulHeuristicResult_t Result{};
  int Found = 0;
  if (St == CUBLAS_STATUS_SUCCESS)
    St = cublasLtMatmulAlgoGetHeuristic(Handle, P->Desc, P->LayoutA, P->LayoutB,
                                        P->LayoutC, P->LayoutC, Pref, 1,
                                        &Result, &Found);
  cublasLtMatmulPreferenceDestroy(Pref);
  WEFT_RETURN_IF_ERROR(cublasStatus(St, "cublasLtMatmulAlgoGetHeuristic"));
  if (Found == 0)
    return Status::error(
        "cuBLASLt offers no algorithm for a " + std::string(dtypeName(S.Type)) +
        " GEMM of M=" + std::to_string(S.M) + " N=" + std::to_string(S.N) +
        " K=" + std::to_string(S.K));
  P->Algo = Result.algo;
  return P;
}

CudaMatmulPlan::~CudaMatmulPlan() {
  if (LayoutC)
    cublasLtMatrixLayoutDestroy(LayoutC);
  if (LayoutB)
    cublasLtMatrixLayoutDestroy(LayoutB);
  if (LayoutA)
    cublasLtMatrixLayoutDestroy(LayoutA);
  if (Desc)
    cublasLtMatmulDescDestroy(Desc);
}

Status CudaMatmulPlan::run(cublasLtHandle_t Handle, const void *A,
                           const void *B, void *C, void *Workspace,
                           size_t WorkspaceBytes, cudaStream_t Stream) const {
  const float OneF = 1.0f, ZeroF = 0.0f;
  const double OneD = 1.0, ZeroD = 0.0;
  const bool F64 = Shape.Type == DType::F64;
  const void *Alpha = F64 ? static_cast<const void *>(&OneD) : &OneF;
  const void *Beta = F64 ? static_cast<const void *>(&ZeroD) : &ZeroF;
  return cublasStatus(cublasLtMatmul(Handle, Desc, Alpha, B, LayoutA, A,
                                     LayoutB, Beta, C, LayoutC, C, LayoutC,
                                     &Algo, Workspace, WorkspaceBytes, Stream),
                      "cublasLtMatmul");
}

} // namespace weft
