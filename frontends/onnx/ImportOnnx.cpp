//===- ImportOnnx.cpp - an ONNX model as weft IR --------------------------===//
#include "frontends/onnx/ImportOnnx.h"
#include "dialect/AttrNames.h"
#include "dialect/WeftDialect.h"
#include "frontends/onnx/HostTensor.h"
#include "frontends/onnx/OpSchemaCheck.h"
#include "frontends/onnx/PaddingMask.h"
#include "frontends/onnx/ShapeRules.h"
#include "frontends/onnx/TwinTables.h"
#include "frontends/onnx/UnknownFields.h"
#include "program/OnnxBuffers.h"
#include "program/OnnxExternalData.h"
#include "program/TorchExportSignature.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Path.h"

#include <google/protobuf/io/coded_stream.h>
#include <onnx/onnx_pb.h>

#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

using namespace mlir;

namespace weft {
namespace {
// A half-precision model's way in: its float32 export, trained in bf16 by
// weft's own mixed precision (weights, gradients and Adam state in f32).
std::string halfPrecisionHint(int64_t code) {
  return code == onnx::TensorProto_DataType_FLOAT16 ||
                 code == onnx::TensorProto_DataType_BFLOAT16
             ? "; export the model in float32 and compile it with --dtype "
               "bf16 for mixed precision"
             : "";
}

// That a weight's values are all there, where the model says, without
// reading them (weft-run --load reads them): one of raw_data, the typed
// field or external data, of its shape's size; external data in a file
// beside the model, no further (ONNX's rule: no absolute path, no "..").
std::string checkWeightDataIn(const onnx::TensorProto &t,
                              const std::string &modelDir) {
  const std::string what = "initializer '" + t.name() + "'";
  uint64_t numel = 1;
  for (int64_t d : t.dims())
    if (d <= 0 || __builtin_mul_overflow(numel, uint64_t(d), &numel) ||
        numel > (uint64_t(1) << 48))
      return what + " has " + std::to_string(t.dims_size()) +
             " dims whose product is not a size weft holds";
  const bool f64 = t.data_type() == onnx::TensorProto_DataType_DOUBLE;
  const uint64_t want = numel * (f64 ? 8 : 4);
  const int typed = f64 ? t.double_data_size() : t.float_data_size();
  const bool external =
      t.data_location() == onnx::TensorProto_DataLocation_EXTERNAL;
  if (int(t.has_raw_data()) + int(typed > 0) + int(external) > 1)
    return what + " holds its values in more than one of raw_data, " +
           (f64 ? "double_data" : "float_data") +
           " and external data: which the model means is ambiguous";
  if (external)
    return weft::readOnnxExternalData(t, want, modelDir, what, nullptr);
  if (t.has_raw_data() && t.raw_data().size() != want)
    return what + ": raw_data holds " + std::to_string(t.raw_data().size()) +
           " bytes, expected " + std::to_string(want) + " for its shape";
  if (!t.has_raw_data() && uint64_t(typed) != numel)
    return what + ": holds " + std::to_string(typed) + " values, expected " +
           std::to_string(numel) + " for its shape";
  return "";
}
using onnximport::HostTensor;
using onnximport::HostType;
using onnximport::shapeString;
using Shape = std::vector<int64_t>;

// The opsets whose definitions of the imported ops weft follows: from 7
// (numpy broadcasting of the arithmetic ops); Slice's bounds are inputs
// from 10, Squeeze's, Unsqueeze's and ReduceSum's axes and Split's sizes
// from 13, ReduceMean's axes from 18; before, attributes, and the import
// reads each where its opset puts it (refusing the other place). Opsets 21
// to 23 changed the imported ops' type constraints only (int4, float8,
// bfloat16 and float4 added; their inputs, attributes and text as at 20,
// compared in ONNX 1.23's schemas). Of 23's new ops weft imports Attention
// (attentionResult); RMSNormalization and RotaryEmbedding are refused.
constexpr int64_t kMinOpset = 7, kMaxOpset = 23;

// One ONNX value: folded (a constant), a tensor of the IR, or the tensors
// of a sequence (SplitToSequence).
struct Slot {
  std::optional<HostTensor> constant;
  /// Computed from the attention_mask input alone (PaddingMask.h).
  std::optional<onnximport::PaddedValue> padded;
  /// The token_type_ids input [batch, seq]: the step's, read by a table.
  std::optional<HostTensor> tokenTypes;
  Value value;
  std::vector<Value> sequence;
  bool isSequence = false;
};

class Importer {
public:
  Importer(MLIRContext &context, const OnnxImportOptions &options,
           std::string modelDir)
      : b(&context), options(options), modelDir(std::move(modelDir)) {}

  std::string run(const onnx::ModelProto &model, const std::string &name,
                  OwningOpRef<ModuleOp> &module);

private:
  OpBuilder b;
  const OnnxImportOptions &options;
  std::string modelDir; // where external data files lie
  int64_t opset = 0;
  Type floatType;
  llvm::StringMap<Slot> slots;
  llvm::StringMap<const onnx::TensorProto *> params;
  llvm::StringMap<Value> paramValues;
  // Materialised constants, by ONNX value name.
  llvm::StringMap<Value> constants;

  std::string nodeName(const onnx::NodeProto &n) const {
    return onnximport::nodeLabel(n) + " (opset " + std::to_string(opset) + ")";
  }
  Type elementType(HostType t) {
    switch (t) {
    case HostType::F32:
    case HostType::F64:
      return floatType;
    case HostType::I32:
      return b.getI32Type();
    case HostType::I64:
      return b.getI64Type();
    case HostType::Bool:
      return b.getI1Type();
    }
    return {};
  }
  Value materialize(const std::string &name, const HostTensor &t);
  DenseElementsAttr denseOf(const HostTensor &t);
  std::string materializePadded(const std::string &name,
                                const onnximport::PaddedValue &v, Value &out);
  std::string maskInput(const onnx::ValueInfoProto &input, int64_t batch,
                        int64_t seq);
  std::string typesInput(const onnx::ValueInfoProto &input, int64_t batch,
                         int64_t seq);
  std::string rowsInput(const onnx::ValueInfoProto &input, int64_t batch,
                        int64_t seq, llvm::function_ref<bool(HostType)> allowed,
                        const std::string &kind, HostType &type);
  Value param(const std::string &name);
  std::string graphInput(const onnx::ValueInfoProto &input, Block *body);
  std::string tensorGraph(const onnx::GraphProto &g,
                          const std::vector<const onnx::ValueInfoProto *> &in,
                          const std::string &name,
                          OwningOpRef<ModuleOp> &module);
  std::string checkDeclared(const onnx::ValueInfoProto &info,
                            bool isOutput = false);
  std::string twinTables(Block *body, const std::string &table);
  std::string frozenWeights(Block *body, int64_t hidden);
  std::string node(const onnx::NodeProto &n);
  std::optional<std::string> paddedNode(const onnx::NodeProto &n,
                                        const std::vector<const Slot *> &in);
  std::optional<std::string>
  tokenTypesNode(const onnx::NodeProto &n, const std::vector<const Slot *> &in);
  std::string readNode(const onnx::NodeProto &n);
  std::string emit(const onnx::NodeProto &n,
                   const std::vector<const Slot *> &in);
  std::string attentionResult(const onnx::NodeProto &n,
                              const std::vector<const Slot *> &in,
                              SmallVectorImpl<Type> &types);
  std::string resultTypes(const onnx::NodeProto &n,
                          const std::vector<const Slot *> &in,
                          SmallVectorImpl<Type> &types, DictionaryAttr &attrs);
  DictionaryAttr attributes(const onnx::NodeProto &n, std::string &error);
};

int64_t intAttr(const onnx::NodeProto &n, const char *name, int64_t dflt) {
  for (const auto &a : n.attribute())
    if (a.name() == name)
      return a.i();
  return dflt;
}
using onnximport::findAttribute;

bool isFloatElement(int code) {
  return code == onnx::TensorProto_DataType_FLOAT ||
         code == onnx::TensorProto_DataType_DOUBLE ||
         code == onnx::TensorProto_DataType_FLOAT16 ||
         code == onnx::TensorProto_DataType_BFLOAT16;
}

Shape shapeOf(Value v) {
  auto t = cast<RankedTensorType>(v.getType());
  return Shape(t.getShape().begin(), t.getShape().end());
}

Value Importer::materialize(const std::string &name, const HostTensor &t) {
  auto it = constants.find(name);
  if (it != constants.end())
    return it->second;
  Value v =
      ConstantOp::create(b, NameLoc::get(b.getStringAttr(name)), denseOf(t));
  constants[name] = v;
  return v;
}

DenseElementsAttr Importer::denseOf(const HostTensor &t) {
  auto type = RankedTensorType::get(t.shape, elementType(t.type));
  DenseElementsAttr attr;
  if (t.isFloat()) {
    if (floatType.isF64())
      attr = DenseElementsAttr::get(type, ArrayRef<double>(t.reals));
    else {
      std::vector<float> v(t.reals.begin(), t.reals.end());
      attr = DenseElementsAttr::get(type, ArrayRef<float>(v));
    }
  } else if (t.type == HostType::Bool) {
    SmallVector<bool> v(t.ints.begin(), t.ints.end());
    attr = DenseElementsAttr::get(type, ArrayRef<bool>(v));
  } else if (t.type == HostType::I32) {
    std::vector<int32_t> v(t.ints.begin(), t.ints.end());
    attr = DenseElementsAttr::get(type, ArrayRef<int32_t>(v));
  } else {
    attr = DenseElementsAttr::get(type, ArrayRef<int64_t>(t.ints));
  }
  return attr;
}

// A value computed from the attention_mask input, read by a node of the
// model: its value if every key is a token, marked with its value if
// every key is padding (weft-raise-onnx makes it an attention's key
// padding, or refuses it).
std::string Importer::materializePadded(const std::string &name,
                                        const onnximport::PaddedValue &v,
                                        Value &out) {
  if (std::string e = onnximport::keyMaskForm(v); !e.empty())
    return "value '" + name + "', computed from the attention_mask input, " + e;
  out = materialize(name, v.ifTokens);
  out.getDefiningOp()->setAttr(attrname::kIfPadding, denseOf(v.ifPadding));
  return "";
}

// A graph input beside the token ids, [batch, seq] as they are, of a type
// `allowed` accepts; `kind` names what it holds. Returns why not, or "".
std::string Importer::rowsInput(const onnx::ValueInfoProto &input,
                                int64_t batch, int64_t seq,
                                llvm::function_ref<bool(HostType)> allowed,
                                const std::string &kind, HostType &type) {
  const std::string what = "graph input '" + input.name() + "'";
  const auto &tt = input.type().tensor_type();
  if (!input.type().has_tensor_type() ||
      !onnximport::hostTypeOf(tt.elem_type(), type) || !allowed(type))
    return what + " is not a tensor of " + kind;
  if (tt.shape().dim_size() != 2)
    return what + " has rank " + std::to_string(tt.shape().dim_size()) +
           "; it is [batch, seq], as the token ids";
  const int64_t want[2] = {batch, seq};
  for (int d = 0; d < 2; ++d)
    if (tt.shape().dim(d).has_dim_value() &&
        tt.shape().dim(d).dim_value() != want[d])
      return what + " has dim " + std::to_string(d) + " = " +
             std::to_string(tt.shape().dim(d).dim_value()) +
             ", but the token ids' is " + std::to_string(want[d]);
  return "";
}

// The graph's token_type_ids input: integers, which weft-run
// --token-type-ids gives each step.
std::string Importer::typesInput(const onnx::ValueInfoProto &input,
                                 int64_t batch, int64_t seq) {
  HostType type;
  if (std::string e = rowsInput(
          input, batch, seq,
          [](HostType t) { return t == HostType::I64 || t == HostType::I32; },
          "integers; token types are ids", type);
      !e.empty())
    return e;
  Slot s;
  s.tokenTypes.emplace();
  s.tokenTypes->type = type;
  s.tokenTypes->shape = {batch, seq};
  s.tokenTypes->ints.assign(size_t(batch * seq), 0);
  slots[input.name()] = s;
  return "";
}

// The graph's attention_mask input: integers (or bools), 1 a token and 0
// padding, which weft-run --attention-mask gives each step.
std::string Importer::maskInput(const onnx::ValueInfoProto &input,
                                int64_t batch, int64_t seq) {
  HostType type;
  if (std::string e = rowsInput(
          input, batch, seq,
          [](HostType t) {
            return t == HostType::I64 || t == HostType::I32 ||
                   t == HostType::Bool;
          },
          "integers or bools; an attention mask is 1 for a token, 0 for "
          "padding",
          type);
      !e.empty())
    return e;
  Slot s;
  s.padded = onnximport::paddedInput(type, batch, seq);
  slots[input.name()] = s;
  return "";
}

Value Importer::param(const std::string &name) {
  auto it = paramValues.find(name);
  if (it != paramValues.end())
    return it->second;
  const onnx::TensorProto &t = *params[name];
  Shape shape(t.dims().begin(), t.dims().end());
  // The values are the model's: weft-run --load model.onnx gives them, and
  // refuses to start without (init "loaded").
  auto p = ParamOp::create(b, NameLoc::get(b.getStringAttr(name)),
                           RankedTensorType::get(shape, floatType),
                           b.getStringAttr(name), b.getStringAttr("loaded"),
                           b.getF64FloatAttr(0.0));
  paramValues[name] = p;
  return p;
}

std::string Importer::graphInput(const onnx::ValueInfoProto &input,
                                 Block *body) {
  const std::string what = "graph input '" + input.name() + "'";
  if (!input.type().has_tensor_type())
    return what + " is not a tensor";
  const auto &tt = input.type().tensor_type();
  if (tt.elem_type() != onnx::TensorProto_DataType_INT64 &&
      tt.elem_type() != onnx::TensorProto_DataType_INT32)
    return what + " has ONNX element type " + std::to_string(tt.elem_type()) +
           "; weft imports models whose one input is token ids (int64 or "
           "int32 [batch, seq])";
  if (tt.shape().dim_size() != 2)
    return what + " has rank " + std::to_string(tt.shape().dim_size()) +
           "; token ids are [batch, seq]";
  Shape want{options.batch, options.seq};
  const char *flags[] = {"--batch", "--seq"};
  for (int d = 0; d < 2; ++d) {
    const auto &dim = tt.shape().dim(d);
    if (d == 0 && !want[0] && !dim.has_dim_value())
      want[0] = options.symbolicBatch;
    if (dim.has_dim_value() && want[d] && dim.dim_value() != want[d])
      return what + " has dim " + std::to_string(d) + " = " +
             std::to_string(dim.dim_value()) + " in the model, but " +
             flags[d] + " " + std::to_string(want[d]) +
             " was asked; export the model with a dynamic dim to change it";
    if (!dim.has_dim_value() && !want[d])
      return what + " has the symbolic dim " + std::to_string(d) + " '" +
             dim.dim_param() + "': give " + flags[d];
    if (dim.has_dim_value() && dim.dim_value() < 1)
      return what + " has dim " + std::to_string(d) + " = " +
             std::to_string(dim.dim_value()) + "; weft needs positive dims";
  }
  Slot s;
  s.value = body->getArgument(0);
  slots[input.name()] = s;
  return "";
}

DictionaryAttr Importer::attributes(const onnx::NodeProto &n,
                                    std::string &error) {
  SmallVector<NamedAttribute> out;
  for (const auto &a : n.attribute()) {
    Attribute v;
    switch (a.type()) {
    case onnx::AttributeProto::INT:
      v = b.getI64IntegerAttr(a.i());
      break;
    case onnx::AttributeProto::FLOAT:
      v = b.getF64FloatAttr(a.f());
      break;
    case onnx::AttributeProto::STRING:
      v = b.getStringAttr(a.s());
      break;
    case onnx::AttributeProto::INTS:
      v = b.getDenseI64ArrayAttr(
          SmallVector<int64_t>(a.ints().begin(), a.ints().end()));
      break;
    case onnx::AttributeProto::FLOATS:
      v = b.getDenseF64ArrayAttr(
          SmallVector<double>(a.floats().begin(), a.floats().end()));
      break;
    default:
      error = nodeName(n) + ": attribute '" + a.name() + "' of type " +
              std::to_string(int(a.type())) + " is not imported";
      return nullptr;
    }
    out.push_back(b.getNamedAttr(a.name(), v));
  }
  return b.getDictionaryAttr(out);
}

// The static result types of a node weft keeps (for weft-raise-onnx), by
// ONNX's shape rules; `attrs` gains what the rule resolved (Split's sizes).
std::string Importer::resultTypes(const onnx::NodeProto &n,
                                  const std::vector<const Slot *> &in,
                                  SmallVectorImpl<Type> &types,
                                  DictionaryAttr &attrs) {
  const std::string &op = n.op_type();
  auto fail = [&](const std::string &why) { return nodeName(n) + ": " + why; };
  auto typeOf = [&](size_t i) -> RankedTensorType {
    if (i >= in.size() || !in[i])
      return nullptr;
    if (in[i]->constant)
      return RankedTensorType::get(in[i]->constant->shape,
                                   elementType(in[i]->constant->type));
    return cast<RankedTensorType>(in[i]->value.getType());
  };
  auto shapeIn = [&](size_t i) {
    auto t = typeOf(i);
    return Shape(t.getShape().begin(), t.getShape().end());
  };
  // A constant integer input (a shape, axes, split sizes).
  auto constInts = [&](size_t i, Shape &v, const char *what) -> std::string {
    if (i >= in.size() || !in[i] || !in[i]->constant ||
        in[i]->constant->isFloat())
      return fail(std::string(what) + " (input " + std::to_string(i) +
                  ") must be a constant of integers; weft needs static "
                  "shapes");
    v = in[i]->constant->ints;
    return "";
  };
  // The inputs each rule reads; beyond them, optional ones may be absent.
  static const std::pair<const char *, size_t> kRequired[] = {
      {"Gemm", 2},     {"Slice", 3},  {"MatMul", 2},
      {"Reshape", 2},  {"Expand", 2}, {"Gather", 2},
      {"CastLike", 2}, {"Where", 3},  {"LayerNormalization", 2},
      {"Attention", 3}};
  size_t required = 1;
  for (auto [name, count] : kRequired)
    if (op == name)
      required = count;
  if (op == "Slice" && opset < 10)
    required = 1; // its bounds are attributes
  bool optional = op == "Slice" || op == "Gemm" || op == "Squeeze" ||
                  op == "Clip" || op == "LayerNormalization" || op == "Split" ||
                  op == "SplitToSequence" || op == "ReduceMean" ||
                  op == "ReduceSum" || op == "Unsqueeze" || op == "Attention";
  if (in.size() < required)
    return fail("has " + std::to_string(in.size()) + " inputs, expected " +
                std::to_string(required));
  for (size_t i = 0; i < in.size(); ++i)
    if (!in[i] && (i < required || !optional))
      return fail("input " + std::to_string(i) + " is missing");
  RankedTensorType x = typeOf(0);
  auto same = [&](Type element, Shape shape) {
    types.push_back(RankedTensorType::get(shape, element));
    return std::string();
  };
  static const char *const kUnary[] = {
      "Tanh", "Sqrt", "Erf",      "Sigmoid", "Relu", "Neg", "Exp", "Reciprocal",
      "Sin",  "Cos",  "Identity", "Softmax", "Abs",  "Log", "Gelu"};
  for (const char *u : kUnary)
    if (op == u)
      return same(x.getElementType(), shapeIn(0));
  if (op == "IsNaN" || op == "Not")
    return same(b.getI1Type(), shapeIn(0));
  if (op == "LayerNormalization") {
    // Mean and InvStdDev keep the normalized dims (from axis on) as 1s, in
    // stash_type: float (the model's float type here) is the one weft reads.
    if (intAttr(n, "stash_type", 1) != onnx::TensorProto_DataType_FLOAT)
      return fail("stash_type " + std::to_string(intAttr(n, "stash_type", 1)) +
                  " is not float");
    Shape shape = shapeIn(0), kept = shapeIn(0);
    int64_t rank = int64_t(shape.size()), ax = intAttr(n, "axis", -1);
    ax = ax < 0 ? ax + rank : ax;
    if (ax < 0 || ax >= rank)
      return fail("axis " + std::to_string(intAttr(n, "axis", -1)) +
                  " is out of range for rank " + std::to_string(rank));
    for (int64_t d = ax; d < rank; ++d)
      kept[size_t(d)] = 1;
    same(x.getElementType(), shape);
    for (int i = 1; i < n.output_size() && i < 3; ++i)
      same(x.getElementType(), kept);
    return "";
  }
  static const char *const kBinary[] = {"Add", "Sub", "Mul", "Div",
                                        "Pow", "Max", "Min"};
  static const char *const kCompare[] = {
      "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "And", "Or"};
  bool binary = false, compare = false;
  for (const char *o : kBinary)
    binary |= op == o;
  for (const char *o : kCompare)
    compare |= op == o;
  // Max and Min of one input are that input (weft lowers one or two).
  if ((op == "Max" || op == "Min") && in.size() == 1)
    return same(x.getElementType(), shapeIn(0));
  if (binary || compare || op == "Where") {
    if (in.size() != (op == "Where" ? 3u : 2u))
      return fail("takes " + std::to_string(in.size()) + " inputs" +
                  (op == "Max" || op == "Min" ? "; weft imports it of one "
                                                "or two"
                                              : ""));
    // ONNX's one type T (Pow may raise to another).
    size_t a = op == "Where" ? 1 : 0;
    if (op != "Pow" &&
        typeOf(a).getElementType() != typeOf(a + 1).getElementType())
      return fail("inputs of element types differ");
    Shape shape = shapeIn(0);
    for (size_t i = 1; i < in.size(); ++i) {
      Shape next;
      if (!onnximport::broadcastShapes(shape, shapeIn(i), next))
        return fail("input shapes " + shapeString(shape) + " and " +
                    shapeString(shapeIn(i)) + " do not broadcast");
      shape = next;
    }
    Type element = compare         ? Type(b.getI1Type())
                   : op == "Where" ? typeOf(1).getElementType()
                                   : x.getElementType();
    return same(element, shape);
  }
  if (op == "Cast" || op == "CastLike") {
    Type to;
    if (op == "CastLike") {
      to = typeOf(1).getElementType();
    } else {
      HostType ht;
      if (!onnximport::hostTypeOf(int(intAttr(n, "to", 0)), ht))
        return fail("casts to ONNX type " +
                    onnximport::onnxTypeString(intAttr(n, "to", 0)) +
                    ", which weft does not import" +
                    halfPrecisionHint(intAttr(n, "to", 0)));
      // A model computes in one float type: a value cast to double would
      // go on in f32 here, silently less precise than the graph says.
      if (ht == HostType::F64 && !floatType.isF64())
        return fail("casts to double; weft computes a model in one float "
                    "type: compile with --dtype f64 to compute it in double");
      to = elementType(ht);
    }
    return same(to, shapeIn(0));
  }
  if ((op == "MatMul" || op == "Gemm") && llvm::any_of(in, [&](const Slot *s) {
        return s && (s->constant ? elementType(s->constant->type)
                                 : getElementTypeOrSelf(s->value.getType())) !=
                        x.getElementType();
      }))
    return fail("inputs of element types differ");
  if (op == "MatMul") {
    Shape a = shapeIn(0), c = shapeIn(1);
    if (a.size() < 2 || c.size() < 2)
      return fail("1-D operands (" + shapeString(a) + ", " + shapeString(c) +
                  ") are not supported");
    if (a.back() != c[c.size() - 2])
      return fail("contracts " + shapeString(a) + " with " + shapeString(c));
    Shape batch;
    if (!onnximport::broadcastShapes(Shape(a.begin(), a.end() - 2),
                                     Shape(c.begin(), c.end() - 2), batch))
      return fail("batch dims of " + shapeString(a) + " and " + shapeString(c) +
                  " do not broadcast");
    batch.push_back(a[a.size() - 2]);
    batch.push_back(c.back());
    return same(x.getElementType(), batch);
  }
  if (op == "Gemm") {
    Shape a = shapeIn(0), c = shapeIn(1);
    if (a.size() != 2 || c.size() != 2)
      return fail("operands must be matrices");
    int64_t m = intAttr(n, "transA", 0) ? a[1] : a[0];
    int64_t k = intAttr(n, "transA", 0) ? a[0] : a[1];
    int64_t kb = intAttr(n, "transB", 0) ? c[1] : c[0];
    int64_t nn = intAttr(n, "transB", 0) ? c[0] : c[1];
    if (k != kb)
      return fail("contracts " + shapeString(a) + " with " + shapeString(c));
    return same(x.getElementType(), {m, nn});
  }
  if (op == "Reshape") {
    Shape target, out;
    std::string e = constInts(1, target, "shape");
    if (e.empty())
      e = onnximport::reshapeTarget(shapeIn(0), target,
                                    intAttr(n, "allowzero", 0), out);
    return e.empty() ? same(x.getElementType(), out) : fail(e);
  }
  if (op == "Transpose") {
    Shape perm, out;
    if (const auto *a = findAttribute(n, "perm"))
      perm.assign(a->ints().begin(), a->ints().end());
    std::string e = onnximport::transposeShape(shapeIn(0), perm, out);
    return e.empty() ? same(x.getElementType(), out) : fail(e);
  }
  if (op == "Flatten") {
    // [d0 .. d(axis-1)] and [d(axis) ..] each multiplied out.
    Shape shape = shapeIn(0);
    int64_t rank = int64_t(shape.size()), ax = intAttr(n, "axis", 1);
    ax = ax < 0 ? ax + rank : ax;
    if (ax < 0 || ax > rank)
      return fail("axis " + std::to_string(intAttr(n, "axis", 1)) +
                  " is out of range for rank " + std::to_string(rank));
    Shape out{1, 1};
    for (int64_t d = 0; d < rank; ++d)
      out[d < ax ? 0 : 1] *= shape[size_t(d)];
    return same(x.getElementType(), out);
  }
  // A list an older opset holds as an attribute, a newer one as input 1.
  auto listOf = [&](int64_t since, const char *key, Shape &v,
                    bool &given) -> std::string {
    bool input = in.size() > 1 && in[1];
    std::string e =
        onnximport::listBeforeInput(n, opset, since, key, input, given, v);
    if (!e.empty())
      return fail(e);
    given |= input;
    return input ? constInts(1, v, key) : "";
  };
  if (op == "Unsqueeze" || op == "Squeeze") {
    Shape axes, out;
    bool given;
    if (std::string e = listOf(13, "axes", axes, given); !e.empty())
      return e;
    std::string e = op == "Squeeze"
                        ? onnximport::squeezeShape(shapeIn(0), axes, out)
                        : onnximport::unsqueezeShape(shapeIn(0), axes, out);
    return e.empty() ? same(x.getElementType(), out) : fail(e);
  }
  if (op == "Expand") {
    Shape target, out;
    std::string e = constInts(1, target, "shape");
    if (!e.empty())
      return e;
    if (!onnximport::broadcastShapes(shapeIn(0), target, out))
      return fail("shape " + shapeString(shapeIn(0)) + " does not expand to " +
                  shapeString(target));
    return same(x.getElementType(), out);
  }
  if (op == "Concat") {
    Shape out = shapeIn(0);
    int64_t rank = int64_t(out.size()), ax = intAttr(n, "axis", 0);
    ax = ax < 0 ? ax + rank : ax;
    if (ax < 0 || ax >= rank)
      return fail("axis out of range");
    for (size_t i = 1; i < in.size(); ++i) {
      Shape s = shapeIn(i);
      if (int64_t(s.size()) != rank ||
          typeOf(i).getElementType() != x.getElementType())
        return fail("inputs differ in rank or element type");
      for (int64_t d = 0; d < rank; ++d)
        if (d != ax && s[d] != out[d])
          return fail("input " + std::to_string(i) + " has shape " +
                      shapeString(s) + ", input 0 " + shapeString(shapeIn(0)));
      out[ax] += s[ax];
    }
    return same(x.getElementType(), out);
  }
  if (op == "Slice") {
    Shape starts, ends, axes, steps;
    std::string e;
    if (opset < 10) {
      e = onnximport::sliceAttrs(n, in.size(), starts, ends, axes);
      if (!e.empty())
        return fail(e);
    } else {
      e = constInts(1, starts, "starts");
      if (e.empty())
        e = constInts(2, ends, "ends");
      if (e.empty() && in.size() > 3 && in[3])
        e = constInts(3, axes, "axes");
      if (e.empty() && in.size() > 4 && in[4])
        e = constInts(4, steps, "steps");
      if (!e.empty())
        return e;
    }
    onnximport::SliceSpec spec;
    e = onnximport::sliceSpec(shapeIn(0), starts, ends, axes, steps, spec);
    if (!e.empty())
      return fail(e);
    // The resolved first index and step per dim, for the generic lowering.
    attrs = b.getDictionaryAttr(
        {b.getNamedAttr("start", b.getDenseI64ArrayAttr(spec.start)),
         b.getNamedAttr("step", b.getDenseI64ArrayAttr(spec.step))});
    return same(x.getElementType(), spec.shape);
  }
  if (op == "Clip") {
    // The bounds, resolved for the lowering as attributes `min` and `max`
    // (before opset 11 they are attributes already; absent: unbounded).
    if (!isa<FloatType>(x.getElementType()))
      return fail("clips " + shapeString(shapeIn(0)) +
                  " of a type that is not float");
    if (opset >= 11) {
      SmallVector<NamedAttribute> bounds;
      for (size_t i = 1; i < in.size() && i < 3; ++i) {
        if (!in[i])
          continue;
        const char *what = i == 1 ? "min" : "max";
        RankedTensorType t = typeOf(i);
        if (t.getNumElements() != 1 || t.getElementType() != x.getElementType())
          return fail(std::string(what) + " (input " + std::to_string(i) +
                      ") is not one element of the input's type");
        // A constant bound is resolved; another is read as a tensor.
        if (in[i]->constant)
          bounds.push_back(b.getNamedAttr(
              what, b.getF64FloatAttr(in[i]->constant->reals[0])));
      }
      attrs = b.getDictionaryAttr(bounds);
    }
    return same(x.getElementType(), shapeIn(0));
  }
  if (op == "Gather") {
    Shape data = shapeIn(0), idx = shapeIn(1);
    int64_t rank = int64_t(data.size()), ax = intAttr(n, "axis", 0);
    ax = ax < 0 ? ax + rank : ax;
    if (ax < 0 || ax >= rank)
      return fail("axis out of range");
    Shape out(data.begin(), data.begin() + ax);
    out.insert(out.end(), idx.begin(), idx.end());
    out.insert(out.end(), data.begin() + ax + 1, data.end());
    return same(x.getElementType(), out);
  }
  if (op == "Split" || op == "SplitToSequence") {
    Shape shape = shapeIn(0), sizes;
    int64_t rank = int64_t(shape.size()), ax = intAttr(n, "axis", 0);
    ax = ax < 0 ? ax + rank : ax;
    if (ax < 0 || ax >= rank)
      return fail("axis out of range");
    // The sizes given: Split's (an attribute before opset 13, input 1
    // from it), or SplitToSequence's input 1 (sizes, or one chunk size).
    bool given = false;
    if (op == "Split") {
      if (std::string e = listOf(13, "split", sizes, given); !e.empty())
        return e;
    } else if (in.size() > 1 && in[1]) {
      given = true;
      std::string e = constInts(1, sizes, "split");
      if (!e.empty())
        return e;
      if (in[1]->constant->shape.empty()) {
        int64_t chunk = sizes[0];
        if (chunk < 1)
          return fail("split size " + std::to_string(chunk));
        sizes.clear();
        for (int64_t left = shape[ax]; left > 0; left -= chunk)
          sizes.push_back(std::min(chunk, left));
      }
    }
    // None given: num_outputs parts (opset 18), the outputs' count of equal
    // parts, or SplitToSequence's parts of 1.
    if (!given && op == "Split" && findAttribute(n, "num_outputs")) {
      int64_t parts = intAttr(n, "num_outputs", 1);
      if (parts < 1 || parts > shape[ax])
        return fail("num_outputs " + std::to_string(parts) + " for dim " +
                    std::to_string(shape[ax]));
      int64_t chunk = (shape[ax] + parts - 1) / parts;
      for (int64_t left = shape[ax]; left > 0; left -= chunk)
        sizes.push_back(std::min(chunk, left));
    } else if (!given && op == "Split") {
      if (n.output_size() < 1 || shape[ax] % n.output_size())
        return fail("dim " + std::to_string(shape[ax]) + " does not split " +
                    "evenly into " + std::to_string(n.output_size()));
      sizes.assign(size_t(n.output_size()), shape[ax] / n.output_size());
    } else if (!given) {
      sizes.assign(size_t(shape[ax]), 1);
    }
    int64_t total = 0;
    for (int64_t s : sizes)
      total += s;
    if (total != shape[ax])
      return fail("split sizes " + shapeString(sizes) + " do not add up to " +
                  std::to_string(shape[ax]));
    if (op == "SplitToSequence" && !intAttr(n, "keepdims", 1))
      return fail("keepdims=0 is not supported");
    for (int64_t s : sizes) {
      Shape part = shape;
      part[ax] = s;
      types.push_back(RankedTensorType::get(part, x.getElementType()));
    }
    attrs = b.getDictionaryAttr(
        {b.getNamedAttr("axis", b.getI64IntegerAttr(ax)),
         b.getNamedAttr("split", b.getDenseI64ArrayAttr(sizes))});
    return "";
  }
  if (op == "ReduceMean" || op == "ReduceSum") {
    Shape shape = shapeIn(0), axes;
    // The axes moved from an attribute to an input (ReduceSum at opset 13,
    // ReduceMean at 18): the other place is not read (refused rather than
    // ignored).
    bool given;
    if (std::string e =
            listOf(op == "ReduceSum" ? 13 : 18, "axes", axes, given);
        !e.empty())
      return e;
    // No axes: all of them, or none with noop_with_empty_axes (opset 18).
    if (axes.empty() && intAttr(n, "noop_with_empty_axes", 0))
      return same(x.getElementType(), shape);
    int64_t rank = int64_t(shape.size());
    std::vector<bool> reduce(shape.size(), axes.empty());
    for (int64_t a : axes) {
      int64_t k = a < 0 ? a + rank : a;
      if (k < 0 || k >= rank || reduce[k])
        return fail("axis " + std::to_string(a) +
                    " is out of range or repeated");
      reduce[k] = true;
    }
    Shape out;
    for (int64_t d = 0; d < rank; ++d)
      if (!reduce[d])
        out.push_back(shape[d]);
      else if (intAttr(n, "keepdims", 1))
        out.push_back(1);
    return same(x.getElementType(), out);
  }
  if (op == "Attention")
    return attentionResult(n, in, types);
  return fail("is not supported by weft's ONNX import");
}

// Opset 23's Attention in the 4-D form torch exports SDPA in: Q [B, H, S,
// D], K and V [B, Hkv, S, D], an optional mask; Y [B, H, S, D] its one
// result. weft-raise-onnx makes it weft.attention (as it does the MatMul,
// Softmax, MatMul form) or refuses it.
std::string Importer::attentionResult(const onnx::NodeProto &n,
                                      const std::vector<const Slot *> &in,
                                      SmallVectorImpl<Type> &types) {
  const std::string where = nodeName(n);
  static const std::set<std::string> kKnown = {
      "is_causal", "kv_num_heads", "q_num_heads",      "qk_matmul_output_mode",
      "scale",     "softcap",      "softmax_precision"};
  for (const auto &a : n.attribute())
    if (!kKnown.count(a.name()))
      return where + ": attribute '" + a.name() +
             "' is not an attribute of Attention at opset 23";
  for (size_t i = 4; i < in.size(); ++i) // absent inputs may be listed empty
    if (in[i])
      return where + ": reads a key/value cache (past_key, past_value): weft "
                     "trains without one";
  if (n.output_size() != 1)
    return where + ": has " + std::to_string(n.output_size()) +
           " results; weft's attention yields Y alone (no present key/value "
           "or qk_matmul_output)";
  if (const auto *cap = findAttribute(n, "softcap"); cap && cap->f() != 0.0f)
    return where + ": softcap " + std::to_string(cap->f()) +
           ": weft's attention caps no scores";
  if (const auto *p = findAttribute(n, "softmax_precision");
      p && p->i() != onnx::TensorProto_DataType_FLOAT)
    return where + ": softmax_precision " + std::to_string(p->i()) +
           " is not float";
  if (intAttr(n, "is_causal", 0) != 0 && intAttr(n, "is_causal", 0) != 1)
    return where + ": attribute 'is_causal' = " +
           std::to_string(intAttr(n, "is_causal", 0)) + ", expected 0 or 1";
  for (size_t i = 0; i < 3; ++i)
    if (!in[i]->value)
      return where + ": input " + std::to_string(i) +
             " is a constant; weft raises attention over computed Q, K, V";
  auto shape = [&](size_t i) {
    return Shape(cast<RankedTensorType>(in[i]->value.getType()).getShape());
  };
  Shape q = shape(0), k = shape(1), v = shape(2);
  if (q.size() != 4 || k.size() != 4 || v.size() != 4)
    return where + ": takes Q, K, V of shapes " + shapeString(q) + ", " +
           shapeString(k) + ", " + shapeString(v) +
           "; weft imports the 4-D form torch exports ([batch, heads, seq, "
           "head_dim])";
  if (k[0] != q[0] || v[0] != q[0] || k[1] != v[1] || k[2] != v[2] ||
      k[3] != q[3] || v[3] != q[3] || k[2] != q[2] || q[1] % k[1])
    return where + ": Q " + shapeString(q) + ", K " + shapeString(k) +
           " and V " + shapeString(v) +
           " are not self-attention's [batch, heads, seq, head_dim], the "
           "key/value heads dividing the query heads";
  // The 3-D form's head counts, where given, are the 4-D inputs' own.
  for (auto [key, heads] :
       {std::pair{"q_num_heads", q[1]}, std::pair{"kv_num_heads", k[1]}})
    if (findAttribute(n, key) && intAttr(n, key, 0) != heads)
      return where + ": attribute '" + key +
             "' = " + std::to_string(intAttr(n, key, 0)) +
             " where its input has " + std::to_string(heads) + " heads";
  types.push_back(RankedTensorType::get(
      q, cast<RankedTensorType>(in[0]->value.getType()).getElementType()));
  return "";
}

std::string Importer::emit(const onnx::NodeProto &n,
                           const std::vector<const Slot *> &in) {
  SmallVector<Type> types;
  DictionaryAttr extra;
  std::string e = resultTypes(n, in, types, extra);
  if (!e.empty())
    return e;
  // Sizes weft's passes and runtime can hold (program/Program.h's limit).
  for (Type t : types) {
    Shape shape(cast<RankedTensorType>(t).getShape());
    int64_t numel = 1;
    for (int64_t d : shape)
      if (d < 1 || __builtin_mul_overflow(numel, d, &numel) ||
          numel > (int64_t(1) << 48))
        return nodeName(n) + ": a result of shape " + shapeString(shape) +
               (d < 1 ? " is empty; weft imports no empty tensors"
                      : " has more than 2^48 elements");
  }
  DictionaryAttr attrs = attributes(n, e);
  if (!attrs)
    return e;
  if (extra) { // the resolved attributes replace the node's own
    NamedAttrList merged(attrs);
    for (NamedAttribute a : extra)
      merged.set(a.getName(), a.getValue());
    attrs = merged.getDictionary(b.getContext());
  }
  SmallVector<Value> operands;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!in[i])
      continue; // an absent optional input
    operands.push_back(in[i]->constant
                           ? materialize(n.input(int(i)), *in[i]->constant)
                           : in[i]->value);
  }
  const bool sequence = n.op_type() == "SplitToSequence";
  auto op = OnnxNodeOp::create(
      b, NameLoc::get(b.getStringAttr(n.name())), types, operands,
      b.getStringAttr(sequence ? "Split" : n.op_type()),
      b.getStringAttr(n.name()), b.getI64IntegerAttr(opset), attrs);
  if (sequence) {
    Slot s;
    s.isSequence = true;
    s.sequence.assign(op.getResults().begin(), op.getResults().end());
    slots[n.output(0)] = s;
    return "";
  }
  if (int(op.getNumResults()) != n.output_size() &&
      n.op_type() != "LayerNormalization")
    return nodeName(n) + ": has " + std::to_string(n.output_size()) +
           " outputs, expected " + std::to_string(op.getNumResults());
  for (unsigned i = 0; i < op.getNumResults(); ++i) {
    if (n.output(int(i)).empty())
      continue; // an optional output not asked for
    Slot s;
    s.value = op.getResult(i);
    slots[n.output(int(i))] = s;
  }
  return "";
}

// The type of each attribute weft reads: one of another type is refused
// (read as its default, it would be another model), as is a repeated name.
std::string checkAttributes(const onnx::NodeProto &n,
                            const std::string &where) {
  static const std::map<std::string, int> kTypes = {
      {"axis", onnx::AttributeProto::INT},
      {"allowzero", onnx::AttributeProto::INT},
      {"transA", onnx::AttributeProto::INT},
      {"transB", onnx::AttributeProto::INT},
      {"keepdims", onnx::AttributeProto::INT},
      {"exclusive", onnx::AttributeProto::INT},
      {"reverse", onnx::AttributeProto::INT},
      {"batch_dims", onnx::AttributeProto::INT},
      {"to", onnx::AttributeProto::INT},
      {"start", onnx::AttributeProto::INT},
      {"end", onnx::AttributeProto::INT},
      {"num_outputs", onnx::AttributeProto::INT},
      {"stash_type", onnx::AttributeProto::INT},
      {"upper", onnx::AttributeProto::INT},
      {"noop_with_empty_axes", onnx::AttributeProto::INT},
      {"is_causal", onnx::AttributeProto::INT},
      {"softmax_precision", onnx::AttributeProto::INT},
      {"qk_matmul_output_mode", onnx::AttributeProto::INT},
      {"scale", onnx::AttributeProto::FLOAT},
      {"softcap", onnx::AttributeProto::FLOAT},
      {"q_num_heads", onnx::AttributeProto::INT},
      {"kv_num_heads", onnx::AttributeProto::INT},
      {"perm", onnx::AttributeProto::INTS},
      {"axes", onnx::AttributeProto::INTS},
      {"starts", onnx::AttributeProto::INTS},
      {"ends", onnx::AttributeProto::INTS},
      {"split", onnx::AttributeProto::INTS},
      {"alpha", onnx::AttributeProto::FLOAT},
      {"beta", onnx::AttributeProto::FLOAT},
      {"epsilon", onnx::AttributeProto::FLOAT},
      {"approximate", onnx::AttributeProto::STRING},
      {"value", onnx::AttributeProto::TENSOR},
      {"value_int", onnx::AttributeProto::INT},
      {"value_ints", onnx::AttributeProto::INTS},
      {"value_float", onnx::AttributeProto::FLOAT},
      {"value_floats", onnx::AttributeProto::FLOATS}};
  std::set<std::string> seen;
  for (const auto &a : n.attribute()) {
    if (!seen.insert(a.name()).second)
      return where + ": attribute '" + a.name() + "' appears twice";
    auto it = kTypes.find(a.name());
    if (it != kTypes.end() && int(a.type()) != it->second)
      return where + ": attribute '" + a.name() + "' has ONNX attribute type " +
             std::to_string(int(a.type())) + ", expected " +
             std::to_string(it->second);
  }
  return "";
}

// A node weft's own readers accept is held to ONNX's schema last, so their
// messages (an attribute that became an input at opset 13) come first.
std::string Importer::node(const onnx::NodeProto &n) {
  if (std::string e = readNode(n); !e.empty())
    return e;
  return onnximport::checkNodeAttributes(n, opset, nodeName(n));
}

std::string Importer::readNode(const onnx::NodeProto &n) {
  if (n.output_size() < 1 || n.output(0).empty())
    return nodeName(n) + ": has no output";
  if (std::string e = checkAttributes(n, nodeName(n)); !e.empty())
    return e;
  // SSA: an output names a new value (a redefinition would leave readers
  // of a materialised constant with the old one).
  for (const std::string &out : n.output())
    if (!out.empty() && (slots.count(out) || params.count(out)))
      return nodeName(n) + ": output '" + out +
             "' redefines a value; ONNX graphs define each name once";
  // An absent optional input before a present one shifts the operands
  // weft keeps; refused rather than read in the wrong place.
  for (int i = 0; i + 1 < n.input_size(); ++i)
    if (n.input(i).empty())
      for (int j = i + 1; j < n.input_size(); ++j)
        if (!n.input(j).empty())
          return nodeName(n) + ": input " + std::to_string(i) +
                 " is absent but input " + std::to_string(j) +
                 " is given; weft does not import that";
  if (!n.domain().empty() && n.domain() != "ai.onnx")
    return nodeName(n) + ": domain '" + n.domain() +
           "' is not supported (only the default ONNX domain)";
  std::vector<const Slot *> in;
  bool allConstant = true;
  for (const std::string &name : n.input()) {
    if (name.empty()) {
      in.push_back(nullptr);
      continue;
    }
    if (params.count(name) && !slots.count(name)) {
      Slot s;
      s.value = param(name);
      slots[name] = s;
    }
    auto it = slots.find(name);
    if (it == slots.end())
      return nodeName(n) + ": input '" + name +
             "' is not defined before it (the graph must be topologically "
             "sorted)";
    in.push_back(&it->second);
    allConstant &= bool(it->second.constant);
  }
  const std::string &op = n.op_type();
  // Sequences: SequenceAt of a split at a constant position.
  if (op == "SequenceAt") {
    if (in.size() != 2 || !in[0] || !in[0]->isSequence || !in[1] ||
        !in[1]->constant || in[1]->constant->numel() != 1 ||
        in[1]->constant->isFloat())
      return nodeName(n) + ": weft imports SequenceAt of a SplitToSequence "
                           "at a constant position only";
    int64_t i = in[1]->constant->ints[0], size = in[0]->sequence.size();
    if (i < -size || i >= size)
      return nodeName(n) + ": position " + std::to_string(i) +
             " is out of range for a sequence of " + std::to_string(size);
    Slot s;
    s.value = in[0]->sequence[size_t(i < 0 ? i + size : i)];
    slots[n.output(0)] = s;
    return "";
  }
  for (const Slot *s : in)
    if (s && s->isSequence)
      return nodeName(n) + ": takes a sequence; weft imports sequences only "
                           "into SequenceAt";
  if (std::optional<std::string> e = tokenTypesNode(n, in))
    return *e;
  if (std::optional<std::string> e = paddedNode(n, in))
    return *e;
  // Shape of an imported value: its static shape.
  if (op == "Shape" && !in.empty() && in[0] && !in[0]->constant) {
    HostTensor t;
    const auto *end = findAttribute(n, "end");
    onnximport::shapeTensor(
        shapeOf(in[0]->value), intAttr(n, "start", 0),
        end ? std::optional<int64_t>(end->i()) : std::nullopt, t);
    Slot s;
    s.constant = std::move(t);
    slots[n.output(0)] = s;
    return "";
  }
  // CastLike of a constant reads only the other input's type: a stand-in
  // of that type takes its place.
  Slot like;
  if (op == "CastLike" && in.size() == 2 && in[0] && in[0]->constant && in[1] &&
      !in[1]->constant && !in[1]->isSequence) {
    Type t = cast<RankedTensorType>(in[1]->value.getType()).getElementType();
    like.constant.emplace();
    like.constant->type = t.isF64()           ? HostType::F64
                          : isa<FloatType>(t) ? HostType::F32
                          : t.isInteger(1)    ? HostType::Bool
                          : t.isInteger(32)   ? HostType::I32
                                              : HostType::I64;
    in[1] = &like;
    allConstant = true;
  }
  if ((allConstant || op == "Constant") && onnximport::canFold(op)) {
    std::vector<const HostTensor *> values;
    for (const Slot *s : in)
      values.push_back(s ? &*s->constant : nullptr);
    std::vector<HostTensor> outs;
    std::string e = onnximport::foldNode(n, opset, values, outs);
    if (!e.empty())
      return e + " (opset " + std::to_string(opset) + ")";
    for (size_t i = 0; i < outs.size() && int(i) < n.output_size(); ++i) {
      Slot s;
      s.constant = std::move(outs[i]);
      slots[n.output(int(i))] = s;
    }
    return "";
  }
  return emit(n, in);
}

// A node reading the token_type_ids input: a table's lookup by them, whose
// ids are the step's (weft-raise-onnx makes it a position_embedding with
// token_types); any other reading is refused. nullopt: no such input.
std::optional<std::string>
Importer::tokenTypesNode(const onnx::NodeProto &n,
                         const std::vector<const Slot *> &in) {
  int at = -1;
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i] && in[i]->tokenTypes)
      at = int(i);
  if (at < 0)
    return std::nullopt;
  if (n.op_type() != "Gather" || at != 1 || !in[0] || in[0]->constant ||
      in[0]->padded || intAttr(n, "axis", 0) != 0)
    return nodeName(n) +
           " reads the token_type_ids input; weft reads token_type_ids as "
           "the rows of a table (Gather(table, token_type_ids) along axis "
           "0, BERT's segment embedding) only";
  Slot ids;
  ids.value = materialize(n.input(1), *in[1]->tokenTypes);
  ids.value.getDefiningOp()->setAttr(attrname::kTokenTypes, b.getUnitAttr());
  std::vector<const Slot *> operands = in;
  operands[1] = &ids;
  return emit(n, operands);
}

// A node reading a value computed from the attention_mask input: its
// Shape is static; computed from it and constants alone, it is one too
// (PaddingMask.h); read beside the model's values, it is materialised as
// a constant marked with its padded value. nullopt: no such input.
std::optional<std::string>
Importer::paddedNode(const onnx::NodeProto &n,
                     const std::vector<const Slot *> &in) {
  bool padded = false, computed = false;
  for (const Slot *s : in)
    if (s) {
      padded |= bool(s->padded);
      computed |= !s->constant && !s->padded;
    }
  if (!padded)
    return std::nullopt;
  if (n.op_type() == "Shape" && in[0] && in[0]->padded) {
    HostTensor t;
    const auto *end = findAttribute(n, "end");
    onnximport::shapeTensor(
        in[0]->padded->ifTokens.shape, intAttr(n, "start", 0),
        end ? std::optional<int64_t>(end->i()) : std::nullopt, t);
    Slot s;
    s.constant = std::move(t);
    slots[n.output(0)] = s;
    return "";
  }
  if (!computed) {
    std::vector<const HostTensor *> constantsIn;
    std::vector<const onnximport::PaddedValue *> paddedIn;
    for (const Slot *s : in) {
      constantsIn.push_back(s && s->constant ? &*s->constant : nullptr);
      paddedIn.push_back(s && s->padded ? &*s->padded : nullptr);
    }
    std::vector<onnximport::PaddedValue> outs;
    if (std::string e = onnximport::foldPadded(n, nodeName(n), opset,
                                               constantsIn, paddedIn, outs);
        !e.empty())
      return e;
    Slot s;
    s.padded = std::move(outs[0]);
    slots[n.output(0)] = std::move(s);
    return "";
  }
  std::vector<Slot> materialized(in.size());
  std::vector<const Slot *> operands = in;
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i] && in[i]->padded) {
      if (std::string e = materializePadded(n.input(int(i)), *in[i]->padded,
                                            materialized[i].value);
          !e.empty())
        return nodeName(n) + " reads " + e;
      operands[i] = &materialized[i];
    }
  return emit(n, operands);
}

std::string Importer::run(const onnx::ModelProto &model,
                          const std::string &name,
                          OwningOpRef<ModuleOp> &module) {
  // IR versions 3 (ONNX 1.0, opset 7) to 12: a 0 (unset) or a version
  // past ONNX's would have the fields read in another meaning.
  if (model.ir_version() < 3 || model.ir_version() > 12)
    return "the model's ir_version is " + std::to_string(model.ir_version()) +
           "; weft reads ONNX IR versions 3 to 12";
  for (const auto &o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx")
      opset = o.version();
  if (opset < kMinOpset || opset > kMaxOpset)
    return "the model's ONNX opset is " + std::to_string(opset) +
           "; weft imports opsets " + std::to_string(kMinOpset) + " to " +
           std::to_string(kMaxOpset);
  const onnx::GraphProto &g = model.graph();
  if (g.sparse_initializer_size())
    return "sparse initializer '" + g.sparse_initializer(0).values().name() +
           "' is not supported";
  // Float initializers are parameters; others fold as constants, and so
  // does what a torch export's signature does not call a PARAMETER (its
  // buffers and constant tensors, which PyTorch does not train).
  const TorchExportSignature signature =
      torchExportSignature<onnx::GraphProto, onnx::StringStringEntryProto>(g);
  if (!signature.Mutated.empty())
    return "buffer '" + *signature.Mutated.begin() +
           "' is updated by the forward (the export's signature says "
           "BUFFER_MUTATION); weft holds buffers constant: export the model "
           "in eval mode";
  std::set<std::string> initializerNames;
  for (const auto &t : g.initializer()) {
    HostType ht;
    if (!initializerNames.insert(t.name()).second)
      return "initializer '" + t.name() +
             "' appears twice in graph.initializer: which values the model "
             "holds is ambiguous";
    bool isFloat = t.data_type() == onnx::TensorProto_DataType_FLOAT ||
                   t.data_type() == onnx::TensorProto_DataType_DOUBLE;
    if (isFloat && !isOnnxBuffer(t.name()) && signature.isWeight(t.name())) {
      for (int64_t d : t.dims())
        if (d <= 0)
          return "initializer '" + t.name() + "' has dim " + std::to_string(d);
      // Its values are read by weft-run --load; that they are all there,
      // and where the model says, is checked now.
      if (std::string e = checkWeightDataIn(t, modelDir); !e.empty())
        return e;
      params[t.name()] = &t;
      continue;
    }
    if (!onnximport::hostTypeOf(t.data_type(), ht))
      return "initializer '" + t.name() + "' has ONNX type " +
             onnximport::onnxTypeString(t.data_type()) +
             ", which weft does not import" + halfPrecisionHint(t.data_type());
    Slot s;
    s.constant.emplace();
    std::string e = onnximport::tensorFromProto(t, *s.constant, modelDir);
    if (!e.empty())
      return "initializer '" + t.name() + "': " + e;
    slots[t.name()] = s;
  }
  std::vector<const onnx::ValueInfoProto *> inputs;
  for (const auto &i : g.input())
    if (!params.count(i.name()) && !slots.count(i.name()))
      inputs.push_back(&i);
  for (const auto *i : inputs)
    if (i->type().has_tensor_type() &&
        isFloatElement(i->type().tensor_type().elem_type()))
      return tensorGraph(g, inputs, name, module);
  if (inputs.empty())
    return "the graph has no inputs (every value is an initializer or a "
           "constant); weft computes from token ids or, forward-only, float "
           "tensor inputs";
  // Hugging Face's attention_mask beside the ids (the attention's key
  // padding) and BERT's token_type_ids (its segment embedding's rows),
  // given each step by weft-run --attention-mask and --token-type-ids.
  const onnx::ValueInfoProto *mask = nullptr, *types = nullptr;
  for (size_t i = inputs.size(); i-- > 0 && inputs.size() > 1;) {
    const std::string &n = inputs[i]->name();
    if (n == "attention_mask" || n == "token_type_ids") {
      (n == "attention_mask" ? mask : types) = inputs[i];
      inputs.erase(inputs.begin() + std::ptrdiff_t(i));
    }
  }
  if (types && !options.forwardOnly && !options.givenTargets)
    return "graph input 'token_type_ids': train it on given targets (--loss "
           "cross-entropy, with --classes N for a classifier), fed by "
           "weft-run --tokens, --targets and --token-type-ids (or compile "
           "it --forward-only)";
  if (mask && !options.forwardOnly && !options.givenTargets)
    return "graph input 'attention_mask' pads rows: train it on given "
           "targets, -100 at the padding (--loss cross-entropy, with "
           "--classes N for a classifier), fed by weft-run --tokens, "
           "--targets and --attention-mask (or compile it --forward-only)";
  if (inputs.size() != 1) {
    std::string names;
    for (const auto *i : inputs)
      names += (names.empty() ? "'" : ", '") + i->name() + "'";
    return "the graph has " + std::to_string(inputs.size()) + " inputs (" +
           names +
           "); weft imports models whose inputs are the token ids [batch, "
           "seq] and, optionally, an attention_mask and token_type_ids of "
           "that shape (export without position_ids), or, forward-only, "
           "float tensor inputs";
  }
  // The output the program computes: the one named by --onnx-output, else
  // the only one (forward-only: the first, with a note). A graph without
  // outputs computes nothing to train on (the ONNX checker refuses it too).
  if (g.output_size() == 0)
    return "the graph declares no outputs (graph.output is empty): weft "
           "trains on, or computes, a graph output";
  std::string outputs;
  int chosen = options.output.empty() ? 0 : -1;
  for (int i = 0; i < g.output_size(); ++i) {
    outputs += std::string(i ? ", '" : "'") + g.output(i).name() + "'";
    if (g.output(i).name() == options.output)
      chosen = i;
  }
  if (chosen < 0)
    return "the graph has no output '" + options.output +
           "' (its outputs: " + outputs + ")";
  if (g.output_size() > 1 && options.output.empty() && !options.forwardOnly)
    return "the graph has " + std::to_string(g.output_size()) + " outputs (" +
           outputs + "); name the logits to train on with --onnx-output";
  if (g.output_size() > 1 && options.output.empty() && options.notes)
    options.notes->push_back(
        "the graph has " + std::to_string(g.output_size()) + " outputs (" +
        outputs + "); the program computes the first, '" + g.output(0).name() +
        "' (--onnx-output names another)");

  // The bound [batch, seq]: the flags, else the model's own dims.
  const auto &dims = inputs[0]->type().tensor_type().shape();
  int64_t batch = options.batch, seq = options.seq;
  if (dims.dim_size() == 2) {
    if (!batch)
      batch = dims.dim(0).has_dim_value() ? dims.dim(0).dim_value()
                                          : options.symbolicBatch;
    if (!seq && dims.dim(1).has_dim_value())
      seq = dims.dim(1).dim_value();
  }
  Location loc = NameLoc::get(b.getStringAttr(name));
  module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(module->getBody());
  floatType = options.f64 ? Type(b.getF64Type()) : Type(b.getF32Type());
  if (batch < 0 || seq < 0 || batch > (int64_t(1) << 24) ||
      seq > (int64_t(1) << 24))
    return "graph input '" + inputs[0]->name() + "' of [" +
           std::to_string(batch) + ", " + std::to_string(seq) +
           "]: weft imports batch and seq of 1 to 2^24";
  auto ids = RankedTensorType::get(
      {std::max<int64_t>(batch, 1), std::max<int64_t>(seq, 1)}, b.getI32Type());
  // The result type is the loss's, or (forward-only) set below.
  SmallVector<Type> args{ids};
  if (!options.forwardOnly)
    args.push_back(ids);
  auto fn = func::FuncOp::create(
      b, loc, "forward",
      b.getFunctionType(args, {RankedTensorType::get({}, floatType)}));
  fn->setAttr(attrname::kModel, b.getStringAttr(name));
  Block *body = fn.addEntryBlock();
  b.setInsertionPointToEnd(body);
  std::string e = graphInput(*inputs[0], body);
  if (!e.empty())
    return e;
  if (mask &&
      !(e = maskInput(*mask, ids.getShape()[0], ids.getShape()[1])).empty())
    return e;
  if (types &&
      !(e = typesInput(*types, ids.getShape()[0], ids.getShape()[1])).empty())
    return e;
  for (const auto &n : g.node()) {
    e = node(n);
    if (!e.empty())
      return e;
  }
  const std::string &outName = g.output(chosen).name();
  auto it = slots.find(outName);
  if (it == slots.end() || it->second.constant || it->second.isSequence)
    return "graph output '" + outName +
           "' does not depend on the input; weft trains on logits";
  Value logits = it->second.value;
  auto lt = cast<RankedTensorType>(logits.getType());
  // One row per sample (a classifier's scores, a pooled embedding):
  // computed forward-only, or trained on given labels.
  const bool rowOutput = (options.forwardOnly || options.givenTargets) &&
                         lt.getRank() == 2 &&
                         lt.getShape()[0] == ids.getShape()[0] &&
                         isa<FloatType>(lt.getElementType());
  const bool perSample = rowOutput && !options.forwardOnly;
  // A regression trains any [batch, ...] float output on float targets.
  const bool regression = options.regression && !options.forwardOnly;
  auto typeText = [&] {
    std::string s;
    llvm::raw_string_ostream os(s);
    os << lt;
    return s;
  };
  if (regression &&
      (lt.getRank() < 1 || lt.getShape()[0] != ids.getShape()[0] ||
       !isa<FloatType>(lt.getElementType())))
    return "graph output '" + outName + "' has type " + typeText() +
           "; --loss mse trains an output [batch, ...] of float type";
  if (!regression && !rowOutput &&
      (lt.getRank() != 3 || lt.getShape()[0] != ids.getShape()[0] ||
       lt.getShape()[1] != ids.getShape()[1] ||
       !isa<FloatType>(lt.getElementType())))
    return "graph output '" + outName + "' has type " + typeText() +
           (options.forwardOnly
                ? "; weft computes outputs [batch, seq, N] or [batch, N] of "
                  "float type"
            : options.givenTargets
                ? "; weft trains cross-entropy on given targets over scores "
                  "[batch, classes] (one target per sample) or [batch, seq, "
                  "classes] of float type"
                : std::string("; weft trains ") +
                      (options.maskedLm ? "masked-LM" : "next-token") +
                      " cross-entropy on logits [batch, seq, vocab] (a "
                      "classifier's [batch, classes] trains on given labels: "
                      "--loss cross-entropy --classes N; a regression's "
                      "output: --loss mse)");
  // Next-token cross-entropy reads the output as scores over the
  // vocabulary: the rows of the table the input ids index. A model without
  // its LM head (hidden states) would otherwise train as if each hidden
  // unit were a token.
  std::optional<int64_t> vocab;
  std::string table;
  // The ids, possibly through views (GPT2Model reshapes them to [-1, S]).
  auto isIds = [&](Value v) {
    while (auto view = v.getDefiningOp<OnnxNodeOp>()) {
      if (view.getOpType() != "Reshape" && view.getOpType() != "Cast" &&
          view.getOpType() != "Identity")
        return false;
      v = view->getOperand(0);
    }
    return v == body->getArgument(0);
  };
  body->walk([&](OnnxNodeOp gather) {
    if (vocab || gather.getOpType() != "Gather" ||
        gather->getNumOperands() != 2 || !isIds(gather->getOperand(1)))
      return;
    if (auto p = gather->getOperand(0).getDefiningOp<ParamOp>()) {
      vocab = p.getType().getShape()[0];
      table = p.getName().str();
    }
  });
  if (!vocab)
    return "no initializer is indexed by the input ids ('" + inputs[0]->name() +
           "'): weft finds the vocabulary from the token embedding table";
  if (std::string e = twinTables(body, table); !e.empty())
    return e;
  if (std::string e = frozenWeights(
          body,
          cast<RankedTensorType>(paramValues[table].getType()).getShape()[1]);
      !e.empty())
    return e;
  if (options.classes && options.classes != lt.getShape().back())
    return "graph output '" + outName + "' scores " +
           std::to_string(lt.getShape().back()) + " classes, not --classes " +
           std::to_string(options.classes);
  if (options.forwardOnly) {
    // Whatever the output is (logits, or an encoder's hidden states), the
    // program bounds token ids by the table.
    fn->setAttr(attrname::kVocab, b.getI64IntegerAttr(*vocab));
    fn.setType(b.getFunctionType(args, {logits.getType()}));
  } else if (regression) {
    // Float targets of the output's own shape; the token ids keep the
    // embedding's bound (format version 11).
    fn->setAttr(attrname::kLabels, b.getI64IntegerAttr(*vocab));
    body->getArgument(1).setType(lt);
    args[1] = lt;
    fn.setType(b.getFunctionType(args, fn.getResultTypes()));
  } else if (perSample || lt.getShape()[2] != *vocab) {
    // Given targets are labels of the output's classes, not token ids:
    // the program bounds them by those (format version 11). The classes
    // are stated: hidden states (a model without its LM head) are no
    // classifier's scores.
    // (A --classes other than the width is refused above.)
    const int64_t classes = lt.getShape().back();
    const std::string shape = shapeString(shapeOf(logits));
    if (options.givenTargets && !options.classes)
      return "graph output '" + outName + "' is " + shape +
             ", not logits over the vocabulary (the token embedding '" + table +
             "' has " + std::to_string(*vocab) +
             " rows): if it is a classifier's scores, state its " +
             std::to_string(classes) + " classes with --classes " +
             std::to_string(classes) + " (labels in [0, " +
             std::to_string(classes) +
             ")); hidden states (a model without its LM head) are not";
    if (options.givenTargets) {
      fn->setAttr(attrname::kLabels, b.getI64IntegerAttr(*vocab));
      if (options.notes)
        options.notes->push_back(
            "graph output '" + outName + "' scores " + std::to_string(classes) +
            " classes" + (perSample ? " per sample" : " per token") +
            ": the --targets of weft-run are labels in [0, " +
            std::to_string(classes) + ") or -100, " +
            (perSample ? "[samples]" : "[samples, seq]"));
      if (perSample) {
        auto labels =
            RankedTensorType::get({ids.getShape()[0]}, b.getI32Type());
        body->getArgument(1).setType(labels);
        args[1] = labels;
        fn.setType(b.getFunctionType(args, fn.getResultTypes()));
      }
    } else
      return "graph output '" + outName + "' is " + shape +
             ", but the token embedding '" + table + "' has " +
             std::to_string(*vocab) +
             " rows: the output is not logits over the vocabulary (a model "
             "without its LM head?); weft trains " +
             (options.maskedLm ? "masked-LM" : "next-token") +
             " cross-entropy on logits (a token classifier's scores train on "
             "given labels: --loss cross-entropy --classes N)";
  }
  // Shapes the model declares (its output, value_info) must be the ones
  // weft computed: a mismatch is an initializer of another shape.
  if (std::string e = checkDeclared(g.output(chosen), /*isOutput=*/true);
      !e.empty())
    return e;
  for (const auto &info : g.value_info())
    if (std::string e = checkDeclared(info); !e.empty())
      return e;
  if (options.forwardOnly) {
    func::ReturnOp::create(b, loc, logits);
    return "";
  }
  Location lossLoc = NameLoc::get(b.getStringAttr("loss"));
  Value loss =
      regression
          ? MseLossOp::create(b, lossLoc, logits, body->getArgument(1))
                .getResult()
          : CrossEntropyOp::create(b, lossLoc, logits, body->getArgument(1),
                                   UnitAttr(), IntegerAttr())
                .getResult();
  func::ReturnOp::create(b, loc, loss);
  return "";
}

// Float constants shaped and used like weights: torch.onnx's optimize=True
// folds a parameter whose use does not depend on the input (GPT-2's
// position table, gathered at arange(seq)) into such a constant, which
// weft would hold fixed while PyTorch trains it. A table (two or more dims
// over 1) entering a MatMul or Gemm beside a computed value, gathered by a
// computed index, or added to the hidden states (its last dim the token
// embedding's) is refused by name; a mask (0 and large negatives) or a
// fill (one value) is not.
std::string Importer::frozenWeights(Block *body, int64_t hidden) {
  if (options.freezeConstants)
    return "";
  auto computed = [](Value v) { return !v.getDefiningOp<ConstantOp>(); };
  std::string error;
  body->walk([&](ConstantOp c) {
    auto type = cast<RankedTensorType>(c.getType());
    if (!error.empty() || !isa<FloatType>(type.getElementType()) ||
        llvm::count_if(type.getShape(), [](int64_t d) { return d > 1; }) < 2)
      return;
    // A fill (every value equal) is no trained table.
    auto values = dyn_cast<DenseElementsAttr>(c.getValue());
    if (values &&
        (values.isSplat() || llvm::all_equal(values.getValues<APFloat>())))
      return;
    const bool maskLike =
        values && llvm::all_of(values.getValues<APFloat>(), [](APFloat x) {
          double d = x.convertToDouble();
          return d == 0.0 || d <= -1e4;
        });
    for (OpOperand &use : c->getUses()) {
      auto node = dyn_cast<OnnxNodeOp>(use.getOwner());
      if (!node)
        continue;
      StringRef op = node.getOpType();
      const bool beside = llvm::any_of(node->getOperands(), computed);
      std::string how;
      if ((op == "MatMul" || op == "Gemm") && beside)
        how = "enters a " + op.str() + " beside a computed value";
      else if (op == "Gather" && use.getOperandNumber() == 0 && beside)
        how = "is gathered by a computed index";
      else if ((op == "Add" || op == "Sub") && beside && !maskLike &&
               type.getShape().back() == hidden)
        how = "is added to the hidden states";
      if (how.empty())
        continue;
      std::string name = "";
      if (auto loc = dyn_cast<NameLoc>(c.getLoc()))
        name = loc.getName().str();
      error = "float constant '" + name + "' " +
              shapeString(Shape(type.getShape())) + " " + how + " (node '" +
              node.getNode().str() +
              "') like a weight, but is no parameter: weft would hold it "
              "fixed while the rest trains (torch.onnx's default "
              "optimize=True folds a parameter into such a constant). Export "
              "with optimize=False, or give --freeze-constants to keep it "
              "fixed on purpose";
      return;
    }
  });
  return error;
}

// A parameter holding the token embedding's values again, as stored or
// transposed (a TorchScript export's copy of a tied head): refused until
// the user says which model is meant; tied, its uses read the table (through
// a Transpose where the copy was transposed).
std::string Importer::twinTables(Block *body, const std::string &table) {
  auto tableIt = paramValues.find(table);
  if (tableIt == paramValues.end())
    return "";
  auto tableOp = tableIt->second.getDefiningOp<ParamOp>();
  std::vector<std::string> names;
  for (const auto &entry : paramValues)
    if (entry.getKey() != table)
      names.push_back(entry.getKey().str());
  std::sort(names.begin(), names.end());
  int twins = 0;
  for (const std::string &name : names) {
    onnximport::Twin twin;
    if (std::string e =
            onnximport::twinOf(*params[table], *params[name], modelDir, twin);
        !e.empty())
      return e;
    if (twin == onnximport::Twin::None)
      continue;
    ++twins;
    const bool transposed = twin == onnximport::Twin::Transposed;
    const std::string pair = "initializer '" + name +
                             "' holds the values of "
                             "the token embedding '" +
                             table + "'" + (transposed ? " transposed" : "");
    using Tables = OnnxImportOptions::TwinTables;
    // Forward-only, the copy computes what the table would: nothing trains.
    if (options.twinTables == Tables::Ask && options.forwardOnly)
      continue;
    if (options.twinTables == Tables::Ask)
      return pair +
             ": an exporter's copy of a tied head (torch.onnx's TorchScript "
             "exporter writes one) or two tensors that start equal? Say which "
             "model is meant: --tie-embeddings trains them as one tensor "
             "(tie_word_embeddings), --untie-embeddings as two";
    if (options.twinTables == Tables::Untie) {
      if (options.notes)
        options.notes->push_back(pair + ": trained as a second tensor "
                                        "(--untie-embeddings)");
      continue;
    }
    // Tied: the table is read from the start of the function.
    tableOp->moveBefore(body, body->begin());
    Value tied = tableOp;
    if (transposed) {
      b.setInsertionPointAfter(tableOp);
      auto type = cast<RankedTensorType>(tableOp.getType());
      tied =
          OnnxNodeOp::create(b, NameLoc::get(b.getStringAttr(name)),
                             TypeRange{RankedTensorType::get(
                                 {type.getShape()[1], type.getShape()[0]},
                                 type.getElementType())},
                             ValueRange{tableOp}, b.getStringAttr("Transpose"),
                             b.getStringAttr(name), b.getI64IntegerAttr(opset),
                             b.getDictionaryAttr(b.getNamedAttr(
                                 "perm", b.getDenseI64ArrayAttr({1, 0}))))
              .getResult(0);
    }
    Operation *copy = paramValues[name].getDefiningOp();
    copy->getResult(0).replaceAllUsesWith(tied);
    copy->erase();
    paramValues.erase(name);
    params.erase(name);
    if (options.notes)
      options.notes->push_back(pair + ": trained as the table itself "
                                      "(--tie-embeddings)");
  }
  b.setInsertionPointToEnd(body);
  // A flag about a copy the model does not hold says nothing: refused, so
  // a model is not taken for tied or untied by a flag that did nothing.
  if (!twins && options.twinTables != OnnxImportOptions::TwinTables::Ask)
    return std::string(options.twinTables == OnnxImportOptions::TwinTables::Tie
                           ? "--tie-embeddings"
                           : "--untie-embeddings") +
           ": no initializer holds the values of the token embedding '" +
           table + "' (as stored or transposed); the model is as it is";
  return "";
}

// The shapes the model declares for a value (an output, value_info) must
// be the ones weft computed: a mismatch is an initializer of another shape.
std::string Importer::checkDeclared(const onnx::ValueInfoProto &info,
                                    bool isOutput) {
  auto slot = slots.find(info.name());
  if (slot == slots.end() || !slot->second.value ||
      !info.type().has_tensor_type() || !info.type().tensor_type().has_shape())
    return "";
  Shape got = shapeOf(slot->second.value);
  // A float value declared of an integer or bool type: another model than
  // the one that declared it (comparisons computed from the input are
  // float masks inside weft, so only float-typed declarations are held to
  // a float value's type).
  const int declared = info.type().tensor_type().elem_type();
  const bool floatDeclared = declared == onnx::TensorProto_DataType_FLOAT ||
                             declared == onnx::TensorProto_DataType_DOUBLE ||
                             declared == onnx::TensorProto_DataType_FLOAT16 ||
                             declared == onnx::TensorProto_DataType_BFLOAT16;
  if (isOutput && declared != onnx::TensorProto_DataType_UNDEFINED &&
      !floatDeclared &&
      isa<FloatType>(getElementTypeOrSelf(slot->second.value)))
    return "graph output '" + info.name() + "' is declared of ONNX type " +
           onnximport::onnxTypeString(declared) + " but computes float values";
  const auto &dims = info.type().tensor_type().shape();
  if (dims.dim_size() != int(got.size()))
    return "value '" + info.name() + "' is declared of rank " +
           std::to_string(dims.dim_size()) + " but computes " +
           shapeString(got) + " (an initializer of another shape?)";
  for (int d = 0; d < dims.dim_size(); ++d)
    if (dims.dim(d).has_dim_value() && dims.dim(d).dim_value() != got[d])
      return "value '" + info.name() + "' is declared with dim " +
             std::to_string(d) + " = " +
             std::to_string(dims.dim(d).dim_value()) + " but computes " +
             shapeString(got) + " (an initializer of another shape?)";
  return "";
}

// A graph of float inputs (format version 8), forward-only: `@forward(x,
// ...) -> (y, ...)`, each argument and result named after its graph input
// and output (weft.input, weft.output), every dim static.
std::string
Importer::tensorGraph(const onnx::GraphProto &g,
                      const std::vector<const onnx::ValueInfoProto *> &inputs,
                      const std::string &name, OwningOpRef<ModuleOp> &module) {
  Location loc = NameLoc::get(b.getStringAttr(name));
  module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(module->getBody());
  floatType = options.f64 ? Type(b.getF64Type()) : Type(b.getF32Type());
  SmallVector<Type> args;
  const char *flags[] = {"--batch", "--seq"};
  const int64_t bound[] = {options.batch, options.seq};
  // --batch and --seq bind the symbolic dims 0 and 1 of the inputs; a
  // dim name is one size wherever it appears (else refused by name).
  std::map<std::string, std::pair<int64_t, std::string>> symbols;
  for (const auto *input : inputs) {
    if (!input->type().has_tensor_type() ||
        !input->type().tensor_type().has_shape())
      continue;
    const auto &dims = input->type().tensor_type().shape();
    for (int d = 0; d < std::min(dims.dim_size(), 2); ++d) {
      const auto &dim = dims.dim(d);
      if (dim.has_dim_value() || dim.dim_param().empty() || !bound[d])
        continue;
      std::string where = std::string(flags[d]) + " (dim " + std::to_string(d) +
                          " of '" + input->name() + "')";
      auto [it, fresh] =
          symbols.emplace(dim.dim_param(), std::make_pair(bound[d], where));
      if (!fresh && it->second.first != bound[d])
        return "the symbolic dim '" + dim.dim_param() + "' is " +
               std::to_string(it->second.first) + " by " + it->second.second +
               " but " + std::to_string(bound[d]) + " by " + where +
               "; one name is one size";
    }
  }
  for (const auto *input : inputs) {
    const std::string what = "graph input '" + input->name() + "'";
    if (input->name() == "tokens" || input->name() == "targets")
      return what + " is a float tensor with the name of weft's token ids; "
                    "rename it";
    if (!options.forwardOnly)
      return what +
             " is a float tensor: weft trains models whose input is token "
             "ids; compute this graph's outputs with --forward-only";
    if (!input->type().has_tensor_type())
      return what + " is not a tensor";
    const auto &tt = input->type().tensor_type();
    // float32 widens exactly to an f64 program; nothing narrows silently.
    const int code = tt.elem_type();
    if (code != onnx::TensorProto_DataType_FLOAT &&
        !(code == onnx::TensorProto_DataType_DOUBLE && options.f64))
      return what + " has ONNX element type " + std::to_string(code) +
             (code == onnx::TensorProto_DataType_DOUBLE
                  ? " (double): compile it with --dtype f64"
              : isFloatElement(code)
                  ? ": weft reads float32 (or, with --dtype f64, "
                    "double) tensor inputs"
                  : ": a graph of float inputs reads float tensors "
                    "only (token ids are the input of a model of "
                    "one input)");
    if (!tt.has_shape())
      return what + " has no shape";
    Shape shape;
    for (int d = 0; d < tt.shape().dim_size(); ++d) {
      const auto &dim = tt.shape().dim(d);
      int64_t v = dim.has_dim_value() ? dim.dim_value() : 0;
      auto symbol = symbols.find(dim.dim_param());
      if (!dim.has_dim_value() && symbol != symbols.end())
        v = symbol->second.first;
      else if (!dim.has_dim_value() && d < 2 && bound[d])
        v = bound[d];
      if (!dim.has_dim_value() && !v)
        return what + " has the symbolic dim " + std::to_string(d) + " '" +
               dim.dim_param() + "': weft compiles static shapes" +
               (d < 2 ? std::string(" (give ") + flags[d] + ")" : "");
      if (v < 1 || v > (int64_t(1) << 40))
        return what + " has dim " + std::to_string(d) + " = " +
               std::to_string(v) + "; weft needs dims of 1 to 2^40";
      shape.push_back(v);
    }
    int64_t numel = 1;
    for (int64_t v : shape)
      if (__builtin_mul_overflow(numel, v, &numel) ||
          numel > (int64_t(1) << 40))
        return what + " of " + shapeString(shape) +
               " has more than 2^40 elements";
    args.push_back(RankedTensorType::get(shape, floatType));
  }
  auto fn =
      func::FuncOp::create(b, loc, "forward", b.getFunctionType(args, {}));
  fn->setAttr(attrname::kModel, b.getStringAttr(name));
  Block *body = fn.addEntryBlock();
  b.setInsertionPointToEnd(body);
  for (size_t i = 0; i < inputs.size(); ++i) {
    fn.setArgAttr(unsigned(i), attrname::kInput,
                  b.getStringAttr(inputs[i]->name()));
    Slot s;
    s.value = body->getArgument(unsigned(i));
    slots[inputs[i]->name()] = s;
  }
  for (const auto &n : g.node())
    if (std::string e = node(n); !e.empty())
      return e;
  // Every output, or the one --onnx-output names.
  SmallVector<Value> results;
  SmallVector<Attribute> names;
  bool found = options.output.empty();
  for (const auto &out : g.output()) {
    if (!options.output.empty() && out.name() != options.output)
      continue;
    found = true;
    const std::string what = "graph output '" + out.name() + "'";
    if (llvm::is_contained(names, b.getStringAttr(out.name())))
      return what + " is listed twice";
    auto it = slots.find(out.name());
    if (it == slots.end() || it->second.constant || it->second.isSequence ||
        !it->second.value || it->second.value.getDefiningOp<ParamOp>())
      return what + " does not depend on the inputs (weft computes outputs "
                    "from them)";
    // An output that is an input itself (no node between) is copied, as
    // one behind an Identity is (weft-return-logits).
    Value v = it->second.value;
    if (!isa<FloatType>(cast<RankedTensorType>(v.getType()).getElementType()))
      return what + " is not a float tensor";
    if (std::string e = checkDeclared(out, /*isOutput=*/true); !e.empty())
      return e;
    results.push_back(v);
    names.push_back(b.getStringAttr(out.name()));
  }
  if (!found)
    return "the graph has no output '" + options.output + "'";
  for (const auto &info : g.value_info())
    if (std::string e = checkDeclared(info); !e.empty())
      return e;
  func::ReturnOp::create(b, loc, results);
  fn.setType(b.getFunctionType(args, ValueRange(results).getTypes()));
  for (size_t i = 0; i < names.size(); ++i)
    fn.setResultAttr(unsigned(i), attrname::kOutput, names[i]);
  return "";
}
// The module scope of the node that first reads each initializer: the
// TorchScript exporter names a node by it ("/model/layers.0/mlp/MatMul")
// where it names the weight only "onnx::MatMul_594" (a transposed copy).
std::map<std::string, std::string> firstReaders(const onnx::GraphProto &g) {
  std::set<std::string> inits;
  for (const auto &t : g.initializer())
    inits.insert(t.name());
  std::map<std::string, std::string> reader;
  for (const auto &n : g.node())
    for (const std::string &in : n.input())
      if (inits.count(in))
        reader.emplace(in, n.name());
  return reader;
}

// Which layer each parameter belongs to (weft.layer): the number in
// ".h.N." / ".layers.N." / ".layer.N." / ".blocks.N." of its name, else of
// the scope of the node that first reads it (readers); the others are the
// embeddings (-1) when first used before layer 0's first op, else the head
// (the last layer + 1).
void markLayers(func::FuncOp fn,
                const std::map<std::string, std::string> &readers) {
  static const std::regex kLayer(
      R"((^|[./])(h|layers|layer|blocks)\.(\d+)[./])");
  int64_t last = -1;
  bool seenLayer = false;
  SmallVector<std::pair<ParamOp, bool>> unnumbered;
  fn.walk([&](ParamOp p) {
    std::smatch m;
    std::string name = p.getName().str();
    auto numbered = [&](const std::string &s) {
      // Up to 2^20 layers (7 digits); a longer number is no layer index.
      return std::regex_search(s, m, kLayer) && m[3].length() <= 7 &&
             std::stoll(m[3].str()) <= (int64_t(1) << 20);
    };
    auto reader = readers.find(name);
    if (numbered(name) ||
        (reader != readers.end() && numbered(reader->second))) {
      int64_t layer = std::stoll(m[3].str());
      p->setAttr(attrname::kLayer,
                 Builder(p.getContext()).getI64IntegerAttr(layer));
      last = std::max(last, layer);
      seenLayer = true;
    } else {
      unnumbered.push_back({p, seenLayer});
    }
  });
  for (auto [p, after] : unnumbered)
    p->setAttr(
        attrname::kLayer,
        Builder(p.getContext()).getI64IntegerAttr(after ? last + 1 : -1));
}

} // namespace

OwningOpRef<ModuleOp> importOnnx(MLIRContext &context, const std::string &path,
                                 const OnnxImportOptions &options,
                                 std::string &error) {
  context.loadDialect<WeftDialect, func::FuncDialect>();
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    error = "cannot open ONNX model '" + path + "'";
    return nullptr;
  }
  std::ostringstream bytes;
  bytes << file.rdbuf();
  const std::string data = bytes.str();
  onnx::ModelProto model;
  google::protobuf::io::CodedInputStream stream(
      reinterpret_cast<const uint8_t *>(data.data()),
      int(std::min<size_t>(data.size(), size_t(INT32_MAX))));
  stream.SetTotalBytesLimit(std::numeric_limits<int>::max());
  if (data.size() > size_t(INT32_MAX) || !model.ParseFromCodedStream(&stream) ||
      !stream.ConsumedEntireMessage() || !model.has_graph()) {
    error = "'" + path + "' is not an ONNX model: its " +
            std::to_string(data.size()) +
            " bytes do not parse as a ModelProto with a graph (truncated, "
            "or another format)";
    return nullptr;
  }
  if (std::string e = onnximport::checkUnknownFields(model); !e.empty()) {
    error = "'" + path + "': " + e;
    return nullptr;
  }
  std::string name = llvm::sys::path::stem(path).str();
  std::string dir = llvm::sys::path::parent_path(path).str();
  Importer importer(context, options, dir.empty() ? "." : dir);
  OwningOpRef<ModuleOp> module;
  std::string e = importer.run(model, name, module);
  if (!e.empty()) {
    error = "'" + path + "': " + e;
    return nullptr;
  }
  std::map<std::string, std::string> readers = firstReaders(model.graph());
  module->walk([&](func::FuncOp fn) { markLayers(fn, readers); });
  return module;
}

} // namespace weft
