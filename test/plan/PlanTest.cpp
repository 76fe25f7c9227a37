//===- PlanTest.cpp - cost model and search unit tests --------------------===//
#include "dialect/WeftDialect.h"
#include "frontends/builtin/BuildModel.h"
#include "planner/Search.h"
#include "program/PipelineSchedule.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <set>
#include <vector>

using namespace weft;
using namespace weft::cost;

namespace {

constexpr double kYear = 365.0 * 86400.0;

ModelConfig preset(const std::string &name) {
  ConfigResult c = lookupPreset(name);
  EXPECT_TRUE(c.ok()) << c.error;
  return c.config;
}

// The planner's costs of a model's forward module built at `batch`.
ModelCost analyze(const ModelConfig &config, int64_t seq, int64_t batch = 1) {
  mlir::MLIRContext context;
  context.loadDialect<WeftDialect, mlir::func::FuncDialect>();
  BuildOptions options;
  options.batch = batch;
  options.seq = seq;
  std::string error;
  auto module = buildModel(context, config, options, error);
  EXPECT_TRUE(module) << error;
  ModelCost cost;
  EXPECT_TRUE(module && analyzeModule(*module, cost, error)) << error;
  return cost;
}

ModelCost analyze(const std::string &name, int64_t seq, int64_t batch = 1) {
  return analyze(preset(name), seq, batch);
}

// Llama 3 8B with Llama 3.1's long context (RoPE positions up to `seq`).
ModelCost analyzeLong(int64_t seq) {
  ModelConfig c = preset("llama-3-8b");
  c.maxPositions = seq;
  return analyze(c, seq);
}

Hardware h100() { return lookupHardwarePreset("h100-80g").hardware; }

// --- seed arithmetic -------------------------------------------------------

TEST(Seed, SeventyBillionUnderAdamIsAboutOnePointOneTerabytes) {
  EXPECT_EQ(stateBytesPerParam(0, 1).total(), 16.0);
  double bytes = 70e9 * stateBytesPerParam(0, 64).total();
  EXPECT_NEAR(bytes, 1.12e12, 1e9);
  // The preset's IR-counted parameters (70.6e9) give the same ~1.1 TB.
  ModelCost m = analyze("llama-3-70b", 128);
  EXPECT_NEAR(m.numParams() * 16.0 / 1e12, 1.13, 0.01);
}

TEST(Seed, SixNDFor70BOn15TTokens) {
  double flops = 6 * 70e9 * 15e12;
  EXPECT_NEAR(flops, 6.3e24, 1e22);
  Hardware hw = h100();
  double oneGpuYears = flops / (hw.peakFlops() * 0.40) / kYear;
  EXPECT_NEAR(oneGpuYears, 500, 10); // ~505 GPU-years at 40% MFU
  double days = flops / (hw.peakFlops() * 0.40 * 1024) / 86400.0;
  EXPECT_NEAR(days, 180, 3); // ~180 days on 1,024 H100s
}

// weft's state: fp32 parameters, gradients, Adam m and v, sharded by stage
// (weft-compile --explain's "memory per rank").
TEST(Seed, ZeroBytesPerGpu) {
  for (int64_t d : {1, 2, 8, 64}) {
    EXPECT_DOUBLE_EQ(stateBytesPerParam(0, d).total(), 16.0);
    EXPECT_DOUBLE_EQ(stateBytesPerParam(1, d).total(), 8.0 + 8.0 / d);
    EXPECT_DOUBLE_EQ(stateBytesPerParam(2, d).total(), 4.0 + 12.0 / d);
    EXPECT_DOUBLE_EQ(stateBytesPerParam(3, d).total(), 16.0 / d);
    EXPECT_DOUBLE_EQ(stateBytesPerParam(2, d).grads, 4.0 / d);
    EXPECT_DOUBLE_EQ(stateBytesPerParam(1, d).params, 4.0);
    // The ZeRO paper's (weft-plan --master-weights).
    EXPECT_DOUBLE_EQ(masterWeightStateBytesPerParam(0, d).total(), 16.0);
    EXPECT_DOUBLE_EQ(masterWeightStateBytesPerParam(1, d).total(),
                     4.0 + 12.0 / d);
    EXPECT_DOUBLE_EQ(masterWeightStateBytesPerParam(2, d).total(),
                     2.0 + 14.0 / d);
    EXPECT_DOUBLE_EQ(masterWeightStateBytesPerParam(3, d).total(), 16.0 / d);
  }
}

// The planner prices the bubble by the schedule library's formula (one
// definition, program/PipelineSchedule.h).
TEST(Seed, PipelineBubble) {
  EXPECT_DOUBLE_EQ(weft::pipelineBubble(4, 8, 1), 3.0 / 11.0); // (p-1)/(m+p-1)
  EXPECT_DOUBLE_EQ(weft::pipelineBubble(1, 8, 1), 0.0);
  // Interleaving divides the idle slots by v.
  EXPECT_NEAR(weft::pipelineBubble(4, 8, 2), 1.5 / 9.5, 1e-15);
}

TEST(Seed, RingAllReduceTime) {
  LinkTier link{100, 5, 1}; // 100 GB/s, 5 us
  double s = 1e9;
  EXPECT_DOUBLE_EQ(ringAllReduceSeconds(s, 8, link),
                   2.0 * 7 / 8 * s / 100e9 + 2.0 * 7 * 5e-6);
  EXPECT_DOUBLE_EQ(ringAllReduceSeconds(s, 1, link), 0.0);
}

// A group across nodes: one ring on the inter-node tier, or (a CPU
// cluster's MPI communicator, "collectives": "hierarchical") within the
// node, across on 1/L of the bytes, within again.
TEST(Seed, GroupCollectiveTimes) {
  Hardware hw = h100(); // 8 per node
  double s = 1e9;
  // Inside a node: the intra-node ring.
  EXPECT_DOUBLE_EQ(groupAllReduceSeconds(s, 1, 8, hw),
                   ringAllReduceSeconds(s, 8, hw.intraNode));
  // 16 ranks, 8 on each of 2 nodes: a ring across.
  EXPECT_DOUBLE_EQ(groupAllReduceSeconds(s, 1, 16, hw),
                   ringAllReduceSeconds(s, 16, hw.interNode));
  hw.hierarchical = true;
  EXPECT_DOUBLE_EQ(groupAllReduceSeconds(s, 1, 16, hw),
                   2 * ringGatherSeconds(s, 8, hw.intraNode) +
                       ringAllReduceSeconds(s / 8, 2, hw.interNode));
  EXPECT_DOUBLE_EQ(groupGatherSeconds(s, 2, 16, hw),
                   ringGatherSeconds(s, 4, hw.intraNode) +
                       ringGatherSeconds(s / 4, 4, hw.interNode));
  // One rank of the group per node: nothing to do within a node.
  EXPECT_DOUBLE_EQ(groupAllReduceSeconds(s, 8, 4, hw),
                   ringAllReduceSeconds(s, 4, hw.interNode));
}

TEST(Seed, KorthikantiActivations) {
  int64_t s = 2048, b = 1, h = 4096, a = 32;
  double sbh = double(s) * b * h;
  // Without Korthikanti's 5as/h scores: weft's attention keeps none.
  EXPECT_DOUBLE_EQ(layerActivationBytes(s, b, h, a, 1, false, Recompute::None),
                   sbh * 34.0);
  EXPECT_DOUBLE_EQ(layerActivationBytes(s, b, h, a, 8, true, Recompute::None),
                   sbh * 34.0 / 8);
  EXPECT_DOUBLE_EQ(
      layerActivationBytes(s, b, h, a, 8, false, Recompute::Selective),
      sbh * (10.0 + 24.0 / 8));
  EXPECT_DOUBLE_EQ(layerActivationBytes(s, b, h, a, 8, false, Recompute::Full),
                   2.0 * sbh);
}

// --- the IR-derived costs --------------------------------------------------

// Textbook training FLOPs per token: 6 * N' + 12 * L * s * h, N' the
// parameters that take part in GEMMs (the embedding lookup table excluded
// unless it is also the tied head), 12 L s h the attention core (Kaplan et
// al. 2020 / Narayanan et al. 2021). The IR counts the attention backward as
// the kernel does it (QK^T recomputed: 2.5x the forward, not 2x) and counts
// norm and bias parameters, which do no GEMM work: a few percent above.
double textbookPerToken(const ModelConfig &c, int64_t seq) {
  double n = double(c.numParams());
  if (c.family == ModelFamily::Gpt2)
    n -= double(c.maxPositions) * c.hidden; // learned positions: a lookup
  else if (!c.tieEmbeddings)
    n -= double(c.vocab) * c.hidden; // embed_tokens: a lookup
  return 6.0 * n + 12.0 * c.numLayers * double(seq) * c.hidden;
}

TEST(OpCost, IrFlopsMatchTextbookGpt2) {
  ModelCost m = analyze("gpt2", 1024);
  double ir = m.trainingFlopsPerSequence() / 1024;
  double ref = textbookPerToken(preset("gpt2"), 1024);
  std::printf("gpt2 seq 1024: IR %.4g FLOPs/token, textbook %.4g, ratio %.4f\n",
              ir, ref, ir / ref);
  EXPECT_NEAR(ir / ref, 1.0, 0.05) << "IR " << ir << " textbook " << ref;
  EXPECT_EQ(m.numParams(), preset("gpt2").numParams());
  EXPECT_EQ(m.layer.gemms.size(), 4u); // c_attn, c_proj, c_fc, mlp.c_proj
}

// The planner reads the IR, not the config: the dimensions it needs come
// from the module, and a module built at batch 4 costs the same per sequence.
TEST(OpCost, DimsAndPerSequenceCostsComeFromTheModule) {
  ModelCost one = analyze("llama-3-8b", 512),
            four = analyze("llama-3-8b", 512, 4);
  ModelConfig c = preset("llama-3-8b");
  EXPECT_EQ(one.dims.name, "llama-3-8b");
  EXPECT_EQ(one.dims.numLayers, c.numLayers);
  EXPECT_EQ(one.dims.hidden, c.hidden);
  EXPECT_EQ(one.dims.numHeads, c.numHeads);
  EXPECT_EQ(one.dims.vocab, c.vocab);
  EXPECT_EQ(one.seq, 512);
  ASSERT_EQ(one.layers.size(), size_t(c.numLayers));
  EXPECT_EQ(one.layers.front().gemmFlops, one.layers.back().gemmFlops);
  EXPECT_DOUBLE_EQ(four.trainingFlopsPerSequence(),
                   one.trainingFlopsPerSequence());
  EXPECT_EQ(four.layer.gemms, one.layer.gemms);
  EXPECT_DOUBLE_EQ(four.layer.backwardElems, one.layer.backwardElems);
  EXPECT_EQ(four.numParams(), one.numParams());
}

TEST(OpCost, RefusesAParamWithoutALayer) {
  mlir::MLIRContext context;
  context.loadDialect<WeftDialect, mlir::func::FuncDialect>();
  BuildOptions options;
  options.batch = 1;
  options.seq = 16;
  std::string error;
  auto module = buildModel(context, preset("gpt-tiny"), options, error);
  ASSERT_TRUE(module) << error;
  module->walk([](ParamOp p) {
    if (p.getName() == "transformer.h.0.attn.c_attn.weight")
      p->removeAttr("weft.layer");
  });
  ModelCost cost;
  EXPECT_FALSE(analyzeModule(*module, cost, error));
  EXPECT_NE(error.find("\"transformer.h.0.attn.c_attn.weight\" has no "
                       "weft.layer"),
            std::string::npos)
      << error;
}

TEST(OpCost, IrFlopsMatchTextbookLlama3_8B) {
  ModelCost m = analyze("llama-3-8b", 4096);
  double ir = m.trainingFlopsPerSequence() / 4096;
  double ref = textbookPerToken(preset("llama-3-8b"), 4096);
  std::printf("llama-3-8b seq 4096: IR %.4g FLOPs/token, textbook %.4g, "
              "ratio %.4f\n",
              ir, ref, ir / ref);
  EXPECT_NEAR(ir / ref, 1.0, 0.05) << "IR " << ir << " textbook " << ref;
  EXPECT_EQ(m.numParams(), preset("llama-3-8b").numParams());
  // q, k, v, gate, up are column-parallel; o and down row-parallel.
  int rows = 0;
  for (const Gemm &g : m.layer.gemms)
    rows += g.split == TpSplit::Row;
  EXPECT_EQ(m.layer.gemms.size(), 7u);
  EXPECT_EQ(rows, 2);
}

// --- hardware descriptions -------------------------------------------------

TEST(Hardware, PresetsRoundTripThroughJson) {
  for (const std::string &name : hardwarePresetNames()) {
    Hardware hw = lookupHardwarePreset(name).hardware;
    HardwareResult back = parseHardwareText(hardwareToJson(hw), name);
    ASSERT_TRUE(back.ok()) << back.error;
    EXPECT_EQ(back.hardware.peakTflops, hw.peakTflops);
    EXPECT_EQ(back.hardware.interNode.latencyUs, hw.interNode.latencyUs);
  }
}

TEST(Hardware, CollectivesFieldIsOptionalAndChecked) {
  Hardware hw = h100();
  EXPECT_FALSE(
      parseHardwareText(hardwareToJson(hw), "c.json").hardware.hierarchical);
  hw.hierarchical = true;
  std::string text = hardwareToJson(hw);
  EXPECT_TRUE(parseHardwareText(text, "c.json").hardware.hierarchical);
  text.replace(text.find("\"hierarchical\""), 14, "\"tree\"");
  EXPECT_EQ(parseHardwareText(text, "c.json").error,
            "c.json: field 'collectives' must be \"ring\" or "
            "\"hierarchical\", got \"tree\"");
}

TEST(Hardware, MissingFieldIsNamed) {
  std::string text = hardwareToJson(h100());
  size_t at = text.find("\"latency_us\"", text.find("inter_node"));
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 12, "\"latency\"");
  HardwareResult r = parseHardwareText(text, "c.json");
  EXPECT_EQ(r.error, "c.json: missing field 'links.inter_node.latency_us'");
}

TEST(Hardware, AttentionEfficiencyIsOptionalAndChecked) {
  Hardware hw = h100();
  EXPECT_EQ(hw.attentionEfficiency, 0.35); // FlashAttention-2 on H100
  std::string text = hardwareToJson(hw);
  EXPECT_EQ(parseHardwareText(text, "c.json").hardware.attentionEfficiency,
            0.35);
  text.replace(text.find("0.35"), 4, "1.5");
  EXPECT_EQ(parseHardwareText(text, "c.json").error,
            "c.json: field 'attention_efficiency' must be a number in (0, 1], "
            "got 1.5");
}

// A fused attention kernel skips the blocks a causal mask hides: at long
// sequences the attention time is about half the full count's; model FLOPs
// (MFU) still count every score. Batched GEMMs (no attention_efficiency)
// compute every score.
TEST(OpCost, CausalAttentionRunsHalfItsScores) {
  ModelCost m = analyze("llama-3-8b", 8192);
  ASSERT_GT(m.layer.attentionFlops, 0);
  EXPECT_NEAR(m.layer.attentionRunFlops / m.layer.attentionFlops,
              (8192.0 + 1) / (2 * 8192), 1e-12);
  Layout l;
  l.dp = 8;
  Hardware fused = h100(), batched = h100();
  batched.attentionEfficiency = 0;
  Estimate a = estimate(m, fused, l, 8, 0), b = estimate(m, batched, l, 8, 0);
  EXPECT_LT(a.computeS, b.computeS);
  // The same model FLOPs.
  EXPECT_NEAR(a.mfu * a.stepS / (b.mfu * b.stepS), 1.0, 1e-12);
}

// ZeRO-3 moves a layer at a time: on 512 GPUs each all-gather and
// reduce-scatter pays (n-1) hops of latency, which a small model's compute
// does not hide.
TEST(Search, ZeroThreePaysEachLayersRingLatency) {
  ModelCost m = analyze("gpt2", 1024);
  Layout l;
  l.dp = 512;
  l.zero = 3;
  l.microBatch = 1;
  Hardware hw = h100();
  Estimate slow = estimate(m, hw, l, 512, 0);
  hw.interNode.latencyUs = 0;
  Estimate fast = estimate(m, hw, l, 512, 0);
  // 3 collectives of 13 layer units, 511 hops of 10 us each.
  EXPECT_NEAR(slow.dpCommS - fast.dpCommS, 3 * 13 * 511 * 10e-6, 1e-3);
}

// --- search ----------------------------------------------------------------

TEST(Search, Llama70BOn1024H100sIsFastAndKeepsTpInANode) {
  auto t0 = std::chrono::steady_clock::now();
  ModelCost m = analyze("llama-3-70b", 4096);
  SearchOptions o;
  o.gpus = 1024;
  o.globalBatch = 1024;
  o.breakdownTop = 10; // as weft-plan's --top
  SearchResult r = searchLayouts(m, h100(), o);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  ASSERT_TRUE(r.ok()) << r.error;
  std::printf("llama-3-70b, 1024 H100s: %lld layouts in %.3f s\n",
              (long long)r.evaluated, seconds);
  EXPECT_LT(seconds, 2.0);
  EXPECT_GT(r.evaluated, 1000);
  EXPECT_LE(r.ranked.front().layout.tp, 8);
}

TEST(Search, TpAcrossNodesCostsAnOrderOfMagnitudeMore) {
  // The same tp=8 layout on nodes of 8 GPUs (NVLink) and of 4 (the network).
  // (tp=16 is no option for Llama 3 70B: weft's passes refuse to split its
  // 8 KV heads 16 ways, and the planner asks them.)
  ModelCost m = analyze("llama-3-70b", 4096);
  Layout l{64, 8, 2, 1, 16, Schedule::OneFOneB, 1, 1, false, Recompute::None};
  Hardware node8 = h100(), node4 = h100();
  node4.gpusPerNode = 4;
  Estimate in = estimate(m, node8, l, 1024, 0);
  Estimate across = estimate(m, node4, l, 1024, 0);
  ASSERT_TRUE(in.error.empty()) << in.error;
  double ratio = across.tpCommS / in.tpCommS;
  std::printf("TP comm, tp=8 across nodes / inside one: %.1fx\n", ratio);
  EXPECT_GT(ratio, 8.0) << ratio;
}

// The three ways attention sees a sequence split over cp, priced as weft
// builds them (docs/planner.md). Llama 3 8B (32 heads, 8 KV heads), tp=8
// in a node, cp=4 across nodes.
Layout contextLayout(int64_t cp, ContextComm context) {
  Layout l{1, 8, 1, 1, 1, Schedule::OneFOneB, 1, 0, true, Recompute::None};
  l.cp = cp;
  l.context = context;
  return l;
}

TEST(ContextParallel, TheRingHidesItsShiftsBehindLongAttention) {
  std::vector<double> ratios;
  for (int64_t seq : {4096, 65536}) {
    ModelCost m = analyzeLong(seq);
    Estimate gather =
        estimate(m, h100(), contextLayout(4, ContextComm::AllGather), 1, 0);
    Estimate ring =
        estimate(m, h100(), contextLayout(4, ContextComm::Ring), 1, 0);
    ASSERT_TRUE(gather.error.empty() && ring.error.empty()) << ring.error;
    std::printf("seq %lld, cp=4: all-gather %.4f s, ring %.4f s exposed\n",
                (long long)seq, gather.cpCommS, ring.cpCommS);
    // At 64K each block's attention outlasts its shift: only the last
    // shift, bringing the dK and dV sums home, is exposed (1/6 of the
    // all-gather's bytes). At 4K more shows.
    ratios.push_back(ring.cpCommS / gather.cpCommS);
    // The ring keeps no gathered K and V for the gradient.
    EXPECT_LT(ring.activationBytes, gather.activationBytes);
  }
  EXPECT_LT(ratios[1], 0.2);
  EXPECT_GT(ratios[0], 1.5 * ratios[1]);
}

TEST(ContextParallel, AllToAllPaysForQueriesAndNeedsTheHeads) {
  // GPT-2 (12 heads, no GQA): all-to-all moves q, k, v and the output at
  // (cp-1)/cp of a chunk each, half the all-gather's bytes at cp=4 (32
  // sequences a micro-batch: bandwidth, not latency, sets the time).
  ModelCost gpt = analyze("gpt2", 1024);
  Layout l = contextLayout(4, ContextComm::AllGather);
  l.tp = 1;
  l.sequenceParallel = false;
  l.microBatch = 32;
  Estimate gather = estimate(gpt, h100(), l, 32, 0);
  l.context = ContextComm::AllToAll;
  Estimate a2a = estimate(gpt, h100(), l, 32, 0);
  ASSERT_TRUE(a2a.error.empty()) << a2a.error;
  EXPECT_LT(a2a.cpCommS, gather.cpCommS);
  // Llama 3 8B's 8 KV heads: the queries' bytes make all-to-all dearer.
  ModelCost llama = analyzeLong(8192);
  Estimate llamaGather =
      estimate(llama, h100(), contextLayout(4, ContextComm::AllGather), 1, 0);
  // tp=8 x cp=4 splits the heads 32 ways: 8 KV heads cannot.
  Estimate refused =
      estimate(llama, h100(), contextLayout(4, ContextComm::AllToAll), 1, 0);
  EXPECT_EQ(refused.error,
            "cp=4 all-to-all splits the heads over cp*tp=32: num_heads=32 and "
            "num_kv_heads=8 must both be divisible by it");
  Layout two = contextLayout(4, ContextComm::AllToAll);
  two.tp = 2;
  Estimate llamaA2a = estimate(llama, h100(), two, 1, 0);
  two.context = ContextComm::AllGather;
  llamaGather = estimate(llama, h100(), two, 1, 0);
  ASSERT_TRUE(llamaA2a.error.empty()) << llamaA2a.error;
  EXPECT_GT(llamaA2a.cpCommS, llamaGather.cpCommS);
}

TEST(ContextParallel, TheSearchChoosesTheVariantAndFixHoldsIt) {
  ModelCost m = analyzeLong(65536);
  SearchOptions o;
  o.gpus = 32;
  o.globalBatch = 1;
  o.breakdownTop = 1;
  std::string error;
  ASSERT_TRUE(parseConstraints("tp=8,cp=4", o.fix, error)) << error;
  SearchResult r = searchLayouts(m, h100(), o);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_EQ(r.ranked.front().layout.context, ContextComm::Ring);
  Constraints fix;
  ASSERT_TRUE(parseConstraints("tp=8,cp=4,context=all-gather", fix, error))
      << error;
  o.fix = fix;
  r = searchLayouts(m, h100(), o);
  ASSERT_TRUE(r.ok()) << r.error;
  for (const Estimate &e : r.ranked)
    EXPECT_EQ(e.layout.context, ContextComm::AllGather);
  EXPECT_FALSE(parseConstraints("context=p2p", fix, error));
  EXPECT_EQ(error, "--fix context must be all-gather, ring or all-to-all, got "
                   "'p2p'");
}

// The GEMMs each of `layer`'s collectives that `overlapped` picks runs
// under (TensorParallel.h): GEMMs of 4096 rows per sequence and 8192
// columns; their inner dims, one set per collective, in order. The
// forward's collectives run under none.
template <typename Pick>
std::vector<std::multiset<double>>
overlappedInnerDims(const std::vector<TpCollective> &layer, Pick overlapped) {
  std::vector<std::multiset<double>> dims;
  for (const TpCollective &c : layer) {
    if (c.forward)
      EXPECT_TRUE(c.overlaps.empty());
    if (!overlapped(c))
      continue;
    dims.emplace_back();
    for (const TpCollective::Gemm &g : c.overlaps) {
      EXPECT_EQ(g.rows, 4096.0);
      EXPECT_EQ(g.n, 8192.0);
      dims.back().insert(g.k);
    }
  }
  std::sort(dims.begin(), dims.end());
  return dims;
}

// Llama 3 70B's projections of one layer's input over tp=8: q, k and v
// (8192, 1024 and 1024 over 8), the MLP's gate and up (28672 over 8).
const std::vector<std::multiset<double>> Llama70BProjectionsOverTp8 = {
    {128.0, 128.0, 1024.0}, {3584.0, 3584.0}};

// The planner asks weft's own passes which tp layouts exist and what they
// send: a split weft refuses is no candidate, and the bytes are the
// partitioned IR's.
TEST(Search, TpLayoutsAreWeftsOwn) {
  ModelCost m = analyze("llama-3-70b", 4096);
  std::string error;
  EXPECT_EQ(m.tensorParallel(16, false, error), nullptr);
  EXPECT_NE(error.find("tp=16 does not divide num_heads=64 and "
                       "num_kv_heads=8"),
            std::string::npos)
      << error;
  const TpCollectives *tp8 = m.tensorParallel(8, false, error);
  ASSERT_NE(tp8, nullptr) << error;
  // Megatron: 2 all-reduces forward and 2 backward per layer, of b*s*h.
  // The backward's start after their input gradients and run under the
  // weight gradients (weft-overlap-input-gradient-reductions): [K, 4096] x
  // [4096, 8192] (Llama's weights are [out, in]), K each projection's
  // output over tp.
  ASSERT_EQ(tp8->layer.size(), 4u);
  for (const TpCollective &c : tp8->layer) {
    EXPECT_EQ(c.kind, TpCollective::AllReduce);
    EXPECT_EQ(c.elems, 4096.0 * 8192.0);
    EXPECT_TRUE(c.perSequence);
  }
  EXPECT_EQ(overlappedInnerDims(
                tp8->layer, [](const TpCollective &c) { return !c.forward; }),
            Llama70BProjectionsOverTp8);
  const TpCollectives *sp8 = m.tensorParallel(8, true, error);
  ASSERT_NE(sp8, nullptr) << error;
  int rs = 0, ag = 0, forwardAg = 0;
  for (const TpCollective &c : sp8->layer) {
    (c.kind == TpCollective::ReduceScatter ? rs : ag) +=
        c.kind != TpCollective::AllReduce;
    forwardAg += c.kind == TpCollective::AllGather && c.forward;
  }
  EXPECT_EQ(rs, 4); // SP: each all-reduce becomes a reduce-scatter ...
  // ... and an all-gather, and the backward gathers the attention's and the
  // MLP's inputs again for their weight gradients (Korthikanti et al. 2022,
  // section 4.2.2): those serve the backward, not the forward.
  EXPECT_EQ(ag, 6);
  EXPECT_EQ(forwardAg, 2);
  // Each of those starts before the input gradients' matmuls ahead of the
  // weight gradients (weft.async) and runs under them: [4096, K] x [K,
  // 8192], K each projection's output over tp. The input gradients'
  // reduce-scatters run under the weight gradients, as the all-reduces
  // above.
  EXPECT_EQ(overlappedInnerDims(
                sp8->layer, [](const TpCollective &c) { return c.regather; }),
            Llama70BProjectionsOverTp8);
  EXPECT_EQ(overlappedInnerDims(sp8->layer,
                                [](const TpCollective &c) {
                                  return c.kind ==
                                             TpCollective::ReduceScatter &&
                                         !c.forward;
                                }),
            Llama70BProjectionsOverTp8);
}

// Llama 3 405B on 2,048 H100s, tp=8 and pp=16 under `schedule`.
static SearchOptions llama405OnSixteenStages(Schedule schedule) {
  SearchOptions o;
  o.gpus = 2048;
  o.globalBatch = 2048;
  o.fix.tp = 8;
  o.fix.pp = 16;
  o.fix.schedule = schedule;
  return o;
}

// Llama 3 405B put 126 layers on 16 stages: pp need not divide the layers.
// The planner cuts them as weft-cut-stages does (by forward FLOPs, the
// embeddings on the first stage, the head on the last) and says so.
TEST(Search, UnevenStagesArePlanned) {
  ModelCost m = analyze("llama-3-405b", 8192);
  ASSERT_EQ(m.dims.numLayers, 126);
  SearchResult r =
      searchLayouts(m, h100(), llama405OnSixteenStages(Schedule::OneFOneB));
  ASSERT_TRUE(r.ok()) << r.error;
  const std::vector<int64_t> &chunks = m.chunkLayers(16);
  ASSERT_EQ(chunks.size(), 16u);
  int64_t total = 0;
  for (int64_t n : chunks) {
    EXPECT_TRUE(n == 7 || n == 8) << n;
    total += n;
  }
  EXPECT_EQ(total, 126);
  EXPECT_LE(chunks.back(), chunks[1]); // the head's stage carries no more
  const Estimate &best = r.ranked.front();
  EXPECT_EQ(best.stages.substr(0, 4), "0-7,");
  EXPECT_EQ(best.stages.substr(best.stages.size() - 8), ",119-125");
}

// Meta cut Llama 3 405B's 126 layers for interleaving on pp=16 with the
// first and last chunks a layer short: 126 + 2 = 16 * 2 * 4 = 16 * 4 * 2
// (v = 8 would leave those chunks empty).
TEST(Search, InterleavingTakesLayersPlusTwo) {
  ModelCost m = analyze("llama-3-405b", 8192);
  SearchResult r =
      searchLayouts(m, h100(), llama405OnSixteenStages(Schedule::Interleaved));
  ASSERT_TRUE(r.ok()) << r.error;
  std::set<int64_t> vs;
  for (const Estimate &e : r.ranked)
    vs.insert(e.layout.virtualStages);
  EXPECT_EQ(vs, (std::set<int64_t>{2, 4}));
}

TEST(Search, ConstraintsAndBadInput) {
  Constraints c;
  std::string error;
  EXPECT_TRUE(parseConstraints("tp=8,pp=4", c, error)) << error;
  EXPECT_EQ(*c.tp, 8);
  Constraints d;
  EXPECT_FALSE(parseConstraints("tp=8,tp=4", d, error));
  EXPECT_NE(error.find("contradictory --fix"), std::string::npos) << error;
  Constraints e;
  EXPECT_FALSE(parseConstraints("pp=1,schedule=interleaved", e, error));

  ModelCost m = analyze("llama-3-70b", 4096);
  SearchOptions o;
  o.gpus = 1000;
  o.globalBatch = 1024;
  o.fix.tp = 16;
  o.fix.pp = 4;
  SearchResult r = searchLayouts(m, h100(), o);
  EXPECT_EQ(r.error, "--gpus 1000 is not divisible into the fixed axes "
                     "(dp*tp*pp*cp = 64)");
}

TEST(Search, ModelThatFitsNowhereSaysTheLeastMemory) {
  ModelCost m = analyze("llama-3-405b", 4096);
  SearchOptions o;
  o.gpus = 8;
  o.globalBatch = 8;
  SearchResult r = searchLayouts(m, h100(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error.find("fits no layout: the least memory found is"),
            std::string::npos)
      << r.error;
}

} // namespace
