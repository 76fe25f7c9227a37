//===- CostModel.h - step time and memory of one layout ---------*- C++ -*-===//
//
// An analytic model over the IR-derived per-layer costs (ModelCost.h) and a
// hardware description (Hardware.h). docs/planner.md states every equation.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_PLANNER_COSTMODEL_H
#define WEFT_PLANNER_COSTMODEL_H

#include "planner/Hardware.h"
#include "planner/ModelCost.h"

#include <string>
#include <vector>

namespace weft::cost {

enum class Schedule { OneFOneB, Interleaved };
enum class Recompute { None, Selective, Full };
/// How attention sees a sequence split over cp (weft-compile
/// --context-parallel): K and V all-gathered, passed around a ring, or cp
/// moved from the sequence onto the heads by all-to-alls.
enum class ContextComm { AllGather, Ring, AllToAll };
const char *scheduleName(Schedule s);
const char *recomputeName(Recompute r);
/// weft-compile's spelling: all-gather, ring, all-to-all.
const char *contextCommName(ContextComm c);

/// A layout: mesh dp x pp x cp x tp (tp innermost, so it stays inside a node
/// when tp <= GPUs per node; cp next, as Megatron orders them),
/// micro-batching, schedule, ZeRO, SP, context parallelism, recompute.
struct Layout {
  int64_t dp = 1, tp = 1, pp = 1;
  int64_t microBatch = 1, numMicroBatches = 1;
  Schedule schedule = Schedule::OneFOneB;
  int64_t virtualStages = 1; // interleaved: model chunks per device
  int zero = 0;
  bool sequenceParallel = false;
  Recompute recompute = Recompute::None;
  /// Whether DP gradient reduction overlaps backward (a framework property,
  /// not searched: Megatron-LM 2021 did not overlap it; DeepSpeed and
  /// Megatron with --overlap-grad-reduce do).
  bool dpOverlap = true;
  /// Training state as Megatron-LM, DeepSpeed and FSDP hold it (bf16
  /// weights and gradients, an fp32 master copy sharded with Adam's m and
  /// v), not as weft does (a framework property, not searched: to time a
  /// published run's layout).
  bool masterWeights = false;
  /// Context parallelism: each sequence split over cp ranks in 2*cp
  /// load-balanced chunks; attention sees the other chunks as `context`
  /// says (only the ring overlaps its transfers with compute).
  int64_t cp = 1;
  ContextComm context = ContextComm::AllGather;
  /// Whether the backward's tp collectives run under the GEMMs weft starts
  /// them before (the input gradient's all-reduce under the weight
  /// gradient's, sequence parallelism's second gather under the input
  /// gradient's), as weft and Megatron-LM since 2022 do (a framework
  /// property, not searched: Megatron-LM 2021 and Megatron-DeepSpeed ran
  /// them blocking).
  bool tpOverlap = true;
  /// ZeRO-1 sums the whole gradient with an all-reduce and gathers the
  /// updated parameters after the step, as DeepSpeed's BF16_Optimizer does
  /// under its "stage 0" (BLOOM's run), not a reduce-scatter and a gather
  /// as weft and Megatron-LM's distributed optimizer do: 1.5x the bytes (a
  /// framework property, not searched; only ZeRO-1 layouts are affected).
  bool zero1AllReduce = false;
};

/// One named figure of the breakdown, with how it was obtained.
struct Term {
  std::string name;
  double value = 0;
  std::string unit, how;
};

/// One collective kind per step, per GPU.
struct CollectiveUse {
  std::string kind, axis, tier, why;
  double bytes = 0;   // message size
  int64_t count = 0;  // per step
  double seconds = 0; // all of them, on the critical path
};

struct Estimate {
  Layout layout;
  /// Why the layout cannot run (weft cannot partition the model so); empty
  /// when it can.
  std::string error;
  // Seconds per step, on the critical path.
  double computeS = 0, tpCommS = 0, cpCommS = 0, dpCommS = 0, ppBubbleS = 0,
         p2pS = 0, optimizerS = 0, stepS = 0;
  double bubbleFraction = 0;
  /// Each pipeline chunk's layers ("0-5,6-11", chunks in order), as
  /// weft-compile --stages takes them; "0-(L-1)" without a pipeline.
  std::string stages;
  // Bytes per GPU (the most loaded pipeline stage).
  double paramBytes = 0, gradBytes = 0, optimizerBytes = 0, activationBytes = 0,
         memoryBytes = 0;
  bool fits = false;
  double modelFlopsPerStep = 0; // fwd + bwd, no recomputation (for MFU)
  double mfu = 0, tflopsPerGpu = 0, tokensPerS = 0, days = 0;
  std::vector<Term> timeTerms, memoryTerms;
  std::vector<CollectiveUse> collectives;
};

/// Ring all-reduce of `bytes` over n ranks: 2(n-1)/n * bytes/B + 2(n-1)*alpha.
double ringAllReduceSeconds(double bytes, int64_t n, const LinkTier &link);
/// All-gather or reduce-scatter: half of that.
double ringGatherSeconds(double bytes, int64_t n, const LinkTier &link);
/// A collective over a group of `size` ranks `stride` apart, the ranks
/// filling nodes of hw.gpusPerNode in order: inside one node a ring on the
/// intra-node tier; across nodes a ring on the inter-node tier, or with
/// hw.hierarchical and two or more of its ranks on each node, weft's
/// hierarchical collective: within the node (intra-node ring), across the
/// nodes on 1/L of the bytes (inter-node ring), within the node again
/// (all-reduce only). `bytes`: the larger buffer.
double groupAllReduceSeconds(double bytes, int64_t stride, int64_t size,
                             const Hardware &hw);
/// All-gather or reduce-scatter, likewise.
double groupGatherSeconds(double bytes, int64_t stride, int64_t size,
                          const Hardware &hw);
/// Training state per parameter per GPU as weft holds it (weft-compile
/// --explain's "memory per rank"): fp32 parameters, gradients and Adam m
/// and v whatever the compute dtype, a bf16 program computing on copies of
/// the weights. ZeRO on d ranks shards m and v (stage 1), the gradients too
/// (2), the parameters too (3): 16, 8 + 8/d, 4 + 12/d, 16/d bytes in all.
/// (The ZeRO paper's bf16 parameters with a sharded fp32 master hold less
/// at stages 1 and 2: 4 + 12/d and 2 + 14/d.)
struct StateBytes {
  double params = 0, grads = 0, optimizer = 0;
  double total() const { return params + grads + optimizer; }
};
StateBytes stateBytesPerParam(int stage, int64_t d);
/// The ZeRO paper's count, Megatron-LM's, DeepSpeed's and FSDP's: bf16
/// parameters and gradients, the fp32 master with Adam m and v (12 bytes),
/// sharded by stage: 16, 4 + 12/d, 2 + 14/d, 16/d bytes in all.
StateBytes masterWeightStateBytesPerParam(int stage, int64_t d);
/// Activation bytes of one layer for one micro-batch (Korthikanti et al.
/// 2022, 2-byte activations): s*b*h*(34 + 5*a*s/h) unparallelised.
double layerActivationBytes(int64_t s, int64_t b, int64_t h, int64_t heads,
                            int64_t tp, bool sp, Recompute r);

/// Step time, memory and their breakdown for `layout` training `tokens`
/// tokens (0: no day estimate); `globalBatch` sequences per step. Without
/// `breakdown` the terms and collectives stay empty: the search builds
/// them only for the rows it prints (their strings were most of its time:
/// 3.1 s against 0.93 s for Llama 3 70B on 1,024 GPUs).
Estimate estimate(const ModelCost &model, const Hardware &hw,
                  const Layout &layout, int64_t globalBatch, double tokens,
                  bool breakdown = true);

} // namespace weft::cost

#endif // WEFT_PLANNER_COSTMODEL_H
