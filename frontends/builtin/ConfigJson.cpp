//===- ConfigJson.cpp - Hugging Face config.json -> ModelConfig ----------===//
//
// One rule: every key of a config.json is either implemented exactly (read
// below, with the value transformers uses when it is absent or null) or
// refused with a message naming the key, its value and what weft supports.
// Keys that cannot change the training math are listed once in
// kIrrelevantKeys; any other key is unknown and refused, because weft cannot
// tell whether it changes the model (ConfigOptions::allowUnknownKeys turns
// that into one warning per key).
//
//===----------------------------------------------------------------------===//
#include "frontends/builtin/ModelConfig.h"
#include "program/Activation.h"
#include "program/Hyperparams.h"
#include "program/JsonDepth.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

namespace weft {
namespace {
using Json = nlohmann::json;

// Keys that do not change what is trained: names, token ids, generation
// defaults, serving hints, the storage dtype (weft's --dtype decides), heads
// of other model classes (GPT-2's summary_* belong to GPT2DoubleHeadsModel),
// and options that change only the float evaluation order of the same math
// (Llama's pretraining_tp slices matmuls; GPT-2's reorder_and_upcast_attn
// upcasts fp16 attention). GPT-2's n_special and predict_special_tokens are
// leftovers of OpenAI GPT that GPT2Config does not read.
const char *const kIrrelevantKeys[] = {"_name_or_path",
                                       "architectures",
                                       "transformers_version",
                                       "torch_dtype",
                                       "dtype",
                                       "use_cache",
                                       "bos_token_id",
                                       "eos_token_id",
                                       "pad_token_id",
                                       "sep_token_id",
                                       "decoder_start_token_id",
                                       "tokenizer_class",
                                       "prefix",
                                       "task_specific_params",
                                       "id2label",
                                       "label2id",
                                       "num_labels",
                                       "problem_type",
                                       "finetuning_task",
                                       "return_dict",
                                       "output_hidden_states",
                                       "output_attentions",
                                       "torchscript",
                                       "use_bfloat16",
                                       "tf_legacy_loss",
                                       "is_decoder",
                                       "tie_encoder_decoder",
                                       "chunk_size_feed_forward",
                                       "cross_attention_hidden_size",
                                       "max_length",
                                       "min_length",
                                       "do_sample",
                                       "early_stopping",
                                       "num_beams",
                                       "num_beam_groups",
                                       "diversity_penalty",
                                       "temperature",
                                       "top_k",
                                       "top_p",
                                       "typical_p",
                                       "repetition_penalty",
                                       "length_penalty",
                                       "no_repeat_ngram_size",
                                       "encoder_no_repeat_ngram_size",
                                       "bad_words_ids",
                                       "num_return_sequences",
                                       "output_scores",
                                       "return_dict_in_generate",
                                       "forced_bos_token_id",
                                       "forced_eos_token_id",
                                       "remove_invalid_values",
                                       "exponential_decay_length_penalty",
                                       "suppress_tokens",
                                       "begin_suppress_tokens",
                                       "n_ctx",
                                       "summary_type",
                                       "summary_use_proj",
                                       "summary_activation",
                                       "summary_proj_to_labels",
                                       "summary_first_dropout",
                                       "reorder_and_upcast_attn",
                                       "pretraining_tp",
                                       "n_special",
                                       "predict_special_tokens",
                                       "attn_implementation",
                                       "_attn_implementation_autoset"};

std::string shortDump(const Json &v) {
  std::string s = v.dump();
  return s.size() > 80 ? s.substr(0, 77) + "..." : s;
}

std::string number(double v) { return shortestDecimal(v); }

class KeyReader {
public:
  KeyReader(const Json &j, std::string &error) : j(j), error(error) {}

  /// The value of `key`, or null when absent or JSON null (transformers'
  /// default applies then). Marks the key as read.
  const Json *find(const std::string &key) {
    used.insert(key);
    auto it = j.find(key);
    if (it == j.end() || it->is_null())
      return nullptr;
    return &*it;
  }
  bool present(const std::string &key) { return find(key) != nullptr; }

  void fail(const std::string &message) {
    if (error.empty())
      error = message;
  }

  int64_t integer(const std::string &key, bool required = true,
                  int64_t dflt = 0) {
    const Json *v = find(key);
    if (!v) {
      if (required)
        fail("missing required key '" + key + "'");
      return dflt;
    }
    if (!v->is_number_integer()) {
      fail("key '" + key + "' must be an integer, got " + shortDump(*v));
      return dflt;
    }
    return v->get<int64_t>();
  }

  double real(const std::string &key, double dflt) {
    const Json *v = find(key);
    if (!v)
      return dflt;
    if (!v->is_number() || !std::isfinite(v->get<double>())) {
      fail("key '" + key + "' must be a finite number, got " + shortDump(*v));
      return dflt;
    }
    return v->get<double>();
  }

  bool boolean(const std::string &key, bool dflt) {
    const Json *v = find(key);
    if (!v)
      return dflt;
    if (!v->is_boolean()) {
      fail("key '" + key + "' must be true or false, got " + shortDump(*v));
      return dflt;
    }
    return v->get<bool>();
  }

  std::string string(const std::string &key, const std::string &dflt) {
    const Json *v = find(key);
    if (!v)
      return dflt;
    if (!v->is_string()) {
      fail("key '" + key + "' must be a string, got " + shortDump(*v));
      return dflt;
    }
    return v->get<std::string>();
  }

  /// A dropout probability in [0, 1) (PyTorch's nn.Dropout refuses others;
  /// 1 would drop everything). `dflt` is transformers' value when the key
  /// is absent.
  double dropout(const std::string &key, double dflt) {
    double p = real(key, dflt);
    if (error.empty() && !(p >= 0.0 && p < 1.0))
      fail("key '" + key + "' = " + number(p) +
           ": a dropout probability must be at least 0 and below 1");
    return p;
  }

  /// An ACT2FN activation name weft implements (program/Activation.h).
  std::string activation(const std::string &key, const std::string &dflt) {
    std::string v = string(key, dflt);
    Activation kind;
    if (error.empty() && !parseActivation(v, kind))
      fail("key '" + key + "' = \"" + v +
           "\" is not an activation weft implements (supported: " +
           activationList() + ")");
    return v;
  }

  /// A boolean key whose other value weft does not implement.
  void mustBe(const std::string &key, bool dflt, bool supported,
              const std::string &why) {
    bool v = boolean(key, dflt);
    if (error.empty() && v != supported)
      fail("key '" + key + "' = " + (v ? "true" : "false") +
           " is not supported: " + why);
  }

  /// Keys neither read nor known to be irrelevant.
  std::vector<std::string> unknownKeys() const {
    std::vector<std::string> out;
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (used.count(it.key()))
        continue;
      if (std::find_if(std::begin(kIrrelevantKeys), std::end(kIrrelevantKeys),
                       [&](const char *k) { return it.key() == k; }) !=
          std::end(kIrrelevantKeys))
        continue;
      out.push_back(it.key());
    }
    return out;
  }

  const Json &j;
  std::string &error;
  std::set<std::string> used;
};

// Keys every family reads: encoder-decoder and cross-attention variants of a
// class are other models.
void readCommon(KeyReader &in) {
  in.mustBe("is_encoder_decoder", false, false,
            "weft builds decoder-only causal language models");
  in.mustBe("add_cross_attention", false, false,
            "weft's blocks have no cross-attention");
  if (const Json *pruned = in.find("pruned_heads"))
    if (!pruned->empty())
      in.fail("key 'pruned_heads' = " + shortDump(*pruned) +
              " is not supported: weft's attention keeps every head");
}

void readGpt2(KeyReader &in, ModelConfig &c) {
  c.family = ModelFamily::Gpt2;
  c.numLayers = in.integer("n_layer");
  c.hidden = in.integer("n_embd");
  c.numHeads = c.numKvHeads = in.integer("n_head");
  c.vocab = in.integer("vocab_size");
  c.maxPositions = in.integer("n_positions");
  c.intermediate = in.integer("n_inner", false, 4 * c.hidden);
  c.normEps = in.real("layer_norm_epsilon", 1e-5);
  c.initStd = in.real("initializer_range", 0.02);
  c.tieEmbeddings = in.boolean("tie_word_embeddings", true);
  c.activation = in.activation("activation_function", "gelu_new");
  c.residDropout = in.dropout("resid_pdrop", 0.1);
  c.embdDropout = in.dropout("embd_pdrop", 0.1);
  c.attnDropout = in.dropout("attn_pdrop", 0.1);
  c.scaleAttnWeights = in.boolean("scale_attn_weights", true);
  c.scaleAttnByInverseLayerIdx =
      in.boolean("scale_attn_by_inverse_layer_idx", false);
}

// RoPE: transformers 4 spells rope_theta and rope_scaling at the top level,
// transformers 5 one rope_parameters object holding rope_type, rope_theta
// and the scaling fields. Each scaling type reads exactly the fields
// transformers reads; any other field is refused. Fields that transformers
// versions read differently (original_max_position_embeddings for yarn and
// dynamic, DeepSeek's mscale) are refused rather than guessed.
void readRope(KeyReader &in, ModelConfig &c) {
  c.ropeTheta = in.real("rope_theta", 10000.0);
  bool topTheta = in.present("rope_theta");
  const Json *v4 = in.find("rope_scaling");
  const Json *v5 = in.find("rope_parameters");
  if (!in.error.empty())
    return;
  if (v4 && v5) {
    in.fail("the config gives both rope_scaling (transformers 4) and "
            "rope_parameters (transformers 5): give one");
    return;
  }
  const Json *rope = v4 ? v4 : v5;
  if (!rope)
    return;
  std::string key = v4 ? "rope_scaling" : "rope_parameters";
  if (!rope->is_object()) {
    in.fail("key '" + key + "' must be an object, got " + shortDump(*rope));
    return;
  }
  RopeScaling &sc = c.ropeScaling;
  for (const char *typeKey : {"rope_type", "type"}) {
    auto t = rope->find(typeKey);
    if (t == rope->end() || t->is_null())
      continue;
    if (!t->is_string()) {
      in.fail("key '" + key + "." + typeKey + "' must be a string, got " +
              shortDump(*t));
      return;
    }
    sc.type = t->get<std::string>();
  }
  static const std::vector<std::pair<std::string, std::vector<std::string>>>
      kFields = {
          {"default", {}},
          {"linear", {"factor"}},
          {"dynamic", {"factor"}},
          {"llama3",
           {"factor", "low_freq_factor", "high_freq_factor",
            "original_max_position_embeddings"}},
          {"yarn", {"factor", "attention_factor", "beta_fast", "beta_slow"}}};
  auto type = std::find_if(kFields.begin(), kFields.end(),
                           [&](const auto &e) { return e.first == sc.type; });
  if (type == kFields.end()) {
    in.fail("key '" + key + "' has rope_type '" + sc.type + "' (" +
            shortDump(*rope) +
            "): weft implements rope_type default, linear, dynamic, llama3 "
            "and yarn");
    return;
  }
  const std::vector<std::string> &fields = type->second;
  auto positive = [&](const std::string &field, double &out, bool required) {
    auto it = rope->find(field);
    if (it == rope->end() || it->is_null()) {
      if (required)
        in.fail("key '" + key + "' (rope_type " + sc.type + ") is missing '" +
                field + "'");
      return;
    }
    if (!it->is_number() || !std::isfinite(it->get<double>()) ||
        !(it->get<double>() > 0)) {
      in.fail("key '" + key + "." + field +
              "' must be a positive number, got " + shortDump(*it));
      return;
    }
    out = it->get<double>();
  };
  for (auto it = rope->begin(); it != rope->end(); ++it) {
    const std::string &k = it.key();
    bool known = k == "rope_type" || k == "type" ||
                 (k == "rope_theta" && key == "rope_parameters") ||
                 std::find(fields.begin(), fields.end(), k) != fields.end();
    if (!known) {
      in.fail("key '" + key + "." + k + "' = " + shortDump(*it) +
              " is not supported with rope_type " + sc.type);
      return;
    }
  }
  if (key == "rope_parameters" && rope->contains("rope_theta")) {
    double theta = 0;
    positive("rope_theta", theta, true);
    if (!in.error.empty())
      return;
    if (topTheta && theta != c.ropeTheta) {
      in.fail("rope_theta=" + number(c.ropeTheta) +
              " and rope_parameters.rope_theta=" + number(theta) +
              ": they must agree");
      return;
    }
    c.ropeTheta = theta;
  }
  if (sc.type == "default")
    return;
  positive("factor", sc.factor, true);
  if (sc.type == "llama3") {
    double original = 0;
    positive("low_freq_factor", sc.lowFreqFactor, true);
    positive("high_freq_factor", sc.highFreqFactor, true);
    positive("original_max_position_embeddings", original, true);
    sc.originalMaxPositions = int64_t(original);
    if (in.error.empty() && !(sc.highFreqFactor > sc.lowFreqFactor))
      in.fail("key '" + key +
              "': high_freq_factor=" + number(sc.highFreqFactor) +
              " must exceed low_freq_factor=" + number(sc.lowFreqFactor));
    if (in.error.empty() && double(sc.originalMaxPositions) != original)
      in.fail("key '" + key +
              ".original_max_position_embeddings' must be an integer");
  } else if (sc.type == "yarn") {
    positive("attention_factor", sc.attentionFactor, false);
    positive("beta_fast", sc.betaFast, false);
    positive("beta_slow", sc.betaSlow, false);
  }
}

// Mistral and Qwen2 attend within a sliding window; Qwen2 only when
// use_sliding_window, and only in layers from max_window_layers on (or where
// layer_types says sliding_attention).
void readSlidingWindow(KeyReader &in, ModelConfig &c) {
  bool slides = true;
  if (c.modelType == "qwen2") {
    bool use = in.boolean("use_sliding_window", false);
    int64_t from = in.integer("max_window_layers", false, 28);
    slides = use && from < c.numLayers;
    if (const Json *types = in.find("layer_types")) {
      if (!types->is_array()) {
        in.fail("key 'layer_types' must be a list, got " + shortDump(*types));
        return;
      }
      slides = false;
      for (const Json &t : *types) {
        if (t == "sliding_attention")
          slides = true;
        else if (t != "full_attention") {
          in.fail("key 'layer_types' holds " + shortDump(t) +
                  ": weft supports full_attention and sliding_attention");
          return;
        }
      }
    }
  }
  // Absent: MistralConfig's and Qwen2Config's default of 4096; null: none.
  bool given = in.present("sliding_window");
  bool absent = !in.j.contains("sliding_window");
  int64_t window = in.integer("sliding_window", false, absent ? 4096 : 0);
  if (given && window <= 0)
    in.fail("key 'sliding_window' = " + std::to_string(window) +
            " must be positive");
  c.slidingWindow = slides ? window : 0;
}

void readLlama(KeyReader &in, ModelConfig &c) {
  c.family = ModelFamily::Llama;
  c.hidden = in.integer("hidden_size");
  c.numLayers = in.integer("num_hidden_layers");
  c.numHeads = in.integer("num_attention_heads");
  // Absent, transformers' class default; null, as many as the query heads
  // (LlamaConfig's default is None, MistralConfig's 8, Qwen2Config's 32).
  bool kvGiven = in.j.contains("num_key_value_heads");
  int64_t kvDefault = kvGiven                    ? c.numHeads
                      : c.modelType == "mistral" ? 8
                      : c.modelType == "qwen2"   ? 32
                                                 : c.numHeads;
  c.numKvHeads = in.integer("num_key_value_heads", false, kvDefault);
  c.headDim = in.integer("head_dim", false, 0);
  if (in.present("head_dim") && c.headDim <= 0)
    in.fail("key 'head_dim' = " + std::to_string(c.headDim) +
            " must be positive");
  c.intermediate = in.integer("intermediate_size");
  c.vocab = in.integer("vocab_size");
  c.maxPositions = in.integer("max_position_embeddings");
  c.normEps = in.real("rms_norm_eps", 1e-6);
  c.initStd = in.real("initializer_range", 0.02);
  c.tieEmbeddings = in.boolean("tie_word_embeddings", false);
  c.activation = in.activation("hidden_act", "silu");
  c.attnDropout = in.dropout("attention_dropout", 0.0);
  readRope(in, c);
  if (c.modelType == "llama") {
    bool bias = in.boolean("attention_bias", false);
    c.qkvBias = c.outBias = bias;
    c.mlpBias = in.boolean("mlp_bias", false);
  } else if (c.modelType == "qwen2") {
    c.qkvBias = true; // Qwen2Attention: q, k, v with bias, o without
  }
  if (c.modelType != "llama")
    readSlidingWindow(in, c);
}

} // namespace

ConfigResult parseConfigText(const std::string &text, const std::string &name,
                             const ConfigOptions &options) {
  ConfigResult r;
  r.config.name = name;
  r.error = jsonDepthError(text, "config '" + name + "'");
  if (!r.ok())
    return r;
  Json j = Json::parse(text, nullptr, false);
  if (j.is_discarded()) {
    r.error = "config '" + name + "' is not valid JSON";
    return r;
  }
  if (!j.is_object()) {
    r.error = "config '" + name + "' must be a JSON object";
    return r;
  }
  KeyReader in{j, r.error};
  std::string type = in.string("model_type", "");
  if (!r.ok()) {
    r.error = "config '" + name + "': " + r.error;
    return r;
  }
  if (type.empty())
    type = j.contains("n_embd")        ? "gpt2"
           : j.contains("hidden_size") ? "llama"
                                       : "";
  ModelConfig &c = r.config;
  c.modelType = type;
  if (type == "gpt2") {
    readGpt2(in, c);
  } else if (type == "llama" || type == "mistral" || type == "qwen2") {
    readLlama(in, c);
  } else {
    r.error = (type.empty() ? std::string("cannot tell the family: no "
                                          "model_type, and neither GPT-2 "
                                          "keys (n_embd, ...) nor Llama keys "
                                          "(hidden_size, ...)")
                            : "model_type '" + type + "' is not supported") +
              " (weft supports model_type gpt2, llama, mistral and qwen2)";
    r.error = "config '" + name + "': " + r.error;
    return r;
  }
  readCommon(in);
  if (r.ok()) {
    for (const std::string &key : in.unknownKeys()) {
      std::string what = "key '" + key + "' = " + shortDump(j[key]) +
                         " is not known to weft for model_type " + type +
                         ", so weft cannot tell whether it changes the model";
      if (!options.allowUnknownKeys) {
        r.error = what + "; remove it, or pass --allow-unknown-config-keys "
                         "to train without it";
        break;
      }
      r.warnings.push_back("config '" + name + "': " + what +
                           "; ignored (--allow-unknown-config-keys)");
    }
  }
  if (r.ok()) {
    std::string problem = validateConfig(c);
    if (!problem.empty())
      r.error = problem;
  }
  if (!r.ok())
    r.error = "config '" + name + "': " + r.error;
  return r;
}

ConfigResult parseConfigFile(const std::string &path,
                             const ConfigOptions &options) {
  std::ifstream in(path);
  if (!in) {
    ConfigResult r;
    r.error = "cannot read config file '" + path + "'";
    return r;
  }
  std::stringstream text;
  text << in.rdbuf();
  return parseConfigText(text.str(), path, options);
}

} // namespace weft
