//===- ModelConfig.h - GPT-2 / Llama hyper-parameters -----------*- C++ -*-===//
//
// A model is a family (GPT-2 or Llama semantics) plus its Hugging Face config
// values. Presets and config.json files both produce one. Plain C++ (no MLIR):
// the JSON parsing lives in ConfigJson.cpp so nlohmann's exceptions stay out
// of MLIR code.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_FRONTENDS_BUILTIN_MODELCONFIG_H
#define WEFT_FRONTENDS_BUILTIN_MODELCONFIG_H

#include <cstdint>
#include <string>
#include <vector>

namespace weft {

/// GPT-2 (GPT2LMHeadModel) or Llama semantics (LlamaForCausalLM; Mistral and
/// Qwen2 are Llama blocks with the options below).
enum class ModelFamily { Gpt2, Llama };

/// RoPE scaling as transformers' modeling_rope_utils computes it.
struct RopeScaling {
  std::string type = "default"; // default, linear, dynamic, llama3, yarn
  double factor = 1.0;
  double lowFreqFactor = 0, highFreqFactor = 0; // llama3
  int64_t originalMaxPositions = 0;             // llama3
  double betaFast = 32, betaSlow = 1;           // yarn
  double attentionFactor = 0;                   // yarn; 0: 0.1 * ln(factor) + 1
};

struct ModelConfig {
  std::string name;
  /// The Hugging Face model_type: gpt2, llama, mistral or qwen2.
  std::string modelType = "gpt2";
  ModelFamily family = ModelFamily::Gpt2;
  int64_t numLayers = 0;
  int64_t hidden = 0;
  int64_t numHeads = 0;
  int64_t numKvHeads = 0;   // Llama GQA; GPT-2: numHeads
  int64_t headDim = 0;      // 0: hidden / numHeads (Llama's head_dim key)
  int64_t intermediate = 0; // MLP width (GPT-2: 4 * hidden)
  int64_t vocab = 0;
  int64_t maxPositions = 0;
  double normEps = 1e-5;
  double ropeTheta = 10000.0;
  RopeScaling ropeScaling;
  double initStd = 0.02;
  bool tieEmbeddings = true;
  /// transformers' ACT2FN name: GPT-2's activation_function (its MLP's
  /// activation), Llama's hidden_act (act(gate) * up).
  std::string activation;
  /// Llama attention_bias (q, k, v and o), Qwen2 (q, k, v only), mlp_bias.
  bool qkvBias = false;
  bool outBias = false;
  bool mlpBias = false;
  /// Mistral / Qwen2 sliding-window attention: 0 when every key is visible.
  /// weft's attention has no window, so a program whose sequence exceeds the
  /// window is refused (with seq <= window the window masks nothing).
  int64_t slidingWindow = 0;
  /// GPT-2: scores scaled by 1/sqrt(head_dim) (scale_attn_weights) and by
  /// 1/(layer_idx + 1) (scale_attn_by_inverse_layer_idx).
  bool scaleAttnWeights = true;
  bool scaleAttnByInverseLayerIdx = false;
  /// Dropout probabilities in [0, 1): GPT-2's embd_pdrop (after the token
  /// and position embeddings), resid_pdrop (each block's attention and MLP
  /// output) and attn_pdrop (the attention probabilities); Llama's
  /// attention_dropout is attnDropout. Training programs apply them
  /// (weft.dropout, program/Dropout.h); forward-only ones do not.
  double embdDropout = 0.0, residDropout = 0.0, attnDropout = 0.0;

  /// Per-head features: headDim when set, else hidden / numHeads.
  int64_t headDimOrDefault() const {
    return headDim ? headDim : (numHeads ? hidden / numHeads : 0);
  }
  /// Number of trainable parameters.
  int64_t numParams() const;
};

/// The outcome of reading a config: a message is set when it failed.
struct ConfigResult {
  ModelConfig config;
  std::string error;
  /// One line per config key that was accepted only because the caller
  /// allowed unknown keys.
  std::vector<std::string> warnings;
  bool ok() const { return error.empty(); }
};

struct ConfigOptions {
  /// Unknown config.json keys become warnings instead of errors.
  bool allowUnknownKeys = false;
};

/// A preset by name, or an error listing the presets.
ConfigResult lookupPreset(const std::string &name);
std::vector<std::string> presetNames();

/// A Hugging Face config.json (model_type gpt2, llama, mistral or qwen2).
/// Every key is either implemented exactly or refused, naming the key, its
/// value and what weft supports; keys that do not change the training math
/// are listed in ConfigJson.cpp.
ConfigResult parseConfigFile(const std::string &path,
                             const ConfigOptions &options = {});
ConfigResult parseConfigText(const std::string &text, const std::string &name,
                             const ConfigOptions &options = {});

/// Either a preset name or a path to a config.json.
ConfigResult resolveModel(const std::string &modelOrPath,
                          const ConfigOptions &options = {});

/// The rotary frequencies of a Llama-family model compiled at `seq` tokens:
/// per-pair inverse frequencies (empty for the default theta^(-2i/hd)) and
/// the factor cos and sin are multiplied by (yarn's attention factor).
struct RopeTable {
  std::vector<double> invFreq;
  double scale = 1.0;
};
RopeTable ropeTable(const ModelConfig &config, int64_t seq);

/// Empty when consistent, else what is wrong ("n_head=5 does not divide
/// n_embd=64").
std::string validateConfig(const ModelConfig &config);

} // namespace weft

#endif // WEFT_FRONTENDS_BUILTIN_MODELCONFIG_H
