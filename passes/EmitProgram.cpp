//===- EmitProgram.cpp - weft-emit-program: the runtime's program file ----===//
//
// The file format is docs/program-format.md. This pass is its only writer; the
// runtime (runtime/Program.cpp) is its only reader.
//
//===----------------------------------------------------------------------===//
#include "dialect/WeftDialect.h"
#include "passes/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

namespace weft {
#define GEN_PASS_DEF_WEFTEMITPROGRAM
#include "passes/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;
namespace json = llvm::json;

namespace {
constexpr uint32_t kFormatVersion = 1;

uint64_t fnv1a64(StringRef bytes) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
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
  return "f32";
}

// Op attributes as JSON: bools, integers, floats, strings and i64 arrays.
json::Object attrsOf(Operation *op) {
  json::Object attrs;
  for (NamedAttribute a : op->getAttrs()) {
    StringRef name = a.getName().strref();
    if (name.starts_with("weft."))
      continue;
    Attribute v = a.getValue();
    if (auto bv = dyn_cast<BoolAttr>(v))
      attrs[name] = bv.getValue();
    else if (auto iv = dyn_cast<IntegerAttr>(v))
      attrs[name] = iv.getInt();
    else if (auto fv = dyn_cast<FloatAttr>(v))
      attrs[name] = fv.getValueAsDouble();
    else if (auto sv = dyn_cast<StringAttr>(v))
      attrs[name] = sv.str();
    else if (auto arr = dyn_cast<DenseI64ArrayAttr>(v))
      attrs[name] = json::Array(arr.asArrayRef());
  }
  return attrs;
}

class ProgramWriter {
public:
  explicit ProgramWriter(func::FuncOp fn) : fn(fn) {}

  LogicalResult build(json::Object &program) {
    auto arenaBytes = fn->getAttrOfType<IntegerAttr>("weft.arena_bytes");
    if (!arenaBytes)
      return fn.emitError("no weft.arena_bytes: run weft-plan-memory first");
    if (fn.getNumArguments() != 2)
      return fn.emitError("expects (tokens, targets) arguments, got ")
             << fn.getNumArguments();
    addInput(fn.getArgument(0), "tokens");
    addInput(fn.getArgument(1), "targets");

    Block &body = fn.getBody().front();
    int64_t forwardEnd = -1, optimizerBegin = -1;
    Value loss = cast<func::ReturnOp>(body.getTerminator()).getOperand(0);
    std::optional<int64_t> vocab;
    for (Operation &op : body.without_terminator()) {
      if (auto p = dyn_cast<ParamOp>(op)) {
        addParam(p);
        continue;
      }
      if (isa<AdamWOp>(op) && optimizerBegin < 0)
        optimizerBegin = instructions.size();
      if (auto ce = dyn_cast<CrossEntropyOp>(op))
        vocab = ce.getLogits().getType().getShape().back();
      if (failed(addInstruction(op)))
        return failure();
      if (op.getNumResults() && op.getResult(0) == loss)
        forwardEnd = instructions.size();
    }
    if (forwardEnd < 0)
      return fn.emitError("the returned loss is not computed by an op");

    auto dtype = params.empty() ? std::string("f32") : paramDtype;
    program["model"] = fn->hasAttr("weft.model")
                           ? fn->getAttrOfType<StringAttr>("weft.model").str()
                           : fn.getSymName().str();
    program["dtype"] = dtype;
    auto tokens = cast<RankedTensorType>(fn.getArgument(0).getType());
    program["batch"] = tokens.getRank() > 0 ? tokens.getDimSize(0) : 1;
    program["seq"] = tokens.getRank() > 1 ? tokens.getDimSize(1) : 1;
    program["vocab"] = vocab.value_or(0);
    program["optimizer"] = optimizerJson();
    program["params"] = std::move(params);
    program["arena_bytes"] = arenaBytes.getInt();
    program["buffers"] = std::move(buffers);
    program["instructions"] = std::move(instructions);
    program["loss"] = bufferIds.lookup(loss);
    program["forward_end"] = forwardEnd;
    program["optimizer_begin"] =
        optimizerBegin < 0 ? int64_t(instructions.size()) : optimizerBegin;
    return success();
  }

private:
  int64_t addBuffer(json::Object buffer) {
    buffers.push_back(std::move(buffer));
    return buffers.size() - 1;
  }

  void addInput(Value arg, StringRef name) {
    bufferIds[arg] = addBuffer(json::Object{
        {"kind", "input"},
        {"name", name},
        {"shape", shapeOf(arg)},
        {"dtype", dtypeOf(cast<RankedTensorType>(arg.getType())
                              .getElementType())}});
  }

  void addParam(ParamOp p) {
    int64_t index = params.size();
    paramDtype = dtypeOf(p.getType().getElementType());
    json::Object init{{"kind", p.getInit()}};
    if (p.getInit() == "normal")
      init["std"] = p.getStd().convertToDouble();
    params.push_back(json::Object{{"name", p.getName()},
                                  {"shape", shapeOf(p.getResult())},
                                  {"init", std::move(init)},
                                  {"weight_decay", p.getType().getRank() >= 2}});
    auto state = [&](StringRef kind) {
      return addBuffer(json::Object{{"kind", kind},
                                    {"param", index},
                                    {"shape", shapeOf(p.getResult())},
                                    {"dtype", paramDtype}});
    };
    bufferIds[p.getResult()] = state("param");
    paramState[p.getName()] = {state("grad"), state("adam_m"),
                               state("adam_v")};
    paramIndex[p.getName()] = index;
  }

  int64_t arenaBuffer(Value v, int64_t offset) {
    auto t = cast<RankedTensorType>(v.getType());
    int64_t id = addBuffer(json::Object{{"kind", "arena"},
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
    if (auto g = dyn_cast<ParamGradOp>(op)) {
      auto it = paramState.find(g.getName());
      if (it == paramState.end())
        return op.emitOpError("names no weft.param: '") << g.getName() << "'";
      instructions.push_back(json::Object{
          {"op", "copy"},
          {"in", idsOf(g.getGrad())},
          {"out", json::Array{it->second[0]}},
          {"attrs", json::Object{}}});
      return success();
    }
    if (auto adam = dyn_cast<AdamWOp>(op)) {
      auto name = adam.getParam().getDefiningOp<ParamOp>().getName();
      auto &state = paramState[name];
      int64_t param = bufferIds.lookup(adam.getParam());
      instructions.push_back(json::Object{
          {"op", "adamw"},
          {"in", json::Array{param, state[0], state[1], state[2]}},
          {"out", json::Array{param, state[1], state[2]}},
          {"attrs", json::Object{{"weight_decay", adam.getWeightDecay()}}}});
      return success();
    }
    auto offsets = op.getAttrOfType<DenseI64ArrayAttr>("weft.offsets");
    if (!offsets || offsets.size() != int64_t(op.getNumResults()))
      return op.emitOpError("has no weft.offsets: run weft-plan-memory first");
    json::Array outs;
    for (auto [r, offset] : llvm::zip(op.getResults(), offsets.asArrayRef()))
      outs.push_back(arenaBuffer(r, offset));
    instructions.push_back(json::Object{
        {"op", op.getName().stripDialect()},
        {"in", idsOf(op.getOperands())},
        {"out", std::move(outs)},
        {"attrs", attrsOf(&op)}});
    return success();
  }

  json::Value optimizerJson() {
    json::Object opt{{"kind", "none"}};
    auto cfg = fn->getAttrOfType<DictionaryAttr>("weft.optimizer");
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
  json::Array params, buffers, instructions;
  std::string paramDtype = "f32";
  DenseMap<Value, int64_t> bufferIds;
  llvm::StringMap<std::array<int64_t, 3>> paramState; // grad, m, v
  llvm::StringMap<int64_t> paramIndex;
};

struct EmitProgram : weft::impl::WeftEmitProgramBase<EmitProgram> {
  using WeftEmitProgramBase::WeftEmitProgramBase;

  void runOnOperation() override {
    SmallVector<func::FuncOp> fns(getOperation().getOps<func::FuncOp>());
    if (fns.size() != 1) {
      getOperation().emitError("weft-emit-program expects one function, found ")
          << fns.size();
      return signalPassFailure();
    }
    if (output.empty()) {
      getOperation().emitError("weft-emit-program needs output=FILE");
      return signalPassFailure();
    }
    json::Object program;
    if (failed(ProgramWriter(fns.front()).build(program)))
      return signalPassFailure();
    std::string payload;
    llvm::raw_string_ostream(payload) << json::Value(std::move(program));

    std::error_code ec;
    llvm::raw_fd_ostream os(output, ec);
    if (ec) {
      getOperation().emitError("cannot write '") << output << "': "
                                                 << ec.message();
      return signalPassFailure();
    }
    auto writeLE = [&](uint64_t v, int bytes) {
      for (int i = 0; i < bytes; ++i)
        os << char((v >> (8 * i)) & 0xff);
    };
    os << "WEFTPROG";
    writeLE(kFormatVersion, 4);
    writeLE(payload.size(), 8);
    writeLE(fnv1a64(payload), 8);
    os << payload;
  }
};
} // namespace
