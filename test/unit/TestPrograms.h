//===- TestPrograms.h - Hand-built programs for runtime tests --*- C++ -*-===//
//
// A tiny program builder (JSON payload + container) and two models built
// with it: a minimal embedding -> matmul -> cross_entropy program and a
// GPT-2-style transformer with hand-written backward, both ending in AdamW.
// The arena is bump-allocated (no reuse): tests want clarity, not memory.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_TEST_UNIT_TESTPROGRAMS_H
#define WEFT_TEST_UNIT_TESTPROGRAMS_H

#include "program/Program.h"
#include "runtime/data/Data.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>
#include <vector>

namespace weft::test {

namespace detail {
/// Whether buffers A and B of a flat payload are the same or share arena
/// bytes.
inline bool overlaps(const nlohmann::json &Buffers, int64_t A, int64_t B) {
  if (A == B)
    return true;
  const nlohmann::json &BA = Buffers[size_t(A)], &BB = Buffers[size_t(B)];
  if (BA["kind"] != "arena" || BB["kind"] != "arena")
    return false;
  auto Bytes = [](const nlohmann::json &Buf) {
    int64_t N = Buf["dtype"] == "f64" ? 8 : 4;
    for (const auto &D : Buf["shape"])
      N *= D.get<int64_t>();
    return N;
  };
  int64_t OA = BA["offset"], OB = BB["offset"];
  return OA < OB + Bytes(BB) && OB < OA + Bytes(BA);
}
/// Adds mesh.groups where a payload's mesh has none: the groups of the
/// instructions (Insts: every instruction, in order), as weft-emit-program
/// lists them.
inline void addGroups(nlohmann::json &Root, const nlohmann::json &Insts) {
  if (!Root.contains("mesh") || !Root["mesh"].is_object() ||
      Root["mesh"].contains("groups"))
    return;
  nlohmann::json Groups = nlohmann::json::array();
  for (const auto &I : Insts) {
    if (!I.is_object() || !I.contains("op") || !I["op"].is_string() ||
        !I.contains("attrs") || !I["attrs"].is_object())
      continue;
    const std::string Op = I["op"];
    OpKind Kind;
    if (!parseOpName(Op.substr(0, Op.rfind("_start")), Kind))
      continue;
    const char *Key = groupAttrName(Kind);
    if (!Key || !I["attrs"].contains(Key) || !I["attrs"][Key].is_array() ||
        I["attrs"][Key].empty())
      continue;
    if (std::find(Groups.begin(), Groups.end(), I["attrs"][Key]) ==
        Groups.end())
      Groups.push_back(I["attrs"][Key]);
  }
  Root["mesh"]["groups"] = Groups;
}
} // namespace detail

/// A payload written the way tests find easiest, one flat "instructions"
/// list with "forward_end" and "optimizer_begin", in format version 4: one
/// stage whose fragments forward, backward and optimizer are cut at those
/// marks, run on one micro-batch. An instruction with attrs.async = true
/// becomes its *_start form, and a wait on its output is inserted where
/// weft-emit-program puts one: before the first instruction that touches
/// its buffers, or at its fragment's end (an explicit false is dropped; any
/// other value is left for the loader to refuse). A payload that has
/// "stages" is kept. Either way a mesh without "groups" gets them
/// (detail::addGroups).
inline std::string programJson(nlohmann::json Root) {
  using json = nlohmann::json;
  if (Root.contains("stages") || !Root.contains("instructions")) {
    json All = json::array();
    if (Root.contains("stages") && Root["stages"].is_array())
      for (const auto &St : Root["stages"])
        if (St.is_object() && St.contains("fragments") &&
            St["fragments"].is_array())
          for (const auto &F : St["fragments"])
            if (F.is_object() && F.contains("instructions") &&
                F["instructions"].is_array())
              for (const auto &I : F["instructions"])
                All.push_back(I);
    detail::addGroups(Root, All);
    return Root.dump();
  }
  detail::addGroups(Root, Root["instructions"]);
  json Flat = Root["instructions"];
  const int64_t N = int64_t(Flat.size());
  auto Mark = [&](const char *Key, int64_t Default) {
    int64_t V = Root.value(Key, Default);
    return V < 0 ? 0 : V > N ? N : V;
  };
  const int64_t Cuts[4] = {0, Mark("forward_end", N),
                           Mark("optimizer_begin", N), N};
  const char *Names[3] = {"forward", "backward", "optimizer"};
  const json &Buffers = Root["buffers"];
  json Fragments = json::array();
  for (int F = 0; F < 3; ++F) {
    json List = json::array();
    std::vector<std::pair<int64_t, int64_t>> InFlight; // in, out
    auto Wait = [](int64_t Y) {
      return json{{"op", "wait"},
                  {"in", {Y}},
                  {"out", json::array()},
                  {"attrs", json::object()}};
    };
    for (int64_t I = Cuts[F]; I < std::max(Cuts[F], Cuts[F + 1]); ++I) {
      json Inst = Flat[size_t(I)];
      for (size_t K = 0; K < InFlight.size();) {
        bool Touch = false;
        for (const char *Key : {"in", "out"})
          for (const auto &Id : Inst[Key])
            Touch = Touch || detail::overlaps(Buffers, Id, InFlight[K].first) ||
                    detail::overlaps(Buffers, Id, InFlight[K].second);
        if (!Touch) {
          ++K;
          continue;
        }
        List.push_back(Wait(InFlight[K].second));
        InFlight.erase(InFlight.begin() + int64_t(K));
      }
      json &Attrs = Inst["attrs"];
      if (Attrs.is_object() && Attrs.contains("async") &&
          Attrs["async"].is_boolean()) {
        if (Attrs["async"].get<bool>()) {
          Inst["op"] = Inst["op"].get<std::string>() + "_start";
          if (!Inst["in"].empty() && !Inst["out"].empty())
            InFlight.push_back({Inst["in"][0], Inst["out"][0]});
        }
        Attrs.erase("async");
      }
      List.push_back(Inst);
    }
    for (const auto &F : InFlight)
      List.push_back(Wait(F.second));
    Fragments.push_back({{"name", Names[F]}, {"instructions", List}});
  }
  Root.erase("instructions");
  Root.erase("forward_end");
  Root.erase("optimizer_begin");
  if (!Root.contains("microbatches"))
    Root["microbatches"] = 1;
  Root["stages"] = json::array({{{"fragments", Fragments},
                                 {"schedule",
                                  {{{"run", "forward"}, {"microbatch", 0}},
                                   {{"run", "backward"}, {"microbatch", 0}},
                                   {{"run", "optimizer"}}}}}});
  return Root.dump();
}

class ProgramBuilder {
public:
  using json = nlohmann::json;
  ProgramBuilder(std::string DType, int64_t Batch, int64_t Seq, int64_t Vocab)
      : DType(std::move(DType)) {
    Root = {{"model", "test"},
            {"dtype", this->DType},
            {"batch", Batch},
            {"seq", Seq},
            {"vocab", Vocab},
            {"optimizer",
             {{"kind", "adamw"},
              {"lr", 1e-2},
              {"beta1", 0.9},
              {"beta2", 0.95},
              {"eps", 1e-8},
              {"weight_decay", 0.1},
              {"schedule", "constant"},
              {"warmup_steps", 0},
              {"total_steps", 0},
              {"min_lr", 0.0}}},
            {"params", json::array()},
            {"buffers", json::array()},
            {"instructions", json::array()}};
    Tokens = buffer({{"kind", "input"},
                     {"name", "tokens"},
                     {"shape", {Batch, Seq}},
                     {"dtype", "i32"}});
    Targets = buffer({{"kind", "input"},
                      {"name", "targets"},
                      {"shape", {Batch, Seq}},
                      {"dtype", "i32"}});
  }

  struct Param {
    int64_t Index, Value, Grad, M, V;
    bool Decay;
  };

  Param param(const std::string &Name, const Shape &Dims, double Std,
              bool Decay = true, const char *Kind = "normal") {
    json Init = {{"kind", Kind}};
    if (std::string(Kind) == "normal")
      Init["std"] = Std;
    int64_t I = int64_t(Root["params"].size());
    Root["params"].push_back({{"name", Name},
                              {"shape", Dims},
                              {"init", Init},
                              {"weight_decay", Decay}});
    auto Buf = [&](const char *K) {
      return buffer(
          {{"kind", K}, {"param", I}, {"shape", Dims}, {"dtype", DType}});
    };
    Param P{I, Buf("param"), Buf("grad"), Buf("adam_m"), Buf("adam_v"), Decay};
    Params.push_back(P);
    return P;
  }

  int64_t arena(const Shape &Dims) {
    int64_t Id = buffer({{"kind", "arena"},
                         {"offset", ArenaTop},
                         {"shape", Dims},
                         {"dtype", DType}});
    ArenaTop += (numElements(Dims) * (DType == "f64" ? 8 : 4) + 63) / 64 * 64;
    return Id;
  }

  void op(const std::string &Name, std::vector<int64_t> In,
          std::vector<int64_t> Out, json Attrs = json::object()) {
    Root["instructions"].push_back(
        {{"op", Name}, {"in", In}, {"out", Out}, {"attrs", Attrs}});
  }

  size_t numInstructions() const { return Root["instructions"].size(); }
  void markForwardEnd(int64_t Loss) {
    Root["loss"] = Loss;
    Root["forward_end"] = numInstructions();
  }
  /// Appends one adamw per parameter and finishes the payload.
  void addOptimizer() {
    Root["optimizer_begin"] = numInstructions();
    for (const Param &P : Params)
      op("adamw", {P.Value, P.Grad, P.M, P.V}, {P.Value, P.M, P.V},
         {{"weight_decay", P.Decay}});
    Root["arena_bytes"] = ArenaTop;
  }

  json &root() { return Root; }
  std::string payload() const { return programJson(Root); }
  std::string file() const { return encodeProgramContainer(payload()); }

  int64_t Tokens, Targets;

private:
  int64_t buffer(json B) {
    Root["buffers"].push_back(std::move(B));
    return int64_t(Root["buffers"].size()) - 1;
  }
  std::string DType;
  json Root;
  int64_t ArenaTop = 0;
  std::vector<Param> Params;
};

/// tokens -> embedding [V,D] -> matmul W [D,V] -> cross_entropy, backward
/// and AdamW.
inline ProgramBuilder tinyProgram(const std::string &DType = "f32",
                                  int64_t B = 2, int64_t S = 4, int64_t V = 16,
                                  int64_t D = 8) {
  ProgramBuilder PB(DType, B, S, V);
  auto Wte = PB.param("wte.weight", {V, D}, 0.5);
  auto W = PB.param("head.weight", {D, V}, 0.5);
  int64_t X = PB.arena({B, S, D}), Logits = PB.arena({B, S, V}),
          Loss = PB.arena({});
  PB.op("embedding", {Wte.Value, PB.Tokens}, {X});
  PB.op("matmul", {X, W.Value}, {Logits});
  PB.op("cross_entropy", {Logits, PB.Targets}, {Loss});
  PB.markForwardEnd(Loss);
  int64_t DLoss = PB.arena({}), DLogits = PB.arena({B, S, V}),
          Dx = PB.arena({B, S, D});
  PB.op("fill", {}, {DLoss}, {{"value", 1.0}});
  PB.op("cross_entropy_grad", {Logits, PB.Targets, DLoss}, {DLogits});
  PB.op("matmul", {X, DLogits}, {W.Grad}, {{"transpose_a", true}});
  PB.op("matmul", {DLogits, W.Value}, {Dx}, {{"transpose_b", true}});
  PB.op("embedding_grad", {Dx, PB.Tokens}, {Wte.Grad});
  PB.addOptimizer();
  return PB;
}

struct GptConfig {
  std::string DType = "f32";
  int64_t Batch = 2, Seq = 8, Vocab = 32, Dim = 16, Layers = 2, Heads = 2;
  int64_t KvHeads = 0;   // 0: = Heads
  bool Llama = false;    // rms_norm, rope, swiglu, no biases, untied head
  int64_t Positions = 0; // 0: = Seq
  double Std = 0.02;     // normal init of the weight matrices
};

/// A GPT-2 (or Llama-style) transformer with hand-written backward.
ProgramBuilder gptProgram(const GptConfig &C);

/// A deterministic stream of 3000 ids of C's vocab, in sequences of C.Seq,
/// for training gptProgram(C).
TokenData gptTokens(const GptConfig &C);

} // namespace weft::test

#endif // WEFT_TEST_UNIT_TESTPROGRAMS_H
