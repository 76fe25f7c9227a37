//===- Init.cpp - Deterministic parameter initialisation ------------------===//
#include "runtime/Init.h"
#include "program/Hash.h"

#include <algorithm>
#include <cmath>

namespace weft {

namespace {
inline double unitOpen(uint64_t Bits) {
  return (double(Bits >> 11) + 0.5) * 0x1.0p-53;
}

inline double normalFromKey(uint64_t Key, uint64_t Index) {
  double U1 = unitOpen(splitmix64(Key + 2 * Index));
  double U2 = unitOpen(splitmix64(Key + 2 * Index + 1));
  return std::sqrt(-2.0 * std::log(U1)) * std::cos(2.0 * M_PI * U2);
}

template <typename T>
void fillParam(const ParamSpec &P, uint64_t Key, T *Out, uint64_t Begin,
               uint64_t Count) {
  // A padded vocabulary's rows past the model's are zeros (the last
  // elements): what the model's checkpoint has not.
  if (P.LogicalRows > 0) {
    const uint64_t Logical =
        uint64_t(numElements(logicalShape(P, P.Place.Global)));
    uint64_t Keep = Begin >= Logical ? 0 : std::min(Count, Logical - Begin);
    for (uint64_t I = Keep; I < Count; ++I)
      Out[I] = T(0);
    Count = Keep;
  }
  switch (P.Init.K) {
  case InitSpec::Zeros:
  case InitSpec::Loaded: // zeros until the load (weft-run refuses a run
                         // that loads nothing)
  case InitSpec::Ones: {
    T V = P.Init.K == InitSpec::Ones ? T(1) : T(0);
    for (uint64_t I = 0; I < Count; ++I)
      Out[I] = V;
    return;
  }
  case InitSpec::Normal: {
    int64_t N = int64_t(Count);
#pragma omp parallel for schedule(static) if (N > (1 << 14))
    for (int64_t I = 0; I < N; ++I)
      Out[I] = T(P.Init.Std * normalFromKey(Key, Begin + uint64_t(I)));
    return;
  }
  }
}
} // namespace

double initNormal(uint64_t Seed, const std::string &Name, uint64_t Index) {
  return normalFromKey(fnv1a64(Name) ^ splitmix64(Seed), Index);
}

void initParam(const ParamSpec &P, uint64_t Seed, DType Type, void *Out,
               uint64_t Begin, uint64_t Count) {
  uint64_t Key = fnv1a64(P.Name) ^ splitmix64(Seed);
  if (Type == DType::F64)
    fillParam(P, Key, static_cast<double *>(Out), Begin, Count);
  else
    fillParam(P, Key, static_cast<float *>(Out), Begin, Count);
}

} // namespace weft
