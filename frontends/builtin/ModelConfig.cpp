//===- ModelConfig.cpp - presets and config.json parsing ------------------===//
#include "frontends/builtin/ModelConfig.h"

#include <cmath>

#include <climits>
#include <fstream>
#include <map>

namespace weft {
namespace {

ModelConfig gpt2(const std::string &name, int64_t layers, int64_t hidden,
                 int64_t heads, int64_t vocab, int64_t positions) {
  ModelConfig c;
  c.name = name;
  c.family = ModelFamily::Gpt2;
  c.numLayers = layers;
  c.hidden = hidden;
  c.numHeads = c.numKvHeads = heads;
  c.intermediate = 4 * hidden;
  c.vocab = vocab;
  c.maxPositions = positions;
  c.normEps = 1e-5;
  c.tieEmbeddings = true;
  c.activation = "gelu_new";
  return c;
}

ModelConfig llama(const std::string &name, int64_t layers, int64_t hidden,
                  int64_t heads, int64_t kvHeads, int64_t intermediate,
                  int64_t vocab, int64_t positions, double theta, double eps,
                  bool tied) {
  ModelConfig c;
  c.name = name;
  c.family = ModelFamily::Llama;
  c.modelType = "llama";
  c.numLayers = layers;
  c.hidden = hidden;
  c.numHeads = heads;
  c.numKvHeads = kvHeads;
  c.intermediate = intermediate;
  c.vocab = vocab;
  c.maxPositions = positions;
  c.ropeTheta = theta;
  c.normEps = eps;
  c.tieEmbeddings = tied;
  c.activation = "silu";
  return c;
}

const std::map<std::string, ModelConfig> &presets() {
  static const std::map<std::string, ModelConfig> table = {
      // Byte-level tiny models for tests and the demo (vocab 256).
      {"gpt-tiny", gpt2("gpt-tiny", 2, 64, 4, 256, 128)},
      {"llama-tiny",
       llama("llama-tiny", 2, 64, 4, 2, 192, 256, 128, 10000.0, 1e-5, false)},
      // OpenAI GPT-2 (Hugging Face configs).
      {"gpt2", gpt2("gpt2", 12, 768, 12, 50257, 1024)},
      {"gpt2-medium", gpt2("gpt2-medium", 24, 1024, 16, 50257, 1024)},
      {"gpt2-large", gpt2("gpt2-large", 36, 1280, 20, 50257, 1024)},
      {"gpt2-xl", gpt2("gpt2-xl", 48, 1600, 25, 50257, 1024)},
      // Meta Llama 3 / 3.1 (Hugging Face configs).
      {"llama-3-8b", llama("llama-3-8b", 32, 4096, 32, 8, 14336, 128256, 8192,
                           500000.0, 1e-5, false)},
      {"llama-3-70b", llama("llama-3-70b", 80, 8192, 64, 8, 28672, 128256, 8192,
                            500000.0, 1e-5, false)},
      {"llama-3-405b", llama("llama-3-405b", 126, 16384, 128, 8, 53248, 128256,
                             131072, 500000.0, 1e-5, false)},
  };
  return table;
}

} // namespace

int64_t ModelConfig::numParams() const {
  int64_t d = hidden, hd = headDimOrDefault();
  int64_t perLayer;
  int64_t total;
  int64_t head = tieEmbeddings ? 0 : vocab * d;
  if (family == ModelFamily::Gpt2) {
    perLayer = 2 * 2 * d           // two layer norms
               + d * 3 * d + 3 * d // c_attn
               + d * d + d         // attn c_proj
               + d * intermediate + intermediate + intermediate * d + d;
    total = vocab * d + maxPositions * d + numLayers * perLayer + 2 * d + head;
  } else {
    int64_t q = numHeads * hd, kv = numKvHeads * hd;
    perLayer = 2 * d + d * q + 2 * d * kv + q * d + 3 * d * intermediate +
               (qkvBias ? q + 2 * kv : 0) + (outBias ? d : 0) +
               (mlpBias ? 2 * intermediate + d : 0);
    total = vocab * d + numLayers * perLayer + d + head;
  }
  return total;
}

std::vector<std::string> presetNames() {
  std::vector<std::string> names;
  for (const auto &[name, config] : presets())
    names.push_back(name);
  return names;
}

ConfigResult lookupPreset(const std::string &name) {
  ConfigResult r;
  auto it = presets().find(name);
  if (it != presets().end()) {
    r.config = it->second;
    return r;
  }
  r.error = "unknown model '" + name + "': not a preset (";
  std::string list;
  for (const auto &n : presetNames())
    list += (list.empty() ? "" : ", ") + n;
  r.error += list + ") and not a config.json path";
  return r;
}

ConfigResult resolveModel(const std::string &modelOrPath,
                          const ConfigOptions &options) {
  bool looksLikePath =
      modelOrPath.find('/') != std::string::npos ||
      modelOrPath.size() > 5 &&
          modelOrPath.substr(modelOrPath.size() - 5) == ".json";
  if (looksLikePath || !std::ifstream(modelOrPath).fail()) {
    if (!presets().count(modelOrPath))
      return parseConfigFile(modelOrPath, options);
  }
  return lookupPreset(modelOrPath);
}

std::string validateConfig(const ModelConfig &c) {
  bool gpt = c.family == ModelFamily::Gpt2;
  auto key = [&](const char *gptKey, const char *llamaKey) {
    return std::string(gpt ? gptKey : llamaKey);
  };
  // Bounds far above every published model keep all size arithmetic
  // (parameter counts, buffer bytes) inside int64.
  struct Positive {
    const char *gptKey, *llamaKey;
    int64_t value, max;
  } checks[] = {
      {"n_layer", "num_hidden_layers", c.numLayers, 4096},
      {"n_embd", "hidden_size", c.hidden, int64_t(1) << 20},
      {"n_head", "num_attention_heads", c.numHeads, int64_t(1) << 16},
      {"n_head", "num_key_value_heads", c.numKvHeads, int64_t(1) << 16},
      {"n_inner", "intermediate_size", c.intermediate, int64_t(1) << 24},
      {"vocab_size", "vocab_size", c.vocab, INT32_MAX},
      {"n_positions", "max_position_embeddings", c.maxPositions,
       int64_t(1) << 24},
  };
  for (const Positive &p : checks) {
    if (p.value <= 0)
      return key(p.gptKey, p.llamaKey) + "=" + std::to_string(p.value) +
             " must be positive";
    if (p.value > p.max)
      return key(p.gptKey, p.llamaKey) + "=" + std::to_string(p.value) +
             " exceeds weft's limit of " + std::to_string(p.max);
  }
  if (c.headDim < 0)
    return "head_dim=" + std::to_string(c.headDim) + " must be positive";
  if (c.headDim > (int64_t(1) << 16))
    return "head_dim=" + std::to_string(c.headDim) +
           " exceeds weft's limit of 65536";
  // The parameter count in floating point first: within the bounds above
  // it can still pass int64 (layers x hidden x heads x head_dim).
  long double hd = c.headDimOrDefault(), d = c.hidden;
  long double perLayer = 4 * d * hd * c.numHeads + 3 * d * c.intermediate;
  long double total = c.numLayers * perLayer + 2.0L * c.vocab * d;
  if (total > 1e15L)
    return "the model would have about " +
           std::to_string(static_cast<double>(total)) +
           " parameters, more than weft's limit of 1e15";
  if (c.headDim == 0 && c.hidden % c.numHeads != 0)
    return key("n_head", "num_attention_heads") + "=" +
           std::to_string(c.numHeads) + " does not divide " +
           key("n_embd", "hidden_size") + "=" + std::to_string(c.hidden);
  if (c.numHeads % c.numKvHeads != 0)
    return "num_key_value_heads=" + std::to_string(c.numKvHeads) +
           " does not divide num_attention_heads=" + std::to_string(c.numHeads);
  if (!gpt && c.headDimOrDefault() % 2 != 0)
    return "head_dim=" + std::to_string(c.headDimOrDefault()) +
           " must be even for rotary embeddings";
  // Domains: an epsilon past 1 swamps the variance it guards, a theta of 1
  // or less gives every pair the same or a growing frequency, one token
  // leaves cross-entropy nothing to predict.
  if (!(c.normEps > 0 && c.normEps <= 1))
    return key("layer_norm_epsilon", "rms_norm_eps") + "=" +
           std::to_string(c.normEps) + " must be in (0, 1]";
  if (!gpt && !(c.ropeTheta > 1 && std::isfinite(c.ropeTheta)))
    return "rope_theta=" + std::to_string(c.ropeTheta) +
           " must be finite and above 1";
  if (c.vocab < 2)
    return "vocab_size=" + std::to_string(c.vocab) +
           " must be at least 2 (one token leaves nothing to predict)";
  return "";
}

} // namespace weft
