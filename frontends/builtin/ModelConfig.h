//===- ModelConfig.h - GPT-2 / Llama hyper-parameters -----------*- C++ -*-===//
//
// A model is a family (GPT-2 or Llama semantics) plus its Hugging Face config
// values. Presets and config.json files both produce one. Plain C++ (no MLIR):
// the JSON parsing lives here so nlohmann's exceptions stay out of MLIR code.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_FRONTENDS_BUILTIN_MODELCONFIG_H
#define WEFT_FRONTENDS_BUILTIN_MODELCONFIG_H

#include <cstdint>
#include <string>
#include <vector>

namespace weft {

enum class ModelFamily { Gpt2, Llama };

struct ModelConfig {
  std::string name;
  ModelFamily family = ModelFamily::Gpt2;
  int64_t numLayers = 0;
  int64_t hidden = 0;
  int64_t numHeads = 0;
  int64_t numKvHeads = 0;   // Llama GQA; GPT-2: numHeads
  int64_t intermediate = 0; // MLP width (GPT-2: 4 * hidden)
  int64_t vocab = 0;
  int64_t maxPositions = 0;
  double normEps = 1e-5;
  double ropeTheta = 10000.0;
  double initStd = 0.02;
  bool tieEmbeddings = true;

  /// Number of trainable parameters.
  int64_t numParams() const;
};

/// The outcome of reading a config: a message is set when it failed.
struct ConfigResult {
  ModelConfig config;
  std::string error;
  bool ok() const { return error.empty(); }
};

/// A preset by name, or an error listing the presets.
ConfigResult lookupPreset(const std::string &name);
std::vector<std::string> presetNames();

/// A Hugging Face style config.json (GPT-2 or Llama keys).
ConfigResult parseConfigFile(const std::string &path);
ConfigResult parseConfigText(const std::string &text, const std::string &name);

/// Either a preset name or a path to a config.json.
ConfigResult resolveModel(const std::string &modelOrPath);

/// Empty when consistent, else what is wrong ("n_head=5 does not divide
/// n_embd=64").
std::string validateConfig(const ModelConfig &config);

} // namespace weft

#endif // WEFT_FRONTENDS_BUILTIN_MODELCONFIG_H
