//===- ModelConfig.cpp - presets and config.json parsing ------------------===//
#include "frontends/builtin/ModelConfig.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
#include <sstream>

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
  return c;
}

ModelConfig llama(const std::string &name, int64_t layers, int64_t hidden,
                  int64_t heads, int64_t kvHeads, int64_t intermediate,
                  int64_t vocab, int64_t positions, double theta, double eps,
                  bool tied) {
  ModelConfig c;
  c.name = name;
  c.family = ModelFamily::Llama;
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

// Reads an integer key; records an error naming it when absent or mistyped.
struct Reader {
  const nlohmann::json &j;
  std::string &error;

  int64_t integer(const char *key, bool required = true, int64_t dflt = 0) {
    if (!error.empty())
      return dflt;
    auto it = j.find(key);
    if (it == j.end()) {
      if (required)
        error = std::string("config is missing required key '") + key + "'";
      return dflt;
    }
    if (!it->is_number_integer()) {
      error = std::string("config key '") + key + "' must be an integer, got " +
              it->dump();
      return dflt;
    }
    return it->get<int64_t>();
  }

  double number(const char *key, double dflt) {
    if (!error.empty())
      return dflt;
    auto it = j.find(key);
    if (it == j.end())
      return dflt;
    if (!it->is_number()) {
      error = std::string("config key '") + key + "' must be a number, got " +
              it->dump();
      return dflt;
    }
    return it->get<double>();
  }

  bool boolean(const char *key, bool dflt) {
    if (!error.empty())
      return dflt;
    auto it = j.find(key);
    if (it == j.end())
      return dflt;
    if (!it->is_boolean()) {
      error = std::string("config key '") + key + "' must be true or false";
      return dflt;
    }
    return it->get<bool>();
  }
};

} // namespace

int64_t ModelConfig::numParams() const {
  int64_t d = hidden, hd = hidden / numHeads;
  int64_t perLayer;
  int64_t total;
  if (family == ModelFamily::Gpt2) {
    perLayer = 2 * 2 * d           // two layer norms
               + d * 3 * d + 3 * d // c_attn
               + d * d + d         // attn c_proj
               + d * intermediate + intermediate + intermediate * d + d;
    total = vocab * d + maxPositions * d + numLayers * perLayer + 2 * d;
  } else {
    perLayer = 2 * d + d * numHeads * hd + 2 * d * numKvHeads * hd +
               numHeads * hd * d + 3 * d * intermediate;
    total =
        vocab * d + numLayers * perLayer + d + (tieEmbeddings ? 0 : vocab * d);
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

ConfigResult parseConfigText(const std::string &text, const std::string &name) {
  ConfigResult r;
  r.config.name = name;
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) {
    r.error = "config '" + name + "' is not valid JSON";
    return r;
  }
  if (!j.is_object()) {
    r.error = "config '" + name + "' must be a JSON object";
    return r;
  }
  std::string type = j.value("model_type", "");
  bool isLlama = type == "llama" || (type.empty() && j.contains("hidden_size"));
  bool isGpt2 = type == "gpt2" || (type.empty() && j.contains("n_embd"));
  if (!isLlama && !isGpt2) {
    r.error = "config '" + name +
              "': cannot tell the family: expected model_type gpt2 or llama, "
              "or GPT-2 keys (n_embd, ...) or Llama keys (hidden_size, ...)";
    return r;
  }
  Reader in{j, r.error};
  ModelConfig &c = r.config;
  if (isGpt2) {
    c.family = ModelFamily::Gpt2;
    c.numLayers = in.integer("n_layer");
    c.hidden = in.integer("n_embd");
    c.numHeads = c.numKvHeads = in.integer("n_head");
    c.vocab = in.integer("vocab_size");
    c.maxPositions = in.integer("n_positions");
    c.intermediate = in.integer("n_inner", false, 4 * c.hidden);
    c.normEps = in.number("layer_norm_epsilon", 1e-5);
    c.initStd = in.number("initializer_range", 0.02);
    c.tieEmbeddings = true;
  } else {
    c.family = ModelFamily::Llama;
    c.hidden = in.integer("hidden_size");
    c.numLayers = in.integer("num_hidden_layers");
    c.numHeads = in.integer("num_attention_heads");
    c.numKvHeads = in.integer("num_key_value_heads", false, c.numHeads);
    c.intermediate = in.integer("intermediate_size");
    c.vocab = in.integer("vocab_size");
    c.maxPositions = in.integer("max_position_embeddings");
    c.normEps = in.number("rms_norm_eps", 1e-6);
    c.ropeTheta = in.number("rope_theta", 10000.0);
    c.initStd = in.number("initializer_range", 0.02);
    c.tieEmbeddings = in.boolean("tie_word_embeddings", false);
  }
  if (r.ok()) {
    std::string problem = validateConfig(c);
    if (!problem.empty())
      r.error = "config '" + name + "': " + problem;
  }
  return r;
}

ConfigResult parseConfigFile(const std::string &path) {
  std::ifstream in(path);
  if (!in) {
    ConfigResult r;
    r.error = "cannot read config file '" + path + "'";
    return r;
  }
  std::stringstream text;
  text << in.rdbuf();
  return parseConfigText(text.str(), path);
}

ConfigResult resolveModel(const std::string &modelOrPath) {
  bool looksLikePath =
      modelOrPath.find('/') != std::string::npos ||
      modelOrPath.size() > 5 &&
          modelOrPath.substr(modelOrPath.size() - 5) == ".json";
  if (looksLikePath || !std::ifstream(modelOrPath).fail()) {
    if (!presets().count(modelOrPath))
      return parseConfigFile(modelOrPath);
  }
  return lookupPreset(modelOrPath);
}

std::string validateConfig(const ModelConfig &c) {
  bool gpt = c.family == ModelFamily::Gpt2;
  auto key = [&](const char *gptKey, const char *llamaKey) {
    return std::string(gpt ? gptKey : llamaKey);
  };
  struct Positive {
    const char *gptKey, *llamaKey;
    int64_t value;
  } checks[] = {
      {"n_layer", "num_hidden_layers", c.numLayers},
      {"n_embd", "hidden_size", c.hidden},
      {"n_head", "num_attention_heads", c.numHeads},
      {"n_head", "num_key_value_heads", c.numKvHeads},
      {"n_inner", "intermediate_size", c.intermediate},
      {"vocab_size", "vocab_size", c.vocab},
      {"n_positions", "max_position_embeddings", c.maxPositions},
  };
  for (const Positive &p : checks)
    if (p.value <= 0)
      return key(p.gptKey, p.llamaKey) + "=" + std::to_string(p.value) +
             " must be positive";
  if (c.hidden % c.numHeads != 0)
    return key("n_head", "num_attention_heads") + "=" +
           std::to_string(c.numHeads) + " does not divide " +
           key("n_embd", "hidden_size") + "=" + std::to_string(c.hidden);
  if (c.numHeads % c.numKvHeads != 0)
    return "num_key_value_heads=" + std::to_string(c.numKvHeads) +
           " does not divide num_attention_heads=" + std::to_string(c.numHeads);
  if (!gpt && (c.hidden / c.numHeads) % 2 != 0)
    return "head_dim=" + std::to_string(c.hidden / c.numHeads) +
           " must be even for rotary embeddings";
  if (!(c.normEps > 0))
    return "norm epsilon must be positive";
  if (!gpt && !(c.ropeTheta > 0))
    return "rope_theta must be positive";
  return "";
}

} // namespace weft
