//===- CostModel.cpp - the analytic step-time and memory model ------------===//
//
// Equations and their sources: docs/planner.md. In short, per micro-batch and
// pipeline stage: GEMM FLOPs / (peak * efficiency(shape)) + memory-bound bytes
// / HBM bandwidth + the tp collectives weft's own passes emit (stages cut as
// weft-cut-stages cuts them, the busiest rank setting the pace); the step
// is (m + (p-1)/v) of those (1F1B / interleaved), plus the DP (or ZeRO)
// collectives that backward cannot hide, plus the optimizer. Memory:
// ZeRO-sharded training state over tp * pp model parallelism, and Korthikanti
// et al. 2022 activations times the micro-batches the schedule keeps in flight.
//
//===----------------------------------------------------------------------===//
#include "planner/CostModel.h"
#include "program/PipelineSchedule.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>

namespace weft::cost {

const char *scheduleName(Schedule s) {
  return s == Schedule::OneFOneB ? "1f1b" : "interleaved";
}
const char *recomputeName(Recompute r) {
  switch (r) {
  case Recompute::None:
    return "none";
  case Recompute::Selective:
    return "selective";
  case Recompute::Full:
    return "full";
  }
  return "?";
}

const char *contextCommName(ContextComm c) {
  switch (c) {
  case ContextComm::AllGather:
    return "all-gather";
  case ContextComm::Ring:
    return "ring";
  case ContextComm::AllToAll:
    return "all-to-all";
  }
  return "?";
}

double ringAllReduceSeconds(double bytes, int64_t n, const LinkTier &link) {
  if (n <= 1)
    return 0;
  return 2.0 * (n - 1) / n * bytes / link.bytesPerSecond() +
         2.0 * (n - 1) * link.latencySeconds();
}

double ringGatherSeconds(double bytes, int64_t n, const LinkTier &link) {
  if (n <= 1)
    return 0;
  return double(n - 1) / n * bytes / link.bytesPerSecond() +
         double(n - 1) * link.latencySeconds();
}

namespace {
/// The ranks of the group on each node (L) and the nodes it spans (N);
/// L = 0 where nodes hold different numbers of them.
std::pair<int64_t, int64_t> groupOnNodes(int64_t stride, int64_t size,
                                         const Hardware &hw) {
  int64_t perNode = std::max<int64_t>(1, hw.gpusPerNode);
  int64_t l = stride >= perNode ? 1 : std::min(size, perNode / stride);
  if (l < 1 || size % l != 0)
    return {0, 0};
  return {l, size / l};
}

double groupSeconds(double bytes, int64_t stride, int64_t size,
                    const Hardware &hw, bool allReduce) {
  auto ring = [&](double b, int64_t n, const LinkTier &t) {
    return allReduce ? ringAllReduceSeconds(b, n, t)
                     : ringGatherSeconds(b, n, t);
  };
  if (stride * size <= hw.gpusPerNode)
    return ring(bytes, size, hw.intraNode);
  auto [l, n] = groupOnNodes(stride, size, hw);
  if (!hw.hierarchical || l < 2 || n < 2)
    return ring(bytes, size, hw.interNode);
  double within = ringGatherSeconds(bytes, l, hw.intraNode);
  return (allReduce ? 2 * within : within) + ring(bytes / l, n, hw.interNode);
}
} // namespace

double groupAllReduceSeconds(double bytes, int64_t stride, int64_t size,
                             const Hardware &hw) {
  return groupSeconds(bytes, stride, size, hw, true);
}

double groupGatherSeconds(double bytes, int64_t stride, int64_t size,
                          const Hardware &hw) {
  return groupSeconds(bytes, stride, size, hw, false);
}

namespace {
// Whole bytes per parameter, sharded over d ranks as ZeRO's stage says:
// the optimizer's from stage 1, the gradients' from 2, the parameters'
// from 3.
StateBytes shardedState(int stage, int64_t d, StateBytes whole) {
  const double shard = 1.0 / double(d);
  if (stage >= 1)
    whole.optimizer *= shard;
  if (stage >= 2)
    whole.grads *= shard;
  if (stage >= 3)
    whole.params *= shard;
  return whole;
}
} // namespace

StateBytes stateBytesPerParam(int stage, int64_t d) {
  return shardedState(stage, d, {4, 4, 8});
}

StateBytes masterWeightStateBytesPerParam(int stage, int64_t d) {
  return shardedState(stage, d, {2, 2, 12});
}

double layerActivationBytes(int64_t s, int64_t b, int64_t h, int64_t heads,
                            int64_t tp, bool sp, Recompute r) {
  // Korthikanti et al.'s 5as/h term (the a*s^2*b scores, softmax and
  // dropout mask) is absent: weft's attention keeps no scores (its gradient
  // recomputes them from q, k and v, as FlashAttention does), so recompute
  // none holds what selective holds.
  (void)heads;
  double sbh = double(s) * b * h, t = double(tp);
  switch (r) {
  case Recompute::Full:
    return 2.0 * sbh / (sp ? t : 1.0);
  case Recompute::Selective:
  case Recompute::None:
    return sp ? sbh * 34.0 / t : sbh * (10.0 + 24.0 / t);
  }
  return 0;
}

namespace {

// "0-5,6-11": each chunk's layers, as weft-compile --stages reads them.
std::string stagesString(const std::vector<int64_t> &chunks) {
  std::string out;
  int64_t next = 0;
  for (int64_t n : chunks) {
    if (!out.empty())
      out += ",";
    out += std::to_string(next) + "-" + std::to_string(next + n - 1);
    next += n;
  }
  return out;
}

std::string fmt(const char *f, double a, double b = 0, double c = 0) {
  char buf[256];
  std::snprintf(buf, sizeof buf, f, a, b, c);
  return buf;
}

// Seconds of one part's forward and backward on one GPU for a micro-batch.
struct PartTime {
  double gemmFwd = 0, attnFwd = 0, elemFwd = 0;
  double gemmBwd = 0, attnBwd = 0, elemBwd = 0;
  double fwd() const { return gemmFwd + attnFwd + elemFwd; }
  double bwd() const { return gemmBwd + attnBwd + elemBwd; }
};

// Under context parallelism (cp > 1) each GPU holds 1/cp of every
// sequence's tokens, and (load-balanced) 1/cp of its attention's work.
PartTime partTime(const PartCost &c, const Hardware &hw, int64_t b, int64_t tp,
                  bool sp, int64_t cp = 1) {
  PartTime t;
  double peak = hw.peakFlops(), e = hw.bytesPerElement();
  for (const Gemm &g : c.gemms) {
    double m = double(g.rowsPerSeq) * b / double(cp);
    double n = g.split == TpSplit::Column ? double(g.n) / tp : double(g.n);
    double k = g.split == TpSplit::Row ? double(g.k) / tp : double(g.k);
    double minDim = std::min({m, n, k});
    t.gemmFwd += 2.0 * m * n * k / (peak * hw.gemmEfficiency(minDim));
  }
  double bwdRatio = c.gemmFlops > 0 ? c.backwardGemmFlops / c.gemmFlops : 2.0;
  t.gemmBwd = t.gemmFwd * bwdRatio;
  if (c.attentionFlops > 0) {
    // A fused kernel (FlashAttention's kind) skips what the mask hides
    // (causal: about half); batched GEMMs and a softmax (the GEMM curve at
    // the head dim) compute every score.
    const bool fused = hw.attentionEfficiency > 0;
    double eff = fused ? hw.attentionEfficiency
                       : hw.gemmEfficiency(double(c.attentionHeadDim));
    double run = fused ? c.attentionRunFlops / c.attentionFlops : 1.0;
    t.attnFwd = run * c.attentionFlops * b / tp / cp / (peak * eff);
    t.attnBwd = run * c.backwardAttentionFlops * b / tp / cp / (peak * eff);
  }
  double fwdElems =
      (c.elemsTp * b / tp + c.elemsRep * b / (sp ? tp : 1)) / double(cp);
  t.elemFwd = fwdElems * e / (hw.hbmGBps * 1e9);
  double share = c.elemsTp + c.elemsRep > 0
                     ? fwdElems / (b * (c.elemsTp + c.elemsRep))
                     : 1.0 / double(cp);
  t.elemBwd = c.backwardElems * b * share * e / (hw.hbmGBps * 1e9);
  return t;
}

const LinkTier &tierFor(const Hardware &hw, int64_t stride, int64_t size,
                        const char *&name) {
  bool inside = stride * size <= hw.gpusPerNode;
  name = inside ? "intra-node" : "inter-node";
  return inside ? hw.intraNode : hw.interNode;
}

// One layer's context-parallel transfers per micro-batch on one GPU.
struct ContextCost {
  std::string error;       // the variant cannot partition this model
  double layerSeconds = 0; // on the critical path
  double keptBytes = 0;    // what attention keeps (or holds at its peak)
  std::vector<CollectiveUse> collectives; // per layer and micro-batch
};

// kv: one of K and V over the whole sequence (this GPU's tp heads); q: the
// queries (and attention's output) so. Megatron's and weft's three
// variants (docs/planner.md):
// - all-gather: K and V gathered before attention, their gradients
//   reduce-scattered after it; nothing overlaps; the gathered K and V stay
//   for the gradient;
// - ring: cp-1 steps shift a K and a V block (kv/cp each) to the next rank
//   while the current block's attention runs (1/cp of the layer's); the
//   gradient shifts K and V again and the dK and dV sums cp times (the
//   last brings them home, exposed); only the blocks in flight are held;
// - all-to-all: q, k, v and the output change from sequence to head
//   layout, forward and backward (each sends (cp-1)/cp of its chunk);
//   heads and KV heads must divide by cp*tp; the head-layout q, k, v and
//   output stay for the gradient.
ContextCost contextCost(const Layout &l, const ModelDims &c, const Hardware &hw,
                        const PartTime &layer, bool breakdown, double kv,
                        double q) {
  ContextCost cc;
  const char *tierName = "";
  const LinkTier &tier = tierFor(hw, l.tp, l.cp, tierName);
  const double cp = double(l.cp);
  const double forwards = l.recompute == Recompute::Full ? 2.0 : 1.0;
  switch (l.context) {
  case ContextComm::AllGather: {
    double one = groupGatherSeconds(kv, l.tp, l.cp, hw);
    cc.layerSeconds = (2.0 * forwards + 2.0) * one;
    cc.keptBytes = 2.0 * kv;
    if (breakdown)
      cc.collectives = {
          {"all_gather", "cp", tierName,
           "context parallelism: keys and values before attention", kv,
           int64_t(2.0 * forwards), 2.0 * forwards * one},
          {"reduce_scatter", "cp", tierName,
           "context parallelism: their gradients after attention's", kv, 2,
           2.0 * one}};
    break;
  }
  case ContextComm::Ring: {
    double block = kv / cp;
    auto shift = [&](double bytes) {
      return bytes / tier.bytesPerSecond() + tier.latencySeconds();
    };
    double fwdStep = std::max(0.0, shift(2 * block) - layer.attnFwd / cp);
    double bwdStep = std::max(0.0, shift(4 * block) - layer.attnBwd / cp);
    double fwd = (cp - 1) * fwdStep, bwd = (cp - 1) * bwdStep;
    double home = shift(2 * block);
    cc.layerSeconds = forwards * fwd + bwd + home;
    cc.keptBytes = 4.0 * block; // this step's K and V, and the next's
    if (breakdown)
      cc.collectives = {
          {"ring_shift", "cp", tierName,
           "ring attention: the next K and V blocks, overlapping the block's "
           "attention (seconds: exposed)",
           block, int64_t(2 * forwards * (cp - 1) + 2 * (cp - 1)),
           forwards * fwd + bwd / 2},
          {"ring_shift", "cp", tierName,
           "ring attention gradient: the dK and dV sums, the last shift home "
           "exposed",
           block, int64_t(2 * cp), bwd / 2 + home}};
    break;
  }
  case ContextComm::AllToAll: {
    int64_t ways = l.cp * l.tp;
    if (c.numHeads % ways != 0 || c.numKvHeads % ways != 0) {
      cc.error =
          "cp=" + std::to_string(l.cp) +
          " all-to-all splits the heads over cp*tp=" + std::to_string(ways) +
          ": num_heads=" + std::to_string(c.numHeads) +
          " and num_kv_heads=" + std::to_string(c.numKvHeads) +
          " must both be divisible by it";
      return cc;
    }
    double oneQ = ringGatherSeconds(q / cp, l.cp, tier);
    double oneKv = ringGatherSeconds(kv / cp, l.cp, tier);
    double pass = 2.0 * oneQ + 2.0 * oneKv;
    cc.layerSeconds = forwards * pass + pass;
    cc.keptBytes = (2.0 * q + 2.0 * kv) / cp;
    if (breakdown)
      cc.collectives = {
          {"all_to_all", "cp", tierName,
           "Ulysses: queries, output, their gradients (sequence <-> heads)",
           q / cp, int64_t(2 * forwards + 2), (2 * forwards + 2) * oneQ},
          {"all_to_all", "cp", tierName,
           "Ulysses: keys, values and their gradients", kv / cp,
           int64_t(2 * forwards + 2), (2 * forwards + 2) * oneKv}};
    break;
  }
  }
  return cc;
}

std::string contextHow(ContextComm c) {
  switch (c) {
  case ContextComm::AllGather:
    return "(all-gather: 2 gathers of K and V, 2 reduce-scatters of their "
           "gradients, not overlapped)";
  case ContextComm::Ring:
    return "(ring: cp-1 shifts of K and V blocks forward and backward, cp of "
           "the dK and dV sums; exposed beyond each block's attention)";
  case ContextComm::AllToAll:
    return "(all-to-all: q, k, v, output and their gradients between "
           "sequence and head layout, not overlapped)";
  }
  return "";
}

} // namespace

Estimate estimate(const ModelCost &model, const Hardware &hw, const Layout &l,
                  int64_t globalBatch, double tokens, bool breakdown) {
  Estimate r;
  r.layout = l;
  const ModelDims &c = model.dims;
  int64_t s = model.seq, h = c.hidden, b = l.microBatch, m = l.numMicroBatches;
  int64_t gpus = l.dp * l.tp * l.pp * l.cp, v = l.virtualStages;
  double e = hw.bytesPerElement();

  // --- compute, per micro-batch on the most loaded pipeline rank ---
  PartTime layer = partTime(model.layer, hw, b, l.tp, l.sequenceParallel, l.cp);
  PartTime first = partTime(model.first, hw, b, l.tp, l.sequenceParallel, l.cp);
  PartTime last = partTime(model.last, hw, b, l.tp, l.sequenceParallel, l.cp);
  double recompute = 0;
  if (l.recompute == Recompute::Full)
    recompute = layer.fwd();
  else if (l.recompute == Recompute::Selective)
    recompute = layer.attnFwd;
  double layerCompute = layer.fwd() + layer.bwd() + recompute;
  // Layers on each pipeline rank as weft-cut-stages cuts them (chunk c on
  // rank c mod pp); the first rank also runs the embeddings, the last the
  // head and loss. The busiest rank sets the pace.
  std::vector<double> rankLayers(size_t(l.pp), 0.0);
  const std::vector<int64_t> &chunks = model.chunkLayers(l.pp * v);
  for (size_t i = 0; i < chunks.size(); ++i)
    rankLayers[i % size_t(l.pp)] += double(chunks[i]);
  auto rankBase = [&](size_t rank) {
    return (rank == 0 ? first.fwd() + first.bwd() : 0.0) +
           (rank + 1 == size_t(l.pp) ? last.fwd() + last.bwd() : 0.0);
  };
  size_t busiest = 0;
  double stageCompute = 0;
  for (size_t rank = 0; rank < rankLayers.size(); ++rank) {
    double t = rankLayers[rank] * layerCompute + rankBase(rank);
    if (t > stageCompute)
      stageCompute = t, busiest = rank;
  }
  const double layersPerStage = rankLayers[busiest];
  r.stages = stagesString(chunks);

  // --- tensor parallelism: the collectives weft's own passes emit ---
  // (TensorParallel.h): per layer on the busiest rank, the embeddings' on
  // the first, the head's and loss's on the last; a forward collective runs
  // again in a fully recomputed layer; parameter-sized ones once per step.
  const char *tpTierName = "";
  const LinkTier &tpTier = tierFor(hw, 1, l.tp, tpTierName);
  double actBytes = double(b) * s * h * e / double(l.cp);
  double tpStage = 0, tpPerStep = 0, tpCount = 0;
  const size_t lastRank = size_t(l.pp) - 1;
  if (l.tp > 1) {
    std::string tpError;
    const TpCollectives *tpc =
        model.tensorParallel(l.tp, l.sequenceParallel, tpError);
    if (!tpc) {
      r.error = tpError;
      return r; // fits stays false
    }
    // kind -> {count per step, seconds per step, bytes of one}
    std::map<std::string, std::array<double, 3>> kinds;
    auto add = [&](const std::vector<TpCollective> &list, double times) {
      for (const TpCollective &c : list) {
        double bytes =
            c.elems * e * (c.perSequence ? double(b) / double(l.cp) : 1.0);
        double one = c.kind == TpCollective::AllReduce
                         ? ringAllReduceSeconds(bytes, l.tp, tpTier)
                         : ringGatherSeconds(bytes, l.tp, tpTier);
        // An asynchronous backward collective runs under the GEMMs before
        // its first reader (TensorParallel.h): only what they do not hide
        // is exposed.
        if (l.tpOverlap && !c.overlaps.empty()) {
          for (const TpCollective::Gemm &g : c.overlaps) {
            const double rows = g.rows * double(b) / double(l.cp);
            const double minDim = std::min({rows, g.n, g.k});
            one -= 2.0 * rows * g.n * g.k /
                   (hw.peakFlops() * hw.gemmEfficiency(minDim));
          }
          one = std::max(0.0, one);
        }
        // Full recomputation runs the forward's collectives again, and its
        // weight gradients read the recomputed gathers: no regathering.
        const bool full = l.recompute == Recompute::Full;
        if (c.regather && full)
          continue;
        double n = times * (c.forward && full ? 2 : 1);
        (c.perSequence ? tpStage : tpPerStep) += n * one;
        double perStep = n * (c.perSequence ? double(m) : 1.0);
        tpCount += perStep;
        if (!breakdown)
          continue;
        auto &k =
            kinds[c.kind == TpCollective::AllReduce       ? "all_reduce"
                  : c.kind == TpCollective::ReduceScatter ? "reduce_scatter"
                                                          : "all_gather"];
        k[0] += perStep;
        k[1] += perStep * one;
        k[2] = std::max(k[2], bytes);
      }
    };
    add(tpc->layer, layersPerStage);
    if (busiest == 0)
      add(tpc->first, 1);
    if (busiest == lastRank)
      add(tpc->last, 1);
    for (auto &[kind, k] : kinds)
      if (breakdown)
        r.collectives.push_back(
            {kind, "tp", tpTierName,
             "weft's Megatron layout" +
                 std::string(l.sequenceParallel ? " with SP" : "") +
                 ", read from the partitioned IR (largest message)" +
                 (l.tpOverlap ? "; the backward's beyond the GEMMs they run "
                                "under"
                              : ""),
             k[2], int64_t(std::llround(k[0])), k[1]});
  }

  // --- context parallelism (docs/planner.md): the transfers of each
  // layer's attention over cp (stride tp), by the variant weft-compile
  // builds; a fully recomputed layer's forward transfers run again ---
  double cpStage = 0, kvBytes = 0, cpActBytes = 0;
  if (l.cp > 1) {
    kvBytes = double(b) * s * h * double(c.numKvHeads) / double(c.numHeads) *
              e / double(l.tp);
    ContextCost cc = contextCost(l, c, hw, layer, breakdown, kvBytes,
                                 double(b) * s * h * e / double(l.tp));
    if (!cc.error.empty()) {
      r.error = cc.error;
      return r; // fits stays false
    }
    cpStage = layersPerStage * cc.layerSeconds;
    cpActBytes = cc.keptBytes;
    for (CollectiveUse u : cc.collectives) { // none without breakdown
      u.count = int64_t(std::llround(double(u.count) * layersPerStage * m));
      u.seconds *= layersPerStage * m;
      r.collectives.push_back(std::move(u));
    }
  }
  r.cpCommS = m * cpStage;

  // --- pipeline: p2p of activations (scatter/gather over tp) and bubble ---
  double p2pMb = 0, p2pStep = 0;
  if (l.pp > 1) {
    const char *ppTierName = "";
    const LinkTier &ppTier = tierFor(hw, l.tp * l.cp, l.pp, ppTierName);
    double bytes = actBytes / l.tp;
    p2pMb =
        2.0 * v * (bytes / ppTier.bytesPerSecond() + ppTier.latencySeconds());
    if (breakdown)
      r.collectives.push_back({"send/recv", "pp", ppTierName,
                               "activations forward, gradients backward", bytes,
                               2 * v * m, m * p2pMb});
    // A tied head's gradient, summed over the step on the last stage, goes
    // to the first before its optimizer (weft-cut-stages); nothing hides it.
    if (model.lastTiedParams > 0) {
      double tied = double(model.lastTiedParams) / l.tp * e;
      p2pStep = tied / ppTier.bytesPerSecond() + ppTier.latencySeconds();
      if (breakdown)
        r.collectives.push_back({"send/recv", "pp", ppTierName,
                                 "tied head's gradient, once per step", tied, 1,
                                 p2pStep});
    }
  }
  double perMb = stageCompute + tpStage + cpStage + p2pMb;
  double idle = double(l.pp - 1) / v;
  // The idle fraction of an ideal pipeline: the schedule library's formula.
  r.bubbleFraction = weft::pipelineBubble(l.pp, m, v);
  r.computeS = m * stageCompute;
  r.tpCommS = m * tpStage + tpPerStep;
  r.p2pS = m * p2pMb + p2pStep;
  r.ppBubbleS = idle * perMb;

  // --- data parallelism: gradients (ZeRO: shards), overlapped with backward
  // ---
  // The rank holding the most (the last keeps a copy of a tied head).
  double stageParams = 0;
  for (size_t rank = 0; rank < rankLayers.size(); ++rank) {
    bool isLast = rank + 1 == rankLayers.size();
    stageParams =
        std::max(stageParams,
                 rankLayers[rank] * double(model.layer.params) +
                     (rank == 0 ? double(model.first.params) : 0.0) +
                     (isLast ? double(model.last.params) : 0.0) +
                     (isLast && l.pp > 1 ? double(model.lastTiedParams) : 0.0));
  }
  double gpuParams = stageParams / l.tp;
  double gradBytes = gpuParams * e;
  double dpComm = 0, window = 0, afterStep = 0;
  const char *dpTierName = "";
  const int64_t dpStride = l.tp * l.cp * l.pp;
  tierFor(hw, dpStride, l.dp, dpTierName);
  // Weights are replicated over cp: their gradients are summed over it too
  // (once per step, or per micro-batch where ZeRO-2/3 reduces them so).
  double cpGrad = 0;
  if (l.cp > 1) {
    const char *cpTierName = "";
    tierFor(hw, l.tp, l.cp, cpTierName);
    double one = groupAllReduceSeconds(gradBytes, l.tp, l.cp, hw);
    int64_t times = l.zero >= 2 ? m : 1;
    cpGrad = double(times) * one;
    if (breakdown)
      r.collectives.push_back({"all_reduce", "cp", cpTierName,
                               "gradients summed over cp (weights replicated)",
                               gradBytes, times, cpGrad});
  }
  if (l.dp > 1 || l.cp > 1) {
    double ar =
        l.dp > 1 ? groupAllReduceSeconds(gradBytes, dpStride, l.dp, hw) : 0.0;
    // ZeRO-2 and -3 move a layer at a time (FSDP's units, weft's ZeRO
    // buckets), so each collective pays its ring's latency: (n-1) hops on
    // 512 GPUs are milliseconds, beside a small model's compute.
    const double units = std::max(1.0, std::ceil(layersPerStage)) + 1;
    double gather =
        l.dp <= 1 ? 0.0
        : l.zero >= 2
            ? units * groupGatherSeconds(gradBytes / units, dpStride, l.dp, hw)
            : groupGatherSeconds(gradBytes, dpStride, l.dp, hw);
    double lastBwd = layersPerStage * (layer.bwd() + recompute);
    if (l.dp == 1) {
      window = lastBwd;
    } else if (l.zero == 1 && l.zero1AllReduce) {
      // The all-reduce as ZeRO-0's; the gather inside the optimizer's step,
      // blocking (BF16_Optimizer.step's all_gather_dp_groups).
      dpComm = ar;
      afterStep = gather;
      window = lastBwd;
      if (breakdown) {
        r.collectives.push_back({"all_reduce", "dp", dpTierName,
                                 "ZeRO-1 as DeepSpeed's BF16_Optimizer: the "
                                 "whole gradient",
                                 gradBytes, 1, ar});
        r.collectives.push_back({"all_gather", "dp", dpTierName,
                                 "ZeRO-1: updated parameters", gradBytes, 1,
                                 gather});
      }
    } else if (l.zero <= 1) {
      dpComm = ar;
      window = lastBwd; // gradients are final only in the last micro-batch
      if (breakdown)
        r.collectives.push_back(
            {l.zero == 0 ? "all_reduce" : "reduce_scatter+all_gather", "dp",
             dpTierName, l.zero == 0 ? "gradients" : "ZeRO-1: grads, params",
             gradBytes, 1, ar});
    } else if (l.zero == 2) {
      dpComm = m * gather + gather;
      window = m * lastBwd;
      if (breakdown) {
        r.collectives.push_back({"reduce_scatter", "dp", dpTierName,
                                 "ZeRO-2: gradients every micro-batch",
                                 gradBytes, m, m * gather});
        r.collectives.push_back({"all_gather", "dp", dpTierName,
                                 "ZeRO-2: updated parameters", gradBytes, 1,
                                 gather});
      }
    } else {
      dpComm = 3.0 * m * gather;
      window = m * layersPerStage * layerCompute;
      if (breakdown) {
        r.collectives.push_back(
            {"all_gather", "dp", dpTierName,
             "ZeRO-3: parameters before forward and backward", gradBytes, 2 * m,
             2 * m * gather});
        r.collectives.push_back({"reduce_scatter", "dp", dpTierName,
                                 "ZeRO-3: gradients every micro-batch",
                                 gradBytes, m, m * gather});
      }
    }
    dpComm += cpGrad;
    // What the overlap cannot hide: the part beyond the window, and at least
    // one layer's share (the last bucket starts after the last layer).
    if (l.dpOverlap)
      dpComm =
          std::max(dpComm - window, dpComm / std::max(1.0, layersPerStage));
    dpComm += afterStep;
  }
  r.dpCommS = dpComm;
  double shardParams = l.zero >= 1 ? gpuParams / l.dp : gpuParams;
  r.optimizerS = shardParams * 28.0 / (hw.hbmGBps * 1e9);
  r.stepS = r.computeS + r.tpCommS + r.cpCommS + r.p2pS + r.ppBubbleS +
            r.dpCommS + r.optimizerS;

  // --- memory per GPU, as weft holds it (or a framework with master
  // weights) ---
  double scale = e / 2.0; // the activation formulas are for 2-byte values
  StateBytes state = stateBytesPerParam(l.zero, l.dp);
  if (l.masterWeights) { // its weights and gradients in the compute dtype
    state = masterWeightStateBytesPerParam(l.zero, l.dp);
    state.params *= scale;
    state.grads *= scale;
  }
  r.paramBytes = gpuParams * state.params;
  r.gradBytes = gpuParams * state.grads;
  r.optimizerBytes = gpuParams * state.optimizer;
  // weft's bf16 matmuls read bf16 copies of its fp32 weights, made once
  // per step and held in the activation arena (ZeRO-3's are the gathered
  // layers' below).
  const double weightCopies =
      e == 2 && l.zero < 3 && !l.masterWeights ? gpuParams * 2.0 : 0.0;
  // Context parallelism: a layer's activations of s/cp tokens, and the
  // gathered keys and values attention keeps for its gradient.
  double act = layerActivationBytes(s / l.cp, b, h, c.numHeads, l.tp,
                                    l.sequenceParallel, l.recompute) *
                   scale +
               (l.recompute == Recompute::Full ? 0.0 : cpActBytes);
  double inFlight = double(std::min<int64_t>(m, l.pp));
  if (l.schedule == Schedule::Interleaved && l.pp > 1)
    inFlight *= 1.0 + double(l.pp - 1) / (double(l.pp) * v);
  double firstStage = inFlight * rankLayers.front() * act;
  double logits =
      double(b) * s / l.cp * c.vocab / l.tp * 4.0 * 2.0; // fp32 + grad
  double lastStage = rankLayers.back() * act + logits;
  double peakAct =
      l.pp == 1 ? firstStage + logits : std::max(firstStage, lastStage);
  if (l.recompute == Recompute::Full) // the layer being recomputed
    peakAct += layerActivationBytes(s / l.cp, b, h, c.numHeads, l.tp,
                                    l.sequenceParallel, Recompute::None) *
                   scale +
               cpActBytes;
  if (l.zero == 3) // one gathered layer, prefetching the next
    peakAct += 2.0 * model.layer.params / l.tp * e;
  r.activationBytes = peakAct + weightCopies;
  r.memoryBytes =
      r.paramBytes + r.gradBytes + r.optimizerBytes + r.activationBytes;
  double usable = 0.95 * hw.memoryBytes();
  r.fits = r.memoryBytes <= usable;

  // --- rates ---
  r.modelFlopsPerStep = model.trainingFlopsPerSequence() * globalBatch;
  r.tflopsPerGpu = r.modelFlopsPerStep / (r.stepS * gpus) / 1e12;
  r.mfu = r.modelFlopsPerStep / (r.stepS * gpus * hw.peakFlops());
  r.tokensPerS = double(globalBatch) * s / r.stepS;
  r.days = tokens > 0 ? tokens / r.tokensPerS / 86400.0 : 0;

  // --- the breakdown, each figure with how it was obtained ---
  if (!breakdown)
    return r;
  r.timeTerms = {
      {"compute", r.computeS, "s",
       fmt("%.0f micro-batches x (%.2f layers x (fwd %.4g + bwd", double(m),
           layersPerStage, layer.fwd()) +
           fmt(" %.4g + recompute %.4g) s + embeddings/head %.4g s); GEMMs at "
               "peak x efficiency(min dim), the rest at HBM bandwidth",
               layer.bwd(), recompute, rankBase(busiest))},
      {"tp_comm", r.tpCommS, "s",
       l.tp > 1 ? fmt("%.0f ring collectives per step (the partitioned IR's, "
                      "activations of %.4g MB) over tp=%.0f, ",
                      tpCount, actBytes / 1e6, double(l.tp)) +
                      tpTierName + ", not overlapped"
                : "tp=1: none"},
      {"cp_comm", r.cpCommS, "s",
       l.cp > 1
           ? fmt("%.0f layers x ", layersPerStage) + contextHow(l.context) +
                 fmt(" (K of %.4g MB, whole sequence) over cp=%.0f per "
                     "micro-batch",
                     kvBytes / 1e6, double(l.cp))
           : "cp=1: none"},
      {"pp_p2p", r.p2pS, "s",
       l.pp > 1 ? fmt("2 x v=%.0f sends of b*s*h/tp per micro-batch", double(v))
                : "pp=1: none"},
      {"pp_bubble", r.ppBubbleS, "s",
       fmt("(p-1)/v = %.3g idle micro-batch slots of %.4g s; bubble fraction "
           "%.3g",
           idle, perMb, r.bubbleFraction)},
      {"dp_comm", r.dpCommS, "s",
       l.dp > 1 ? fmt("ZeRO-%.0f collectives of %.4g MB of bf16 grads/params "
                      "over dp=%.0f, ",
                      double(l.zero), gradBytes / 1e6, double(l.dp)) +
                      dpTierName +
                      (!l.dpOverlap ? "; not overlapped"
                       : l.zero >= 3
                           ? "; exposed beyond the forward and backward it "
                             "overlaps"
                           : "; exposed beyond the backward it overlaps") +
                      (afterStep > 0 ? fmt(", then the parameters' gather "
                                           "in the optimizer's step (%.4g s)",
                                           afterStep)
                                     : std::string())
                : "dp=1: none"},
      {"optimizer", r.optimizerS, "s",
       fmt("AdamW over %.4g params at 28 B/param / HBM", shardParams)},
      {"step", r.stepS, "s", "sum of the above"},
  };
  r.memoryTerms = {
      {"parameters", r.paramBytes, "B",
       fmt("%.4g params/GPU (stage / tp) x %.3g B", gpuParams, state.params) +
           (l.masterWeights ? " (compute dtype)" : " (fp32)")},
      {"gradients", r.gradBytes, "B",
       fmt("%.4g params/GPU x %.3g B", gpuParams, state.grads) +
           (l.masterWeights ? " (compute dtype)" : " (fp32)")},
      {"optimizer_state", r.optimizerBytes, "B",
       fmt("%.4g params/GPU x %.3g B", gpuParams, state.optimizer) +
           (l.masterWeights ? " (fp32 master, Adam m, v)"
                            : " (fp32 Adam m, v)")},
      {"activations", r.activationBytes, "B",
       fmt("%.3g micro-batches in flight x %.3g layers x %.4g MB/layer "
           "(Korthikanti et al. 2022), + logits, recompute and ZeRO-3 buffers",
           inFlight, layersPerStage, act / 1e6) +
           (weightCopies > 0 ? fmt(", + the weights' bf16 copies (%.3g GB)",
                                   weightCopies / 1e9)
                             : std::string())},
      {"total", r.memoryBytes, "B",
       fmt("fits if <= 95%% of %.4g GB", hw.memoryGB)},
  };
  return r;
}

} // namespace weft::cost
