//===- CutStages.cpp - weft-cut-stages: pipeline stages -------------------===//
//
// See the pass description in Passes.td. The partitioned step is one
// function whose ops fall in four phases: prologue and optimizer (marked
// weft.fragment), forward (up to the loss) and backward. Every op gets a
// virtual stage (a model chunk: N*V of them, rank v mod N holding chunk
// v / N of its V); then each rank's function is the original with the
// other ranks' ops erased, their values received where this rank reads
// them, and this rank's values sent where another reads them. A rank's ops
// are ordered by fragment (its chunks' forwards, then their backwards in
// reverse), keeping their order within one, so each rank computes exactly
// what the one function computed.
//
//===----------------------------------------------------------------------===//
#include "dialect/AttrNames.h"
#include "dialect/LayerMap.h"
#include "dialect/WeftDialect.h"
#include "passes/Passes.h"
#include "passes/pipeline/FragmentKeys.h"
#include "passes/pipeline/StageBalance.h"
#include "program/PipelineSchedule.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/BitVector.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>

namespace weft {
#define GEN_PASS_DEF_WEFTCUTSTAGES
#include "passes/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {
namespace an = weft::attrname;

// An op's phase (passes/pipeline/FragmentKeys.h; kWeight: the weight-gradient
// half of a split backward (ZB-H1), which the rank functions' backward ops not
// on the way to a sent gradient get), or none (params).
using Phase = FragmentPhase;
constexpr int kNoPhase = kOptimizer + 1;
const char *const *const kPhaseNames = kFragmentPhaseNames;

// One value read on a rank other than its own: sent at the end of the
// maker's fragment, received at the start of one of the reader's
// (fragments numbered by fragmentKey).
struct Crossing {
  int64_t producer; // op index in the function
  unsigned result;
  int64_t from, to; // ranks
  int64_t sendKey, recvKey;
};

// A gradient made on one stage and only accumulated into a param's on
// another, alone or added to one made there, through linear collectives (a
// ZeRO reduce-scatter): a tied embedding's head gradient, made on the stage
// holding the replica (GPT-2 124M: 154 MB), or a bias gradient the
// producing stage reduced. Sent per micro-batch it would cross the pipeline
// M times; instead the making stage sums it over the step (weft.accumulate)
// and sends the sum once, and the param's stage stores that, through the
// same collectives, before its optimizer.
struct StepCrossing {
  int64_t producer; // op index in the function
  unsigned result;
  int64_t from, to; // ranks
  int64_t add;      // the add on the param's stage, or -1 (stored alone)
  SmallVector<int64_t> collectives; // from the add (or value) to param_grad
  int64_t paramGrad;
};

struct CutStages : weft::impl::WeftCutStagesBase<CutStages> {
  using WeftCutStagesBase::WeftCutStagesBase;

  void runOnOperation() override {
    if (stages <= 1)
      return;
    ranks = stages;
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> fns(module.getOps<func::FuncOp>());
    if (fns.size() != 1) {
      module.emitError("weft-cut-stages expects one function, found ")
          << fns.size();
      return signalPassFailure();
    }
    PipelineSchedule parsedSchedule;
    weft::Status parsed = parsePipelineSchedule(schedule, parsedSchedule);
    if (!parsed.ok()) {
      module.emitError(parsed.message());
      return signalPassFailure();
    }
    chunks = parsedSchedule.VirtualStages;
    split = parsedSchedule.SplitBackward;
    fn = fns.front();
    int64_t microbatches = 1;
    if (auto m = fn->getAttrOfType<IntegerAttr>(an::kMicrobatches))
      microbatches = m.getInt();
    if (parsedSchedule.Kind == PipelineScheduleKind::Interleaved &&
        microbatches % ranks != 0) {
      fn.emitError("the interleaved schedule runs micro-batches in rounds "
                   "of the pipeline's ")
          << ranks << " stages: " << microbatches
          << " micro-batches is not a multiple of " << ranks;
      return signalPassFailure();
    }
    if (parsedSchedule.Kind == PipelineScheduleKind::Custom &&
        int64_t(parsedSchedule.Orders.size()) != ranks) {
      fn.emitError("the hand-written pipeline schedule has ")
          << parsedSchedule.Orders.size() << " stages' orders, the mesh's "
          << "pipeline axis " << ranks;
      return signalPassFailure();
    }
    ops.clear();
    index.clear();
    for (Operation &op : fn.getBody().front()) {
      index[&op] = int64_t(ops.size());
      ops.push_back(&op);
    }
    if (failed(assignPhases()) || failed(assignLayers()) ||
        failed(assignStages()))
      return signalPassFailure();
    findStepCrossings(microbatches);
    SmallVector<Crossing> crossings;
    if (failed(findCrossings(crossings)))
      return signalPassFailure();
    OpBuilder b(module.getContext());
    b.setInsertionPoint(fn);
    for (int64_t s = 0; s < ranks; ++s) {
      auto clone = cast<func::FuncOp>(b.clone(*fn));
      clone.setSymName((fn.getSymName() + "_stage" + Twine(s)).str());
      clone->setAttr(an::kStage, b.getI64IntegerAttr(s));
      clone->setAttr(an::kNumStages, b.getI64IntegerAttr(ranks));
      clone->setAttr(an::kPipelineAxis, b.getStringAttr(axis));
      clone->setAttr(an::kPipelineSchedule,
                     PipelineScheduleAttr::fromSpec(b.getContext(), schedule));
      // Each chunk's layers: "0-1,4-5".
      std::string layers;
      for (int64_t c = 0; c < chunks; ++c) {
        int64_t first = -1, last = -1;
        for (int64_t l = 0; l < int64_t(layerStage.size()); ++l)
          if (layerStage[l] == c * ranks + s) {
            first = first < 0 ? l : first;
            last = l;
          }
        layers += (c ? "," : "") +
                  (first == last ? Twine(first).str()
                                 : (Twine(first) + "-" + Twine(last)).str());
      }
      clone->setAttr(an::kStageLayers, b.getStringAttr(layers));
      if (failed(cut(clone, s, crossings)))
        return signalPassFailure();
    }
    fn.erase();
  }

  // Phase of every op, as weft-emit-program cuts fragments: marked ops,
  // forward up to the loss, backward after it, optimizer from the first
  // AdamW on.
  LogicalResult assignPhases() {
    auto ret = cast<func::ReturnOp>(fn.getBody().front().getTerminator());
    Operation *lossOp =
        ret.getNumOperands() == 1 ? ret.getOperand(0).getDefiningOp() : nullptr;
    if (!lossOp)
      return fn.emitError("weft-cut-stages expects the function to return "
                          "its loss, computed by an op");
    phase.assign(ops.size(), kNoPhase);
    bool lossSeen = false, adamSeen = false;
    for (size_t i = 0; i < ops.size(); ++i) {
      Operation *op = ops[i];
      if (isa<func::ReturnOp, ParamOp>(op))
        continue;
      adamSeen |= isa<AdamWOp>(op);
      auto mark = op->getAttrOfType<StringAttr>(an::kFragment);
      if (mark)
        phase[i] = mark.getValue() == "prologue" ? kPrologue : kOptimizer;
      else
        phase[i] = adamSeen ? kOptimizer : lossSeen ? kBackward : kForward;
      if (op == lossOp)
        lossSeen = true;
    }
    return success();
  }

  // Stage of each param's layer: even cuts of [0, numLayers), or the
  // boundaries option; the embeddings (-1) first, the head (numLayers)
  // last.
  LogicalResult assignLayers() {
    int64_t numLayers = 0;
    for (Operation *op : ops)
      if (auto p = dyn_cast<ParamOp>(op)) {
        auto layer = p->getAttrOfType<IntegerAttr>(an::kLayer);
        if (!layer)
          return p.emitOpError("has no weft.layer: pipeline stages are cut "
                               "by the layers the frontend marks");
        numLayers = std::max(numLayers, layer.getInt());
      }
    layerStage.assign(numLayers, 0);
    const int64_t n = virtualStages();
    if (boundaries.empty()) {
      if (numLayers < n)
        return fn.emitError("cannot cut ")
               << numLayers << " layers into " << n
               << (chunks > 1 ? " model chunks" : " pipeline stages")
               << " (each needs a layer)";
      balanceLayers(numLayers);
      return success();
    }
    // "a-b,c-d": consecutive ranges covering every layer once.
    SmallVector<StringRef> ranges;
    StringRef(boundaries).split(ranges, ',');
    if (int64_t(ranges.size()) != n)
      return fn.emitError("--stages '")
             << boundaries << "' names " << ranges.size()
             << " stages, the mesh's pipeline axis has " << ranks
             << (chunks > 1 ? (" times " + Twine(chunks) +
                               " virtual stages (model chunks)")
                                  .str()
                            : std::string());
    int64_t next = 0;
    for (auto [s, range] : llvm::enumerate(ranges)) {
      auto [lo, hi] = range.split('-');
      int64_t first, last;
      if (lo.trim().getAsInteger(10, first) ||
          // "3" is one layer; "3-" names no last layer.
          (!range.contains('-') ? (last = first, false)
                                : hi.trim().getAsInteger(10, last)) ||
          first != next || last < first || last >= numLayers)
        return fn.emitError("--stages '")
               << boundaries << "': range '" << range
               << "' must be FIRST-LAST (or one layer) starting at layer "
               << next << ", within the model's " << numLayers << " layers";
      for (int64_t l = first; l <= last; ++l)
        layerStage[l] = int64_t(s);
      next = last + 1;
    }
    if (next != numLayers)
      return fn.emitError("--stages '") << boundaries << "' covers layers 0-"
                                        << next - 1 << " of " << numLayers;
    return success();
  }

  // The forward FLOPs of each layer (index 0: the embeddings, L + 1: the
  // final norm, head and loss): matmuls and attention, each op counted in
  // the latest layer among its operands'. The backward costs about twice
  // the forward in every layer alike, so the forward decides the balance.
  std::vector<double> layerFlops(int64_t numLayers) {
    std::vector<double> flops(numLayers + 2, 0.0);
    LayerMap layers; // inputs belong to no layer
    auto elems = [](Value v) {
      return double(cast<RankedTensorType>(v.getType()).getNumElements());
    };
    for (size_t i = 0; i < ops.size(); ++i) {
      Operation *op = ops[i];
      if (phase[i] != kForward && !isa<ParamOp>(op))
        continue;
      int64_t layer = layers.visit(op);
      double f = 0;
      if (auto mm = dyn_cast<MatmulOp>(op)) {
        auto a = cast<RankedTensorType>(mm.getA().getType());
        double last = double(a.getShape().back());
        double k = mm.getTransposeA() ? elems(mm.getA()) / last : last;
        f = 2 * elems(mm.getResult()) * k;
      } else if (auto at = dyn_cast<AttentionOp>(op)) {
        // QK^T and AV over [B, S, H*hd] queries: 4 B S^2 H hd.
        auto q = cast<RankedTensorType>(at->getOperand(0).getType());
        f = 4 * elems(at->getOperand(0)) * double(q.getShape()[1]);
      }
      flops[std::clamp<int64_t>(layer, -1, numLayers) + 1] += f;
    }
    return flops;
  }

  // Contiguous runs of layers, one per stage, as even in forward FLOPs as
  // they can be: the first stage also carries the embeddings, the last the
  // head and loss (GPT-2's head costs ~5 of its layers).
  void balanceLayers(int64_t numLayers) {
    std::vector<double> flops = layerFlops(numLayers);
    layerStage =
        balanceStages(std::vector<double>(flops.begin() + 1, flops.end() - 1),
                      flops.front(), flops.back(), virtualStages());
  }

  int64_t stageOfLayer(int64_t layer) const {
    if (layer < 0)
      return 0;
    if (layer >= int64_t(layerStage.size()))
      return virtualStages() - 1;
    return layerStage[layer];
  }

  // Home stage of the param an op names or updates, or -1.
  int64_t homeOfParamOp(Operation *op) const {
    StringRef name;
    if (auto g = dyn_cast<ParamGradOp>(op))
      name = g.getName();
    else if (auto g = dyn_cast<StoredGradOp>(op))
      name = g.getName();
    else if (auto a = dyn_cast<AdamWOp>(op))
      if (auto p = a.getParam().getDefiningOp<ParamOp>())
        name = p.getName();
    auto it = paramHome.find(name);
    return name.empty() || it == paramHome.end() ? -1 : it->second;
  }

  // Every op's stage (-1 for a copied op: params and what is made from them
  // alone), and for each forward value the stages that read it.
  LogicalResult assignStages() {
    const int64_t n = virtualStages();
    stage.assign(ops.size(), -1);
    copied.assign(ops.size(), false);
    home.assign(ops.size(), -1);
    paramOf.assign(ops.size(), StringRef());
    avail.assign(ops.size(), llvm::BitVector(n));
    for (size_t i = 0; i < ops.size(); ++i)
      if (auto p = dyn_cast<ParamOp>(ops[i])) {
        int64_t h =
            stageOfLayer(p->getAttrOfType<IntegerAttr>(an::kLayer).getInt());
        paramHome[p.getName()] = h;
        paramAvail[p.getName()] = llvm::BitVector(n);
        paramAvail[p.getName()].set(h);
        copied[i] = true;
        home[i] = h;
        paramOf[i] = p.getName();
      }
    for (size_t i = 0; i < ops.size(); ++i) {
      Operation *op = ops[i];
      if (copied[i] || isa<func::ReturnOp>(op))
        continue;
      int64_t pinned = homeOfParamOp(op);
      // Made from params and constants alone, with no effect: copied.
      bool pure = pinned < 0 && op->getNumResults() > 0 &&
                  !isa<RecvOp, StoredGradOp>(op) &&
                  llvm::all_of(op->getOperands(), [&](Value v) {
                    Operation *d = v.getDefiningOp();
                    return d && copied[index[d]];
                  });
      if (pure) {
        copied[i] = true;
        for (Value v : op->getOperands()) {
          int64_t d = index[v.getDefiningOp()];
          if (home[d] >= 0) {
            home[i] = std::max(home[i], home[d]);
            paramOf[i] = paramOf[d];
          }
        }
        continue;
      }
      if (pinned >= 0) {
        stage[i] = pinned;
        continue;
      }
      if (phase[i] != kBackward) {
        int64_t s = 0;
        for (Value v : op->getOperands())
          if (Operation *d = v.getDefiningOp()) {
            int64_t j = index[d];
            s = std::max(s, copied[j] ? home[j] : stage[j]);
          }
        stage[i] = s;
      } else {
        // Stages holding every forward operand; the latest of them not past
        // the earliest gradient operand.
        llvm::BitVector holds(n, true);
        int64_t gradMin = n;
        for (Value v : op->getOperands()) {
          Operation *d = v.getDefiningOp();
          if (!d)
            continue;
          int64_t j = index[d];
          if (copied[j]) {
            // A param (and what is made from it alone) is held by its stage
            // and by every stage whose forward reads it (a replica there).
            if (home[j] >= 0)
              holds &= paramAvail[paramOf[j]];
          } else if (phase[j] == kBackward) {
            gradMin = std::min(gradMin, stage[j]);
          } else {
            holds &= avail[j];
          }
        }
        int64_t s = -1;
        if (holds.all())
          s = gradMin < n ? gradMin : n - 1;
        else
          for (int64_t c = std::min<int64_t>(gradMin, n - 1); c >= 0; --c)
            if (holds.test(c)) {
              s = c;
              break;
            }
        if (s < 0)
          s = holds.any() ? holds.find_first() : gradMin;
        stage[i] = s;
      }
      avail[i].set(stage[i]);
      // A forward value (or param) is also held where a forward op reads
      // it.
      if (phase[i] == kForward)
        for (Value v : op->getOperands())
          if (Operation *d = v.getDefiningOp()) {
            int64_t j = index[d];
            if (copied[j] && home[j] >= 0)
              paramAvail[paramOf[j]].set(stage[i]);
            else if (!copied[j])
              avail[j].set(stage[i]);
          }
    }
    // A backward op that only transforms gradients (an all-gather of a
    // sequence-parallel gradient, say) and whose readers are all on one
    // earlier stage runs there when that sends fewer bytes: its input
    // crosses instead of its larger output.
    for (size_t i = ops.size(); i-- > 0;) {
      Operation *op = ops[i];
      if (copied[i] || phase[i] != kBackward || homeOfParamOp(op) >= 0 ||
          op->getNumResults() == 0)
        continue;
      int64_t in = 0, out = 0, readers = -1;
      bool movable = true;
      for (Value v : op->getOperands()) {
        Operation *d = v.getDefiningOp();
        movable &= d && !copied[index[d]] && phase[index[d]] == kBackward;
        if (auto t = dyn_cast<RankedTensorType>(v.getType()))
          in += t.getNumElements() * t.getElementTypeBitWidth();
      }
      for (Value r : op->getResults()) {
        if (auto t = dyn_cast<RankedTensorType>(r.getType()))
          out += t.getNumElements() * t.getElementTypeBitWidth();
        for (Operation *u : r.getUsers()) {
          int64_t j = index[u];
          movable &= !copied[j] && stage[j] >= 0 &&
                     (readers < 0 || readers == stage[j]);
          readers = stage[j];
        }
      }
      if (movable && readers >= 0 && readers < stage[i] && in <= out)
        stage[i] = readers;
    }
    // A param read on a stage other than its own (a tied embedding): that
    // stage holds a replica, received from the param's stage each step.
    for (size_t i = 0; i < ops.size(); ++i) {
      if (copied[i] || stage[i] < 0)
        continue;
      for (Value v : ops[i]->getOperands()) {
        Operation *d = v.getDefiningOp();
        if (d && copied[index[d]] && home[index[d]] >= 0 &&
            rankOf(home[index[d]]) != rankOf(stage[i]))
          replicas[paramOf[index[d]]].insert(rankOf(stage[i]));
      }
    }
    return success();
  }

  int64_t virtualStages() const { return ranks * chunks; }
  int64_t rankOf(int64_t v) const { return v % ranks; }
  int64_t chunkOf(int64_t v) const { return v / ranks; }

  // A rank's fragments in table order (passes/pipeline/FragmentKeys.h).
  FragmentKeys keys() const { return {chunks, split}; }
  int64_t fragmentKey(Phase p, int64_t chunk) const {
    return keys().key(p, chunk);
  }
  Phase phaseOfKey(int64_t key) const { return keys().phase(int(key)); }
  int64_t chunkOfKey(int64_t key) const { return keys().chunk(int(key)); }

  // ", the gradient of NAME" when op's result is stored as a param's
  // gradient (for messages), else "".
  static std::string gradientOf(Operation *op) {
    for (Operation *u : op->getUsers())
      if (auto g = dyn_cast<ParamGradOp>(u))
        return (", the gradient of " + g.getName()).str();
    return "";
  }

  // The step crossings (StepCrossing): only with several micro-batches,
  // whose gradients the param's stage accumulates. Walks up from each
  // accumulated gradient, over linear collectives on its stage, to a value
  // made on another rank that nothing else reads, alone or added to one of
  // this stage's.
  void findStepCrossings(int64_t microbatches) {
    stepCrossings.clear();
    if (microbatches < 2)
      return;
    for (size_t i = 0; i < ops.size(); ++i) {
      auto store = dyn_cast<ParamGradOp>(ops[i]);
      if (!store || !store.getAccumulate() || phase[i] != kBackward ||
          stage[i] < 0)
        continue;
      const int64_t r = rankOf(stage[i]);
      // A value of the function's ops, read once, by an op on rank r.
      auto madeHere = [&](Value v, bool here) -> Operation * {
        Operation *d = v.getDefiningOp();
        if (!d || !v.hasOneUse())
          return nullptr;
        int64_t j = index[d];
        if (copied[j] || phase[j] != kBackward || stage[j] < 0 ||
            (rankOf(stage[j]) == r) != here)
          return nullptr;
        return d;
      };
      SmallVector<int64_t> chain;
      Value cur = store.getGrad();
      while (Operation *d = madeHere(cur, true)) {
        if (!isa<ReduceScatterOp, AllReduceOp>(d) || d->getNumOperands() != 1 ||
            d->getNumResults() != 1)
          break;
        chain.insert(chain.begin(), index[d]);
        cur = d->getOperand(0);
      }
      int64_t add = -1;
      Value x = cur;
      if (auto sum = dyn_cast_or_null<AddOp>(madeHere(cur, true))) {
        add = index[sum.getOperation()];
        x = madeHere(sum.getLhs(), false) ? sum.getLhs() : sum.getRhs();
        if (sum.getLhs() == sum.getRhs())
          continue;
      }
      Operation *producer = madeHere(x, false);
      if (!producer)
        continue;
      stepCrossings.push_back({index[producer],
                               cast<OpResult>(x).getResultNumber(),
                               rankOf(stage[index[producer]]), r, add,
                               std::move(chain), int64_t(i)});
    }
  }

  const StepCrossing *stepCrossingOf(Operation *producer,
                                     unsigned result) const {
    auto it = index.find(producer);
    if (it == index.end())
      return nullptr;
    for (const StepCrossing &c : stepCrossings)
      if (c.producer == it->second && c.result == result)
        return &c;
    return nullptr;
  }

  LogicalResult findCrossings(SmallVectorImpl<Crossing> &out) {
    std::map<std::tuple<int64_t, unsigned, int64_t>, size_t> seen;
    for (size_t i = 0; i < ops.size(); ++i) {
      if (stage[i] < 0)
        continue;
      for (Value v : ops[i]->getOperands()) {
        Operation *d = v.getDefiningOp();
        if (!d)
          continue;
        int64_t j = index[d];
        if (copied[j] || rankOf(stage[j]) == rankOf(stage[i]) ||
            stepCrossingOf(d, cast<OpResult>(v).getResultNumber()))
          continue;
        Phase from = Phase(phase[j]), to = Phase(phase[i]);
        if (from == kPrologue || from == kOptimizer || to == kPrologue ||
            to == kOptimizer)
          return ops[i]->emitOpError("on pipeline stage ")
                 << rankOf(stage[i]) << " reads a value of stage "
                 << rankOf(stage[j]) << " in the "
                 << kPhaseNames[std::min(from, to)]
                 << " fragment, which runs once per step: only forward and "
                    "backward values cross stages";
        const int64_t r = rankOf(stage[i]);
        // Received at the start of the reader's fragment; interleaved, at
        // the next virtual stage's.
        int64_t recvKey = fragmentKey(to, chunkOf(stage[i]));
        if (chunks > 1) {
          // Interleaved, transfers pair in order only when each goes to
          // the next virtual stage down the model (a forward value, read
          // there or later) or up it (a gradient): then each fragment of a
          // rank sends to one fragment of another, in the order both run
          // them. A forward value is received in that forward.
          const int64_t next = stage[j] + (from == kForward ? 1 : -1);
          if (rankOf(next) != r || (from == kBackward && to != kBackward) ||
              (from == kForward ? stage[i] < next : stage[i] > next))
            return ops[i]->emitOpError("reads a ")
                   << kPhaseNames[from] << " value of virtual stage "
                   << stage[j] << " on virtual stage " << stage[i]
                   << " (pipeline stage " << r << ", " << kPhaseNames[to]
                   << gradientOf(ops[i])
                   << "): an interleaved schedule moves values only to the "
                      "next virtual stage down the model and gradients to "
                      "the next up"
                   << (from == kBackward && stage[i] == 0
                           ? " (a tied embedding's gradient from the head "
                             "crosses once per step over several "
                             "micro-batches; over one it needs a pipeline of "
                             "two stages, or 1F1B)"
                           : "");
          recvKey = fragmentKey(from, chunkOf(next));
        }
        auto key = std::make_tuple(j, cast<OpResult>(v).getResultNumber(), r);
        auto it = seen.find(key);
        if (it != seen.end()) {
          // Received once per rank, before its first reader there.
          out[it->second].recvKey = std::min(out[it->second].recvKey, recvKey);
          continue;
        }
        seen[key] = out.size();
        out.push_back({j, cast<OpResult>(v).getResultNumber(), rankOf(stage[j]),
                       r, fragmentKey(from, chunkOf(stage[j])), recvKey});
      }
    }
    // Both ends list a pair's transfers in the order of the ops that made
    // the values.
    llvm::stable_sort(out, [](const Crossing &a, const Crossing &b) {
      return std::tie(a.producer, a.result) < std::tie(b.producer, b.result);
    });
    return success();
  }

  // Rank s's function: the clone of fn with other ranks' ops erased, the
  // rest ordered by fragment.
  LogicalResult cut(func::FuncOp clone, int64_t s,
                    ArrayRef<Crossing> crossings) {
    SmallVector<Operation *> mine;
    for (Operation &op : clone.getBody().front())
      mine.push_back(&op);
    const size_t n = mine.size();
    // Keep this rank's ops and the copied ops it reads.
    std::vector<bool> keep(n, false);
    DenseMap<Operation *, int64_t> inClone; // into mine (the clone's ops)
    for (size_t i = 0; i < n; ++i)
      inClone[mine[i]] = int64_t(i);
    for (size_t i = n; i-- > 0;) {
      if (isa<func::ReturnOp>(mine[i]))
        keep[i] = s + 1 == ranks;
      else if (!copied[i])
        keep[i] = rankOf(stage[i]) == s;
      else
        // A param stays on its own stage even if nothing reads it (it is
        // still trained state the program declares).
        keep[i] = (isa<ParamOp>(mine[i]) && rankOf(home[i]) == s) ||
                  llvm::any_of(mine[i]->getUsers(),
                               [&](Operation *u) { return keep[inClone[u]]; });
    }
    // Each kept op's fragment (-1: params, outside every fragment); a
    // copied op runs in the first fragment of its phase.
    std::vector<int64_t> key(n, -1);
    for (size_t i = 0; i < n; ++i) {
      if (!keep[i] || phase[i] == kNoPhase)
        continue;
      Phase p = Phase(phase[i]);
      key[i] = fragmentKey(p, !copied[i]       ? chunkOf(stage[i])
                              : p == kBackward ? chunks - 1
                                               : 0);
    }
    // A split backward (ZB-H1): what no sent gradient needs is the weight
    // gradients' fragment, run later. A rank that sends no gradient keeps
    // its backward whole (its receives need a fragment with instructions).
    if (split) {
      std::vector<bool> needed(n, false);
      SmallVector<Operation *> work;
      for (const Crossing &c : crossings)
        if (c.from == s && phaseOfKey(c.sendKey) == kBackward)
          work.push_back(mine[c.producer]);
      while (!work.empty()) {
        Operation *op = work.pop_back_val();
        auto it = inClone.find(op);
        if (it == inClone.end() || needed[it->second] ||
            phaseOfKey(key[it->second]) != kBackward)
          continue;
        needed[it->second] = true;
        for (Value v : op->getOperands())
          if (Operation *d = v.getDefiningOp())
            work.push_back(d);
      }
      if (llvm::is_contained(needed, true))
        for (size_t i = 0; i < n; ++i)
          if (key[i] >= 0 && phaseOfKey(key[i]) == kBackward && !needed[i])
            key[i] = fragmentKey(kWeight, 0);
    }
    // In fragment order (stable: a fragment's ops keep theirs).
    SmallVector<size_t> order;
    for (size_t i = 0; i + 1 < n; ++i)
      if (keep[i])
        order.push_back(i);
    llvm::stable_sort(order,
                      [&](size_t a, size_t b) { return key[a] < key[b]; });
    for (size_t i : order)
      mine[i]->moveBefore(mine[n - 1]);
    OpBuilder b(clone.getContext());
    auto mark = [&](Operation *op, int64_t k) {
      Phase p = phaseOfKey(k);
      op->setAttr(an::kFragment, b.getStringAttr(kPhaseNames[p]));
      if (chunks > 1 && (p == kForward || p == kBackward))
        op->setAttr(an::kChunk, b.getI64IntegerAttr(chunkOfKey(k)));
    };
    // Where a fragment begins and ends among the kept ops.
    auto firstOf = [&](int64_t k) -> Operation * {
      for (size_t i : order)
        if (key[i] >= k)
          return mine[i];
      return mine[n - 1];
    };
    auto lastOf = [&](int64_t k) -> Operation * {
      Operation *last = nullptr;
      for (size_t i : order)
        if (key[i] >= 0 && key[i] <= k)
          last = mine[i];
      return last;
    };
    // Receives first, at the start of their fragment.
    for (const Crossing &c : crossings) {
      if (c.to != s)
        continue;
      b.setInsertionPoint(firstOf(c.recvKey));
      Value orig = mine[c.producer]->getResult(c.result);
      auto recv = RecvOp::create(b, orig.getLoc(), orig.getType(),
                                 b.getI64IntegerAttr(c.from));
      mark(recv, c.recvKey);
      orig.replaceUsesWithIf(recv.getResult(), [&](OpOperand &use) {
        auto it = inClone.find(use.getOwner());
        return it != inClone.end() && keep[it->second];
      });
    }
    // Sends at the end of the maker's fragment (a value several ranks read
    // goes to each).
    std::set<int64_t> sendKeys;
    for (const Crossing &c : crossings)
      if (c.from == s)
        sendKeys.insert(c.sendKey);
    for (int64_t k : sendKeys) {
      Operation *after = lastOf(k);
      if (!after)
        return clone.emitError("stage ")
               << s << " sends from an empty " << kPhaseNames[phaseOfKey(k)]
               << " fragment";
      for (const Crossing &c : crossings) {
        if (c.from != s || c.sendKey != k)
          continue;
        b.setInsertionPointAfter(after);
        auto send = SendOp::create(b, mine[c.producer]->getLoc(),
                                   mine[c.producer]->getResult(c.result),
                                   b.getI64IntegerAttr(c.to));
        mark(send, k);
        after = send;
      }
    }
    const int64_t optimizerKey = fragmentKey(kOptimizer, 0);
    cutStepCrossings(s, mine, key, keep, firstOf, lastOf, mark);
    // Replicas: the param's stage sends its value after the optimizer; a
    // stage that reads it receives it before its own optimizer.
    // The sends follow each other in param order, as the receives do: each
    // after the one before (all after the same anchor would reverse them,
    // and transfers between two stages pair in order).
    Operation *lastSend = nullptr;
    for (size_t i = 0; i < n; ++i) {
      auto param = dyn_cast<ParamOp>(mine[i]);
      if (!param || !keep[i])
        continue;
      auto it = replicas.find(param.getName());
      if (it == replicas.end())
        continue;
      if (rankOf(home[i]) != s) {
        param->setAttr(an::kReplica, b.getUnitAttr());
        b.setInsertionPoint(firstOf(optimizerKey));
        auto recv = RecvParamOp::create(b, param.getLoc(), param.getName(),
                                        rankOf(home[i]));
        mark(recv, optimizerKey);
        continue;
      }
      Operation *after = lastSend ? lastSend : lastOf(optimizerKey);
      for (int64_t t : it->second) {
        b.setInsertionPointAfter(after);
        auto send = SendOp::create(b, param.getLoc(), param.getResult(),
                                   b.getI64IntegerAttr(t));
        mark(send, optimizerKey);
        after = send;
      }
      lastSend = after;
    }
    for (size_t i : order)
      if (key[i] >= 0)
        mark(mine[i], key[i]);
    if (s + 1 != ranks) {
      // Only the last stage computes the loss.
      b.setInsertionPoint(mine[n - 1]);
      func::ReturnOp::create(b, mine[n - 1]->getLoc());
      clone.setType(FunctionType::get(clone.getContext(),
                                      clone.getFunctionType().getInputs(), {}));
    }
    for (size_t i = n; i-- > 0;)
      if (!keep[i]) {
        mine[i]->dropAllUses();
        mine[i]->erase();
      }
    return success();
  }

  // Rank s's side of the step crossings: the maker sums the value into a
  // zero of the prologue and sends the sum before its optimizer; the
  // param's stage drops the per-micro-batch add and, first in its
  // optimizer, receives the sum and stores it through the same collectives.
  template <typename FirstOf, typename LastOf, typename Mark>
  void cutStepCrossings(int64_t s, ArrayRef<Operation *> mine,
                        ArrayRef<int64_t> key, std::vector<bool> &keep,
                        FirstOf firstOf, LastOf lastOf, Mark mark) {
    OpBuilder b(fn.getContext());
    const int64_t prologueKey = fragmentKey(kPrologue, 0),
                  optimizerKey = fragmentKey(kOptimizer, 0);
    // Both ends keep the crossings' order (transfers between two stages pair
    // in order), and the receives come first in the optimizer: they all
    // land as it begins.
    Operation *lastSend = nullptr;
    SmallVector<std::pair<const StepCrossing *, Value>> received;
    for (const StepCrossing &c : stepCrossings) {
      Value x = mine[c.producer]->getResult(c.result);
      auto type = cast<RankedTensorType>(x.getType());
      if (c.from == s) {
        b.setInsertionPoint(firstOf(prologueKey));
        auto acc = FillOp::create(b, x.getLoc(), type, b.getF64FloatAttr(0.0));
        mark(acc, prologueKey);
        b.setInsertionPointAfter(mine[c.producer]);
        mark(AccumulateOp::create(b, x.getLoc(), acc, x), key[c.producer]);
        // Last in the optimizer, so that the memory plan keeps the sum
        // through it; the schedule sends it before the optimizer's run.
        b.setInsertionPointAfter(lastSend ? lastSend : lastOf(optimizerKey));
        auto send = SendOp::create(b, x.getLoc(), acc, c.to);
        send.setOnce(true);
        mark(send, optimizerKey);
        lastSend = send;
      } else if (c.to == s) {
        b.setInsertionPoint(firstOf(optimizerKey));
        auto recv =
            RecvOp::create(b, x.getLoc(), type, b.getI64IntegerAttr(c.from));
        mark(recv, optimizerKey);
        received.push_back({&c, recv.getResult()});
      }
    }
    for (auto [c, sum] : received) {
      Value x = mine[c->producer]->getResult(c->result);
      b.setInsertionPoint(firstOf(optimizerKey));
      IRMapping map;
      map.map(c->add >= 0 ? mine[c->add]->getResult(0) : x, sum);
      for (int64_t k : c->collectives) {
        Operation *copy = b.clone(*mine[k], map);
        mark(copy, optimizerKey);
        sum = copy->getResult(0);
      }
      auto store = cast<ParamGradOp>(mine[c->paramGrad]);
      auto total = ParamGradOp::create(b, store.getLoc(), store.getName(), sum);
      total.setAccumulate(true);
      mark(total, optimizerKey);
      if (c->add >= 0) {
        // Each micro-batch stores this stage's own gradient.
        Operation *add = mine[c->add];
        add->getResult(0).replaceAllUsesWith(
            add->getOperand(add->getOperand(0) == x ? 1 : 0));
        keep[c->add] = false;
      } else {
        // Nothing of it is left per micro-batch.
        keep[c->paramGrad] = false;
        for (int64_t k : c->collectives)
          keep[k] = false;
      }
    }
  }

  /// Pipeline ranks (N, the stages option) and model chunks per rank (V);
  /// whether backwards split into B and W (ZB-H1).
  int64_t ranks = 1, chunks = 1;
  bool split = false;
  func::FuncOp fn;
  SmallVector<Operation *> ops;
  DenseMap<Operation *, int64_t> index; // into ops
  std::vector<int> phase;
  std::vector<int64_t> layerStage, stage, home;
  std::vector<bool> copied;
  std::vector<StringRef> paramOf;
  std::vector<llvm::BitVector> avail;
  llvm::StringMap<int64_t> paramHome;
  /// Per param: its stage and the stages whose forward reads it.
  llvm::StringMap<llvm::BitVector> paramAvail;
  /// Per param read on other ranks than its own: those ranks.
  llvm::StringMap<std::set<int64_t>> replicas;
  SmallVector<StepCrossing> stepCrossings;
};
} // namespace
