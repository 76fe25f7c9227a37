//===- config.cpp - Fuzz the Hugging Face config.json reader --------------===//
//
// frontends/builtin/ConfigJson.cpp is plain C++ (no MLIR). A config that is
// accepted also has its parameter count and RoPE table computed, as
// weft-compile does before building IR.
//
//===----------------------------------------------------------------------===//
#include "frontends/builtin/ModelConfig.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *Data, size_t Size) {
  std::string Text(reinterpret_cast<const char *>(Data), Size);
  weft::ConfigOptions Opts;
  Opts.allowUnknownKeys = Size % 2 == 1;
  weft::ConfigResult R = weft::parseConfigText(Text, "fuzz", Opts);
  if (!R.ok())
    return 0;
  (void)R.config.numParams();
  if (R.config.family == weft::ModelFamily::Llama) {
    int64_t Seq = R.config.maxPositions > 0 && R.config.maxPositions < 4096
                      ? R.config.maxPositions
                      : 64;
    (void)weft::ropeTable(R.config, Seq);
  }
  return 0;
}
