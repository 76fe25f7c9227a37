//===- ApplyLayout.cpp - weft-apply-layout: mesh + declared shardings -----===//
#include "dialect/AttrNames.h"
#include "passes/Passes.h"
#include "passes/ShardingUtils.h"
#include "program/JsonDepth.h"
#include "llvm/ADT/StringSet.h"

#include "mlir/IR/Builders.h"
#include "llvm/Support/GlobPattern.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/WithColor.h"

namespace weft {
#define GEN_PASS_DEF_WEFTAPPLYLAYOUT
#include "passes/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {
using DimAxes = SmallVector<SmallVector<std::string>>;

// Megatron-LM's split of GPT-2 and Llama blocks: (name suffix, dim, blocks).
// Column-parallel layers split their output features, row-parallel layers
// their input features. GPT-2's Conv1D weights are [in, out], Llama's
// nn.Linear weights [out, in].
struct MegatronRule {
  const char *suffix;
  int64_t dim;
  int64_t blocks;
};
const MegatronRule kMegatron[] = {
    {".attn.c_attn.weight", 1, 3},
    {".attn.c_attn.bias", 0, 3},
    {".attn.c_proj.weight", 0, 1},
    {".mlp.c_fc.weight", 1, 1},
    {".mlp.c_fc.bias", 0, 1},
    {".mlp.c_proj.weight", 0, 1},
    {".self_attn.q_proj.weight", 0, 1},
    {".self_attn.k_proj.weight", 0, 1},
    {".self_attn.v_proj.weight", 0, 1},
    {".self_attn.o_proj.weight", 1, 1},
    {".mlp.gate_proj.weight", 0, 1},
    {".mlp.up_proj.weight", 0, 1},
    {".mlp.down_proj.weight", 1, 1},
    // Column-parallel biases (Llama attention_bias / mlp_bias, Qwen2) split
    // with their weights' output dim; row-parallel ones (o_proj, down_proj)
    // stay whole and are added after the all-reduce.
    {".self_attn.q_proj.bias", 0, 1},
    {".self_attn.k_proj.bias", 0, 1},
    {".self_attn.v_proj.bias", 0, 1},
    {".mlp.gate_proj.bias", 0, 1},
    {".mlp.up_proj.bias", 0, 1},
    // DistilBERT (nn.Linear, [out, in]): q/k/v and lin1 column-parallel
    // with their biases, out_lin and lin2 row-parallel.
    {".attention.q_lin.weight", 0, 1},
    {".attention.q_lin.bias", 0, 1},
    {".attention.k_lin.weight", 0, 1},
    {".attention.k_lin.bias", 0, 1},
    {".attention.v_lin.weight", 0, 1},
    {".attention.v_lin.bias", 0, 1},
    {".attention.out_lin.weight", 1, 1},
    {".ffn.lin1.weight", 0, 1},
    {".ffn.lin1.bias", 0, 1},
    {".ffn.lin2.weight", 1, 1},
    // BERT / MiniLM (nn.Linear): query/key/value and intermediate
    // column-parallel with their biases; attention.output.dense and
    // output.dense row-parallel.
    {".attention.self.query.weight", 0, 1},
    {".attention.self.query.bias", 0, 1},
    {".attention.self.key.weight", 0, 1},
    {".attention.self.key.bias", 0, 1},
    {".attention.self.value.weight", 0, 1},
    {".attention.self.value.bias", 0, 1},
    {".attention.output.dense.weight", 1, 1},
    {".intermediate.dense.weight", 0, 1},
    {".intermediate.dense.bias", 0, 1},
    {".output.dense.weight", 1, 1},
};

// Megatron's vocab-parallel embedding and LM head: split the vocab dim.
const char *const kMegatronVocab[] = {
    "transformer.wte.weight", "model.embed_tokens.weight", "lm_head.weight"};

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

    DimAxes inputDims = {{}, {}};
    if (meshInfo.size("dp") > 1)
      inputDims[0] = {"dp"};
    SmallVector<std::pair<std::string, DimAxes>> globs;
    int64_t zeroStage = zero;
    bool sp = sequenceParallel;
    if (layout != "data" && layout != "megatron" &&
        failed(readLayoutFile(module, inputDims, globs, zeroStage, sp)))
      return failure();
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
      if (failed(annotateInputs(fn, inputDims)) ||
          failed(annotateParams(fn, globs, zeroStage)) ||
          failed(checkHeads(fn)) || (sp && failed(constrainSequence(fn))) ||
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
    if (mesh.empty())
      return module.emitError("weft-apply-layout needs mesh=AXIS=N[,AXIS=N]");
    SmallVector<StringRef> parts;
    StringRef(mesh).split(parts, ',');
    for (StringRef part : parts) {
      auto [rawName, rawSize] = part.split('=');
      StringRef name = rawName.trim(), size = rawSize.trim();
      int64_t n;
      bool identifier =
          !name.empty() && !isdigit(name.front()) &&
          llvm::all_of(name, [](char c) { return isalnum(c) || c == '_'; });
      if (!identifier || size.getAsInteger(10, n) || n < 1)
        return module.emitError("bad mesh axis '")
               << part
               << "': expected NAME=SIZE, NAME letters, digits and _, SIZE "
                  ">= 1";
      if (meshInfo.size(name) != 0)
        return module.emitError("mesh axis '") << name << "' appears twice";
      meshInfo.axes.push_back(name.str());
      meshInfo.sizes.push_back(n);
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

  LogicalResult annotateParams(func::FuncOp fn,
                               ArrayRef<std::pair<std::string, DimAxes>> globs,
                               int64_t zeroStage) {
    int64_t tp = meshInfo.size("tp"), dp = meshInfo.size("dp");
    auto walk = fn.walk([&](ParamOp p) -> WalkResult {
      StringRef name = p.getName();
      ArrayRef<int64_t> shape = p.getType().getShape();
      DimAxes dims(shape.size());
      SmallVector<int64_t> blocks(shape.size(), 1);
      if (layout == "megatron" && tp > 1) {
        for (const MegatronRule &rule : kMegatron)
          if (name.ends_with(rule.suffix)) {
            dims[rule.dim] = {"tp"};
            blocks[rule.dim] = rule.blocks;
          }
        if (llvm::is_contained(kMegatronVocab, name)) {
          // Megatron-LM pads the vocab to a multiple of tp; weft does not
          // change the model, so an indivisible vocab stays replicated.
          if (shape[0] % tp == 0)
            dims[0] = {"tp"};
          else
            llvm::WithColor::warning(llvm::errs(), "weft")
                << "tp=" << tp << " does not divide the vocab (" << shape[0]
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
        for (const MegatronRule &rule : kMegatron)
          if (rule.blocks > 1 && name.ends_with(rule.suffix) &&
              size_t(rule.dim) < dims.size() && !dims[rule.dim].empty())
            blocks[rule.dim] = rule.blocks;
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
    return failure(walk.wasInterrupted());
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
  LogicalResult constrainSequence(func::FuncOp fn) {
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
      DimAxes dims(3);
      if (meshInfo.size("dp") > 1)
        dims[0] = {"dp"};
      dims[1] = {"tp"};
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
                 int64_t &zeroStage, bool &sp) {
    auto buffer = llvm::MemoryBuffer::getFile(layout);
    if (!buffer)
      return module.emitError("cannot read layout file '") << layout << "'";
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
