//===- BuildModel.cpp - GPT-2 and Llama forward graphs --------------------===//
#include "frontends/builtin/BuildModel.h"
#include "dialect/AttrNames.h"
#include "dialect/WeftDialect.h"
#include "program/Activation.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <algorithm>
#include <cmath>

using namespace mlir;

namespace weft {
namespace {

class ModelBuilder {
public:
  ModelBuilder(OpBuilder &b, const ModelConfig &c, Type element, int64_t seq)
      : b(b), c(c), element(element), seq(seq), loc(b.getUnknownLoc()) {}

  Value param(const std::string &name, ArrayRef<int64_t> shape, StringRef init,
              double std = 0.0) {
    auto p = ParamOp::create(b, loc, RankedTensorType::get(shape, element),
                             b.getStringAttr(name), b.getStringAttr(init),
                             b.getF64FloatAttr(std));
    p->setAttr(attrname::kLayer, b.getI64IntegerAttr(layer));
    return p;
  }
  Value normal(const std::string &name, ArrayRef<int64_t> shape, double std) {
    return param(name, shape, "normal", std);
  }
  Value ones(const std::string &name, int64_t n) {
    return param(name, {n}, "ones");
  }
  Value zeros(const std::string &name, int64_t n) {
    return param(name, {n}, "zeros");
  }

  Value matmul(Value x, Value w, bool transposeB = false) {
    return MatmulOp::create(b, loc, x, w, false, transposeB);
  }
  Value add(Value x, Value y) { return AddOp::create(b, loc, x, y); }
  // Dropout at a numbered site (program/Dropout.h keys masks by it): the
  // embeddings' is site 0, layer i's attention probabilities, attention
  // output and MLP output sites 3i+1, 3i+2 and 3i+3.
  Value dropout(Value x, double p, int64_t site) {
    if (p <= 0.0)
      return x;
    return DropoutOp::create(b, loc, x, b.getF64FloatAttr(p),
                             b.getI64IntegerAttr(site), ArrayAttr());
  }
  // The attention's dropout of its probabilities, as attributes.
  FloatAttr attnDropoutP() const {
    return c.attnDropout > 0 ? b.getF64FloatAttr(c.attnDropout) : nullptr;
  }
  IntegerAttr attnDropoutSite(int64_t i) const {
    return c.attnDropout > 0 ? b.getI64IntegerAttr(3 * i + 1) : nullptr;
  }
  // Mistral's sliding window, where it cuts the compiled sequence (a
  // window as long as the sequence masks nothing).
  IntegerAttr window() const {
    return c.slidingWindow > 0 && c.slidingWindow < seq
               ? b.getI64IntegerAttr(c.slidingWindow)
               : nullptr;
  }
  // The config's activation kind (program/Activation.h; the config reader
  // has refused names it does not know).
  Activation activation() const {
    Activation kind = Activation::GeluTanh;
    parseActivation(c.activation, kind);
    return kind;
  }
  // The config's activation: the fused tanh GELU where it is that one.
  Value activate(Value x) {
    if (activation() == Activation::GeluTanh)
      return GeluOp::create(b, loc, x);
    return ActOp::create(b, loc, x, b.getStringAttr(c.activation));
  }

  // GPT-2: HF GPT2LMHeadModel (Conv1D weights are [in, out]).
  Value gpt2(Value tokens, Value targets) {
    int64_t d = c.hidden, layers = c.numLayers;
    double std = c.initStd, projStd = c.initStd / std::sqrt(2.0 * layers);
    auto epsAttr = b.getF64FloatAttr(c.normEps);
    Value wte = normal("transformer.wte.weight", {c.vocab, d}, std);
    Value wpe = normal("transformer.wpe.weight", {c.maxPositions, d}, std);
    Value x = EmbeddingOp::create(b, loc, wte, tokens);
    x = PositionEmbeddingOp::create(b, loc, x, wpe);
    x = dropout(x, c.embdDropout, 0);
    auto layerNorm = [&](Value in, const std::string &prefix) -> Value {
      Value g = ones(prefix + ".weight", d), beta = zeros(prefix + ".bias", d);
      return LayerNormOp::create(b, loc, in, g, beta, epsAttr);
    };
    auto linear = [&](Value in, const std::string &prefix, int64_t out,
                      double wStd) -> Value {
      int64_t inDim = cast<RankedTensorType>(in.getType()).getShape().back();
      Value w = normal(prefix + ".weight", {inDim, out}, wStd);
      Value bias = zeros(prefix + ".bias", out);
      return BiasAddOp::create(b, loc, matmul(in, w), bias);
    };
    for (int64_t i = 0; i < layers; ++i) {
      layer = i;
      std::string p = "transformer.h." + std::to_string(i);
      Value h = layerNorm(x, p + ".ln_1");
      Value qkv = linear(h, p + ".attn.c_attn", 3 * d, std);
      auto parts =
          SplitOp::create(b, loc, qkv, b.getDenseI64ArrayAttr({d, d, d}));
      // HF GPT2Attention: scores / sqrt(head_dim) unless scale_attn_weights
      // is false, and / (layer_idx + 1) with scale_attn_by_inverse_layer_idx.
      double scale =
          c.scaleAttnWeights ? 1.0 / std::sqrt(double(d / c.numHeads)) : 1.0;
      if (c.scaleAttnByInverseLayerIdx)
        scale /= double(i + 1);
      FloatAttr scaleAttr = c.scaleAttnWeights && !c.scaleAttnByInverseLayerIdx
                                ? nullptr
                                : b.getF64FloatAttr(scale);
      Value a = AttentionOp::create(
          b, loc, parts.getResult(0), parts.getResult(1), parts.getResult(2),
          b.getI64IntegerAttr(c.numHeads), b.getI64IntegerAttr(c.numHeads),
          scaleAttr, UnitAttr(), attnDropoutP(), attnDropoutSite(i),
          ArrayAttr(), IntegerAttr());
      x = add(x, dropout(linear(a, p + ".attn.c_proj", d, projStd),
                         c.residDropout, 3 * i + 2));
      h = layerNorm(x, p + ".ln_2");
      Value f = activate(linear(h, p + ".mlp.c_fc", c.intermediate, std));
      x = add(x, dropout(linear(f, p + ".mlp.c_proj", d, projStd),
                         c.residDropout, 3 * i + 3));
    }
    layer = layers;
    x = layerNorm(x, "transformer.ln_f");
    Value head =
        c.tieEmbeddings ? wte : normal("lm_head.weight", {c.vocab, d}, std);
    Value logits = matmul(x, head, /*transposeB=*/true);
    return CrossEntropyOp::create(b, loc, logits, targets, UnitAttr(),
                                  IntegerAttr());
  }

  // Llama: HF LlamaForCausalLM (nn.Linear weights are [out, in]).
  Value llama(Value tokens, Value targets) {
    int64_t d = c.hidden, hd = c.headDimOrDefault();
    double std = c.initStd;
    auto epsAttr = b.getF64FloatAttr(c.normEps);
    auto theta = b.getF64FloatAttr(c.ropeTheta);
    RopeTable table = ropeTable(c, seq);
    DenseF64ArrayAttr invFreq =
        table.invFreq.empty() ? nullptr : b.getDenseF64ArrayAttr(table.invFreq);
    auto ropeScale = b.getF64FloatAttr(table.scale);
    Value embed = normal("model.embed_tokens.weight", {c.vocab, d}, std);
    Value x = EmbeddingOp::create(b, loc, embed, tokens);
    auto rmsNorm = [&](Value in, const std::string &name) -> Value {
      return RmsNormOp::create(b, loc, in, ones(name, d), epsAttr);
    };
    // `prefix`.weight, plus `prefix`.bias when `bias` (zeros, as HF inits).
    auto linear = [&](Value in, const std::string &prefix, int64_t out,
                      bool bias) {
      int64_t inDim = cast<RankedTensorType>(in.getType()).getShape().back();
      Value y = matmul(in, normal(prefix + ".weight", {out, inDim}, std),
                       /*transposeB=*/true);
      if (bias)
        y = BiasAddOp::create(b, loc, y, zeros(prefix + ".bias", out));
      return y;
    };
    for (int64_t i = 0; i < c.numLayers; ++i) {
      layer = i;
      std::string p = "model.layers." + std::to_string(i);
      Value h = rmsNorm(x, p + ".input_layernorm.weight");
      Value q = linear(h, p + ".self_attn.q_proj", c.numHeads * hd, c.qkvBias);
      Value k =
          linear(h, p + ".self_attn.k_proj", c.numKvHeads * hd, c.qkvBias);
      Value v =
          linear(h, p + ".self_attn.v_proj", c.numKvHeads * hd, c.qkvBias);
      q = RopeOp::create(b, loc, q, b.getI64IntegerAttr(c.numHeads), theta,
                         b.getBoolAttr(false), invFreq, ropeScale);
      k = RopeOp::create(b, loc, k, b.getI64IntegerAttr(c.numKvHeads), theta,
                         b.getBoolAttr(false), invFreq, ropeScale);
      Value a = AttentionOp::create(
          b, loc, q, k, v, b.getI64IntegerAttr(c.numHeads),
          b.getI64IntegerAttr(c.numKvHeads), /*scale=*/nullptr, UnitAttr(),
          attnDropoutP(), attnDropoutSite(i), ArrayAttr(), window());
      x = add(x, linear(a, p + ".self_attn.o_proj", d, c.outBias));
      h = rmsNorm(x, p + ".post_attention_layernorm.weight");
      Value gate = linear(h, p + ".mlp.gate_proj", c.intermediate, c.mlpBias);
      Value up = linear(h, p + ".mlp.up_proj", c.intermediate, c.mlpBias);
      Value act = activation() == Activation::Silu
                      ? Value(SwigluOp::create(b, loc, gate, up))
                      : Value(MulOp::create(b, loc, activate(gate), up));
      x = add(x, linear(act, p + ".mlp.down_proj", d, c.mlpBias));
    }
    layer = c.numLayers;
    x = rmsNorm(x, "model.norm.weight");
    Value head =
        c.tieEmbeddings ? embed : normal("lm_head.weight", {c.vocab, d}, std);
    Value logits = matmul(x, head, /*transposeB=*/true);
    return CrossEntropyOp::create(b, loc, logits, targets, UnitAttr(),
                                  IntegerAttr());
  }

private:
  OpBuilder &b;
  const ModelConfig &c;
  Type element;
  int64_t seq; // the compiled sequence (dynamic RoPE scales to it)
  Location loc;
  /// The layer of the params made next (weft.layer): -1 for the embeddings.
  int64_t layer = -1;
};

} // namespace

OwningOpRef<ModuleOp> buildModel(MLIRContext &context,
                                 const ModelConfig &config,
                                 const BuildOptions &options,
                                 std::string &error) {
  context.loadDialect<WeftDialect, func::FuncDialect>();
  Location loc = UnknownLoc::get(&context);
  std::string problem = validateConfig(config);
  if (problem.empty() && (options.batch <= 0 || options.seq <= 0))
    problem = "batch=" + std::to_string(options.batch) +
              " and seq=" + std::to_string(options.seq) + " must be positive";
  // The largest activation (logits, or the attention and MLP widths) must
  // keep its byte size well inside int64.
  long double widest = std::max<long double>(
      {(long double)config.vocab, 3.0L * config.hidden,
       (long double)config.intermediate,
       (long double)config.numHeads * config.headDimOrDefault()});
  if (problem.empty() &&
      (long double)options.batch * options.seq * widest * 8 > 1e18L)
    problem = "batch=" + std::to_string(options.batch) +
              " x seq=" + std::to_string(options.seq) +
              " makes activations of more than 1e18 bytes";
  // GPT-2 has no position past its table; a RoPE model computes any, but
  // positions past its config's context were never trained (a longer
  // context is a rope_scaling, which sets the new length; dynamic scaling
  // is the one meant to run past it).
  if (problem.empty() && options.seq > config.maxPositions &&
      config.ropeScaling.type != "dynamic")
    problem = "seq=" + std::to_string(options.seq) + " exceeds " +
              (config.family == ModelFamily::Gpt2 ? "n_positions"
                                                  : "max_position_embeddings") +
              "=" + std::to_string(config.maxPositions) + " of " + config.name;
  // Mistral's window is weft.attention's; Qwen2's applies from
  // max_window_layers on (or by layer_types), per layer, which weft does not
  // build yet.
  if (problem.empty() && config.slidingWindow > 0 &&
      config.modelType != "mistral" && options.seq > config.slidingWindow)
    problem =
        "seq=" + std::to_string(options.seq) +
        " exceeds sliding_window=" + std::to_string(config.slidingWindow) +
        " of " + config.name + ": " + config.modelType +
        " slides its window only in some layers (from max_window_layers on, "
        "or by layer_types), which weft does not build yet; it matches " +
        config.modelType + " only while every key lies inside the window";
  if (!problem.empty()) {
    error = problem;
    return nullptr;
  }

  OpBuilder b(&context);
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(module->getBody());
  Type element = options.f64 ? Type(b.getF64Type()) : Type(b.getF32Type());
  auto ids =
      RankedTensorType::get({options.batch, options.seq}, b.getI32Type());
  auto fnType =
      b.getFunctionType({ids, ids}, {RankedTensorType::get({}, element)});
  auto fn = func::FuncOp::create(b, loc, "forward", fnType);
  fn->setAttr(weft::attrname::kModel, b.getStringAttr(config.name));
  Block *body = fn.addEntryBlock();
  b.setInsertionPointToEnd(body);
  ModelBuilder mb(b, config, element, options.seq);
  Value loss = config.family == ModelFamily::Gpt2
                   ? mb.gpt2(body->getArgument(0), body->getArgument(1))
                   : mb.llama(body->getArgument(0), body->getArgument(1));
  func::ReturnOp::create(b, loc, loss);
  return module;
}

} // namespace weft
