//===- Explain.cpp - collectives and memory of a partitioned step ---------===//
#include "passes/analysis/Explain.h"
#include "dialect/AttrNames.h"
#include "dialect/WeftDialect.h"
#include "passes/sharding/ShardingUtils.h"
#include "program/CommBytes.h"
#include "program/PipelineSchedule.h"
#include "program/Program.h"

#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/Support/Format.h"

#include <tuple>
#include <vector>

using namespace mlir;
using namespace weft;

namespace {
int64_t bytesOf(Type t) {
  auto r = cast<RankedTensorType>(t);
  return r.getNumElements() * r.getElementTypeBitWidth() / 8;
}

std::string typeName(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << t;
  return s;
}

SmallVector<StringRef> namesOf(ArrayAttr axes) {
  SmallVector<StringRef> out;
  for (Attribute a : axes)
    out.push_back(cast<StringAttr>(a).getValue());
  return out;
}

struct Collective {
  std::string kind, axes, reason;
  std::string dtype; // the element type it moves (bf16 activations, f32 grads)
  int64_t bytes = 0;
  int64_t times = 1; // per step: once per micro-batch, or once
};

// How many times per step the op runs: micro-batch fragments once per
// micro-batch; the optimizer fragment (from the first op marked for it or
// the first AdamW on) and prologue once.
DenseMap<Operation *, int64_t> timesPerStep(Operation *root) {
  DenseMap<Operation *, int64_t> times;
  root->walk([&](func::FuncOp fn) {
    int64_t m = 1;
    if (auto a = fn->getAttrOfType<IntegerAttr>(weft::attrname::kMicrobatches))
      m = a.getInt();
    bool once = false;
    for (Operation &op : fn.getBody().getOps()) {
      auto mark = op.getAttrOfType<StringAttr>(weft::attrname::kFragment);
      once =
          once || isa<AdamWOp>(op) || (mark && mark.getValue() == "optimizer");
      // A pipeline stage marks its forward and backward ops too.
      bool perMicrobatch = !mark || mark.getValue() == "forward" ||
                           mark.getValue() == "backward" ||
                           mark.getValue() == "weight";
      times[&op] = once || !perMicrobatch ? 1 : m;
    }
  });
  return times;
}

// Ring-algorithm bytes sent per rank: all_reduce 2(c-1)/c n, all_gather and
// reduce_scatter (c-1)/c n, n the larger of input and output; all_to_all
// (c-1)/c of its input, every block but the rank's own; ring_shift its
// whole block, to the next rank.
SmallVector<Collective> collectivesOf(Operation *root) {
  DenseMap<Operation *, int64_t> times = timesPerStep(root);
  SmallVector<Collective> out;
  Operation *current = nullptr;
  auto add = [&](StringRef kind, ArrayAttr axes, RankedTensorType t,
                 StringRef why) {
    auto names = namesOf(axes);
    int64_t c = MeshInfo::of(current).count(names); // the op's mesh
    int64_t factor = kind == "all_reduce" ? 2 : 1;
    int64_t n = bytesOf(t);
    out.push_back({kind.str(), joinAxes(names), why.str(),
                   typeName(t.getElementType()),
                   c > 1 ? factor * (c - 1) * n / c : 0,
                   times.lookup(current) ? times.lookup(current) : 1});
  };
  root->walk([&](Operation *op) {
    current = op;
    StringRef why;
    // A pipeline transfer: the bytes this rank sends to another stage.
    if (auto send = dyn_cast<SendOp>(op)) {
      auto fn = send->getParentOfType<func::FuncOp>();
      auto axis = fn->getAttrOfType<StringAttr>(weft::attrname::kPipelineAxis);
      auto mark = send->getAttrOfType<StringAttr>(weft::attrname::kFragment);
      StringRef what = !mark                           ? "value"
                       : mark.getValue() == "forward"  ? "activation"
                       : mark.getValue() == "backward" ? "gradient"
                       : send.getOnce() ? "gradient summed over the step"
                                        : "updated parameter";
      auto type = cast<RankedTensorType>(send.getX().getType());
      out.push_back({"send", axis ? axis.str() : "",
                     (what + " to stage " + Twine(send.getPeer())).str(),
                     typeName(type.getElementType()), bytesOf(type),
                     times.lookup(op) ? times.lookup(op) : 1});
      return;
    }
    if (auto r = op->getAttrOfType<StringAttr>("reason"))
      why = r.getValue();
    if (auto ar = dyn_cast<AllReduceOp>(op))
      add("all_reduce", ar.getAxes(), ar.getType(), why);
    else if (auto ag = dyn_cast<AllGatherOp>(op))
      add("all_gather", ag.getAxes(), ag.getType(), why);
    else if (auto rs = dyn_cast<ReduceScatterOp>(op))
      add("reduce_scatter", rs.getAxes(), rs.getX().getType(), why);
    else if (auto a2a = dyn_cast<AllToAllOp>(op))
      add("all_to_all", a2a.getAxes(), a2a.getX().getType(), why);
    else if (auto shift = dyn_cast<RingShiftOp>(op))
      out.push_back({"ring_shift", joinAxes(namesOf(shift.getAxes())),
                     why.str(), typeName(shift.getType().getElementType()),
                     bytesOf(shift.getType()),
                     times.lookup(op) ? times.lookup(op) : 1});
    else if (auto adam = dyn_cast<AdamWOp>(op)) {
      if (auto axes =
              adam->getAttrOfType<ArrayAttr>(weft::attrname::kShardAxes)) {
        auto p = adam.getParam().getDefiningOp<ParamOp>();
        // ZeRO-1: the unreduced gradient is reduce-scattered into the block.
        auto grad = p->getAttrOfType<ShardingAttr>(
            weft::attrname::kGradStorageSharding);
        if (grad && !grad.partialAxes().empty())
          out.push_back(
              {"reduce_scatter", joinAxes(namesOf(axes)),
               ("ZeRO-1: gradient of " + p.getName()).str(),
               typeName(adam.getParam().getType().getElementType()),
               [&] {
                 int64_t c = MeshInfo::of(adam).count(namesOf(axes));
                 return c > 1 ? (c - 1) * bytesOf(adam.getParam().getType()) / c
                              : 0;
               }(),
               1});
        add("all_gather", axes, adam.getParam().getType(),
            ("ZeRO: updated shards of " + p.getName()).str());
      }
    }
  });
  return out;
}

// The functions of a pipeline's stages, by stage (empty: no pipeline).
SmallVector<func::FuncOp> stageFunctions(ModuleOp module) {
  SmallVector<func::FuncOp> stages;
  for (auto fn : module.getOps<func::FuncOp>())
    if (fn->hasAttr(weft::attrname::kStage))
      stages.push_back(fn);
  llvm::sort(stages, [](func::FuncOp a, func::FuncOp b) {
    return a->getAttrOfType<IntegerAttr>(weft::attrname::kStage).getInt() <
           b->getAttrOfType<IntegerAttr>(weft::attrname::kStage).getInt();
  });
  return stages;
}

std::map<std::string, int64_t> commBytesOf(Operation *root) {
  std::map<std::string, int64_t> bytes;
  for (const Collective &c : collectivesOf(root))
    bytes[c.kind + "/" + c.axes] += c.bytes * c.times;
  return bytes;
}

// The bytes of one run of collective `c` (of the group holding world rank
// `base`) that cross between nodes of `perNode` ranks, as the runtime sends
// them (program/CommBytes.h).
double acrossNodes(const Collective &c, const MeshInfo &info, int64_t base,
                   int64_t perNode) {
  const bool reduce = c.kind == "all_reduce";
  const bool exchange = c.kind == "all_to_all" || c.kind == "ring_shift";
  if (!reduce && !exchange && c.kind != "reduce_scatter" &&
      c.kind != "all_gather")
    return 0;
  Mesh mesh;
  mesh.Axes.assign(info.axes.begin(), info.axes.end());
  mesh.Dims.assign(info.sizes.begin(), info.sizes.end());
  SmallVector<StringRef> names;
  StringRef(c.axes).split(names, ',', -1, false);
  std::vector<int64_t> nodeOf;
  size_t self = 0;
  for (int64_t r : mesh.group(base, AxesList(names.begin(), names.end()))) {
    if (r == base)
      self = nodeOf.size();
    nodeOf.push_back(r / perNode);
  }
  const int64_t n = int64_t(nodeOf.size());
  if (n < 2)
    return 0;
  // Point to point: an all_to_all's buffer is n/(n-1) of what it sends.
  if (c.kind == "ring_shift")
    return ringShiftAcross(double(c.bytes), nodeOf, self);
  if (c.kind == "all_to_all")
    return allToAllAcross(double(c.bytes) * double(n) / double(n - 1), nodeOf,
                          self);
  // The larger buffer, from the ring's bytes per rank.
  const double ring = reduce ? 2.0 : 1.0;
  const double big = double(c.bytes) * double(n) / (ring * double(n - 1));
  return sentBytes(reduce, big, n, nodeOf, /*Hierarchical=*/true).Across;
}

void printCollectives(Operation *root, llvm::raw_ostream &os, StringRef indent,
                      int64_t perNode = 0, int64_t base = 0) {
  // Group identical collectives; the reason names the op and operand that
  // needed each, and the sharding it went from and to.
  std::map<
      std::tuple<std::string, std::string, std::string, int64_t, std::string>,
      int64_t>
      groups;
  for (const Collective &c : collectivesOf(root))
    groups[{c.kind, c.axes, c.dtype, c.bytes, c.reason}] += c.times;
  os << indent
     << "collectives per training step (bytes sent per rank, ring "
        "algorithm):\n";
  os << indent
     << llvm::format("  %-15s %-6s %-5s %14s %6s  %s\n", "kind", "axes",
                     "dtype", "bytes/rank", "count", "reason");
  for (const auto &[key, count] : groups) {
    const auto &[kind, axes, dtype, bytes, reason] = key;
    os << indent
       << llvm::format("  %-15s %-6s %-5s %14lld %6lld  %s\n", kind.c_str(),
                       axes.c_str(), dtype.c_str(), (long long)bytes,
                       (long long)count, reason.c_str());
  }
  os << indent << "totals:\n";
  for (const auto &[key, bytes] : commBytesOf(root))
    os << indent
       << llvm::format("  %-24s %14lld bytes/rank/step\n", key.c_str(),
                       (long long)bytes);
  if (perNode <= 0)
    return;
  double across = 0;
  MeshInfo mesh = MeshInfo::of(root);
  for (const Collective &c : collectivesOf(root))
    across += double(c.times) * acrossNodes(c, mesh, base, perNode);
  os << indent
     << llvm::format("  %-24s %14lld bytes/rank/step (%lld ranks a node, "
                     "node by node; hierarchical where a group has 2 or "
                     "more ranks on each of its nodes)\n",
                     "between nodes", (long long)std::llround(across),
                     (long long)perNode);
}

struct Memory {
  int64_t params = 0, grads = 0, state = 0, arena = 0, staging = 0;
  /// The CPU backend's f32 copies of one kernel's bf16 operands.
  int64_t widening = 0;
  /// The arena's per-slot part (weft.slot_bytes; -1: the whole arena).
  int64_t slot = -1;
  int64_t perSlot() const { return slot >= 0 ? slot : arena; }
  /// The arena: its per-slot part once per micro-batch in flight, the
  /// shared rest once.
  int64_t activations(int64_t slots) const {
    return perSlot() * slots + (arena - perSlot());
  }
  /// Everything.
  int64_t total(int64_t slots) const {
    return params + grads + state + activations(slots) + staging + widening;
  }
};

// A pipeline stage's transfer staging at most, as the runtime's asynchronous
// transfers hold it (runtime/PipelineTransfers.cpp): 2 groups of sends and 2
// of receives in flight. A group sends what one run of a micro-batch sends
// (interleaved: a forward's and a backward's); its receives need staging
// only where runs lie between them and their own (weight gradients before
// the run, an interleaved tick's forward before its backward). Once-per-step
// transfers go from and to their place.
int64_t transferStaging(func::FuncOp stage) {
  llvm::StringMap<int64_t> sends, recvs; // per fragment and chunk
  bool split = false, chunks = false;
  auto key = [&](Operation *op) -> std::string {
    auto f = op->getAttrOfType<StringAttr>(weft::attrname::kFragment);
    if (!f || (f.getValue() != "forward" && f.getValue() != "backward" &&
               f.getValue() != "weight"))
      return "";
    auto c = op->getAttrOfType<IntegerAttr>(weft::attrname::kChunk);
    chunks |= c && c.getInt() > 0;
    return (f.getValue() + "." + std::to_string(c ? c.getInt() : 0)).str();
  };
  stage.walk([&](Operation *op) {
    if (auto f = op->getAttrOfType<StringAttr>(weft::attrname::kFragment))
      split |= f.getValue() == "weight";
    if (auto send = dyn_cast<SendOp>(op)) {
      if (std::string k = key(op); !k.empty())
        sends[k] += bytesOf(send.getOperand().getType());
    } else if (auto recv = dyn_cast<RecvOp>(op)) {
      if (std::string k = key(op); !k.empty())
        recvs[k] += bytesOf(recv.getType());
    }
  });
  // The largest forward's and the largest backward's (weight gradients
  // count as backward: ZB-H1 sends none there).
  auto largest = [](const llvm::StringMap<int64_t> &m, StringRef phase) {
    int64_t most = 0;
    for (const auto &e : m)
      if (e.getKey().starts_with(phase))
        most = std::max(most, e.getValue());
    return most;
  };
  const int64_t sendBound =
      largest(sends, "forward") +
      std::max(largest(sends, "backward"), largest(sends, "weight"));
  const int64_t fwdRecvs = largest(recvs, "forward"),
                bwdRecvs = largest(recvs, "backward");
  const int64_t recvBound = chunks  ? fwdRecvs + bwdRecvs
                            : split ? std::max(fwdRecvs, bwdRecvs)
                                    : 0;
  return 2 * (sendBound + recvBound);
}

// The CPU backend runs a kernel with bf16 operands on f32 copies of them in
// one scratch buffer, sized for the kernel with the most (CpuBackend's
// planWidening, planBf16Widening): each distinct bf16 value, 64-byte
// aligned. Ops that only move bytes run as they are; collectives and
// transfers are not kernels.
int64_t bf16WideningBytes(func::FuncOp fn) {
  int64_t most = 0;
  fn.walk([&](Operation *op) {
    if (isa<CastOp, PackOp, UnpackOp, SendOp, RecvOp, RecvParamOp, ParamOp,
            ParamGradOp, StoredGradOp, AllReduceOp, AllGatherOp,
            ReduceScatterOp, RingShiftOp, AllToAllOp>(op) ||
        !isa_and_nonnull<WeftDialect>(op->getDialect()))
      return;
    llvm::SmallPtrSet<Value, 8> seen;
    int64_t bytes = 0;
    auto widen = [&](Value v) {
      auto t = dyn_cast<RankedTensorType>(v.getType());
      if (!t || !t.getElementType().isBF16() || !seen.insert(v).second)
        return;
      bytes += (t.getNumElements() + 15) / 16 * 16 * 4;
    };
    for (Value v : op->getOperands())
      widen(v);
    for (Value v : op->getResults())
      widen(v);
    most = std::max(most, bytes);
  });
  return most;
}

// Memory per rank, from the local types the partitioner gave; a replica
// (a param another stage trains) holds its value only.
Memory memoryOf(Operation *root) {
  Memory m;
  root->walk([&](ParamOp p) {
    MeshInfo mesh = MeshInfo::of(p); // its function's
    SmallVector<int64_t> global(p.getType().getShape());
    if (auto g =
            p->getAttrOfType<DenseI64ArrayAttr>(weft::attrname::kGlobalShape))
      global.assign(g.asArrayRef().begin(), g.asArrayRef().end());
    auto type = RankedTensorType::get(global, p.getType().getElementType());
    auto local = [&](StringRef attr) {
      auto s = p->getAttrOfType<ShardingAttr>(attr);
      RankedTensorType t = s ? localType(type, s, mesh) : p.getType();
      return t ? bytesOf(t) : 0;
    };
    m.params += bytesOf(p.getType());
    // A forward-only function (weft-return-logits marks its vocabulary)
    // holds values only.
    auto fn = p->getParentOfType<func::FuncOp>();
    if (p->hasAttr(weft::attrname::kReplica) ||
        (fn && fn->hasAttr(weft::attrname::kVocab)))
      return;
    m.grads += local(weft::attrname::kGradStorageSharding);
    m.state += 2 * local(weft::attrname::kStateStorageSharding);
  });
  root->walk([&](func::FuncOp fn) {
    if (auto a = fn->getAttrOfType<IntegerAttr>(weft::attrname::kArenaBytes))
      m.arena = a.getInt();
    if (auto a = fn->getAttrOfType<IntegerAttr>(weft::attrname::kSlotBytes))
      m.slot = a.getInt();
    m.staging += transferStaging(fn);
    m.widening = std::max(m.widening, bf16WideningBytes(fn));
  });
  return m;
}

void printMemory(const Memory &m, int64_t slots, llvm::raw_ostream &os,
                 StringRef indent) {
  auto mib = [](int64_t b) { return b / 1048576.0; };
  const int64_t activations = m.activations(slots);
  os << indent << "memory per rank:\n"
     << indent
     << llvm::format("  parameters        %12lld bytes (%.2f MiB)\n",
                     (long long)m.params, mib(m.params))
     << indent
     << llvm::format("  gradients         %12lld bytes (%.2f MiB)\n",
                     (long long)m.grads, mib(m.grads))
     << indent
     << llvm::format(
            "  optimizer state   %12lld bytes (%.2f MiB, Adam m + v)\n",
            (long long)m.state, mib(m.state));
  if (slots > 1 && m.slot < 0)
    os << indent
       << llvm::format("  activations       %12lld bytes (%.2f MiB, the arena "
                       "x %lld micro-batches in flight)\n",
                       (long long)activations, mib(activations),
                       (long long)slots);
  else if (slots > 1)
    os << indent
       << llvm::format("  activations       %12lld bytes (%.2f MiB: %.2f MiB "
                       "kept x %lld micro-batches in flight, %.2f MiB "
                       "shared)\n",
                       (long long)activations, mib(activations),
                       mib(m.perSlot()), (long long)slots,
                       mib(m.arena - m.perSlot()));
  else
    os << indent
       << llvm::format(
              "  activations       %12lld bytes (%.2f MiB, the arena)\n",
              (long long)activations, mib(activations));
  if (m.staging)
    os << indent
       << llvm::format("  transfer staging  %12lld bytes (%.2f MiB, at most: 2 "
                       "groups of sends and of receives in flight)\n",
                       (long long)m.staging, mib(m.staging));
  if (m.widening)
    os << indent
       << llvm::format(
              "  bf16 widening     %12lld bytes (%.2f MiB, on CPUs: f32 "
              "copies of one kernel's bf16 operands)\n",
              (long long)m.widening, mib(m.widening));
  const int64_t total = m.total(slots);
  os << indent
     << llvm::format("  total             %12lld bytes (%.2f MiB)\n",
                     (long long)total, mib(total));
}

// The stages' runs laid out in time, transfers taking none and holding back
// only the run that reads them (runtime/PipelineTransfers.cpp's asynchronous
// way), a chunk's forward taking one unit and its backward two (its two
// matmuls per forward one): each stage runs its order, a forward after the
// previous virtual stage's (chunk c of stage s is virtual stage c*n + s), a
// backward after the next one's. Returns per stage a row: '.' idle, a forward
// of micro-batch k its digit (k mod 10), a backward its letter ('a' + k mod
// 26), twice; split (ZB-H1), B its letter and W its capital, once each.
std::vector<std::string> timeline(const PipelineSchedule &kind, int64_t n,
                                  int64_t m) {
  const int64_t nv = n * kind.VirtualStages;
  std::vector<std::vector<PipelineRun>> orders;
  for (int64_t s = 0; s < n; ++s)
    orders.push_back(pipelineOrder(kind, s, n, m));
  std::vector<std::vector<int64_t>> doneF(nv, std::vector<int64_t>(m, -1)),
      doneB(nv, std::vector<int64_t>(m, -1));
  std::vector<size_t> pos(n, 0);
  std::vector<int64_t> clock(n, 0);
  std::vector<std::string> rows(n);
  for (bool progress = true; progress;) {
    progress = false;
    for (int64_t s = 0; s < n; ++s)
      while (pos[s] < orders[s].size()) {
        const PipelineRun &r = orders[s][pos[s]];
        const int64_t k = r.Microbatch, v = r.Chunk * n + s;
        if (k >= m || v >= nv)
          return rows; // not this schedule's run
        // A W (split backward) follows its own B; B then takes one unit.
        int64_t ready = r.Weight      ? doneB[v][k]
                        : !r.Backward ? (v == 0 ? 0 : doneF[v - 1][k])
                        : v == nv - 1 ? doneF[v][k]
                                      : doneB[v + 1][k];
        if (ready < 0)
          break;
        int64_t start = std::max(clock[s], ready);
        int64_t length = r.Backward && !kind.SplitBackward ? 2 : 1;
        rows[s].append(size_t(start - clock[s]), '.');
        rows[s].append(size_t(length), r.Weight     ? char('A' + k % 26)
                                       : r.Backward ? char('a' + k % 26)
                                                    : char('0' + k % 10));
        clock[s] = start + length;
        if (!r.Weight)
          (r.Backward ? doneB : doneF)[v][k] = clock[s];
        ++pos[s];
        progress = true;
      }
  }
  size_t width = 0;
  for (const std::string &r : rows)
    width = std::max(width, r.size());
  for (std::string &r : rows)
    r.append(width - r.size(), '.');
  return rows;
}

// A pipeline read off its stage functions: stages, micro-batches, schedule.
struct PipelineShape {
  int64_t n = 1, m = 1;
  PipelineSchedule kind;
};

PipelineShape pipelineShape(ArrayRef<func::FuncOp> stages) {
  PipelineShape p;
  p.n = int64_t(stages.size());
  func::FuncOp first = stages.front();
  if (auto a = first->getAttrOfType<IntegerAttr>(weft::attrname::kMicrobatches))
    p.m = a.getInt();
  if (auto schedule = first->getAttrOfType<PipelineScheduleAttr>(
          weft::attrname::kPipelineSchedule))
    (void)parsePipelineSchedule(schedule.spec(), p.kind);
  return p;
}

// "layers 0-8" or "layer 0"; empty when the stage names none.
std::string layersOf(func::FuncOp stage) {
  auto layers = stage->getAttrOfType<StringAttr>(weft::attrname::kStageLayers);
  if (!layers)
    return "";
  return (layers.getValue().contains('-') || layers.getValue().contains(',')
              ? "layers "
              : "layer ") +
         layers.str();
}

// The first world rank of stage s: its pipeline coordinate s, the others 0.
int64_t stageBase(func::FuncOp stage, int64_t s) {
  MeshInfo mesh = MeshInfo::of(stage);
  auto axis = stage->getAttrOfType<StringAttr>(weft::attrname::kPipelineAxis);
  int64_t stride = 1;
  for (size_t i = mesh.axes.size(); i-- > 0;) {
    if (axis && mesh.axes[i] == axis.getValue())
      return s * stride;
    stride *= mesh.sizes[i];
  }
  return 0;
}

void explainPipeline(ArrayRef<func::FuncOp> stages, llvm::raw_ostream &os,
                     int64_t perNode) {
  const auto [n, m, kind] = pipelineShape(stages);
  func::FuncOp first = stages.front();
  auto axis = first->getAttrOfType<StringAttr>(weft::attrname::kPipelineAxis);
  std::vector<std::string> rows = timeline(kind, n, m);
  const int64_t width = rows.empty() ? 0 : int64_t(rows.front().size());
  // Busy units: 3 per micro-batch and chunk on every stage.
  const int64_t v = kind.VirtualStages;
  const double bubble = width ? 1.0 - double(3 * m * v) / double(width) : 0.0;
  os << "pipeline: " << n << " stages over mesh axis '"
     << (axis ? axis.getValue() : "") << "', schedule "
     << pipelineScheduleName(kind.Kind);
  if (v > 1)
    os << " over " << v << " model chunks per stage";
  os << ", " << m << " micro-batches\n";
  if (v > 1)
    os << llvm::format("  bubble %.1f%% of each stage's step (ideal chunks, "
                       "a backward twice a forward; (N-1)/(V*M+N-1) = "
                       "%.1f%%)\n",
                       100 * bubble, 100 * pipelineBubble(n, m, v));
  else if (kind.SplitBackward)
    os << llvm::format("  bubble %.1f%% of each stage's step (ideal stages, "
                       "the backward split into B and W as long as a "
                       "forward; (N-1)/(3M+N-1) = %.1f%%)\n",
                       100 * bubble, 100 * zeroBubbleH1Bubble(n, m));
  else
    os << llvm::format("  bubble %.1f%% of each stage's step (ideal stages, "
                       "a backward twice a forward; (N-1)/(M+N-1) = %.1f%%)\n",
                       100 * bubble, 100 * pipelineBubble(n, m));
  if (width <= 160) {
    os << "  timeline (transfers overlapped, as the runtime runs them over "
          "MPI: a send never holds its stage, a receive only its run; digit: "
          "forward of that micro-batch, letter: its "
       << (kind.SplitBackward ? "input gradient (B), capital: its weight "
                                "gradients (W)"
                              : "backward")
       << ", '.': idle):\n";
    for (int64_t s = 0; s < n; ++s)
      os << llvm::format("    stage %-3lld |", (long long)s) << rows[s]
         << "|\n";
  }
  for (int64_t s = 0; s < n; ++s) {
    os << "stage " << s;
    if (std::string layers = layersOf(stages[s]); !layers.empty())
      os << " (" << layers << (s == 0 ? ", the embeddings" : "")
         << (s == n - 1 ? ", the head and loss" : "") << ")";
    os << ":\n";
    printCollectives(stages[s], os, "  ", perNode, stageBase(stages[s], s));
    printMemory(memoryOf(stages[s]), pipelineSlots(kind, s, n, m), os, "  ");
  }
}

} // namespace

std::vector<std::pair<std::string, int64_t>>
weft::memoryPerRank(ModuleOp module) {
  SmallVector<func::FuncOp> stages = stageFunctions(module);
  if (stages.empty())
    return {{"every rank", memoryOf(module).total(1)}};
  const auto [n, m, kind] = pipelineShape(stages);
  std::vector<std::pair<std::string, int64_t>> out;
  for (int64_t s = 0; s < n; ++s) {
    std::string label = "stage " + std::to_string(s);
    if (std::string layers = layersOf(stages[s]); !layers.empty())
      label += " (" + layers + ")";
    out.push_back(
        {label, memoryOf(stages[s]).total(pipelineSlots(kind, s, n, m))});
  }
  return out;
}

std::map<std::string, int64_t> weft::predictCommBytes(ModuleOp module) {
  // A pipeline's rank 0 runs stage 0.
  SmallVector<func::FuncOp> stages = stageFunctions(module);
  return stages.empty() ? commBytesOf(module) : commBytesOf(stages.front());
}

void weft::explainStep(ModuleOp module, llvm::raw_ostream &os,
                       int64_t perNode) {
  int64_t microbatches = 1;
  module.walk([&](func::FuncOp fn) {
    if (auto a = fn->getAttrOfType<IntegerAttr>(weft::attrname::kMicrobatches))
      microbatches = a.getInt();
  });
  SmallVector<func::FuncOp> stages = stageFunctions(module);
  if (!stages.empty())
    return explainPipeline(stages, os, perNode);
  if (microbatches > 1)
    os << "micro-batches: " << microbatches
       << " per step; forward and backward run once per micro-batch, the "
          "gradients accumulate, and the activation arena holds one "
          "micro-batch\n";
  printCollectives(module, os, "", perNode);
  printMemory(memoryOf(module), 1, os, "");
}
