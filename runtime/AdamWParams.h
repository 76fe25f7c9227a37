//===- AdamWParams.h - One AdamW step's scalars -----------------*- C++ -*-===//
//
// What the CPU and CUDA AdamW kernels take: torch.optim.AdamW's
// hyper-parameters for one 1-based step, and whether this tensor decays.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_RUNTIME_KERNELS_ADAMWPARAMS_H
#define WEFT_RUNTIME_KERNELS_ADAMWPARAMS_H

#include <cstdint>

namespace weft {

struct AdamWParams {
  double Lr, Beta1, Beta2, Eps, WeightDecay;
  int64_t Step;
  bool Decay;
};

} // namespace weft

#endif // WEFT_RUNTIME_KERNELS_ADAMWPARAMS_H
