//===- EmitProgram.cpp - weft-emit-program: the runtime's program file ----===//
//
// The file format is docs/program-format.md. This pass is its only writer; the
// format's library (program/, MLIR-free) owns the op table and every rule,
// and is the runtime's loader: each op's name is looked up in its table, and
// the whole program is loaded back and checked with it before the file is
// written, so weft-compile never writes a program weft-run would refuse.
//
//===----------------------------------------------------------------------===//
#include "dialect/AttrNames.h"
#include "dialect/WeftDialect.h"
#include "passes/NamedTensors.h"
#include "passes/Passes.h"
#include "passes/lower/DirectGradients.h"
#include "passes/pipeline/FragmentKeys.h"
#include "passes/sharding/ShardingUtils.h"
#include "program/Base64.h"
#include "program/PipelineSchedule.h"
#include "program/Program.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>

namespace weft {
#define GEN_PASS_DEF_WEFTEMITPROGRAM
#include "passes/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;
namespace json = llvm::json;

namespace {
// Version 3: stages of fragments run by a schedule over micro-batches;
// version 4: the mesh lists its communicator groups, buffers may be bf16;
// version 5: a stage per pipeline stage, joined by send and recv actions;
// version 6: pack and unpack may have `blocks`; version 7: forward-only
// programs; version 8: their named tensor inputs and outputs; version 9:
// masked-LM programs; version 10: constant buffers, select; version 14:
// seq_axes on rope and attention (context parallelism); version 15: a
// padded vocabulary (logical_rows on params, classes on cross-entropies);
// version 16: a matmul's fused bias (weft-fuse-bias); version 17: an
// embedding_grad's base (weft-fuse-table-grad).
constexpr uint32_t kFormatVersion = 17;

// A pipeline stage's fragments (its schedule's virtual stages, and whether
// its backward splits); one chunk, unsplit, for any other function.
FragmentKeys fragmentKeysOf(func::FuncOp fn) {
  weft::PipelineSchedule s;
  auto attr = fn->getAttrOfType<PipelineScheduleAttr>(
      weft::attrname::kPipelineSchedule);
  if (!attr || !weft::parsePipelineSchedule(attr.spec(), s).ok())
    return {};
  return FragmentKeys::of(s);
}

json::Array shapeOf(Value v) {
  json::Array shape;
  for (int64_t d : cast<RankedTensorType>(v.getType()).getShape())
    shape.push_back(d);
  return shape;
}

std::string dtypeOf(Type element) {
  if (element.isF64())
    return "f64";
  if (element.isInteger(32))
    return "i32";
  if (element.isBF16())
    return "bf16";
  return "f32";
}

// Op attributes as JSON: bools, integers, floats, strings, i64 arrays and
// (dim_axes) lists of lists of axis names.
json::Object attrsOf(Operation *op) {
  json::Object attrs;
  for (NamedAttribute a : op->getAttrs()) {
    StringRef name = a.getName().strref();
    if (name.starts_with("weft."))
      continue;
    Attribute v = a.getValue();
    if (auto bv = dyn_cast<BoolAttr>(v))
      attrs[name] = bv.getValue();
    else if (isa<UnitAttr>(v)) // a flag that is set
      attrs[name] = true;
    else if (auto iv = dyn_cast<IntegerAttr>(v))
      attrs[name] = iv.getInt();
    else if (auto fv = dyn_cast<FloatAttr>(v))
      attrs[name] = fv.getValueAsDouble();
    else if (auto sv = dyn_cast<StringAttr>(v))
      attrs[name] = sv.str();
    else if (auto arr = dyn_cast<DenseI64ArrayAttr>(v))
      attrs[name] = json::Array(arr.asArrayRef());
    else if (auto arr = dyn_cast<DenseF64ArrayAttr>(v))
      attrs[name] = json::Array(arr.asArrayRef());
    else if (auto arr = dyn_cast<ArrayAttr>(v)) {
      json::Array items;
      for (Attribute item : arr)
        if (auto str = dyn_cast<StringAttr>(item))
          items.push_back(str.str());
        else if (auto inner = dyn_cast<ArrayAttr>(item)) { // dim_axes
          json::Array names;
          for (Attribute name : inner)
            if (auto str = dyn_cast<StringAttr>(name))
              names.push_back(str.str());
          items.push_back(std::move(names));
        }
      attrs[name] = std::move(items);
    }
  }
  attrs.erase("reason"); // documentation of collectives, for --explain
  return attrs;
}

json::Array shardingDims(ShardingAttr s, int64_t rank) {
  json::Array dims;
  for (int64_t d = 0; d < rank; ++d) {
    json::Array axes;
    if (s)
      for (StringRef a : s.axesOf(d))
        axes.push_back(a.str());
    dims.push_back(std::move(axes));
  }
  return dims;
}

json::Array shardingBlocks(ShardingAttr s, int64_t rank) {
  json::Array blocks;
  for (int64_t d = 0; d < rank; ++d)
    blocks.push_back(s ? s.blocksOf(d) : 1);
  return blocks;
}

// Adds global_shape, sharding and blocks to a buffer or param entry.
void addLayout(json::Object &entry, ArrayRef<int64_t> globalShape,
               ShardingAttr s) {
  if (!s || s.isReplicated())
    return;
  entry["global_shape"] = json::Array(globalShape);
  entry["sharding"] = shardingDims(s, globalShape.size());
  entry["blocks"] = shardingBlocks(s, globalShape.size());
  if (!s.partialAxes().empty()) {
    json::Array partial;
    for (StringRef a : s.partialAxes())
      partial.push_back(a.str());
    entry["partial"] = std::move(partial);
  }
}

// A send or receive of a pipeline stage (weft.send, weft.recv): a schedule
// action beside every run of its fragment (a FragmentKeys number), or, for
// a send marked once, one right before the optimizer's run.
struct TransferRecord {
  bool send;
  int64_t buffer, peer;
  int fragment;
  bool once = false;
};

class ProgramWriter {
public:
  SmallVector<TransferRecord> transfers;

  ProgramWriter(func::FuncOp fn, MeshInfo mesh)
      : fn(fn), mesh(std::move(mesh)), frags(fragmentKeysOf(fn)),
        fragmentEnd(size_t(frags.count()), 0) {}

  const FragmentKeys &fragmentKeys() const { return frags; }

  LogicalResult build(json::Object &program) {
    auto arenaBytes =
        fn->getAttrOfType<IntegerAttr>(weft::attrname::kArenaBytes);
    if (!arenaBytes)
      return fn.emitError("no weft.arena_bytes: run weft-plan-memory first");
    // A training function reads (tokens, targets) and returns the loss; a
    // forward-only one (weft-return-logits) reads tokens and returns the
    // logits; one a frontend names (format version 8) reads the tensors
    // its weft.input arguments name and returns its weft.output results.
    auto ret = cast<func::ReturnOp>(fn.getBody().front().getTerminator());
    named = namesTensors(fn);
    if (named && failed(checkNamedTensors(fn)))
      return failure();
    forwardOnly =
        named ||
        (ret.getNumOperands() == 1 &&
         cast<RankedTensorType>(ret.getOperand(0).getType()).getRank() != 0);
    if (!named && fn.getNumArguments() != (forwardOnly ? 1u : 2u))
      return fn.emitError(forwardOnly ? "returns the logits, so expects "
                                        "(tokens) arguments, got "
                                      : "expects (tokens, targets) "
                                        "arguments, got ")
             << fn.getNumArguments();
    scratchOffset = (arenaBytes.getInt() + 63) / 64 * 64;
    for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
      auto name = fn.getArgAttrOfType<StringAttr>(i, weft::attrname::kInput);
      addInput(fn.getArgument(i), name     ? name.getValue()
                                  : i == 0 ? StringRef("tokens")
                                           : StringRef("targets"));
    }

    Block &body = fn.getBody().front();
    // A gradient computed only to be stored is written straight into the
    // parameter's grad buffer: no copy (0.5 GB per step for GPT-2 124M).
    for (Operation &op : body)
      if (auto g = dyn_cast<ParamGradOp>(op); g && weft::storedDirectly(g))
        storedDirectly[g.getGrad()] = g.getName();
    // Every parameter first: a fragment may store a gradient above them.
    for (Operation &op : body)
      if (auto p = dyn_cast<ParamOp>(op))
        addParam(p);
    // A pipeline stage before the last returns no loss.
    Value loss =
        ret.getNumOperands() && !forwardOnly ? ret.getOperand(0) : Value();
    std::optional<int64_t> vocab;
    int current = 0;
    const int forwardKey = frags.key(kForward, 0),
              backwardKey = frags.key(kBackward, frags.chunks - 1),
              optimizerKey = frags.key(kOptimizer, 0);
    bool lossSeen = false;
    for (Operation &op : body.without_terminator()) {
      if (isa<ParamOp>(op))
        continue;
      if (auto c = dyn_cast<ConstantOp>(op)) {
        if (failed(addConstant(c)))
          return failure();
        continue;
      }
      // Fragments are contiguous and in table order.
      int want = fragmentOf(&op);
      if (want < 0)
        want = isa<AdamWOp>(op) ? optimizerKey
               : lossSeen       ? std::max<int>(current, backwardKey)
                                : std::max<int>(current, forwardKey);
      if (want < current)
        return op.emitOpError("belongs to fragment '")
               << frags.name(want) << "' but fragment '" << frags.name(current)
               << "' has begun";
      if (current < want)
        waitForAll(); // a fragment completes what it started
      while (current < want)
        fragmentEnd[current++] = instructions.size();
      if (auto recv = dyn_cast<RecvOp>(op)) {
        auto offsets =
            op.getAttrOfType<DenseI64ArrayAttr>(weft::attrname::kOffsets);
        if (!offsets || offsets.size() != 1)
          return op.emitOpError("has no weft.offsets: run weft-plan-memory "
                                "first");
        transfers.push_back({false, arenaBuffer(recv.getResult(), offsets[0]),
                             recv.getPeer(), current});
        continue;
      }
      if (auto recv = dyn_cast<RecvParamOp>(op)) {
        auto it = paramBuffer.find(recv.getName());
        if (it == paramBuffer.end())
          return op.emitOpError("names no weft.param: '")
                 << recv.getName() << "'";
        transfers.push_back({false, it->second, recv.getPeer(), current});
        continue;
      }
      if (auto send = dyn_cast<SendOp>(op)) {
        if (!bufferIds.count(send.getX()))
          return op.emitOpError("sends a value the program does not know");
        // The schedule places a once send before the optimizer's run: in
        // any other fragment it would mean nothing the schedule can say.
        if (send.getOnce() && frags.phase(current) != kOptimizer)
          return op.emitOpError("is marked once in fragment '")
                 << frags.name(current)
                 << "': a send once per step belongs to the optimizer "
                    "fragment";
        transfers.push_back({true, bufferIds.lookup(send.getX()),
                             send.getPeer(), current, send.getOnce()});
        continue;
      }
      // A padded vocabulary's (weft-pad-vocab) ids are its classes.
      if (auto ce = dyn_cast<CrossEntropyOp>(op))
        vocab = ce.getClasses() ? int64_t(*ce.getClasses())
                                : ce.getLogits().getType().getShape().back();
      if (auto stats = dyn_cast<CrossEntropyStatsOp>(op)) {
        SmallVector<StringRef> axes;
        for (Attribute a : stats.getVocabAxes())
          axes.push_back(cast<StringAttr>(a).getValue());
        // The logits hold one vocab shard.
        vocab = stats.getClasses()
                    ? int64_t(*stats.getClasses())
                    : cast<RankedTensorType>(stats.getLogits().getType())
                              .getShape()
                              .back() *
                          mesh.count(axes);
      }
      if (failed(addInstruction(op)))
        return failure();
      if (loss && op.getNumResults() && op.getResult(0) == loss) {
        if (frags.phase(current) != kForward)
          return op.emitOpError("computes the loss outside the forward");
        lossSeen = true;
        waitForAll();
        fragmentEnd[current++] = instructions.size();
      }
    }
    if (loss && !lossSeen)
      return fn.emitError("the returned loss is not computed by an op");
    waitForAll();
    while (current < frags.count())
      fragmentEnd[current++] = instructions.size();
    int64_t microbatches = 1;
    if (auto m = fn->getAttrOfType<IntegerAttr>(weft::attrname::kMicrobatches))
      microbatches = m.getInt();

    // Without parameters: the float type of its named tensors (f64 when
    // compiled so), else f32.
    std::string dtype = params.empty() ? std::string("f32") : paramDtype;
    for (unsigned i = 0; params.empty() && i < fn.getNumArguments(); ++i)
      if (fn.getArgAttr(i, weft::attrname::kInput))
        dtype = dtypeOf(cast<RankedTensorType>(fn.getArgument(i).getType())
                            .getElementType());
    program["model"] =
        fn->hasAttr(weft::attrname::kModel)
            ? fn->getAttrOfType<StringAttr>(weft::attrname::kModel).str()
            : fn.getSymName().str();
    program["dtype"] = dtype;
    // batch and seq are global; the tokens buffer holds this rank's block.
    // A program of tensor inputs alone reads no tokens: both 0.
    const bool tokensRead =
        fn.getNumArguments() > 0 && !fn.getArgAttr(0, weft::attrname::kInput);
    auto split =
        tokensRead
            ? fn.getArgAttrOfType<ShardingAttr>(0, weft::attrname::kSharding)
            : ShardingAttr();
    auto global = [&](int64_t d) -> int64_t {
      if (!tokensRead)
        return 0;
      auto tokens = cast<RankedTensorType>(fn.getArgument(0).getType());
      if (tokens.getRank() <= d)
        return 1;
      return tokens.getDimSize(d) * (split ? mesh.count(split.axesOf(d)) : 1);
    };
    // The step's batch: `microbatches` of the function's.
    program["batch"] = global(0) * microbatches;
    program["seq"] = global(1);
    // A loss on labels or float targets (weft.labels): the token ids'
    // bound is the embedding's, a cross-entropy's width the labels'
    // (classes; a regression has none).
    if (auto labels = fn->getAttrOfType<IntegerAttr>(weft::attrname::kLabels)) {
      program["vocab"] = labels.getInt();
      if (vocab)
        program["classes"] = *vocab;
    } else {
      program["vocab"] = vocab.value_or(0);
    }
    program["optimizer"] = optimizerJson();
    if (!mesh.axes.empty()) {
      json::Array axes;
      for (const std::string &a : mesh.axes)
        axes.push_back(a);
      program["mesh"] = json::Object{{"axes", std::move(axes)},
                                     {"shape", json::Array(mesh.sizes)},
                                     {"groups", groupsOf(instructions)}};
    }
    program["params"] = std::move(params);
    // Scratch for ZeRO-1's reduced gradient blocks lies past the plan.
    program["arena_bytes"] =
        scratchBytes ? scratchOffset + scratchBytes : arenaBytes.getInt();
    if (auto slot = fn->getAttrOfType<IntegerAttr>(weft::attrname::kSlotBytes))
      program["slot_bytes"] = slot.getInt();
    program["buffers"] = std::move(buffers);
    program["microbatches"] = microbatches;
    program["stages"] = json::Array{stageJson(microbatches)};
    program["loss"] = loss ? bufferIds.lookup(loss) : int64_t(-1);
    // How the runtime hides tokens, for a masked-LM loss (weft-masked-lm).
    if (auto m = fn->getAttrOfType<DictionaryAttr>(weft::attrname::kMaskedLm))
      program["masked_lm"] = json::Object{
          {"mask_token", m.getAs<IntegerAttr>("mask_token").getInt()},
          {"mask_prob", m.getAs<FloatAttr>("mask_prob").getValueAsDouble()},
          {"seed", m.getAs<IntegerAttr>("seed").getInt()}};
    // Load-balanced context parallelism: the order of each sequence's chunks.
    if (auto c = fn->getAttrOfType<IntegerAttr>(weft::attrname::kSeqChunks))
      program["seq_chunks"] = c.getInt();
    // Rows that pack documents (weft-pack-documents).
    if (auto d = fn->getAttrOfType<DictionaryAttr>(weft::attrname::kDocuments))
      program["documents"] =
          d.get("attention_mask")
              ? json::Object{{"attention_mask", true}, {"given_targets", true}}
              : json::Object{{"eos", d.getAs<IntegerAttr>("eos").getInt()},
                             {"given_targets",
                              d.getAs<BoolAttr>("given_targets").getValue()}};
    if (named) {
      json::Array outputs;
      for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
        Value v = ret.getOperand(i);
        if (!bufferIds.count(v) || isa<BlockArgument>(v) ||
            v.getDefiningOp<ParamOp>() || v.getDefiningOp<ConstantOp>())
          return fn.emitError("result ")
                 << i << " is not computed by an op (an output is written by "
                 << "the forward, not an input or a parameter)";
        outputs.push_back(json::Object{
            {"name",
             fn.getResultAttrOfType<StringAttr>(i, weft::attrname::kOutput)
                 .getValue()},
            {"buffer", bufferIds.lookup(v)}});
      }
      auto vocabAttr = fn->getAttrOfType<IntegerAttr>(weft::attrname::kVocab);
      program["vocab"] = vocabAttr ? vocabAttr.getInt() : 0;
      program["outputs"] = std::move(outputs);
    } else if (forwardOnly) {
      Value logits = ret.getOperand(0);
      if (!bufferIds.count(logits))
        return fn.emitError("the returned logits are not computed by an op");
      auto vocabAttr = fn->getAttrOfType<IntegerAttr>(weft::attrname::kVocab);
      if (!vocabAttr)
        return fn.emitError("returns its outputs but has no weft.vocab: run "
                            "weft-return-logits first");
      // Scores over the vocabulary, an encoder's hidden states, or one row
      // per sample (a classifier's scores, a pooled embedding: version 11).
      auto type = cast<RankedTensorType>(logits.getType());
      const int64_t n = type.getShape().back();
      program["vocab"] = vocabAttr.getInt();
      program["outputs"] = json::Array{
          json::Object{{"name", type.getRank() == 2       ? "samples"
                                : n == vocabAttr.getInt() ? "logits"
                                                          : "hidden"},
                       {"buffer", bufferIds.lookup(logits)}}};
    }
    return success();
  }

private:
  // The fragment the op's weft.fragment and weft.chunk marks name, or -1.
  int fragmentOf(Operation *op) const {
    auto mark = op->getAttrOfType<StringAttr>(weft::attrname::kFragment);
    if (!mark)
      return -1;
    auto chunk = op->getAttrOfType<IntegerAttr>(weft::attrname::kChunk);
    for (int p = kPrologue; p <= kOptimizer; ++p)
      if (mark.getValue() == kFragmentPhaseNames[p])
        return frags.key(FragmentPhase(p), chunk ? chunk.getInt() : 0);
    return -1;
  }

  // One stage: the fragments cut from the instruction list, and the
  // schedule: [prologue,] forward and backward per micro-batch, optimizer.
  json::Object stageJson(int64_t microbatches) {
    json::Array fragments, schedule;
    int64_t begin = 0;
    const int last = frags.count() - 1;
    for (int f = 0; f <= last; ++f) {
      int64_t end = fragmentEnd[f];
      if (f == 0 && end == 0 && microbatches == 1)
        continue; // nothing to clear: each step stores its gradients
      json::Array list;
      for (int64_t i = begin; i < end; ++i)
        list.push_back(std::move(instructions[i]));
      fragments.push_back(json::Object{{"name", frags.name(f)},
                                       {"instructions", std::move(list)}});
      begin = end;
      if (f == 0 || f == last)
        schedule.push_back(json::Object{{"run", frags.name(f)}});
      // Each micro-batch runs the forwards and backwards in table order.
      if (f + 1 == last)
        for (int64_t k = 0; k < microbatches; ++k)
          for (int g = 1; g < last; ++g)
            schedule.push_back(
                json::Object{{"run", frags.name(g)}, {"microbatch", k}});
    }
    return json::Object{{"fragments", std::move(fragments)},
                        {"schedule", std::move(schedule)}};
  }

  // The communicator groups the instructions use (collectives' `axes`,
  // sharded AdamW's `shard_axes`), in order of first use.
  static json::Array groupsOf(const json::Array &insts) {
    std::vector<std::vector<std::string>> seen;
    json::Array groups;
    for (const json::Value &v : insts) {
      const json::Object *inst = v.getAsObject();
      std::optional<StringRef> op = inst->getString("op");
      const json::Object *attrs = inst->getObject("attrs");
      weft::OpKind kind;
      if (!op || !attrs ||
          !weft::parseOpName(op->str().substr(0, op->rfind("_start")), kind))
        continue;
      const char *key = weft::groupAttrName(kind);
      const json::Array *axes = key ? attrs->getArray(key) : nullptr;
      if (!axes || axes->empty())
        continue;
      std::vector<std::string> names;
      for (const json::Value &a : *axes)
        names.push_back(a.getAsString()->str());
      if (llvm::is_contained(seen, names))
        continue;
      seen.push_back(names);
      groups.push_back(json::Array(*axes));
    }
    return groups;
  }

  // Appends an instruction. A collective in flight whose output it touches
  // or whose input it writes (the same buffer or shared arena bytes) is
  // waited for first: a start's wait lands right before the first use of
  // its result. Reading its input is safe (ring attention computes on the
  // block it is sending).
  void pushInstruction(json::Object inst) {
    SmallVector<int64_t> ids, outs;
    for (StringRef key : {"in", "out"})
      for (const json::Value &v : *inst.getArray(key))
        (key == "in" ? ids : outs).push_back(*v.getAsInteger());
    pushTransposesFor(ids, outs);
    for (size_t k = 0; k < inFlight.size();) {
      auto [x, y] = inFlight[k];
      auto touches = [&, x = x, y = y](int64_t id, bool writes) {
        return (writes && overlaps(id, x)) || overlaps(id, y);
      };
      if (llvm::any_of(ids, [&](int64_t id) { return touches(id, false); }) ||
          llvm::any_of(outs, [&](int64_t id) { return touches(id, true); })) {
        instructions.push_back(waitFor(y));
        inFlight.erase(inFlight.begin() + k);
        continue;
      }
      ++k;
    }
    bool start = inst.getString("op")->ends_with("_start");
    if (start)
      inFlight.push_back({ids[0], outs[0]}); // in[0], out[0]
    instructions.push_back(std::move(inst));
  }

  static json::Object waitFor(int64_t y) {
    return json::Object{{"op", "wait"},
                        {"in", json::Array{y}},
                        {"out", json::Array{}},
                        {"attrs", json::Object{}}};
  }

  // An asynchronous gather along an inner dim (addBlockedCollective) whose
  // inverse block_transpose waits: pushed, with the gather's wait, before
  // the first instruction that touches its result or its scratch blocks.
  void pushTransposesFor(ArrayRef<int64_t> ids, ArrayRef<int64_t> outs) {
    SmallVector<DeferredTranspose> due;
    for (size_t k = 0; k < deferred.size();) {
      const DeferredTranspose &d = deferred[k];
      auto touches = [&](int64_t id) {
        return overlaps(id, d.blocks) || overlaps(id, d.y);
      };
      if (llvm::any_of(ids, touches) || llvm::any_of(outs, touches)) {
        due.push_back(d);
        deferred.erase(deferred.begin() + k);
        continue;
      }
      ++k;
    }
    for (DeferredTranspose &d : due)
      pushBlockTranspose(d.blocks, d.y, d.axes, d.dim, /*inverse=*/true);
  }

  void waitForAll() {
    SmallVector<DeferredTranspose> due = std::move(deferred);
    deferred.clear();
    for (DeferredTranspose &d : due)
      pushBlockTranspose(d.blocks, d.y, d.axes, d.dim, /*inverse=*/true);
    for (auto [x, y] : inFlight)
      instructions.push_back(waitFor(y));
    inFlight.clear();
  }

  bool overlaps(int64_t a, int64_t b) const {
    if (a == b)
      return true;
    auto sa = arenaSpan.find(a), sb = arenaSpan.find(b);
    if (sa == arenaSpan.end() || sb == arenaSpan.end())
      return false;
    return sa->second.first < sb->second.first + sb->second.second &&
           sb->second.first < sa->second.first + sa->second.second;
  }

  int64_t addBuffer(json::Object buffer) {
    buffers.push_back(std::move(buffer));
    return buffers.size() - 1;
  }

  /// The function returns the logits (weft-return-logits), not a loss.
  bool forwardOnly = false;
  /// Its inputs and outputs are named (weft.input, weft.output).
  bool named = false;

  void addInput(Value arg, StringRef name) {
    auto type = cast<RankedTensorType>(arg.getType());
    json::Object entry{{"kind", "input"},
                       {"name", name},
                       {"shape", shapeOf(arg)},
                       {"dtype", dtypeOf(type.getElementType())}};
    if (auto s = fn.getArgAttrOfType<ShardingAttr>(
            cast<BlockArgument>(arg).getArgNumber(), weft::attrname::kSharding))
      if (!s.isReplicated())
        entry["sharding"] = shardingDims(s, type.getRank());
    bufferIds[arg] = addBuffer(std::move(entry));
  }

  void addParam(ParamOp p) {
    int64_t index = params.size();
    paramDtype = dtypeOf(p.getType().getElementType());
    json::Object init{{"kind", p.getInit()}};
    if (p.getInit() == "normal")
      init["std"] = p.getStd().convertToDouble();
    SmallVector<int64_t> global(p.getType().getShape());
    if (auto g =
            p->getAttrOfType<DenseI64ArrayAttr>(weft::attrname::kGlobalShape))
      global.assign(g.asArrayRef().begin(), g.asArrayRef().end());
    auto globalType =
        RankedTensorType::get(global, p.getType().getElementType());
    json::Object entry{{"name", p.getName()},
                       {"shape", shapeOf(p.getResult())},
                       {"init", std::move(init)},
                       {"weight_decay", p.getType().getRank() >= 2}};
    // Rows past these are a padded vocabulary's (format version 15).
    if (auto rows = p->getAttrOfType<IntegerAttr>(weft::attrname::kLogicalRows))
      entry["logical_rows"] = rows.getInt();
    addLayout(entry, global,
              p->getAttrOfType<ShardingAttr>(weft::attrname::kStorageSharding));
    params.push_back(std::move(entry));
    auto state = [&](StringRef kind, StringRef layoutAttr) {
      auto s = p->getAttrOfType<ShardingAttr>(layoutAttr);
      RankedTensorType local = s ? localType(globalType, s, mesh) : p.getType();
      json::Array shape;
      for (int64_t d : local.getShape())
        shape.push_back(d);
      json::Object buffer{{"kind", kind},
                          {"param", index},
                          {"shape", std::move(shape)},
                          {"dtype", paramDtype}};
      addLayout(buffer, global, s);
      return addBuffer(std::move(buffer));
    };
    bufferIds[p.getResult()] = state("param", weft::attrname::kStorageSharding);
    paramBuffer[p.getName()] = bufferIds[p.getResult()];
    // A replica (another pipeline stage trains it) holds only the value,
    // and so does every parameter of a forward-only program.
    if (p->hasAttr(weft::attrname::kReplica) || forwardOnly)
      return;
    paramState[p.getName()] = {
        state("grad", weft::attrname::kGradStorageSharding),
        state("adam_m", weft::attrname::kStateStorageSharding),
        state("adam_v", weft::attrname::kStateStorageSharding)};
  }

  // A float tensor known at compile time (format version 10): whole on
  // every rank, its elements' little-endian bytes in base64.
  LogicalResult addConstant(ConstantOp c) {
    auto type = cast<RankedTensorType>(c.getType());
    auto values = dyn_cast<DenseElementsAttr>(c.getValue());
    Type element = type.getElementType();
    if (!values || !(element.isF32() || element.isF64()))
      return c.emitOpError("is a ")
             << type << " constant; a program holds f32 and f64 constants";
    std::vector<char> bytes;
    bytes.reserve(size_t(type.getNumElements()) * (element.isF64() ? 8 : 4));
    for (const APFloat &v : values.getValues<APFloat>()) {
      char raw[8];
      size_t n = element.isF64() ? 8 : 4;
      if (element.isF64()) {
        double d = v.convertToDouble();
        std::memcpy(raw, &d, n);
      } else {
        float f = v.convertToFloat();
        std::memcpy(raw, &f, n);
      }
      bytes.insert(bytes.end(), raw, raw + n);
    }
    bufferIds[c.getResult()] = addBuffer(
        json::Object{{"kind", "constant"},
                     {"shape", shapeOf(c.getResult())},
                     {"dtype", dtypeOf(element)},
                     {"data", weft::base64Encode(bytes.data(), bytes.size())}});
    return success();
  }

  int64_t arenaBuffer(Value v, int64_t offset) {
    auto direct = storedDirectly.find(v);
    if (direct != storedDirectly.end()) {
      int64_t id = paramState[direct->second][0];
      bufferIds[v] = id;
      return id;
    }
    auto t = cast<RankedTensorType>(v.getType());
    int64_t bytes = t.getNumElements() * t.getElementTypeBitWidth() / 8;
    arenaSpan[int64_t(buffers.size())] = {offset, bytes};
    int64_t id =
        addBuffer(json::Object{{"kind", "arena"},
                               {"offset", offset},
                               {"shape", shapeOf(v)},
                               {"dtype", dtypeOf(t.getElementType())}});
    bufferIds[v] = id;
    return id;
  }

  json::Array idsOf(ValueRange values) {
    json::Array ids;
    for (Value v : values)
      ids.push_back(bufferIds.lookup(v));
    return ids;
  }

  LogicalResult addInstruction(Operation &op) {
    for (Value v : op.getOperands())
      if (!bufferIds.count(v))
        return op.emitOpError("operand is not a buffer the program knows");
    if (auto g = dyn_cast<StoredGradOp>(op)) {
      auto it = paramState.find(g.getName());
      if (it == paramState.end())
        return op.emitOpError("names no weft.param: '") << g.getName() << "'";
      bufferIds[g.getResult()] = it->second[0];
      return success();
    }
    // A step accumulator (weft.accumulate): its fill's arena buffer, += x.
    if (auto acc = dyn_cast<AccumulateOp>(op)) {
      if (!bufferIds.count(acc.getAcc()))
        return op.emitOpError("accumulates into a value the program does "
                              "not know");
      pushInstruction(json::Object{{"op", "accumulate"},
                                   {"in", idsOf(acc.getX())},
                                   {"out", idsOf(acc.getAcc())},
                                   {"attrs", json::Object{}}});
      return success();
    }
    if (auto g = dyn_cast<ParamGradOp>(op)) {
      auto it = paramState.find(g.getName());
      if (it == paramState.end())
        return op.emitOpError("names no weft.param: '") << g.getName() << "'";
      if (storedDirectly.count(g.getGrad()))
        return success();
      pushInstruction(
          json::Object{{"op", g.getAccumulate() ? "accumulate" : "copy"},
                       {"in", idsOf(g.getGrad())},
                       {"out", json::Array{it->second[0]}},
                       {"attrs", json::Object{}}});
      return success();
    }
    if (auto adam = dyn_cast<AdamWOp>(op))
      return addAdamW(adam);
    auto offsets =
        op.getAttrOfType<DenseI64ArrayAttr>(weft::attrname::kOffsets);
    if (!offsets || offsets.size() != int64_t(op.getNumResults()))
      return op.emitOpError("has no weft.offsets: run weft-plan-memory first");
    if (isa<ReduceScatterOp, AllGatherOp>(op) &&
        !contiguousBlocks(&op, op.getAttrOfType<IntegerAttr>("dim").getInt()))
      return addBlockedCollective(op, offsets[0]);
    if (auto a2a = dyn_cast<AllToAllOp>(op))
      return addAllToAll(a2a, offsets[0]);
    weft::OpKind kind;
    if (!weft::parseOpName(op.getName().stripDialect().str(), kind))
      return op.emitOpError("has no runtime instruction (the program format's "
                            "op table, program/Program.h, lacks '")
             << op.getName().stripDialect() << "')";
    json::Array outs;
    for (auto [r, offset] : llvm::zip(op.getResults(), offsets.asArrayRef()))
      outs.push_back(arenaBuffer(r, offset));
    json::Object attrs = attrsOf(&op);
    // An asynchronous collective is a start, completed by a wait.
    bool start = op.hasAttr(weft::attrname::kAsync);
    pushInstruction(json::Object{
        {"op", std::string(weft::opName(kind)) + (start ? "_start" : "")},
        {"in", idsOf(op.getOperands())},
        {"out", std::move(outs)},
        {"attrs", std::move(attrs)}});
    return success();
  }

  // The full-size side of a reduce_scatter or all_gather.
  static RankedTensorType fullType(Operation *op) {
    return cast<RankedTensorType>(
        (isa<AllGatherOp>(op) ? op->getResult(0) : op->getOperand(0))
            .getType());
  }

  // Whether a collective's blocks along dim are contiguous: only size-1
  // dims before it.
  static bool contiguousBlocks(Operation *op, int64_t dim) {
    ArrayRef<int64_t> shape = fullType(op).getShape();
    return llvm::all_of(shape.take_front(dim),
                        [](int64_t d) { return d == 1; });
  }

  // A reduce_scatter or all_gather along an inner dim: the program moves the
  // dim's blocks to the front (block_transpose, into scratch past the memory
  // plan's arena) and communicates contiguous blocks along dim 0.
  LogicalResult addBlockedCollective(Operation &op, int64_t offset) {
    bool gather = isa<AllGatherOp>(op);
    int64_t dim = op.getAttrOfType<IntegerAttr>("dim").getInt();
    auto axesAttr = op.getAttrOfType<ArrayAttr>("axes");
    json::Array axes;
    SmallVector<StringRef> names;
    for (Attribute a : axesAttr) {
      axes.push_back(cast<StringAttr>(a).str());
      names.push_back(cast<StringAttr>(a).getValue());
    }
    RankedTensorType full = fullType(&op);
    SmallVector<int64_t> moved(full.getShape());
    moved[0] *= mesh.count(names);
    moved[dim] /= mesh.count(names);
    int64_t bytes = full.getNumElements() * full.getElementTypeBitWidth() / 8;
    scratchBytes = std::max(scratchBytes, bytes);
    int64_t blocks =
        addBuffer(json::Object{{"kind", "arena"},
                               {"offset", scratchOffset},
                               {"shape", json::Array(moved)},
                               {"dtype", dtypeOf(full.getElementType())}});
    arenaSpan[blocks] = {scratchOffset, bytes};
    int64_t x = bufferIds.lookup(op.getOperand(0));
    int64_t y = arenaBuffer(op.getResult(0), offset);
    auto transpose = [&](int64_t in, int64_t out, bool inverse) {
      pushBlockTranspose(in, out, axes, dim, inverse);
    };
    const bool async = op.hasAttr(weft::attrname::kAsync);
    auto collective = [&](int64_t in, int64_t out) {
      pushInstruction(json::Object{
          {"op", std::string(gather ? "all_gather" : "reduce_scatter") +
                     (async ? "_start" : "")},
          {"in", json::Array{in}},
          {"out", json::Array{out}},
          {"attrs", json::Object{{"axes", json::Array(axes)}, {"dim", 0}}}});
    };
    if (gather && async) {
      // Started along dim 0 (asynchronous there); its transpose waits.
      collective(x, blocks);
      deferred.push_back({blocks, y, std::move(axes), dim});
    } else if (gather) {
      collective(x, blocks);
      transpose(blocks, y, /*inverse=*/true);
    } else {
      transpose(x, blocks, /*inverse=*/false);
      collective(blocks, y);
    }
    return success();
  }

  // Moves dim's blocks (one per rank of axes) to dim 0 of out, or back with
  // inverse.
  void pushBlockTranspose(int64_t in, int64_t out, const json::Array &axes,
                          int64_t dim, bool inverse) {
    json::Object attrs{{"axes", json::Array(axes)}, {"dim", dim}};
    if (inverse)
      attrs["inverse"] = true;
    pushInstruction(json::Object{{"op", "block_transpose"},
                                 {"in", json::Array{in}},
                                 {"out", json::Array{out}},
                                 {"attrs", std::move(attrs)}});
  }

  // all_to_all(x, split_dim, concat_dim): the program moves split_dim's
  // blocks to the front (block_transpose into scratch past the arena),
  // exchanges contiguous blocks along dim 0 (block k to and from shard k,
  // into a second scratch span), and moves the received blocks into
  // concat_dim (an inverse block_transpose). A dim 0 needs no transpose.
  LogicalResult addAllToAll(AllToAllOp op, int64_t offset) {
    json::Array axes;
    SmallVector<StringRef> names;
    for (Attribute a : op.getAxes()) {
      axes.push_back(cast<StringAttr>(a).str());
      names.push_back(cast<StringAttr>(a).getValue());
    }
    int64_t c = mesh.count(names);
    int64_t split = op.getSplitDim(), concat = op.getConcatDim();
    auto in = cast<RankedTensorType>(op.getX().getType());
    SmallVector<int64_t> moved(in.getShape());
    moved[0] *= c;
    moved[split] /= c;
    int64_t bytes = in.getNumElements() * in.getElementTypeBitWidth() / 8;
    int64_t span = (bytes + 63) / 64 * 64;
    scratchBytes = std::max(scratchBytes, 2 * span);
    auto scratch = [&](int64_t k) {
      int64_t id =
          addBuffer(json::Object{{"kind", "arena"},
                                 {"offset", scratchOffset + k * span},
                                 {"shape", json::Array(moved)},
                                 {"dtype", dtypeOf(in.getElementType())}});
      arenaSpan[id] = {scratchOffset + k * span, bytes};
      return id;
    };
    int64_t x = bufferIds.lookup(op.getX());
    int64_t y = arenaBuffer(op.getResult(), offset);
    auto transpose = [&](int64_t from, int64_t into, int64_t dim,
                         bool inverse) {
      pushBlockTranspose(from, into, axes, dim, inverse);
    };
    int64_t sent = x;
    if (split != 0) {
      sent = scratch(0);
      transpose(x, sent, split, /*inverse=*/false);
    }
    int64_t received = concat == 0 ? y : scratch(1);
    pushInstruction(json::Object{
        {"op", "all_to_all"},
        {"in", json::Array{sent}},
        {"out", json::Array{received}},
        {"attrs", json::Object{{"axes", json::Array(axes)}, {"dim", 0}}}});
    if (concat != 0)
      transpose(received, y, concat, /*inverse=*/true);
    return success();
  }

  // One AdamW update. Under ZeRO (shard_axes) it updates this rank's block
  // of the parameter, and the program says everything around it: a gradient
  // stored unreduced (ZeRO-1) is reduce-scattered to the block first, into
  // scratch bytes past the memory plan's arena, and the parameter is
  // all-gathered in place after.
  LogicalResult addAdamW(AdamWOp adam) {
    ParamOp p = adam.getParam().getDefiningOp<ParamOp>();
    auto &state = paramState[p.getName()];
    int64_t param = bufferIds.lookup(adam.getParam()), grad = state[0];
    json::Object attrs{{"weight_decay", adam.getWeightDecay()}};
    auto axes = adam->getAttrOfType<ArrayAttr>(weft::attrname::kShardAxes);
    json::Array names;
    if (axes) {
      for (Attribute a : axes)
        names.push_back(cast<StringAttr>(a).str());
      attrs["shard_axes"] = json::Array(names);
    }
    auto gradLayout =
        p->getAttrOfType<ShardingAttr>(weft::attrname::kGradStorageSharding);
    if (axes && gradLayout && !gradLayout.partialAxes().empty()) {
      auto type = cast<RankedTensorType>(p.getType());
      SmallVector<int64_t> block(type.getShape());
      block[0] /= mesh.count(llvm::to_vector(llvm::map_range(
          axes, [](Attribute a) { return cast<StringAttr>(a).getValue(); })));
      auto blockType = RankedTensorType::get(block, type.getElementType());
      int64_t bytes =
          blockType.getNumElements() * blockType.getElementTypeBitWidth() / 8;
      scratchBytes = std::max(scratchBytes, bytes);
      int64_t reduced = addBuffer(json::Object{{"kind", "arena"},
                                               {"offset", scratchOffset},
                                               {"shape", json::Array(block)},
                                               {"dtype", paramDtype}});
      arenaSpan[reduced] = {scratchOffset, bytes};
      pushInstruction(json::Object{
          {"op", "reduce_scatter"},
          {"in", json::Array{grad}},
          {"out", json::Array{reduced}},
          {"attrs", json::Object{{"axes", json::Array(names)}, {"dim", 0}}}});
      grad = reduced;
    }
    pushInstruction(
        json::Object{{"op", "adamw"},
                     {"in", json::Array{param, grad, state[1], state[2]}},
                     {"out", json::Array{param, state[1], state[2]}},
                     {"attrs", std::move(attrs)}});
    if (axes)
      pushInstruction(json::Object{
          {"op", "all_gather"},
          {"in", json::Array{param}},
          {"out", json::Array{param}},
          {"attrs", json::Object{{"axes", std::move(names)}, {"dim", 0}}}});
    return success();
  }

  json::Value optimizerJson() {
    json::Object opt{{"kind", "none"}};
    auto cfg = fn->getAttrOfType<DictionaryAttr>(weft::attrname::kOptimizer);
    if (!cfg)
      return opt;
    for (NamedAttribute a : cfg) {
      StringRef name = a.getName().strref();
      if (auto f = dyn_cast<FloatAttr>(a.getValue()))
        opt[name] = f.getValueAsDouble();
      else if (auto i = dyn_cast<IntegerAttr>(a.getValue()))
        opt[name] = i.getInt();
      else if (auto s = dyn_cast<StringAttr>(a.getValue()))
        opt[name] = s.str();
    }
    return opt;
  }

  func::FuncOp fn;
  MeshInfo mesh;
  json::Array params, buffers, instructions;
  FragmentKeys frags;
  std::vector<int64_t> fragmentEnd;
  int64_t scratchOffset = 0, scratchBytes = 0;
  // Collectives started and not yet waited for: (in, out) buffer ids.
  SmallVector<std::pair<int64_t, int64_t>> inFlight;
  /// An asynchronous inner-dim gather's inverse block_transpose, not yet
  /// pushed (pushTransposesFor).
  struct DeferredTranspose {
    int64_t blocks, y;
    json::Array axes;
    int64_t dim;
  };
  SmallVector<DeferredTranspose> deferred;
  DenseMap<int64_t, std::pair<int64_t, int64_t>> arenaSpan; // offset, bytes
  std::string paramDtype = "f32";
  DenseMap<Value, int64_t> bufferIds;
  DenseMap<Value, StringRef> storedDirectly; // gradient -> its parameter
  llvm::StringMap<std::array<int64_t, 3>> paramState; // grad, m, v
  llvm::StringMap<int64_t> paramBuffer;               // its value
};

struct EmitProgram : weft::impl::WeftEmitProgramBase<EmitProgram> {
  using WeftEmitProgramBase::WeftEmitProgramBase;

  void runOnOperation() override {
    SmallVector<func::FuncOp> fns(getOperation().getOps<func::FuncOp>());
    const bool pipeline =
        !fns.empty() && fns.front()->hasAttr(weft::attrname::kStage);
    if (fns.size() != 1 && !pipeline) {
      getOperation().emitError("weft-emit-program expects one function, found ")
          << fns.size();
      return signalPassFailure();
    }
    if (output.empty()) {
      getOperation().emitError("weft-emit-program needs output=FILE");
      return signalPassFailure();
    }
    json::Object program;
    if (pipeline ? failed(writePipeline(fns, program))
                 : failed(ProgramWriter(fns.front(), MeshInfo::of(fns.front()))
                              .build(program)))
      return signalPassFailure();
    std::string payload;
    uint32_t version = kFormatVersion;
    static_assert(kFormatVersion == weft::ProgramFormatVersion,
                  "the emitter writes the version the loader reads");
    llvm::raw_string_ostream(payload) << json::Value(std::move(program));
    // The runtime's loader and validator, on what is about to be written.
    weft::Expected<weft::Program> loaded =
        weft::parseProgramJson(payload, version);
    if (!loaded.ok()) {
      // A hand-written pipeline schedule is the user's to fix.
      auto schedule = fns.front()->getAttrOfType<PipelineScheduleAttr>(
          weft::attrname::kPipelineSchedule);
      if (schedule && schedule.getKind() == "custom")
        fns.front().emitError("the hand-written pipeline schedule is "
                              "refused: ")
            << loaded.status().message();
      else
        fns.front().emitError("the program fails the format's checks "
                              "(a compiler bug; please report it): ")
            << loaded.status().message();
      return signalPassFailure();
    }

    std::error_code ec;
    llvm::raw_fd_ostream os(output, ec);
    if (ec) {
      getOperation().emitError("cannot write '")
          << output << "': " << ec.message();
      return signalPassFailure();
    }
    // The format's one container writer (magic, version, size, hash).
    os << weft::encodeProgramContainer(payload, version);
  }

  // One program of several stages (format version 5): each stage function
  // written as a program of its own, then merged: one parameter table (by
  // name), the stages' buffers one after another (each naming its stage),
  // and each stage's schedule from the pipeline order, its receives before
  // each run and its sends after.
  LogicalResult writePipeline(SmallVector<func::FuncOp> fns,
                              json::Object &out) {
    llvm::sort(fns, [](func::FuncOp a, func::FuncOp b) {
      return a->getAttrOfType<IntegerAttr>(weft::attrname::kStage).getInt() <
             b->getAttrOfType<IntegerAttr>(weft::attrname::kStage).getInt();
    });
    const int64_t n = int64_t(fns.size());
    for (int64_t s = 0; s < n; ++s) {
      auto stage = fns[s]->getAttrOfType<IntegerAttr>(weft::attrname::kStage);
      auto count =
          fns[s]->getAttrOfType<IntegerAttr>(weft::attrname::kNumStages);
      if (!stage || stage.getInt() != s || !count || count.getInt() != n)
        return fns[s].emitError("pipeline stage functions must be numbered "
                                "0 to ")
               << n - 1 << " with weft.num_stages " << n;
    }
    auto axis =
        fns.front()->getAttrOfType<StringAttr>(weft::attrname::kPipelineAxis);
    auto scheduleAttr = fns.front()->getAttrOfType<PipelineScheduleAttr>(
        weft::attrname::kPipelineSchedule);
    weft::PipelineSchedule kind;
    if (!axis || !scheduleAttr ||
        !weft::parsePipelineSchedule(scheduleAttr.spec(), kind).ok())
      return fns.front().emitError("a pipeline stage needs "
                                   "weft.pipeline_axis and a known "
                                   "weft.pipeline_schedule");
    json::Array params, buffers, stages, groups;
    llvm::StringMap<int64_t> paramIndex;
    int64_t arena = 0, loss = -1;
    for (int64_t s = 0; s < n; ++s) {
      ProgramWriter writer(fns[s], MeshInfo::of(fns[s]));
      json::Object p;
      if (failed(writer.build(p)))
        return failure();
      SmallVector<int64_t> paramMap;
      for (json::Value &v : *p.getArray("params")) {
        json::Object &entry = *v.getAsObject();
        std::string name = entry.getString("name")->str();
        auto [it, fresh] = paramIndex.try_emplace(name, params.size());
        if (fresh)
          params.push_back(std::move(entry));
        paramMap.push_back(it->second);
      }
      const int64_t base = int64_t(buffers.size());
      for (json::Value &v : *p.getArray("buffers")) {
        json::Object &entry = *v.getAsObject();
        if (auto param = entry.getInteger("param"))
          entry["param"] = paramMap[*param];
        entry["stage"] = s;
        buffers.push_back(std::move(entry));
      }
      auto shift = [&](json::Array &ids) {
        for (json::Value &id : ids)
          id = *id.getAsInteger() + base;
      };
      json::Object &stage = *(*p.getArray("stages"))[0].getAsObject();
      bool prologue = false;
      for (json::Value &f : *stage.getArray("fragments")) {
        json::Object &frag = *f.getAsObject();
        prologue |= *frag.getString("name") == "prologue";
        for (json::Value &inst : *frag.getArray("instructions")) {
          shift(*inst.getAsObject()->getArray("in"));
          shift(*inst.getAsObject()->getArray("out"));
        }
      }
      const int64_t m = *p.getInteger("microbatches");
      json::Array schedule;
      // A run of fragment `frag` (micro-batch k, or once per step when k is
      // negative) with its receives before it and its sends after.
      // A run of fragment `frag` (micro-batch k, or once per step when k is
      // negative) with its sends after it and, unless hoisted, its
      // receives before it.
      auto addRun = [&](int frag, int64_t k, bool receives = true) {
        auto action = [&](json::Object a) {
          if (k >= 0)
            a["microbatch"] = k;
          schedule.push_back(std::move(a));
        };
        // A sum over the step (weft.accumulate) leaves before the
        // optimizer's run, after the barrier that ends the pipeline, where
        // its peer receives it for its own optimizer.
        for (const TransferRecord &t : writer.transfers)
          if (t.send && t.once && t.fragment == frag)
            action(json::Object{{"send", t.buffer + base}, {"to", t.peer}});
        for (const TransferRecord &t : writer.transfers)
          if (receives && !t.send && t.fragment == frag)
            action(json::Object{{"recv", t.buffer + base}, {"from", t.peer}});
        action(json::Object{{"run", writer.fragmentKeys().name(frag)}});
        for (const TransferRecord &t : writer.transfers)
          if (t.send && !t.once && t.fragment == frag)
            action(json::Object{{"send", t.buffer + base}, {"to", t.peer}});
      };
      const FragmentKeys &keys = writer.fragmentKeys();
      if (prologue)
        addRun(keys.key(kPrologue, 0), -1);
      const std::vector<weft::PipelineRun> order =
          weft::pipelineOrder(kind, s, n, m);
      auto keyOf = [&](const weft::PipelineRun &run) {
        return keys.key(run.Weight     ? kWeight
                        : run.Backward ? kBackward
                                       : kForward,
                        run.Chunk);
      };
      if (keys.chunks == 1) {
        // A run's receives go before the W runs right before it (they
        // transfer nothing): the peer that waits for them, to complete
        // the group that also sends its next input, does not wait for
        // this stage's weight gradients (pipelineSlots counts the slot).
        for (size_t i = 0; i < order.size();) {
          size_t j = i;
          while (j < order.size() && order[j].Weight)
            ++j;
          const bool hoist = j < order.size() && j > i;
          if (hoist)
            for (const TransferRecord &t : writer.transfers)
              if (!t.send && t.fragment == keyOf(order[j]))
                schedule.push_back(
                    json::Object{{"recv", t.buffer + base},
                                 {"from", t.peer},
                                 {"microbatch", order[j].Microbatch}});
          for (; i < j; ++i)
            addRun(keyOf(order[i]), order[i].Microbatch);
          if (j < order.size())
            addRun(keyOf(order[j]), order[j].Microbatch, !hoist);
          i = j + 1;
        }
      } else {
        // Several chunks (Megatron's interleaved schedule): a steady tick
        // runs a forward and a backward (PipelineRun::Paired), then
        // exchanges both runs' sends and the next tick's receives in one
        // group, as Megatron's send_forward_backward_recv_forward_backward.
        // A group per run would deadlock: two stages each send a forward's
        // output while the other waits to send a backward's gradient.
        auto transfers = [&](const weft::PipelineRun &run, bool send) {
          for (const TransferRecord &t : writer.transfers)
            if (t.send == send && t.fragment == keyOf(run))
              schedule.push_back(
                  json::Object{{send ? "send" : "recv", t.buffer + base},
                               {send ? "to" : "from", t.peer},
                               {"microbatch", run.Microbatch}});
        };
        // Never two runs of one micro-batch in a tick (a transfer belongs
        // to its micro-batch's run beside it).
        SmallVector<std::pair<size_t, size_t>> ticks;
        for (size_t i = 0; i < order.size();) {
          size_t j = i + 1;
          if (order[i].Paired && j < order.size() && order[j].Backward &&
              order[j].Microbatch != order[i].Microbatch)
            ++j;
          ticks.push_back({i, j});
          i = j;
        }
        for (auto [begin, end] : ticks) {
          for (size_t i = begin; i < end; ++i)
            transfers(order[i], /*send=*/false);
          for (size_t i = begin; i < end; ++i)
            schedule.push_back(
                json::Object{{"run", keys.name(keyOf(order[i]))},
                             {"microbatch", order[i].Microbatch}});
          for (size_t i = begin; i < end; ++i)
            transfers(order[i], /*send=*/true);
        }
      }
      addRun(keys.key(kOptimizer, 0), -1);
      stage["schedule"] = std::move(schedule);
      stage["slots"] = weft::pipelineSlots(kind, s, n, m);
      // Each stage's ranks allocate its own arena (times its slots).
      stage["arena_bytes"] = *p.getInteger("arena_bytes");
      // The part of it instanced per slot (weft-plan-memory's split).
      if (std::optional<int64_t> slot = p.getInteger("slot_bytes"))
        stage["slot_bytes"] = *slot;
      stages.push_back(std::move(stage));
      arena = std::max(arena, *p.getInteger("arena_bytes"));
      if (*p.getInteger("loss") >= 0)
        loss = *p.getInteger("loss") + base;
      json::Object &mesh = *p.getObject("mesh");
      for (json::Value &g : *mesh.getArray("groups"))
        if (!llvm::is_contained(groups, g))
          groups.push_back(g);
      for (StringRef key :
           {"model", "dtype", "batch", "seq", "optimizer", "microbatches"})
        out[key] = std::move(*p.get(key));
      if (json::Value *m = p.get("masked_lm"))
        out["masked_lm"] = std::move(*m);
      if (json::Value *d = p.get("documents"))
        out["documents"] = std::move(*d);
      if (s + 1 == n) {
        out["vocab"] = std::move(*p.get("vocab"));
        if (json::Value *classes = p.get("classes"))
          out["classes"] = std::move(*classes);
        json::Value pp = json::Array{axis.str()};
        if (!llvm::is_contained(groups, pp))
          groups.push_back(std::move(pp));
        mesh["groups"] = std::move(groups);
        mesh["pipeline"] = axis.str();
        out["mesh"] = std::move(mesh);
      }
    }
    out["params"] = std::move(params);
    out["arena_bytes"] = arena;
    out["buffers"] = std::move(buffers);
    out["stages"] = std::move(stages);
    out["loss"] = loss;
    return success();
  }
};
} // namespace
