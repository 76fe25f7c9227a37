//===- TestPrograms.cpp - GPT-2 / Llama-style programs for tests ----------===//
#include "TestPrograms.h"

namespace weft::test {

namespace {
using Param = ProgramBuilder::Param;

struct Gpt {
  const GptConfig &C;
  ProgramBuilder &PB;
  int64_t B, S, D, V, F, H, Hkv, Hd;
  using Param = ProgramBuilder::Param;
  using json = nlohmann::json;

  Shape act(int64_t W) const { return {B, S, W}; }
  int64_t mm(int64_t A, int64_t W, Shape Out, bool TA = false,
             bool TB = false) {
    int64_t Y = PB.arena(Out);
    json Attrs = json::object();
    if (TA)
      Attrs["transpose_a"] = true;
    if (TB)
      Attrs["transpose_b"] = true;
    PB.op("matmul", {A, W}, {Y}, Attrs);
    return Y;
  }
  void mmInto(int64_t A, int64_t W, int64_t Y, bool TA, bool TB) {
    json Attrs = json::object();
    if (TA)
      Attrs["transpose_a"] = true;
    if (TB)
      Attrs["transpose_b"] = true;
    PB.op("matmul", {A, W}, {Y}, Attrs);
  }
  int64_t add(int64_t A, int64_t Bb, Shape Out) {
    int64_t Y = PB.arena(Out);
    PB.op("add", {A, Bb}, {Y});
    return Y;
  }
  Param weight(const std::string &Name, Shape Dims) {
    return PB.param(Name, Dims, C.Std, true);
  }
  Param vec(const std::string &Name, int64_t N, bool Ones) {
    return PB.param(Name, {N}, 0, false, Ones ? "ones" : "zeros");
  }
  json normAttrs() const { return {{"eps", 1e-5}}; }
  json attnAttrs() const { return {{"num_heads", H}, {"num_kv_heads", Hkv}}; }
};

ProgramBuilder gpt2(const GptConfig &C) {
  ProgramBuilder PB(C.DType, C.Batch, C.Seq, C.Vocab);
  Gpt G{C,       PB,        C.Batch, C.Seq,   C.Dim,
        C.Vocab, 4 * C.Dim, C.Heads, C.Heads, C.Dim / C.Heads};
  int64_t B = G.B, S = G.S, D = G.D, V = G.V, F = G.F;
  int64_t P = C.Positions ? C.Positions : S;
  auto Wte = G.weight("transformer.wte.weight", {V, D});
  auto Wpe = G.weight("transformer.wpe.weight", {P, D});
  struct Layer {
    Param Ln1G, Ln1B, AttnW, AttnB, ProjW, ProjB, Ln2G, Ln2B, FcW, FcB, MpW,
        MpB;
    int64_t H, A, Qkv, Qkv2, Q, K, Vv, Att, Proj, Proj2, H1, M, Fc, Fc2, Gl, Mp,
        Mp2;
  };
  std::vector<Layer> Ls(size_t(C.Layers));
  for (int64_t L = 0; L < C.Layers; ++L) {
    std::string Pre = "transformer.h." + std::to_string(L) + ".";
    Layer &Y = Ls[size_t(L)];
    Y.Ln1G = G.vec(Pre + "ln_1.weight", D, true);
    Y.Ln1B = G.vec(Pre + "ln_1.bias", D, false);
    Y.AttnW = G.weight(Pre + "attn.c_attn.weight", {D, 3 * D});
    Y.AttnB = G.vec(Pre + "attn.c_attn.bias", 3 * D, false);
    Y.ProjW = G.weight(Pre + "attn.c_proj.weight", {D, D});
    Y.ProjB = G.vec(Pre + "attn.c_proj.bias", D, false);
    Y.Ln2G = G.vec(Pre + "ln_2.weight", D, true);
    Y.Ln2B = G.vec(Pre + "ln_2.bias", D, false);
    Y.FcW = G.weight(Pre + "mlp.c_fc.weight", {D, F});
    Y.FcB = G.vec(Pre + "mlp.c_fc.bias", F, false);
    Y.MpW = G.weight(Pre + "mlp.c_proj.weight", {F, D});
    Y.MpB = G.vec(Pre + "mlp.c_proj.bias", D, false);
  }
  auto LnfG = G.vec("transformer.ln_f.weight", D, true);
  auto LnfB = G.vec("transformer.ln_f.bias", D, false);

  // Forward.
  int64_t E = PB.arena(G.act(D));
  PB.op("embedding", {Wte.Value, PB.Tokens}, {E});
  int64_t H = PB.arena(G.act(D));
  PB.op("position_embedding", {E, Wpe.Value}, {H});
  for (Layer &Y : Ls) {
    Y.H = H;
    Y.A = PB.arena(G.act(D));
    PB.op("layer_norm", {H, Y.Ln1G.Value, Y.Ln1B.Value}, {Y.A}, G.normAttrs());
    Y.Qkv = G.mm(Y.A, Y.AttnW.Value, G.act(3 * D));
    Y.Qkv2 = PB.arena(G.act(3 * D));
    PB.op("bias_add", {Y.Qkv, Y.AttnB.Value}, {Y.Qkv2});
    Y.Q = PB.arena(G.act(D));
    Y.K = PB.arena(G.act(D));
    Y.Vv = PB.arena(G.act(D));
    PB.op("split", {Y.Qkv2}, {Y.Q, Y.K, Y.Vv}, {{"sizes", {D, D, D}}});
    Y.Att = PB.arena(G.act(D));
    PB.op("attention", {Y.Q, Y.K, Y.Vv}, {Y.Att}, G.attnAttrs());
    Y.Proj = G.mm(Y.Att, Y.ProjW.Value, G.act(D));
    Y.Proj2 = PB.arena(G.act(D));
    PB.op("bias_add", {Y.Proj, Y.ProjB.Value}, {Y.Proj2});
    Y.H1 = G.add(H, Y.Proj2, G.act(D));
    Y.M = PB.arena(G.act(D));
    PB.op("layer_norm", {Y.H1, Y.Ln2G.Value, Y.Ln2B.Value}, {Y.M},
          G.normAttrs());
    Y.Fc = G.mm(Y.M, Y.FcW.Value, G.act(F));
    Y.Fc2 = PB.arena(G.act(F));
    PB.op("bias_add", {Y.Fc, Y.FcB.Value}, {Y.Fc2});
    Y.Gl = PB.arena(G.act(F));
    PB.op("gelu", {Y.Fc2}, {Y.Gl});
    Y.Mp = G.mm(Y.Gl, Y.MpW.Value, G.act(D));
    Y.Mp2 = PB.arena(G.act(D));
    PB.op("bias_add", {Y.Mp, Y.MpB.Value}, {Y.Mp2});
    H = G.add(Y.H1, Y.Mp2, G.act(D));
  }
  int64_t Fin = PB.arena(G.act(D));
  PB.op("layer_norm", {H, LnfG.Value, LnfB.Value}, {Fin}, G.normAttrs());
  int64_t Logits = G.mm(Fin, Wte.Value, G.act(V), false, true);
  int64_t Loss = PB.arena({});
  PB.op("cross_entropy", {Logits, PB.Targets}, {Loss});
  PB.markForwardEnd(Loss);

  // Backward.
  int64_t DLoss = PB.arena({});
  PB.op("fill", {}, {DLoss}, {{"value", 1.0}});
  int64_t DLogits = PB.arena(G.act(V));
  PB.op("cross_entropy_grad", {Logits, PB.Targets, DLoss}, {DLogits});
  int64_t DFin = G.mm(DLogits, Wte.Value, G.act(D));
  int64_t DWteHead = G.mm(DLogits, Fin, {V, D}, true, false);
  int64_t DH = PB.arena(G.act(D));
  PB.op("layer_norm_grad", {DFin, H, LnfG.Value}, {DH, LnfG.Grad, LnfB.Grad},
        G.normAttrs());
  for (auto It = Ls.rbegin(); It != Ls.rend(); ++It) {
    Layer &Y = *It;
    PB.op("reduce_rows", {DH}, {Y.MpB.Grad});
    G.mmInto(Y.Gl, DH, Y.MpW.Grad, true, false);
    int64_t DGl = G.mm(DH, Y.MpW.Value, G.act(F), false, true);
    int64_t DFc = PB.arena(G.act(F));
    PB.op("gelu_grad", {DGl, Y.Fc2}, {DFc});
    PB.op("reduce_rows", {DFc}, {Y.FcB.Grad});
    G.mmInto(Y.M, DFc, Y.FcW.Grad, true, false);
    int64_t DM = G.mm(DFc, Y.FcW.Value, G.act(D), false, true);
    int64_t DH1p = PB.arena(G.act(D));
    PB.op("layer_norm_grad", {DM, Y.H1, Y.Ln2G.Value},
          {DH1p, Y.Ln2G.Grad, Y.Ln2B.Grad}, G.normAttrs());
    int64_t DH1 = G.add(DH, DH1p, G.act(D));
    PB.op("reduce_rows", {DH1}, {Y.ProjB.Grad});
    G.mmInto(Y.Att, DH1, Y.ProjW.Grad, true, false);
    int64_t DAtt = G.mm(DH1, Y.ProjW.Value, G.act(D), false, true);
    int64_t DQ = PB.arena(G.act(D)), DK = PB.arena(G.act(D)),
            DV = PB.arena(G.act(D));
    PB.op("attention_grad", {DAtt, Y.Q, Y.K, Y.Vv}, {DQ, DK, DV},
          G.attnAttrs());
    int64_t DQkv = PB.arena(G.act(3 * D));
    PB.op("concat", {DQ, DK, DV}, {DQkv});
    PB.op("reduce_rows", {DQkv}, {Y.AttnB.Grad});
    G.mmInto(Y.A, DQkv, Y.AttnW.Grad, true, false);
    int64_t DA = G.mm(DQkv, Y.AttnW.Value, G.act(D), false, true);
    int64_t DHp = PB.arena(G.act(D));
    PB.op("layer_norm_grad", {DA, Y.H, Y.Ln1G.Value},
          {DHp, Y.Ln1G.Grad, Y.Ln1B.Grad}, G.normAttrs());
    DH = G.add(DH1, DHp, G.act(D));
  }
  PB.op("position_embedding_grad", {DH}, {Wpe.Grad});
  int64_t DWteEmb = PB.arena({V, D});
  PB.op("embedding_grad", {DH, PB.Tokens}, {DWteEmb});
  PB.op("add", {DWteHead, DWteEmb}, {Wte.Grad});
  PB.addOptimizer();
  return PB;
}

ProgramBuilder llama(const GptConfig &C) {
  ProgramBuilder PB(C.DType, C.Batch, C.Seq, C.Vocab);
  int64_t Hkv = C.KvHeads ? C.KvHeads : C.Heads;
  Gpt G{C,       PB,        C.Batch, C.Seq, C.Dim,
        C.Vocab, 3 * C.Dim, C.Heads, Hkv,   C.Dim / C.Heads};
  int64_t D = G.D, V = G.V, F = G.F, Kd = Hkv * G.Hd;
  nlohmann::json RopeQ = {{"num_heads", G.H}, {"theta", 10000.0}},
                 RopeK = {{"num_heads", Hkv}, {"theta", 10000.0}};
  nlohmann::json RopeQi = RopeQ, RopeKi = RopeK;
  RopeQi["inverse"] = true;
  RopeKi["inverse"] = true;
  auto Wte = G.weight("model.embed_tokens.weight", {V, D});
  struct Layer {
    Param Ln1, Wq, Wk, Wv, Wo, Ln2, Wg, Wu, Wd;
    int64_t H, A, Q, K, Vv, Qr, Kr, Att, H1, M, Gt, Up, Sw;
  };
  std::vector<Layer> Ls(size_t(C.Layers));
  for (int64_t L = 0; L < C.Layers; ++L) {
    std::string Pre = "model.layers." + std::to_string(L) + ".";
    Layer &Y = Ls[size_t(L)];
    Y.Ln1 = G.vec(Pre + "input_layernorm.weight", D, true);
    Y.Wq = G.weight(Pre + "self_attn.q_proj.weight", {D, D});
    Y.Wk = G.weight(Pre + "self_attn.k_proj.weight", {D, Kd});
    Y.Wv = G.weight(Pre + "self_attn.v_proj.weight", {D, Kd});
    Y.Wo = G.weight(Pre + "self_attn.o_proj.weight", {D, D});
    Y.Ln2 = G.vec(Pre + "post_attention_layernorm.weight", D, true);
    Y.Wg = G.weight(Pre + "mlp.gate_proj.weight", {D, F});
    Y.Wu = G.weight(Pre + "mlp.up_proj.weight", {D, F});
    Y.Wd = G.weight(Pre + "mlp.down_proj.weight", {F, D});
  }
  auto Lnf = G.vec("model.norm.weight", D, true);
  auto Head = G.weight("lm_head.weight", {D, V});

  int64_t H = PB.arena(G.act(D));
  PB.op("embedding", {Wte.Value, PB.Tokens}, {H});
  for (Layer &Y : Ls) {
    Y.H = H;
    Y.A = PB.arena(G.act(D));
    PB.op("rms_norm", {H, Y.Ln1.Value}, {Y.A}, G.normAttrs());
    Y.Q = G.mm(Y.A, Y.Wq.Value, G.act(D));
    Y.K = G.mm(Y.A, Y.Wk.Value, G.act(Kd));
    Y.Vv = G.mm(Y.A, Y.Wv.Value, G.act(Kd));
    Y.Qr = PB.arena(G.act(D));
    Y.Kr = PB.arena(G.act(Kd));
    PB.op("rope", {Y.Q}, {Y.Qr}, RopeQ);
    PB.op("rope", {Y.K}, {Y.Kr}, RopeK);
    Y.Att = PB.arena(G.act(D));
    PB.op("attention", {Y.Qr, Y.Kr, Y.Vv}, {Y.Att}, G.attnAttrs());
    int64_t O = G.mm(Y.Att, Y.Wo.Value, G.act(D));
    Y.H1 = G.add(H, O, G.act(D));
    Y.M = PB.arena(G.act(D));
    PB.op("rms_norm", {Y.H1, Y.Ln2.Value}, {Y.M}, G.normAttrs());
    Y.Gt = G.mm(Y.M, Y.Wg.Value, G.act(F));
    Y.Up = G.mm(Y.M, Y.Wu.Value, G.act(F));
    Y.Sw = PB.arena(G.act(F));
    PB.op("swiglu", {Y.Gt, Y.Up}, {Y.Sw});
    int64_t Dn = G.mm(Y.Sw, Y.Wd.Value, G.act(D));
    H = G.add(Y.H1, Dn, G.act(D));
  }
  int64_t Fin = PB.arena(G.act(D));
  PB.op("rms_norm", {H, Lnf.Value}, {Fin}, G.normAttrs());
  int64_t Logits = G.mm(Fin, Head.Value, G.act(V));
  int64_t Loss = PB.arena({});
  PB.op("cross_entropy", {Logits, PB.Targets}, {Loss});
  PB.markForwardEnd(Loss);

  int64_t DLoss = PB.arena({});
  PB.op("fill", {}, {DLoss}, {{"value", 1.0}});
  int64_t DLogits = PB.arena(G.act(V));
  PB.op("cross_entropy_grad", {Logits, PB.Targets, DLoss}, {DLogits});
  G.mmInto(Fin, DLogits, Head.Grad, true, false);
  int64_t DFin = G.mm(DLogits, Head.Value, G.act(D), false, true);
  int64_t DH = PB.arena(G.act(D));
  PB.op("rms_norm_grad", {DFin, H, Lnf.Value}, {DH, Lnf.Grad}, G.normAttrs());
  for (auto It = Ls.rbegin(); It != Ls.rend(); ++It) {
    Layer &Y = *It;
    G.mmInto(Y.Sw, DH, Y.Wd.Grad, true, false);
    int64_t DSw = G.mm(DH, Y.Wd.Value, G.act(F), false, true);
    int64_t DGt = PB.arena(G.act(F)), DUp = PB.arena(G.act(F));
    PB.op("swiglu_grad", {DSw, Y.Gt, Y.Up}, {DGt, DUp});
    G.mmInto(Y.M, DGt, Y.Wg.Grad, true, false);
    G.mmInto(Y.M, DUp, Y.Wu.Grad, true, false);
    int64_t DM = G.add(G.mm(DGt, Y.Wg.Value, G.act(D), false, true),
                       G.mm(DUp, Y.Wu.Value, G.act(D), false, true), G.act(D));
    int64_t DH1p = PB.arena(G.act(D));
    PB.op("rms_norm_grad", {DM, Y.H1, Y.Ln2.Value}, {DH1p, Y.Ln2.Grad},
          G.normAttrs());
    int64_t DH1 = G.add(DH, DH1p, G.act(D));
    G.mmInto(Y.Att, DH1, Y.Wo.Grad, true, false);
    int64_t DAtt = G.mm(DH1, Y.Wo.Value, G.act(D), false, true);
    int64_t DQr = PB.arena(G.act(D)), DKr = PB.arena(G.act(Kd)),
            DV = PB.arena(G.act(Kd));
    PB.op("attention_grad", {DAtt, Y.Qr, Y.Kr, Y.Vv}, {DQr, DKr, DV},
          G.attnAttrs());
    int64_t DQ = PB.arena(G.act(D)), DK = PB.arena(G.act(Kd));
    PB.op("rope", {DQr}, {DQ}, RopeQi);
    PB.op("rope", {DKr}, {DK}, RopeKi);
    G.mmInto(Y.A, DQ, Y.Wq.Grad, true, false);
    G.mmInto(Y.A, DK, Y.Wk.Grad, true, false);
    G.mmInto(Y.A, DV, Y.Wv.Grad, true, false);
    int64_t DA =
        G.add(G.add(G.mm(DQ, Y.Wq.Value, G.act(D), false, true),
                    G.mm(DK, Y.Wk.Value, G.act(D), false, true), G.act(D)),
              G.mm(DV, Y.Wv.Value, G.act(D), false, true), G.act(D));
    int64_t DHp = PB.arena(G.act(D));
    PB.op("rms_norm_grad", {DA, Y.H, Y.Ln1.Value}, {DHp, Y.Ln1.Grad},
          G.normAttrs());
    DH = G.add(DH1, DHp, G.act(D));
  }
  PB.op("embedding_grad", {DH, PB.Tokens}, {Wte.Grad});
  PB.addOptimizer();
  return PB;
}

} // namespace

ProgramBuilder gptProgram(const GptConfig &C) {
  return C.Llama ? llama(C) : gpt2(C);
}

TokenData gptTokens(const GptConfig &C) {
  std::vector<uint16_t> Toks(3000);
  for (size_t I = 0; I < Toks.size(); ++I)
    Toks[I] = uint16_t((I * 11 + I / 7) % size_t(C.Vocab));
  return TokenData::fromTokens(Toks, C.Vocab, C.Seq).take();
}

} // namespace weft::test
