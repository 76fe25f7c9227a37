//===- OnnxMatch.cpp - matching imported ONNX subgraphs -------------------===//
#include "passes/onnx/OnnxMatch.h"

using namespace mlir;

namespace weft::onnxmatch {

Shape shapeOf(Value v) {
  auto t = cast<RankedTensorType>(v.getType());
  return Shape(t.getShape().begin(), t.getShape().end());
}

bool wellFormed(OnnxNodeOp op) {
  static const struct {
    const char *type;
    unsigned min, max;
  } kArity[] = {{"Add", 2, 2},        {"Sub", 2, 2},
                {"Mul", 2, 2},        {"Div", 2, 2},
                {"Pow", 2, 2},        {"MatMul", 2, 2},
                {"Gather", 2, 2},     {"Reshape", 2, 2},
                {"Expand", 2, 2},     {"Where", 3, 3},
                {"Gemm", 2, 3},       {"Slice", 3, 5},
                {"ReduceMean", 1, 2}, {"ReduceSum", 1, 2},
                {"Unsqueeze", 1, 2},  {"LayerNormalization", 2, 3},
                {"Concat", 1, ~0u},   {"Split", 1, 2},
                {"Squeeze", 1, 2},    {"Equal", 2, 2},
                {"Less", 2, 2},       {"LessOrEqual", 2, 2},
                {"Greater", 2, 2},    {"GreaterOrEqual", 2, 2},
                {"And", 2, 2},        {"Or", 2, 2},
                {"Max", 1, ~0u},      {"Min", 1, ~0u},
                {"Clip", 1, 3},       {"Attention", 3, 4}};
  unsigned n = op.getInputs().size(), min = 1, max = 1;
  for (const auto &a : kArity)
    if (op.getOpType() == a.type)
      min = a.min, max = a.max;
  // Before opset 10 a Slice's starts, ends and axes are attributes.
  if (op.getOpType() == "Slice" && op.getOpset() < 10)
    min = max = 1;
  return n >= min && n <= max && op.getNumResults() >= 1;
}

OnnxNodeOp nodeOf(Value v, StringRef type) {
  auto op = v ? v.getDefiningOp<OnnxNodeOp>() : nullptr;
  return op && op.getOpType() == type && wellFormed(op) ? op : nullptr;
}

int64_t intAttr(OnnxNodeOp op, StringRef name, int64_t dflt) {
  auto a = op.getAttrs().getAs<IntegerAttr>(name);
  return a ? a.getInt() : dflt;
}
double floatAttr(OnnxNodeOp op, StringRef name, double dflt) {
  auto a = op.getAttrs().getAs<FloatAttr>(name);
  return a ? a.getValueAsDouble() : dflt;
}

bool allReals(DenseFPElementsAttr dense,
              llvm::function_ref<bool(int64_t, double)> pred) {
  int64_t i = 0;
  Type t = dense.getElementType();
  // The stored type where it is a C++ one (fast); APFloat otherwise (bf16).
  if (t.isF32()) {
    for (float x : dense.getValues<float>())
      if (!pred(i++, double(x)))
        return false;
  } else if (t.isF64()) {
    for (double x : dense.getValues<double>())
      if (!pred(i++, x))
        return false;
  } else {
    for (APFloat x : dense.getValues<APFloat>())
      if (!pred(i++, x.convertToDouble()))
        return false;
  }
  return true;
}

std::optional<double> splat(Value v) {
  auto c = v ? v.getDefiningOp<ConstantOp>() : nullptr;
  if (!c)
    return std::nullopt;
  auto dense = dyn_cast<DenseFPElementsAttr>(c.getValue());
  if (!dense || dense.empty())
    return std::nullopt;
  if (dense.isSplat())
    return dense.getSplatValue<APFloat>().convertToDouble();
  double first = (*dense.value_begin<APFloat>()).convertToDouble();
  if (!allReals(dense, [&](int64_t, double x) { return x == first; }))
    return std::nullopt;
  return first;
}

bool isConstant(Value v, double want) {
  std::optional<double> s = splat(v);
  if (!s)
    return false;
  // An f32 model's constant is want rounded to f32, also where the import
  // computes in f64 (--dtype f64 widens the model's f32 constants exactly).
  return *s == want || *s == double(float(want));
}

bool sameFloat(ValueRange values) {
  if (values.empty() || !isFloat(values[0]))
    return false;
  Type t = cast<RankedTensorType>(values[0].getType()).getElementType();
  return llvm::all_of(values, [&](Value v) {
    return cast<RankedTensorType>(v.getType()).getElementType() == t;
  });
}

bool isFloat(Value v) {
  return isa<FloatType>(cast<RankedTensorType>(v.getType()).getElementType());
}

//===----------------------------------------------------------------------===//
// Views: what a chain of Reshape and Transpose does to a tensor's elements.
//===----------------------------------------------------------------------===//

SmallVector<int64_t> permOf(OnnxNodeOp t) {
  auto perm = t.getAttrs().getAs<DenseI64ArrayAttr>("perm");
  const int64_t rank = shapeOf(t.getInputs()[0]).size();
  SmallVector<int64_t> p;
  if (perm)
    p.assign(perm.asArrayRef().begin(), perm.asArrayRef().end());
  else
    for (int64_t d = rank - 1; d >= 0; --d)
      p.push_back(d);
  SmallVector<bool> seen(rank, false);
  for (int64_t d : p)
    if (int64_t(p.size()) != rank || d < 0 || d >= rank || seen[d])
      return {};
    else
      seen[d] = true;
  return p;
}

std::optional<SmallVector<int64_t>> constInts(Value v) {
  auto c = v ? v.getDefiningOp<ConstantOp>() : nullptr;
  auto dense = c ? dyn_cast<DenseIntElementsAttr>(c.getValue()) : nullptr;
  if (!dense)
    return std::nullopt;
  SmallVector<int64_t> out;
  for (const APInt &x : dense.getValues<APInt>())
    out.push_back(x.getSExtValue());
  return out;
}

std::optional<View> traceView(Value v) {
  SmallVector<OnnxNodeOp> chain;
  Value at = v;
  while (auto op = at.getDefiningOp<OnnxNodeOp>()) {
    StringRef t = op.getOpType();
    if ((t != "Reshape" && t != "Transpose" && t != "Identity" &&
         t != "Unsqueeze" && t != "Expand") ||
        !wellFormed(op))
      break;
    chain.push_back(op);
    at = op.getInputs()[0];
  }
  View view = View::of(at);
  for (OnnxNodeOp op : llvm::reverse(chain)) {
    StringRef t = op.getOpType();
    Shape out = shapeOf(op.getResult(0));
    if (t == "Transpose") {
      SmallVector<int64_t> perm = permOf(op);
      if (perm.size() != view.dims.size())
        return std::nullopt;
      view.transpose(perm);
    } else if (t == "Reshape" || t == "Unsqueeze") {
      if (!view.reshape(out)) // an unsqueeze is a reshape adding 1s
        return std::nullopt;
    } else if (t == "Expand") {
      if (out.size() != view.dims.size())
        return std::nullopt;
      for (size_t d = 0; d < out.size(); ++d) {
        int64_t now = 1;
        for (const Piece &p : view.dims[d])
          now *= p.size;
        if (now == out[d])
          continue;
        if (now != 1)
          return std::nullopt;
        view.dims[d] = {Piece{-1, out[d], 0}}; // repeated: no base dim
      }
    }
  }
  return view;
}

View headsView(Value x, int64_t heads, int64_t headDim, bool keysLast) {
  Shape s = shapeOf(x);
  const int64_t xHeads = s[2] / headDim, repeat = heads / xHeads;
  View v = View::of(x);
  v.reshape({s[0], s[1], xHeads, headDim});
  v.transpose({0, 2, 1, 3});
  if (repeat > 1) {
    v.reshape({s[0], xHeads, 1, s[1], headDim});
    v.dims[2] = {Piece{-1, repeat, 0}};
    v.reshape({s[0], heads, s[1], headDim});
  }
  if (keysLast)
    v.transpose({0, 1, 3, 2});
  return v;
}

} // namespace weft::onnxmatch
