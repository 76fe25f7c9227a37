//===- KernelTable.h - the op-to-kernel table every backend fills -*- C++
//-*-===//
//
// One entry per op of the program format's op table (program/Program.h),
// filled by each backend (runtime/cpu, runtime/cuda) with its kernels. What a
// backend lacks is therefore one list, missing(), and an instruction of such
// an op is refused when the backend prepares the program, before any step,
// naming the op and every other op that backend lacks. Collectives are the
// communicator's, not a backend's: no table holds them.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_RUNTIME_KERNELTABLE_H
#define WEFT_RUNTIME_KERNELTABLE_H

#include "program/Program.h"

#include <array>
#include <string>
#include <vector>

namespace weft {

/// Whether a backend runs op K (every op but the communicator's).
inline bool backendRunsOp(OpKind K) { return !isCollective(K); }

template <typename Fn> class KernelTable {
public:
  void set(OpKind K, Fn F) { Fns[size_t(K)] = F; }
  Fn operator[](OpKind K) const { return Fns[size_t(K)]; }

  /// The backend's ops without a kernel, in the op table's order.
  std::vector<OpKind> missing() const {
    std::vector<OpKind> Out;
    for (int I = 0; I < NumOpKinds; ++I)
      if (backendRunsOp(OpKind(I)) && !Fns[size_t(I)])
        Out.push_back(OpKind(I));
    return Out;
  }

private:
  std::array<Fn, NumOpKinds> Fns{};
};

/// "op 'x' has no CUDA kernel for f32 (the CUDA backend lacks: a, b, c)":
/// the refusal of an instruction whose op a backend lacks.
inline std::string missingKernelMessage(const std::string &Instruction,
                                        const char *Backend,
                                        const std::string &Dtype,
                                        const std::vector<OpKind> &Missing) {
  std::string List;
  for (OpKind K : Missing)
    List += (List.empty() ? "" : ", ") + std::string(opName(K));
  return Instruction + " has no " + Backend + " kernel" +
         (Dtype.empty() ? "" : " for " + Dtype) + " (the " + Backend +
         " backend lacks: " + (List.empty() ? "nothing" : List) + ")";
}

} // namespace weft

#endif // WEFT_RUNTIME_KERNELTABLE_H
