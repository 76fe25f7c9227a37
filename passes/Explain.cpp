//===- Explain.cpp - collectives and memory of a partitioned step ---------===//
#include "passes/Explain.h"
#include "dialect/AttrNames.h"
#include "dialect/WeftDialect.h"
#include "passes/ShardingUtils.h"

#include "llvm/Support/Format.h"

#include <tuple>

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
DenseMap<Operation *, int64_t> timesPerStep(ModuleOp module) {
  DenseMap<Operation *, int64_t> times;
  module.walk([&](func::FuncOp fn) {
    int64_t m = 1;
    if (auto a = fn->getAttrOfType<IntegerAttr>(weft::attrname::kMicrobatches))
      m = a.getInt();
    bool once = false;
    for (Operation &op : fn.getBody().getOps()) {
      auto mark = op.getAttrOfType<StringAttr>(weft::attrname::kFragment);
      once =
          once || isa<AdamWOp>(op) || (mark && mark.getValue() == "optimizer");
      times[&op] = once || mark ? 1 : m;
    }
  });
  return times;
}

// Ring-algorithm bytes sent per rank: all_reduce 2(c-1)/c n, all_gather and
// reduce_scatter (c-1)/c n, n the larger of input and output.
SmallVector<Collective> collectivesOf(ModuleOp module) {
  DenseMap<Operation *, int64_t> times = timesPerStep(module);
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
  module.walk([&](Operation *op) {
    current = op;
    StringRef why;
    if (auto r = op->getAttrOfType<StringAttr>("reason"))
      why = r.getValue();
    if (auto ar = dyn_cast<AllReduceOp>(op))
      add("all_reduce", ar.getAxes(), ar.getType(), why);
    else if (auto ag = dyn_cast<AllGatherOp>(op))
      add("all_gather", ag.getAxes(), ag.getType(), why);
    else if (auto rs = dyn_cast<ReduceScatterOp>(op))
      add("reduce_scatter", rs.getAxes(), rs.getX().getType(), why);
    else if (auto adam = dyn_cast<AdamWOp>(op)) {
      if (auto axes = adam->getAttrOfType<ArrayAttr>("shard_axes")) {
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
} // namespace

std::map<std::string, int64_t> weft::predictCommBytes(ModuleOp module) {
  std::map<std::string, int64_t> bytes;
  for (const Collective &c : collectivesOf(module))
    bytes[c.kind + "/" + c.axes] += c.bytes * c.times;
  return bytes;
}

void weft::explainStep(ModuleOp module, llvm::raw_ostream &os) {
  // Group identical collectives; the reason names the op and operand that
  // needed each, and the sharding it went from and to.
  std::map<
      std::tuple<std::string, std::string, std::string, int64_t, std::string>,
      int64_t>
      groups;
  for (const Collective &c : collectivesOf(module))
    groups[{c.kind, c.axes, c.dtype, c.bytes, c.reason}] += c.times;
  int64_t microbatches = 1;
  module.walk([&](func::FuncOp fn) {
    if (auto a = fn->getAttrOfType<IntegerAttr>(weft::attrname::kMicrobatches))
      microbatches = a.getInt();
  });
  if (microbatches > 1)
    os << "micro-batches: " << microbatches
       << " per step; forward and backward run once per micro-batch, the "
          "gradients accumulate, and the activation arena holds one "
          "micro-batch\n";
  os << "collectives per training step (bytes sent per rank, ring "
        "algorithm):\n";
  os << llvm::format("  %-15s %-6s %-5s %14s %6s  %s\n", "kind", "axes",
                     "dtype", "bytes/rank", "count", "reason");
  for (const auto &[key, count] : groups) {
    const auto &[kind, axes, dtype, bytes, reason] = key;
    os << llvm::format("  %-15s %-6s %-5s %14lld %6lld  %s\n", kind.c_str(),
                       axes.c_str(), dtype.c_str(), (long long)bytes,
                       (long long)count, reason.c_str());
  }
  os << "totals:\n";
  for (const auto &[key, bytes] : predictCommBytes(module))
    os << llvm::format("  %-24s %14lld bytes/rank/step\n", key.c_str(),
                       (long long)bytes);

  // Memory per rank, from the local types the partitioner gave.
  int64_t params = 0, grads = 0, state = 0, arena = 0;
  module.walk([&](ParamOp p) {
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
    params += bytesOf(p.getType());
    grads += local(weft::attrname::kGradStorageSharding);
    state += 2 * local(weft::attrname::kStateStorageSharding);
  });
  module.walk([&](func::FuncOp fn) {
    if (auto a = fn->getAttrOfType<IntegerAttr>(weft::attrname::kArenaBytes))
      arena = a.getInt();
  });
  auto mib = [](int64_t b) { return b / 1048576.0; };
  os << "memory per rank:\n"
     << llvm::format("  parameters        %12lld bytes (%.2f MiB)\n",
                     (long long)params, mib(params))
     << llvm::format("  gradients         %12lld bytes (%.2f MiB)\n",
                     (long long)grads, mib(grads))
     << llvm::format(
            "  optimizer state   %12lld bytes (%.2f MiB, Adam m + v)\n",
            (long long)state, mib(state))
     << llvm::format("  activations       %12lld bytes (%.2f MiB, the arena)\n",
                     (long long)arena, mib(arena))
     << llvm::format("  total             %12lld bytes (%.2f MiB)\n",
                     (long long)(params + grads + state + arena),
                     mib(params + grads + state + arena));
}
