//===- MpiTypes.h - weft enums to MPI handles; MPI errors as Status -*- C++
//-*-===//
#ifndef WEFT_RUNTIME_COMM_MPITYPES_H
#define WEFT_RUNTIME_COMM_MPITYPES_H

#include "program/Program.h"
#include "runtime/comm/Communicator.h"

#include <mpi.h>

#include <climits>
#include <cstdio>
#include <string>

namespace weft::mpi {

/// Success, or an error naming Call and MPI's message for Rc.
inline Status check(int Rc, const char *Call) {
  if (Rc == MPI_SUCCESS)
    return Status::success();
  char Msg[MPI_MAX_ERROR_STRING];
  int Len = 0;
  if (MPI_Error_string(Rc, Msg, &Len) != MPI_SUCCESS)
    Len = std::snprintf(Msg, sizeof(Msg), "error code %d", Rc);
  return Status::error(std::string(Call) +
                       " failed: " + std::string(Msg, size_t(Len)));
}

/// Success, or an error naming Call when Count elements do not fit MPI's
/// int counts.
inline Status countFits(size_t Count, const char *Call) {
  if (Count > size_t(INT_MAX))
    return Status::error(std::string(Call) + ": " + std::to_string(Count) +
                         " elements exceed MPI's int count (2^31-1)");
  return Status::success();
}

struct DTypeEntry {
  DType Type;
  MPI_Datatype Mpi;
};
/// One row per DType.
inline const DTypeEntry DTypeTable[] = {
    {DType::F32, MPI_FLOAT},
    {DType::F64, MPI_DOUBLE},
    {DType::I32, MPI_INT32_T},
    {DType::BF16, MPI_UINT16_T}, // moved as bits; summed by sumOp's own op
};

struct ReduceEntry {
  ReduceOp Op;
  MPI_Op Mpi;
};
inline const ReduceEntry ReduceTable[] = {
    {ReduceOp::Sum, MPI_SUM},
};

inline MPI_Datatype datatype(DType T) {
  for (const DTypeEntry &E : DTypeTable)
    if (E.Type == T)
      return E.Mpi;
  return MPI_DATATYPE_NULL;
}

inline MPI_Op reduceOp(ReduceOp Op) {
  for (const ReduceEntry &E : ReduceTable)
    if (E.Op == Op)
      return E.Mpi;
  return MPI_OP_NULL;
}

/// The sum of elements of type T: MPI_SUM, or for bf16 (MPI has no such
/// type) an op that adds in f32 and rounds each partial sum to bf16, as
/// NCCL's bf16 sum does. Made on first use.
MPI_Op sumOp(DType T);

} // namespace weft::mpi

#endif // WEFT_RUNTIME_COMM_MPITYPES_H
