//===- ApplyLayout.cpp - weft-apply-layout: mesh + declared shardings -----===//
#include "dialect/AttrNames.h"
#include "passes/Passes.h"
#include "passes/sharding/ShardingUtils.h"
#include "program/JsonDepth.h"
#include "program/Program.h"
#include "llvm/ADT/StringSet.h"

#include "mlir/IR/Builders.h"
#include "llvm/Support/GlobPattern.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/WithColor.h"

#include <mutex>
#include <set>

namespace weft {
#define GEN_PASS_DEF_WEFTAPPLYLAYOUT
#include "passes/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {
// A warning the same process has printed is not printed again (the planner
// runs this pass on one model at each tp, with and without SP).
bool warnOnce(const std::string &key) {
  static std::mutex mutex;
  static std::set<std::string> printed;
  std::lock_guard<std::mutex> lock(mutex);
  return printed.insert(key).second;
}

using DimAxes = SmallVector<SmallVector<std::string>>;

struct ApplyLayout : weft::impl::WeftApplyLayoutBase<ApplyLayout> {
  using WeftApplyLayoutBase::WeftApplyLayoutBase;

  void runOnOperation() override {
    if (failed(apply()))
      signalPassFailure();
  }

  LogicalResult apply() {
    ModuleOp module = getOperation();
    OpBuilder b(module.getBodyRegion());
    if (failed(parseMesh(module)))
      return failure();
    b.setInsertionPointToStart(module.getBody());
    SmallVector<StringRef> axisRefs(meshInfo.axes.begin(), meshInfo.axes.end());
    MeshOp::create(b, module.getLoc(), "mesh", b.getStrArrayAttr(axisRefs),
                   b.getDenseI64ArrayAttr(meshInfo.sizes));

    // Samples over dp; under context parallelism each sample's sequence
    // over cp (attention all-gathers the keys and values it needs).
    DimAxes inputDims = {{}, {}};
    if (meshInfo.size("dp") > 1)
      inputDims[0] = {"dp"};
    if (meshInfo.size(kContextAxis) > 1)
      inputDims[1] = {kContextAxis.str()};
    SmallVector<std::pair<std::string, DimAxes>> globs;
    int64_t zeroStage = zero;
    bool sp = sequenceParallel;
    std::string contextOrder = "head-tail", contextMode = contextParallel;
    if (layout != "data" && layout != "megatron" &&
        failed(readLayoutFile(module, inputDims, globs, zeroStage, sp,
                              contextOrder, contextMode)))
      return failure();
    if (contextMode != "all-gather" && contextMode != "all-to-all" &&
        contextMode != "ring")
      return module.emitError("context parallelism must be all-gather, "
                              "all-to-all or ring, got '")
             << contextMode << "'";
    if (contextMode != "all-gather" && meshInfo.size(kContextAxis) <= 1)
      return module.emitError("")
             << contextMode
             << " context parallelism needs a mesh axis 'cp' of more than "
                "one rank";
    if (zeroStage < 0 || zeroStage > 3)
      return module.emitError("zero stage must be 0-3, got ") << zeroStage;
    if (sp && meshInfo.size("tp") < 1)
      return module.emitError("sequence parallelism needs a tp mesh axis");

    for (auto fn : module.getOps<func::FuncOp>()) {
      if (fn.isExternal())
        continue;
      // The function names its mesh (a pipeline stage will name its own).
      fn->setAttr(weft::attrname::kMesh,
                  FlatSymbolRefAttr::get(b.getContext(), "mesh"));
      if (contextMode != "all-gather")
        fn->setAttr(weft::attrname::kContextParallel,
                    b.getStringAttr(contextMode));
      if (failed(annotateInputs(fn, inputDims)) ||
          (contextOrder == "head-tail" &&
           failed(balanceContext(fn, inputDims))) ||
          failed(annotateParams(fn, globs, zeroStage)) ||
          failed(checkHeads(fn)) ||
          (sp && failed(constrainSequence(fn, inputDims))) ||
          failed(checkAxesUsed(fn, sp)))
        return failure();
    }
    for (auto &[pattern, used] : globUsed)
      if (!used)
        llvm::WithColor::warning(llvm::errs(), "weft")
            << "layout pattern '" << pattern << "' matches no parameter\n";
    return success();
  }

  // Every mesh axis of more than one rank must split something: ranks along
  // an axis nothing uses would all compute the same thing (--mesh DP=2 with
  // the data layout, which splits over "dp", used to compile to that).
  LogicalResult checkAxesUsed(func::FuncOp fn, bool sp) {
    llvm::StringSet<> used;
    auto note = [&](Attribute a) {
      if (auto s = dyn_cast_or_null<ShardingAttr>(a))
        for (size_t d = 0; d < s.getDims().size(); ++d)
          for (StringRef axis : s.axesOf(d))
            used.insert(axis);
    };
    for (unsigned i = 0; i < fn.getNumArguments(); ++i)
      note(fn.getArgAttr(i, weft::attrname::kSharding));
    fn.walk([&](ParamOp p) {
      for (StringRef attr :
           {weft::attrname::kSharding, weft::attrname::kStateStorage,
            weft::attrname::kGradStorage, weft::attrname::kStorage})
        note(p->getAttr(attr));
    });
    if (!pipelineAxis.empty() && used.contains(pipelineAxis))
      return fn.emitError("the layout splits a tensor over mesh axis '")
             << pipelineAxis
             << "', which holds pipeline stages: stages split the layers, "
                "so no tensor may be split over that axis";
    if (sp)
      used.insert("tp");
    if (!pipelineAxis.empty())
      used.insert(pipelineAxis);
    for (auto [axis, size] : llvm::zip(meshInfo.axes, meshInfo.sizes))
      if (size > 1 && !used.contains(axis))
        return fn.emitError("mesh axis '")
               << axis << "' (size " << size
               << ") splits nothing in this layout: its ranks would all "
                  "compute the same thing (the data layout splits the batch "
                  "over 'dp', megatron the weights over 'tp'; a layout file "
                  "over the axes it names)";
    return success();
  }

  LogicalResult parseMesh(ModuleOp module) {
    weft::Mesh parsed;
    if (weft::Status st = weft::parseMeshSpec(mesh, parsed); !st.ok())
      return module.emitError("weft-apply-layout: ") << st.message();
    for (auto [axis, size] : llvm::zip(parsed.Axes, parsed.Dims)) {
      meshInfo.axes.push_back(axis);
      meshInfo.sizes.push_back(size);
    }
    return success();
  }

  ShardingAttr toAttr(const DimAxes &dims, ArrayRef<int64_t> blocks = {}) {
    SmallVector<SmallVector<StringRef>> refs;
    for (const auto &axes : dims)
      refs.emplace_back(axes.begin(), axes.end());
    SmallVector<int64_t> b(dims.size(), 1);
    for (size_t i = 0; i < blocks.size() && i < b.size(); ++i)
      b[i] = blocks[i];
    return ShardingAttr::get(&getContext(), refs, {}, b);
  }

  // Every axis must exist and divide the dim it splits.
  LogicalResult checkDims(Operation *at, StringRef tensor,
                          ArrayRef<int64_t> shape, const DimAxes &dims,
                          ArrayRef<int64_t> blocks = {}) {
    if (dims.size() != shape.size())
      return at->emitError("layout for ")
             << tensor << " has " << dims.size() << " dims, the tensor has "
             << shape.size();
    llvm::StringMap<size_t> dimOfAxis;
    for (auto [d, axes] : llvm::enumerate(dims)) {
      int64_t c = 1;
      for (const std::string &a : axes) {
        if (meshInfo.size(a) == 0)
          return at->emitError("unknown mesh axis '")
                 << a << "' in the layout of " << tensor;
        auto [it, fresh] = dimOfAxis.try_emplace(a, d);
        if (!fresh)
          return at->emitError("mesh axis '")
                 << a << "' splits dim " << it->second
                 << (it->second == d ? " twice"
                                     : " and dim " + std::to_string(d))
                 << " in the layout of " << tensor
                 << ": an axis may split one dim of a tensor once";
        c *= meshInfo.size(a);
      }
      int64_t nb = d < blocks.size() ? blocks[d] : 1;
      if (shape[d] % (c * nb) != 0) {
        std::string names;
        for (const std::string &a : axes)
          names += (names.empty() ? "" : "*") + a + "=" +
                   std::to_string(meshInfo.size(a));
        return at->emitError()
               << names << " does not divide dim " << d << " (size " << shape[d]
               << (nb > 1 ? ", in " : "")
               << (nb > 1 ? std::to_string(nb) + " blocks" : "") << ") of "
               << tensor;
      }
    }
    return success();
  }

  LogicalResult annotateInputs(func::FuncOp fn, const DimAxes &dims) {
    for (BlockArgument arg : fn.getArguments()) {
      auto type = cast<RankedTensorType>(arg.getType());
      // A tensor input is whole on every rank (format version 8):
      // replicated; the layout splits the parameters, and propagation the
      // values computed from both.
      if (fn.getArgAttr(arg.getArgNumber(), weft::attrname::kInput))
        continue;
      std::string name = arg.getArgNumber() == 0 ? "tokens" : "targets";
      // A classifier's targets, one per sample, are the batch dim alone; a
      // regression's float targets are split along the rows only (a
      // reader split along another dim slices its block locally).
      const bool floats = isa<FloatType>(type.getElementType());
      DimAxes argDims = dims;
      if (arg.getArgNumber() == 1 && floats && type.getRank() >= 1) {
        argDims.assign(type.getRank(), {});
        argDims[0] = dims[0];
      } else if (type.getRank() == 1 && arg.getArgNumber() == 1) {
        argDims.resize(1);
      }
      if (failed(checkDims(fn,
                           name + (floats                ? " (batch x ...)"
                                   : argDims.size() == 1 ? " (batch)"
                                                         : " (batch x seq)"),
                           type.getShape(), argDims)))
        return failure();
      fn.setArgAttr(arg.getArgNumber(), weft::attrname::kSharding,
                    toAttr(argDims));
    }
    return success();
  }

  // Load-balanced context parallelism: with each sequence split over cp
  // alone, it is held as 2N chunks, rank i holding chunks i and 2N-1-i, so
  // that every rank's queries have as many earlier keys to read
  // (weft.seq_chunks; PyTorch's and Megatron's head-tail order).
  LogicalResult balanceContext(func::FuncOp fn, const DimAxes &dims) {
    int64_t cp = meshInfo.size(kContextAxis);
    if (cp <= 1 || dims.size() < 2 || dims[1].size() != 1 ||
        dims[1][0] != kContextAxis || fn.getNumArguments() == 0)
      return success();
    auto tokens = cast<RankedTensorType>(fn.getArgument(0).getType());
    if (tokens.getRank() != 2)
      return success();
    // Only a next-token (or masked-LM) loss reads targets per token, stored
    // in the same order: a classifier's or a regression's per-sample targets
    // keep the natural order (their pooling may read any position).
    if (fn.getNumArguments() < 2)
      return success();
    auto targets = cast<RankedTensorType>(fn.getArgument(1).getType());
    if (targets.getRank() != 2 || !targets.getElementType().isInteger(32))
      return success();
    int64_t seq = tokens.getDimSize(1), chunks = 2 * cp;
    if (seq % chunks != 0)
      return fn.emitError("context parallelism cuts each sequence into 2*cp=")
             << chunks << " chunks, rank i holding chunks i and " << chunks - 1
             << "-i so that causal attention's work is even: seq=" << seq
             << " is not divisible by " << chunks
             << " (a layout file's \"context_order\": \"natural\" holds "
                "contiguous blocks, which need seq divisible by cp="
             << cp << " only)";
    fn->setAttr(weft::attrname::kSeqChunks,
                Builder(fn.getContext()).getI64IntegerAttr(chunks));
    return success();
  }

  LogicalResult annotateParams(func::FuncOp fn,
                               ArrayRef<std::pair<std::string, DimAxes>> globs,
                               int64_t zeroStage) {
    int64_t tp = meshInfo.size("tp"), dp = meshInfo.size("dp");
    std::vector<std::string> whole; // ZeRO left these unsplit
    auto walk = fn.walk([&](ParamOp p) -> WalkResult {
      StringRef name = p.getName();
      ArrayRef<int64_t> shape = p.getType().getShape();
      DimAxes dims(shape.size());
      SmallVector<int64_t> blocks(shape.size(), 1);
      // Megatron's layout splits by the role weft-infer-tp-roles read
      // from the graph (or a frontend or user declared): never by name.
      auto role = p->getAttrOfType<TpRoleAttr>(weft::attrname::kTpRole);
      if (layout == "megatron" && tp > 1 && role && role.splits()) {
        int64_t d = role.getDim();
        if (role.getKind() != "vocab") {
          dims[d] = {"tp"};
          blocks[d] = role.getBlocks();
        } else if (shape[d] % tp == 0) {
          dims[d] = {"tp"};
        } else {
          // Megatron-LM pads the vocab to a multiple of tp; weft does not
          // change the model, so an indivisible vocab stays replicated.
          if (warnOnce("tp=" + std::to_string(tp) + " " + name.str()))
            llvm::WithColor::warning(llvm::errs(), "weft")
                << "tp=" << tp << " does not divide the vocab (" << shape[d]
                << ") of " << name
                << ": it stays replicated, with no vocab-parallel embedding "
                   "or cross-entropy\n";
        }
      }
      std::string matchedBy;
      for (const auto &[pattern, patternDims] : globs) {
        auto glob = llvm::GlobPattern::create(pattern);
        if (!glob || !glob->match(name))
          continue;
        globUsed[pattern] = true;
        if (!matchedBy.empty() && patternDims != dims) {
          p.emitError() << "contradictory layout: patterns '" << matchedBy
                        << "' and '" << pattern << "' both match parameter "
                        << name << " with different shardings";
          return WalkResult::interrupt();
        }
        dims = patternDims;
        matchedBy = pattern;
      }
      if (!matchedBy.empty()) {
        // A split of GPT-2's fused QKV dim is a split of q, k and v each (3
        // blocks), as Megatron's: attention needs whole heads of all three
        // on a rank, and a plain split could never be resharded into that.
        blocks.assign(shape.size(), 1);
        if (role && role.getBlocks() > 1 &&
            size_t(role.getDim()) < dims.size() && !dims[role.getDim()].empty())
          blocks[role.getDim()] = role.getBlocks();
      }
      if (failed(checkDims(p, "parameter " + name.str(), shape, dims, blocks)))
        return WalkResult::interrupt();
      p->setAttr(weft::attrname::kSharding, toAttr(dims, blocks));
      // ZeRO: split dim 0 further over dp where it divides (not a dim split
      // in blocks: a blocked all-gather would need a strided layout; not a
      // parameter the layout already splits over dp: its state is split).
      bool usesDp = llvm::any_of(dims, [](const auto &axes) {
        return llvm::is_contained(axes, "dp");
      });
      if (zeroStage > 0 && dp > 1 && blocks[0] == 1 && !usesDp) {
        DimAxes storage = dims;
        storage[0].push_back("dp");
        int64_t c = 1;
        for (const std::string &a : storage[0])
          c *= meshInfo.size(a);
        if (shape[0] % (c * blocks[0]) != 0)
          whole.push_back(name.str() + " [" + std::to_string(shape[0]) +
                          " rows, split " + std::to_string(c) + " ways]");
        if (shape[0] % (c * blocks[0]) == 0) {
          ShardingAttr s = toAttr(storage, blocks);
          p->setAttr(weft::attrname::kStateStorage, s);
          if (zeroStage == 1) {
            // ZeRO-1 keeps whole gradients, unreduced: each rank's own
            // contribution, reduce-scattered into the optimizer's block
            // (the same bytes as data parallelism's all-reduce).
            SmallVector<SmallVector<StringRef>> refs;
            for (const auto &axes : dims)
              refs.emplace_back(axes.begin(), axes.end());
            p->setAttr(weft::attrname::kGradStorage,
                       ShardingAttr::get(&getContext(), refs, {"dp"}, blocks));
          }
          if (zeroStage >= 2)
            p->setAttr(weft::attrname::kGradStorage, s);
          if (zeroStage >= 3)
            p->setAttr(weft::attrname::kStorage, s);
        }
      }
      return WalkResult::advance();
    });
    warnWholeState(whole, zeroStage);
    return failure(walk.wasInterrupted());
  }

  // ZeRO splits a parameter's rows over dp only where dp (times the rows'
  // other split) divides them; it says which it left whole, once.
  static void warnWholeState(ArrayRef<std::string> whole, int64_t zeroStage) {
    if (whole.empty() || !warnOnce("zero whole " + whole.front()))
      return;
    auto &w = llvm::WithColor::warning(llvm::errs(), "weft");
    w << "zero=" << zeroStage << " splits no rows of " << whole.size()
      << " parameter" << (whole.size() > 1 ? "s" : "")
      << " whose dim 0 the split does not divide, so their gradients and "
         "optimizer state stay whole on every rank: ";
    const size_t shown = std::min<size_t>(whole.size(), 3);
    for (size_t i = 0; i < shown; ++i)
      w << (i ? ", " : "") << whole[i];
    if (whole.size() > shown)
      w << " and " << whole.size() - shown << " more";
    w << "\n";
  }

  LogicalResult checkHeads(func::FuncOp fn) {
    int64_t tp = meshInfo.size("tp");
    // Only Megatron's layout splits every attention by heads; in a layout
    // file, attention splits only where the head counts allow (the sharding
    // rule's granule and tied factors), and stays whole elsewhere.
    if (tp <= 1 || layout != "megatron")
      return success();
    auto walk = fn.walk([&](AttentionOp att) -> WalkResult {
      if (att.getNumHeads() % tp != 0 || att.getNumKvHeads() % tp != 0) {
        att.emitError() << "tp=" << tp
                        << " does not divide num_heads=" << att.getNumHeads()
                        << (att.getNumKvHeads() != att.getNumHeads()
                                ? " and num_kv_heads=" +
                                      std::to_string(att.getNumKvHeads())
                                : "");
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    return failure(walk.wasInterrupted());
  }

  // Sequence parallelism: the residual stream (the embedding output and every
  // residual add) is split along the sequence over tp.
  LogicalResult constrainSequence(func::FuncOp fn, const DimAxes &inputDims) {
    SmallVector<Value> stream;
    fn.walk([&](Operation *op) {
      if (isa<PositionEmbeddingOp, AddOp>(op) ||
          (isa<EmbeddingOp>(op) &&
           !llvm::any_of(op->getUsers(), [](Operation *u) {
             return isa<PositionEmbeddingOp>(u);
           })))
        stream.push_back(op->getResult(0));
    });
    for (Value v : stream) {
      auto type = cast<RankedTensorType>(v.getType());
      if (type.getRank() != 3)
        continue;
      // Under context parallelism each rank's block of the sequence is
      // split further over tp (Megatron's cp x tp).
      DimAxes dims(3);
      if (meshInfo.size("dp") > 1)
        dims[0] = {"dp"};
      if (inputDims.size() > 1 &&
          llvm::is_contained(inputDims[1], kContextAxis.str()))
        dims[1].push_back(kContextAxis.str());
      dims[1].push_back("tp");
      if (failed(checkDims(v.getDefiningOp(),
                           "the residual stream (batch x seq x hidden)",
                           type.getShape(), dims)))
        return failure();
      OpBuilder b(v.getContext());
      b.setInsertionPointAfterValue(v);
      auto shard = ShardOp::create(b, v.getLoc(), v, toAttr(dims));
      v.replaceAllUsesExcept(shard.getResult(), shard);
    }
    return success();
  }

  LogicalResult
  readLayoutFile(ModuleOp module, DimAxes &inputDims,
                 SmallVector<std::pair<std::string, DimAxes>> &globs,
                 int64_t &zeroStage, bool &sp, std::string &contextOrder,
                 std::string &contextMode) {
    auto buffer = llvm::MemoryBuffer::getFile(layout);
    if (!buffer)
      return module.emitError("--layout '")
             << layout << "' is not data or megatron, and not a layout file "
             << "weft can read (" << buffer.getError().message()
             << "): give data, megatron or a layout JSON file";
    std::string deep = jsonDepthError((*buffer)->getBuffer().str(),
                                      "layout file '" + layout + "'");
    if (!deep.empty())
      return module.emitError(deep);
    auto parsed = llvm::json::parse((*buffer)->getBuffer());
    if (!parsed) {
      std::string msg = llvm::toString(parsed.takeError());
      return module.emitError("layout file '")
             << layout << "' is not valid JSON: " << msg;
    }
    auto *root = parsed->getAsObject();
    if (!root)
      return module.emitError("layout file '")
             << layout << "' must be an object";
    if (root->empty())
      return module.emitError("layout file '")
             << layout
             << "' is empty ({}): it names no params, inputs, zero or "
                "sequence_parallel, so it would lay out nothing; use "
                "--layout data for the batch split alone";
    auto readDims = [&](const llvm::json::Value &v, DimAxes &out) -> bool {
      auto *arr = v.getAsArray();
      if (!arr)
        return false;
      out.clear();
      for (const auto &dim : *arr) {
        out.emplace_back();
        if (auto s = dim.getAsString()) {
          out.back().push_back(s->str());
          continue;
        }
        auto *axes = dim.getAsArray();
        if (!axes)
          return false;
        for (const auto &a : *axes) {
          auto s = a.getAsString();
          if (!s)
            return false;
          out.back().push_back(s->str());
        }
      }
      return true;
    };
    for (auto &[key, value] : *root) {
      if (key == "params") {
        auto *obj = value.getAsObject();
        if (!obj)
          return module.emitError("layout 'params' must map globs to dims");
        for (auto &[pattern, dims] : *obj) {
          DimAxes d;
          if (!readDims(dims, d))
            return module.emitError("layout for '")
                   << pattern.str() << "' must be a list of axis lists";
          globs.push_back({pattern.str(), d});
          globUsed[pattern.str()] = false;
        }
      } else if (key == "inputs") {
        if (!readDims(value, inputDims) || inputDims.size() != 2)
          return module.emitError(
              "layout 'inputs' must be [[batch axes], [seq axes]]");
      } else if (key == "zero") {
        auto z = value.getAsInteger();
        if (!z)
          return module.emitError("layout 'zero' must be an integer");
        zeroStage = *z;
      } else if (key == "sequence_parallel") {
        auto s = value.getAsBoolean();
        if (!s)
          return module.emitError(
              "layout 'sequence_parallel' must be a boolean");
        sp = *s;
      } else if (key == "context_order") {
        auto o = value.getAsString();
        if (!o || (*o != "head-tail" && *o != "natural"))
          return module.emitError("layout 'context_order' must be "
                                  "\"head-tail\" or \"natural\"");
        contextOrder = o->str();
      } else if (key == "context_parallel") {
        auto m = value.getAsString();
        if (!m)
          return module.emitError("layout 'context_parallel' must be "
                                  "\"all-gather\", \"all-to-all\" or "
                                  "\"ring\"");
        contextMode = m->str();
      } else {
        return module.emitError("unknown layout key '") << key.str() << "'";
      }
    }
    return success();
  }

  MeshInfo meshInfo;
  std::map<std::string, bool> globUsed;
};
} // namespace
