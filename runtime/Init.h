//===- Init.h - Layout-independent deterministic parameter init -*- C++ -*-===//
#ifndef WEFT_RUNTIME_INIT_H
#define WEFT_RUNTIME_INIT_H

#include "program/Program.h"

#include <cstdint>
#include <string>

namespace weft {

/// The standard normal sample for global element Index of parameter Name
/// (docs/program-format.md, "Deterministic initialisation").
double initNormal(uint64_t Seed, const std::string &Name, uint64_t Index);

/// Fills elements [Begin, Begin+Count) of a parameter (its global row-major
/// indices) into Out, whose element type is Type (F32 or F64). A shard passes
/// its own range; the values do not depend on it.
void initParam(const ParamSpec &P, uint64_t Seed, DType Type, void *Out,
               uint64_t Begin, uint64_t Count);

} // namespace weft

#endif // WEFT_RUNTIME_INIT_H
