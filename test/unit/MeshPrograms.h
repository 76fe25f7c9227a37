//===- MeshPrograms.h - Hand-built version-2 programs for tests -*- C++ -*-===//
//
// meshTinyProgram is tinyProgram (embedding -> matmul -> cross_entropy,
// backward, AdamW) partitioned by hand over a dp x tp mesh: the head weight
// [D,V] is split over tp on dim 1 (its logits all-gathered), the batch over
// dp; optional ZeRO-1 on the embedding (adamw shard_axes, m/v split) and
// ZeRO-2 on the head (reduce-scattered grad). Same param names, shapes and
// init as tinyProgram, so the 1-rank run is its oracle. With AsyncGrads the
// head's gradient all_reduce is async and independent compute (the dx
// matmul, embedding_grad) runs before adamw reads the gradient. With Zero3
// the head is also split over dp on dim 0 and all-gathered before each use
// (forward and backward), independent compute (the embedding, the dW
// matmul) between the gather and its consumer; AsyncGather makes those
// gathers async. With Zero1Partial both params are ZeRO-1 in the
// reduce-scatter form: each grad buffer is full-size and `partial` over dp
// (written by the local matmul / embedding_grad, no gradient all_reduce),
// m/v split over dp on dim 0, adamw with shard_axes [dp]. With VocabParallel
// the loss reads the tp-split logits through cross_entropy_stats, an
// all_gather of the [tp, rows, 3] statistics and cross_entropy_from_stats
// (the gradient: cross_entropy_stats_grad), never gathering the logits.
//
// asyncOverwriteProgram: an async all_reduce (or all_gather) whose next
// instruction writes another arena buffer over its input's bytes (the
// executor must wait).
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_TEST_UNIT_MESHPROGRAMS_H
#define WEFT_TEST_UNIT_MESHPROGRAMS_H

#include "TestPrograms.h"
#include "program/Program.h"

#include <nlohmann/json.hpp>

namespace weft::test {

struct MeshTinyConfig {
  int64_t Dp = 1, Tp = 1;
  int64_t B = 4, S = 4, V = 16, D = 8;
  bool Zero1 = false;         // embedding: m/v split over dp
  bool Zero2 = false;         // head: grad, m, v split over dp on dim 0
  int64_t HeadBlocks = 1;     // blocks of the head's dim 1 (checkpoint tests;
                              // training needs 1)
  bool AsyncGrads = false;    // the gradient all_reduces over dp are async
  bool Zero3 = false;         // head: param, grad, m, v split over dp on dim 0
  bool AsyncGather = false;   // Zero3: the head's gathers are async
  bool Zero1Partial = false;  // both params: partial grads, m/v split over dp
  bool VocabParallel = false; // the tp-split logits go through the
                              // vocab-parallel cross-entropy ops, not a gather
};

inline nlohmann::json meshTinyProgram(const MeshTinyConfig &C) {
  using json = nlohmann::json;
  const int64_t Bl = C.B / C.Dp, Vl = C.V / C.Tp;
  json Buffers = json::array(), Insts = json::array();
  int64_t Top = 0;
  auto Buf = [&](json B) {
    Buffers.push_back(std::move(B));
    return int64_t(Buffers.size()) - 1;
  };
  auto Arena = [&](Shape Dims) {
    int64_t Id = Buf({{"kind", "arena"},
                      {"offset", Top},
                      {"shape", Dims},
                      {"dtype", "f32"}});
    Top += (numElements(Dims) * 4 + 63) / 64 * 64;
    return Id;
  };
  auto Op = [&](const char *Name, std::vector<int64_t> In,
                std::vector<int64_t> Out, json Attrs = json::object()) {
    Insts.push_back({{"op", Name}, {"in", In}, {"out", Out}, {"attrs", Attrs}});
  };
  json Input = {{"kind", "input"},
                {"shape", {Bl, C.S}},
                {"dtype", "i32"},
                {"sharding", {{"dp"}, json::array()}}};
  Input["name"] = "tokens";
  int64_t Tokens = Buf(Input);
  Input["name"] = "targets";
  int64_t Targets = Buf(Input);
  auto State = [&](const char *Kind, int64_t P, Shape Local, Shape Global,
                   json Sharding, json Blocks) {
    return Buf({{"kind", Kind},
                {"param", P},
                {"shape", Local},
                {"dtype", "f32"},
                {"global_shape", Global},
                {"sharding", Sharding},
                {"blocks", Blocks}});
  };
  json Rep2 = {json::array(), json::array()};
  // wte [V,D], replicated; ZeRO-1 splits m/v over dp.
  int64_t Wte = State("param", 0, {C.V, C.D}, {C.V, C.D}, Rep2, {1, 1});
  int64_t WteG = State("grad", 0, {C.V, C.D}, {C.V, C.D}, Rep2, {1, 1});
  if (C.Zero1Partial)
    Buffers[size_t(WteG)]["partial"] = {"dp"};
  const bool SplitWte = C.Zero1 || C.Zero1Partial;
  Shape OptWte = SplitWte ? Shape{C.V / C.Dp, C.D} : Shape{C.V, C.D};
  json OptWteS = SplitWte ? json{{"dp"}, json::array()} : Rep2;
  int64_t WteM = State("adam_m", 0, OptWte, {C.V, C.D}, OptWteS, {1, 1});
  int64_t WteV = State("adam_v", 0, OptWte, {C.V, C.D}, OptWteS, {1, 1});
  // head [D,V] split over tp on dim 1; ZeRO-2 splits grad/m/v over dp.
  json HeadS = {json::array(), {"tp"}};
  json HeadB = {1, C.HeadBlocks};
  // ZeRO-3 splits the param too.
  const bool ShardW = C.Zero2 || C.Zero3;
  const bool SplitW = ShardW || C.Zero1Partial;
  Shape OptW = SplitW ? Shape{C.D / C.Dp, Vl} : Shape{C.D, Vl};
  json OptWS = SplitW ? json{{"dp"}, {"tp"}} : HeadS;
  Shape WLocal = C.Zero3 ? OptW : Shape{C.D, Vl};
  json WS = C.Zero3 ? OptWS : HeadS;
  int64_t W = State("param", 1, WLocal, {C.D, C.V}, WS, HeadB);
  int64_t WG = C.Zero1Partial
                   ? State("grad", 1, {C.D, Vl}, {C.D, C.V}, HeadS, HeadB)
                   : State("grad", 1, OptW, {C.D, C.V}, OptWS, HeadB);
  if (C.Zero1Partial)
    Buffers[size_t(WG)]["partial"] = {"dp"};
  int64_t WM = State("adam_m", 1, OptW, {C.D, C.V}, OptWS, HeadB);
  int64_t WV = State("adam_v", 1, OptW, {C.D, C.V}, OptWS, HeadB);

  int64_t X = Arena({Bl, C.S, C.D}), LogitsL = Arena({Bl, C.S, Vl}),
          Logits = Arena({Bl, C.S, C.V}), LossL = Arena({}), Loss = Arena({});
  const int64_t Den = C.B * C.S;
  // ZeRO-3: the head gathered into WFull before the embedding.
  auto Gather = [&] {
    int64_t Full = Arena({C.D, Vl});
    Op("all_gather", {W}, {Full},
       {{"axes", {"dp"}}, {"dim", 0}, {"async", C.AsyncGather}});
    return Full;
  };
  const int64_t WFwd = C.Zero3 ? Gather() : W;
  Op("embedding", {Wte, Tokens}, {X});
  Op("matmul", {X, WFwd}, {LogitsL});
  const int64_t StatsL = Arena({1, Bl, C.S, 3}),
                Stats = Arena({C.Tp, Bl, C.S, 3});
  if (C.VocabParallel) {
    Op("cross_entropy_stats", {LogitsL, Targets}, {StatsL},
       {{"vocab_axes", {"tp"}}});
    Op("all_gather", {StatsL}, {Stats}, {{"axes", {"tp"}}, {"dim", 0}});
    Op("cross_entropy_from_stats", {Stats}, {LossL}, {{"denominator", Den}});
  } else {
    // Along dim 2: gather contiguous blocks, then put them in place.
    int64_t Blocks = Arena({C.Tp * Bl, C.S, Vl});
    Op("all_gather", {LogitsL}, {Blocks}, {{"axes", {"tp"}}, {"dim", 0}});
    Op("block_transpose", {Blocks}, {Logits},
       {{"axes", {"tp"}}, {"dim", 2}, {"inverse", true}});
    Op("cross_entropy", {Logits, Targets}, {LossL}, {{"denominator", Den}});
  }
  Op("all_reduce", {LossL}, {Loss}, {{"axes", {"dp"}}});
  int64_t ForwardEnd = int64_t(Insts.size());
  int64_t DLoss = Arena({}), DLogits = Arena({Bl, C.S, C.V}),
          DLogitsL = Arena({Bl, C.S, Vl}), DWp = Arena({C.D, Vl}),
          DXp = Arena({Bl, C.S, C.D}), DX = Arena({Bl, C.S, C.D}),
          DWteP = Arena({C.V, C.D});
  Op("fill", {}, {DLoss}, {{"value", 1.0}});
  if (C.VocabParallel) {
    Op("cross_entropy_stats_grad", {LogitsL, Targets, Stats, DLoss}, {DLogitsL},
       {{"vocab_axes", {"tp"}}, {"denominator", Den}});
  } else {
    Op("cross_entropy_grad", {Logits, Targets, DLoss}, {DLogits},
       {{"denominator", Den}});
    Op("slice", {DLogits}, {DLogitsL}, {{"axes", {"tp"}}, {"dim", 2}});
  }
  const int64_t WBwd = C.Zero3 ? Gather() : W; // gathered again
  Op("matmul", {X, DLogitsL}, {C.Zero1Partial ? WG : DWp},
     {{"transpose_a", true}});
  if (ShardW)
    Op("reduce_scatter", {DWp}, {WG}, {{"axes", {"dp"}}, {"dim", 0}});
  else if (!C.Zero1Partial) // partial: adamw reduce-scatters it
    Op("all_reduce", {DWp}, {WG}, {{"axes", {"dp"}}, {"async", C.AsyncGrads}});
  Op("matmul", {DLogitsL, WBwd}, {DXp}, {{"transpose_b", true}});
  Op("all_reduce", {DXp}, {DX}, {{"axes", {"tp"}}});
  Op("embedding_grad", {DX, Tokens}, {C.Zero1Partial ? WteG : DWteP});
  if (!C.Zero1Partial)
    Op("all_reduce", {DWteP}, {WteG},
       {{"axes", {"dp"}}, {"async", C.AsyncGrads}});
  int64_t OptBegin = int64_t(Insts.size());
  json A0 = {{"weight_decay", true}}, A1 = {{"weight_decay", true}};
  if (C.Zero1 || C.Zero1Partial)
    A0["shard_axes"] = {"dp"};
  if ((C.Zero2 && !C.Zero3) || C.Zero1Partial)
    A1["shard_axes"] = {"dp"};
  // Under ZeRO the program reduce-scatters a partial gradient to the rank's
  // block first and gathers the updated param in place after.
  auto Update = [&](int64_t Par, int64_t G, int64_t Mo, int64_t Ve, json A,
                    Shape Block) {
    const bool Sharded = A.contains("shard_axes");
    if (Sharded && C.Zero1Partial) {
      int64_t Reduced = Arena(Block);
      Op("reduce_scatter", {G}, {Reduced}, {{"axes", {"dp"}}, {"dim", 0}});
      G = Reduced;
    }
    Op("adamw", {Par, G, Mo, Ve}, {Par, Mo, Ve}, A);
    if (Sharded)
      Op("all_gather", {Par}, {Par}, {{"axes", {"dp"}}, {"dim", 0}});
  };
  Update(Wte, WteG, WteM, WteV, A0, OptWte);
  Update(W, WG, WM, WV, A1, OptW);

  json Norm = {{"kind", "normal"}, {"std", 0.5}};
  return {{"model", "mesh-tiny"},
          {"dtype", "f32"},
          {"batch", C.B},
          {"seq", C.S},
          {"vocab", C.V},
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
          {"mesh", {{"axes", {"dp", "tp"}}, {"shape", {C.Dp, C.Tp}}}},
          {"params",
           {{{"name", "wte.weight"},
             {"shape", {C.V, C.D}},
             {"global_shape", {C.V, C.D}},
             {"sharding", Rep2},
             {"init", Norm},
             {"weight_decay", true}},
            {{"name", "head.weight"},
             {"shape", WLocal},
             {"global_shape", {C.D, C.V}},
             {"sharding", WS},
             {"blocks", HeadB},
             {"init", Norm},
             {"weight_decay", true}}}},
          {"arena_bytes", Top},
          {"buffers", Buffers},
          {"instructions", Insts},
          {"loss", Loss},
          {"forward_end", ForwardEnd},
          {"optimizer_begin", OptBegin}};
}

/// Over a mesh dp=Dp, N elements: loss = 0; A = 1; grad(w) = all_reduce(A)
/// (async); Z = 100 where Z is a different arena buffer on A's bytes; Y = Z
/// + grad(w). The sum is Dp everywhere only if the all_reduce completed
/// before Z was written. Instructions: [0] fill loss, [1] fill A, [2]
/// all_reduce, [3] fill Z, [4] add. With Gather, [2] is an all_gather along
/// dim 0 (async) and w, grad(w), Z and Y have Dp·N elements, all 1 when it
/// completed before Z was written.
inline nlohmann::json asyncOverwriteProgram(int64_t Dp, int64_t N,
                                            bool Gather = false) {
  using json = nlohmann::json;
  const int64_t M = Gather ? Dp * N : N; // grad(w), Z and Y
  const int64_t Bytes = (M * 4 + 63) / 64 * 64;
  json Buffers = {
      {{"kind", "param"}, {"param", 0}, {"shape", {M}}, {"dtype", "f32"}},
      {{"kind", "grad"}, {"param", 0}, {"shape", {M}}, {"dtype", "f32"}},
      {{"kind", "arena"}, {"offset", 0}, {"shape", {N}}, {"dtype", "f32"}},
      {{"kind", "arena"}, {"offset", 0}, {"shape", {M}}, {"dtype", "f32"}},
      {{"kind", "arena"},
       {"offset", Bytes},
       {"shape", json::array()},
       {"dtype", "f32"}},
      {{"kind", "arena"},
       {"offset", Bytes + 64},
       {"shape", {M}},
       {"dtype", "f32"}}};
  enum { W, G, A, Z, L, Y }; // buffer ids
  auto Op = [](const char *Name, std::vector<int64_t> In,
               std::vector<int64_t> Out, json Attrs) {
    return json{{"op", Name}, {"in", In}, {"out", Out}, {"attrs", Attrs}};
  };
  json Collective =
      Gather ? Op("all_gather", {A}, {G},
                  {{"axes", {"dp"}}, {"dim", 0}, {"async", true}})
             : Op("all_reduce", {A}, {G}, {{"axes", {"dp"}}, {"async", true}});
  json Insts = {Op("fill", {}, {L}, {{"value", 0.0}}),
                Op("fill", {}, {A}, {{"value", 1.0}}), Collective,
                Op("fill", {}, {Z}, {{"value", 100.0}}),
                Op("add", {Z, G}, {Y}, json::object())};
  return {{"model", "async-overwrite"},
          {"dtype", "f32"},
          {"batch", 1},
          {"seq", 1},
          {"vocab", 2},
          {"optimizer",
           {{"kind", "adamw"},
            {"lr", 1e-2},
            {"beta1", 0.9},
            {"beta2", 0.95},
            {"eps", 1e-8},
            {"weight_decay", 0.0},
            {"schedule", "constant"},
            {"warmup_steps", 0},
            {"total_steps", 0},
            {"min_lr", 0.0}}},
          {"mesh", {{"axes", {"dp"}}, {"shape", {Dp}}}},
          {"params",
           {{{"name", "w"},
             {"shape", {M}},
             {"init", {{"kind", "zeros"}}},
             {"weight_decay", false}}}},
          {"arena_bytes", Bytes + 64 + Bytes},
          {"buffers", Buffers},
          {"instructions", Insts},
          {"loss", int64_t(L)},
          {"forward_end", 1},
          {"optimizer_begin", 5}};
}

} // namespace weft::test

#endif // WEFT_TEST_UNIT_MESHPROGRAMS_H
