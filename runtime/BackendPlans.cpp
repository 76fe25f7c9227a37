//===- BackendPlans.cpp - What every backend plans the same way -----------===//
#include "runtime/Backend.h"

#include <utility>

namespace weft {

std::string describeInstruction(const BoundInstruction &I) {
  return "instructions[" + std::to_string(I.Index) + "] (" + opName(I.Op) + ")";
}

AdamWParams adamwParams(const BoundInstruction &I, const StepContext &Ctx) {
  const OptimizerSpec &O = *Ctx.Optimizer;
  return AdamWParams{Ctx.Lr,
                     O.Beta1,
                     O.Beta2,
                     O.Eps,
                     O.WeightDecay,
                     Ctx.Step,
                     I.Attrs->WeightDecay};
}

DropoutKey dropoutKey(const BoundInstruction &I, const StepContext &Ctx) {
  DropoutKey K;
  K.Seed = Ctx.Seed;
  K.Step = Ctx.Step;
  K.Site = I.Attrs->DropSite;
  K.Threshold = dropoutThreshold(I.Attrs->DropP);
  K.Scale = 1.0 / (1.0 - I.Attrs->DropP);
  return K;
}

WideningPlan planBf16Widening(const BoundInstruction &I, int64_t AlignFloats) {
  WideningPlan P;
  std::vector<std::pair<const void *, int64_t>> Seen; // in place: one slot
  auto Slot = [&](const TensorRef &R) -> int64_t {
    if (R.Spec->Type != DType::BF16)
      return -1;
    for (const auto &[Data, At] : Seen)
      if (Data == R.Data)
        return At;
    Seen.emplace_back(R.Data, P.Floats);
    P.Floats += (R.Numel + AlignFloats - 1) / AlignFloats * AlignFloats;
    return Seen.back().second;
  };
  for (const TensorRef &R : I.In)
    P.InAt.push_back(Slot(R));
  for (const TensorRef &R : I.Out)
    P.OutAt.push_back(Slot(R));
  return P;
}

} // namespace weft
