//===- LowerOnnxGeneric.cpp - weft-lower-onnx-generic ---------------------===//
//
// docs/design.md decision 20. Each weft.onnx_node weft-raise-onnx left
// becomes the generic op computing its ONNX function exactly, or is refused
// by name. The import's static result type is the contract: a lowering whose
// type differs is refused rather than trusted.
//
//===----------------------------------------------------------------------===//
#include "dialect/WeftDialect.h"
#include "passes/Passes.h"
#include "passes/onnx/OnnxMatch.h"
#include "program/Broadcast.h"
#include "program/ShapeString.h"

#include "mlir/IR/Builders.h"

#include <cmath>
#include <string>

namespace weft {
#define GEN_PASS_DEF_WEFTLOWERONNXGENERIC
#include "passes/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;
using namespace weft::onnxmatch;

namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

std::string shapeStr(ArrayRef<int64_t> shape) {
  return weft::shapeString(shape.data(), shape.size(), /*Spaced=*/true);
}

// The one value of a constant of one element, as the op's scalar: finite
// (an attribute's; an infinite one stays a constant buffer).
std::optional<double> scalarOf(Value v) {
  auto c = v.getDefiningOp<ConstantOp>();
  if (!c || typeOf(v).getNumElements() != 1)
    return std::nullopt;
  std::optional<double> x = splat(v);
  return x && std::isfinite(*x) ? x : std::nullopt;
}

class Lowering {
public:
  Lowering(OnnxNodeOp op) : op(op), b(op), loc(op.getLoc()) {}

  // The value replacing op's result, or null after an error.
  Value lower() {
    StringRef t = op.getOpType();
    static const char *const kLowered[] = {
        "Identity",    "Squeeze",    "Unsqueeze",
        "Reshape",     "Flatten",    "Cast",
        "Transpose",   "Expand",     "Neg",
        "Exp",         "Log",        "Sqrt",
        "Tanh",        "Sigmoid",    "Relu",
        "Erf",         "Reciprocal", "Add",
        "Sub",         "Mul",        "Div",
        "Pow",         "Softmax",    "ReduceSum",
        "ReduceMean",  "MatMul",     "Gemm",
        "Concat",      "Slice",      "Gather",
        "Sin",         "Cos",        "Abs",
        "Where",       "Equal",      "Less",
        "LessOrEqual", "Greater",    "GreaterOrEqual",
        "And",         "Or",         "Not",
        "IsNaN",       "Max",        "Min",
        "Clip"};
    if (t == "Attention") // what weft-raise-onnx did not make weft.attention
      return refuse("was not raised to weft.attention, which takes Q, K and "
                    "V as heads of [batch, seq, heads*dim] values and a mask "
                    "that is causal, a sliding window, every key or the "
                    "attention_mask's key padding");
    if (!llvm::is_contained(kLowered, t)) {
      std::string all;
      for (const char *l : kLowered)
        all += std::string(all.empty() ? "" : ", ") + l;
      return refuse("is not an op the generic path lowers (" + all +
                    ", LayerNormalization)");
    }
    if (op.getNumResults() != 1)
      return refuse("has " + std::to_string(op.getNumResults()) +
                    " results; the generic path lowers single-result nodes");
    if (!wellFormed(op))
      return refuse("has " + std::to_string(inputs().size()) +
                    " inputs, not the count its op type takes");
    if (isMaskOp(t))
      return mask();
    if (resultType().getElementType().isInteger(1))
      return refuse("computes " + typeStr(op.getResult(0)) +
                    "; the generic path computes bools as masks of "
                    "comparisons and boolean logic only (a view, copy or "
                    "cast of one the inputs compute is not lowered)");
    if (!isFloat(op.getResult(0)))
      return refuse("computes " + typeStr(op.getResult(0)) +
                    "; the generic path computes floats (integer tensors "
                    "are folded at import or read by embeddings)");
    // Shapes and axes (Reshape's second input, ...) are folded integers.
    bool dataOnly = t == "Reshape" || t == "Squeeze" || t == "Unsqueeze" ||
                    t == "Expand" || t == "ReduceSum" || t == "ReduceMean" ||
                    t == "Slice" || t == "Gather";
    // Where's condition is a bool (where() reads it).
    const size_t firstFloat = t == "Where" ? 1 : 0;
    for (auto [i, in] : llvm::enumerate(inputs()))
      if (i >= firstFloat && (i == firstFloat || !dataOnly) &&
          (!isFloat(in) || typeOf(in).getElementType() != element()))
        return refuse("input " + std::to_string(i) + " is " + typeStr(in) +
                      ", expected " + typeStr(op.getResult(0)) +
                      "'s element type");
    if (t == "Identity" || t == "Squeeze" || t == "Unsqueeze") {
      if (!sameDims(input(0)))
        return refuse("changes dims other than 1s: " + typeStr(input(0)) +
                      " to " + typeStr(op.getResult(0)));
      return reshapeTo(input(0));
    }
    if (t == "Reshape" || t == "Flatten")
      return reshapeTo(input(0));
    if (t == "Cast")
      return checked(input(0));
    if (t == "Transpose")
      return transpose();
    if (t == "Expand")
      return checked(BroadcastOp::create(b, loc, resultType(), input(0)));
    static const char *const kUnary[][2] = {
        {"Neg", "neg"},   {"Exp", "exp"},   {"Log", "log"},
        {"Sqrt", "sqrt"}, {"Tanh", "tanh"}, {"Sigmoid", "sigmoid"},
        {"Relu", "relu"}, {"Erf", "erf"},   {"Reciprocal", "reciprocal"},
        {"Sin", "sin"},   {"Cos", "cos"},   {"Abs", "abs"}};
    for (const auto &u : kUnary)
      if (t == u[0])
        return unary(u[1]);
    if (t == "Add" || t == "Sub" || t == "Mul" || t == "Div" || t == "Pow")
      return arithmetic();
    if (t == "Softmax")
      return softmax();
    if (t == "ReduceSum" || t == "ReduceMean")
      return reduction(t == "ReduceMean");
    if (t == "MatMul")
      return matmul();
    if (t == "Concat")
      return concat();
    if (t == "Slice")
      return slice();
    if (t == "Gather")
      return gather();
    if (t == "Where")
      return where();
    if (t == "Max" || t == "Min")
      return extremum();
    if (t == "Clip")
      return clip();
    assert(t == "Gemm" && "kLowered lists an op no branch lowers");
    return gemm();
  }

private:
  ValueRange inputs() { return op.getInputs(); }
  Value input(unsigned i) { return op.getInputs()[i]; }
  RankedTensorType resultType() { return typeOf(op.getResult(0)); }
  Type element() { return resultType().getElementType(); }
  static std::string typeStr(Value v) {
    std::string s;
    llvm::raw_string_ostream os(s);
    os << v.getType();
    return s;
  }

  Value refuse(const std::string &why) {
    op.emitError() << "ONNX node '" << op.getNode() << "' (" << op.getOpType()
                   << ", opset " << op.getOpset() << ") " << why;
    return nullptr;
  }

  // The lowered value must have the type the import gave the node.
  Value checked(Value v) {
    if (!v || v.getType() == resultType())
      return v;
    return refuse("lowers to " + typeStr(v) + " but the import gave it " +
                  typeStr(op.getResult(0)));
  }

  Value wrongShape(ArrayRef<int64_t> computed) {
    return refuse("computes " + shapeStr(computed) +
                  " but the import gave it " + typeStr(op.getResult(0)));
  }

  Value reshapeTo(Value x) {
    if (x.getType() == resultType())
      return x;
    if (typeOf(x).getNumElements() != resultType().getNumElements())
      return refuse("reshapes " + typeStr(x) + " to " +
                    typeStr(op.getResult(0)) + ": the element counts differ");
    return ReshapeOp::create(b, loc, resultType(), x);
  }

  // Whether x and the result hold the same dims apart from 1s (a view
  // that only adds or drops 1s).
  bool sameDims(Value x) {
    auto big = [](ArrayRef<int64_t> s) {
      Shape out;
      for (int64_t d : s)
        if (d != 1)
          out.push_back(d);
      return out;
    };
    return big(typeOf(x).getShape()) == big(resultType().getShape());
  }

  // The broadcast of a and c's shapes, or nullopt (then refused).
  std::optional<Shape> broadcastOf(Value a, Value c) {
    ArrayRef<int64_t> x = typeOf(a).getShape(), y = typeOf(c).getShape();
    std::vector<int64_t> out;
    if (!broadcastShapes({x.begin(), x.end()}, {y.begin(), y.end()}, out)) {
      refuse("has operands " + shapeStr(x) + " and " + shapeStr(y) +
             " that do not broadcast");
      return std::nullopt;
    }
    return Shape(out.begin(), out.end());
  }

  // Concat, Slice and Gather move data along one axis; weft's split and
  // concat work on the last dim, so another axis is transposed there and
  // back (copies, exact; their VJPs and sharding rules are the fused ops').
  Value toLast(Value x, int64_t axis) { return moveAxis(x, axis, true); }
  Value fromLast(Value x, int64_t axis) { return moveAxis(x, axis, false); }
  // x with dim `axis` moved last (or, `!last`, its last dim moved back to
  // `axis`); x itself when the axis is the last.
  Value moveAxis(Value x, int64_t axis, bool last) {
    int64_t rank = typeOf(x).getRank();
    if (axis == rank - 1)
      return x;
    Shape perm;
    for (int64_t d = 0; d < rank; ++d)
      perm.push_back(last ? (d < axis        ? d
                             : d + 1 == rank ? axis
                                             : d + 1)
                          : (d < axis    ? d
                             : d == axis ? rank - 1
                                         : d - 1));
    return TransposeOp::create(b, loc, x, perm);
  }
  // Elements [start, start + size) of x's dim `axis`.
  Value range(Value x, int64_t axis, int64_t start, int64_t size) {
    int64_t dim = typeOf(x).getShape()[axis];
    if (start == 0 && size == dim)
      return x;
    Shape sizes;
    int64_t middle = start > 0 ? 1 : 0;
    for (int64_t part : {start, size, dim - start - size})
      if (part > 0)
        sizes.push_back(part);
    auto split = SplitOp::create(b, loc, toLast(x, axis), sizes);
    return fromLast(split.getResult(middle), axis);
  }

  // Elements `at` (in range, in that order, repeats allowed) of x's dim
  // `axis`: each run of consecutive indices one slice, the runs
  // concatenated. Exact, and its gradient is the split's and concat's (a
  // repeated index adds up, as ONNX's gradient would).
  static constexpr size_t kMaxRuns = 256;
  Value pick(Value x, int64_t axis, ArrayRef<int64_t> at) {
    SmallVector<std::pair<int64_t, int64_t>> runs; // (start, size)
    for (int64_t i : at) {
      if (!runs.empty() && runs.back().first + runs.back().second == i)
        ++runs.back().second;
      else
        runs.push_back({i, 1});
    }
    if (runs.size() > kMaxRuns)
      return refuse("reads " + std::to_string(runs.size()) +
                    " runs of consecutive indices along dim " +
                    std::to_string(axis) + "; the generic path reads at most " +
                    std::to_string(kMaxRuns));
    if (runs.size() == 1)
      return range(x, axis, runs[0].first, runs[0].second);
    SmallVector<Value> parts;
    for (auto [start, size] : runs)
      parts.push_back(toLast(range(x, axis, start, size), axis));
    return fromLast(ConcatOp::create(b, loc, parts), axis);
  }

  Value concat() {
    int64_t rank = resultType().getRank();
    int64_t axis = intAttr(op, "axis", 0);
    axis = axis < 0 ? axis + rank : axis;
    if (rank < 1 || axis < 0 || axis >= rank)
      return refuse("has axis " + std::to_string(intAttr(op, "axis", 0)) +
                    " for rank " + std::to_string(rank));
    SmallVector<Value> parts;
    for (Value in : inputs())
      parts.push_back(toLast(in, axis));
    return checked(fromLast(ConcatOp::create(b, loc, parts), axis));
  }

  // The import resolved starts, ends, axes and steps to a first index and
  // a step per dim; a step other than 1 (x[::2], x[::-1]) picks its
  // elements one run each.
  Value slice() {
    auto start = op.getAttrs().getAs<DenseI64ArrayAttr>("start");
    auto step = op.getAttrs().getAs<DenseI64ArrayAttr>("step");
    Shape out(resultType().getShape());
    if (!start || !step || start.size() != out.size() ||
        step.size() != out.size())
      return refuse("has no resolved start and step per dim (the import "
                    "writes them)");
    Value x = input(0);
    for (size_t d = 0; d < out.size(); ++d) {
      int64_t dim = typeOf(x).getShape()[d];
      if (start[d] == 0 && step[d] == 1 && out[d] == dim)
        continue;
      const int64_t last = start[d] + (out[d] - 1) * step[d];
      if (step[d] == 0 || out[d] < 1 || start[d] < 0 || start[d] >= dim ||
          last < 0 || last >= dim)
        return refuse("slices " + std::to_string(out[d]) + " elements from " +
                      std::to_string(start[d]) + " by " +
                      std::to_string(step[d]) + " out of dim " +
                      std::to_string(d) + " of size " + std::to_string(dim));
      Shape at;
      for (int64_t k = 0; k < out[d]; ++k)
        at.push_back(start[d] + k * step[d]);
      x = pick(x, int64_t(d), at);
      if (!x)
        return nullptr;
    }
    return checked(x); // all dims whole: the input itself
  }

  // Gather by constant indices: a slice per run of consecutive ones
  // (x[:, 3], x[2:5] are one), concatenated.
  Value gather() {
    ArrayRef<int64_t> data = typeOf(input(0)).getShape();
    int64_t rank = int64_t(data.size()), axis = intAttr(op, "axis", 0);
    axis = axis < 0 ? axis + rank : axis;
    std::optional<Shape> idx = constInts(input(1));
    if (!idx || idx->empty())
      return refuse("gathers by indices that are not a constant (the "
                    "generic path gathers by consecutive constant indices)");
    if (axis < 0 || axis >= rank)
      return refuse("has axis " + std::to_string(intAttr(op, "axis", 0)) +
                    " for rank " + std::to_string(rank));
    Shape at;
    for (int64_t i : *idx) {
      if (i < -data[axis] || i >= data[axis])
        return refuse("index " + std::to_string(i) + " is out of dim " +
                      std::to_string(axis) + " of size " +
                      std::to_string(data[axis]));
      at.push_back(i < 0 ? i + data[axis] : i);
    }
    Value x = pick(input(0), axis, at);
    if (!x)
      return nullptr;
    // A scalar index drops the dim, an index tensor of another shape
    // replaces it: a reshape of the same elements in the same order.
    return checked(reshapeTo(x));
  }

  // Max and Min of two, as torch.maximum and torch.minimum (NaN if either
  // operand is; a tie sends half the gradient to each); of one, the input.
  Value extremum() {
    if (inputs().size() == 1)
      return checked(input(0));
    if (inputs().size() != 2)
      return refuse("takes " + std::to_string(inputs().size()) +
                    " inputs; the generic path lowers " + op.getOpType().str() +
                    " of one or two");
    if (!broadcastOf(input(0), input(1)))
      return nullptr;
    return checked(BinaryOp::create(b, loc, input(0), input(1),
                                    b.getStringAttr(op.getOpType().lower())));
  }

  // Clip(x, min, max) as torch.clamp, the gradient dy where neither bound
  // binds (the bounds included). A bound the import resolved (a constant)
  // is a pointwise clamp_min or clamp_max by that scalar (finite); one the
  // inputs compute is a select: y < min ? min : y, which sends the
  // gradient to the bound where it binds, as torch does.
  Value clip() {
    Value y = input(0);
    unsigned next = 1; // the import refuses a max without a min input
    for (StringRef bound : {"min", "max"}) {
      const bool isMin = bound == "min";
      auto c = op.getAttrs().getAs<FloatAttr>(bound);
      // Before opset 11 the bounds are attributes; from 11, inputs.
      Value given = op.getOpset() >= 11 && next < inputs().size()
                        ? input(next++)
                        : Value();
      if (c) {
        double v = c.getValueAsDouble();
        if (!std::isfinite(v))
          return refuse(("has " + bound + " " + std::to_string(v) +
                         "; the generic path clips by finite bounds")
                            .str());
        y = fnOf(y, isMin ? "clamp_min" : "clamp_max", v);
      } else if (given) {
        Value binds = BinaryOp::create(b, loc, y, given,
                                       b.getStringAttr(isMin ? "lt" : "gt"));
        y = SelectOp::create(b, loc, binds, given, y);
      }
    }
    return checked(y);
  }

  // ONNX's comparisons and boolean logic, with their binary or pointwise
  // mask fn: a bool tensor on the generic path is a float mask of its
  // operands' float type, 1 where true.
  static constexpr const char *kMaskOps[][2] = {
      {"Equal", "eq"},   {"Less", "lt"},           {"LessOrEqual", "le"},
      {"Greater", "gt"}, {"GreaterOrEqual", "ge"}, {"And", "and"},
      {"Or", "or"},      {"Not", "not"},           {"IsNaN", "isnan"}};
  static bool isMaskOp(StringRef t) {
    return llvm::any_of(kMaskOps, [&](const auto &m) { return t == m[0]; });
  }

  // v as a float mask of `element`: a float operand as it is (a mask
  // lowered before it, or a compared value), a folded bool one as 0/1.
  Value asFloat(Value v, Type element) {
    if (isFloat(v))
      return typeOf(v).getElementType() == element ? v : Value();
    auto c = v.getDefiningOp<ConstantOp>();
    auto bits =
        c ? dyn_cast<DenseElementsAttr>(c.getValue()) : DenseElementsAttr();
    if (!bits || !bits.getElementType().isInteger(1))
      return Value();
    SmallVector<Attribute> values;
    for (bool x : bits.getValues<bool>())
      values.push_back(FloatAttr::get(element, x ? 1.0 : 0.0));
    auto type = RankedTensorType::get(bits.getType().getShape(), element);
    return ConstantOp::create(b, loc, DenseElementsAttr::get(type, values));
  }

  Value mask() {
    StringRef t = op.getOpType();
    if (llvm::any_of(op->getUsers(),
                     [](Operation *u) { return isa<func::ReturnOp>(u); }))
      return refuse("is a graph output of bools; weft's outputs are float "
                    "tensors");
    Type element;
    for (Value in : inputs())
      if (!element && isFloat(in))
        element = typeOf(in).getElementType();
    if (!element)
      return refuse("reads no float tensor (" + typeStr(input(0)) +
                    "); the generic path compares floats, and the import "
                    "folds what depends on no input");
    SmallVector<Value> xs;
    for (auto [i, in] : llvm::enumerate(inputs())) {
      xs.push_back(asFloat(in, element));
      if (!xs.back())
        return refuse("input " + std::to_string(i) + " is " + typeStr(in) +
                      ", expected a float tensor of the others' element "
                      "type, or a folded bool one");
    }
    StringRef fn;
    for (const auto &m : kMaskOps)
      if (t == m[0])
        fn = m[1];
    Value y;
    if (xs.size() == 1) {
      y = fnOf(xs[0], fn);
    } else {
      if (!broadcastOf(xs[0], xs[1]))
        return nullptr;
      y = BinaryOp::create(b, loc, xs[0], xs[1], b.getStringAttr(fn));
    }
    if (typeOf(y).getShape() != resultType().getShape())
      return wrongShape(typeOf(y).getShape());
    return y;
  }

  // Where(cond, a, b). The condition is a float mask: one mask() lowered
  // (computed from the inputs), or a bool the import folded (a causal
  // mask), as 0/1. A folded one true (or false) everywhere picks its
  // operand alone.
  Value where() {
    auto c = input(0).getDefiningOp<ConstantOp>();
    auto bits =
        c ? dyn_cast<DenseElementsAttr>(c.getValue()) : DenseElementsAttr();
    if (bits && bits.getElementType().isInteger(1) &&
        llvm::all_equal(bits.getValues<bool>())) {
      Value picked = input(*bits.getValues<bool>().begin() ? 1 : 2);
      if (typeOf(picked) == resultType())
        return picked;
      ArrayRef<int64_t> from = typeOf(picked).getShape(),
                        to = resultType().getShape();
      if (!broadcastsTo({from.begin(), from.end()}, {to.begin(), to.end()}))
        return wrongShape(typeOf(picked).getShape());
      return checked(BroadcastOp::create(b, loc, resultType(), picked));
    }
    Value cond = asFloat(input(0), element());
    if (!cond)
      return refuse("selects by " + typeStr(input(0)) +
                    ", which is neither a " + typeStr(op.getResult(0)) +
                    " mask of a comparison the generic path lowers nor a "
                    "condition the import folds");
    return checked(SelectOp::create(b, loc, cond, input(1), input(2)));
  }

  Value transpose() {
    Shape perm = permOf(op);
    if (perm.empty())
      return refuse("has a perm that is not a permutation of its input's " +
                    std::to_string(typeOf(input(0)).getRank()) + " dims");
    return checked(TransposeOp::create(b, loc, input(0), perm));
  }

  // weft.pointwise fn of v (with scalar c, for the scalar fns).
  Value fnOf(Value v, StringRef fn, std::optional<double> c = std::nullopt) {
    return PointwiseOp::create(b, loc, v.getType(), v, b.getStringAttr(fn),
                               c ? b.getF64FloatAttr(*c) : FloatAttr());
  }

  Value unary(StringRef fn) { return checked(fnOf(input(0), fn)); }

  Value pointwise(Value x, Value constant, StringRef fn, double c) {
    // A constant of higher rank (x [N] + c [1, 1]) adds leading 1s.
    std::optional<Shape> full = broadcastOf(x, constant);
    if (!full)
      return nullptr;
    if (*full != Shape(resultType().getShape()))
      return wrongShape(*full);
    Value y = fnOf(x, fn, c);
    return y.getType() == resultType() ? y : reshapeTo(y);
  }

  // Add, Sub, Mul, Div and Pow: with a one-element constant, pointwise;
  // between two tensors, binary.
  Value arithmetic() {
    StringRef t = op.getOpType();
    Value x = input(0), y = input(1);
    std::optional<double> cx = scalarOf(x), cy = scalarOf(y);
    if (cy && !cx) {
      static const char *const kRight[][2] = {{"Add", "add"},
                                              {"Sub", "sub"},
                                              {"Mul", "mul"},
                                              {"Div", "div"},
                                              {"Pow", "pow"}};
      for (const auto &r : kRight)
        if (t == r[0])
          return pointwise(x, y, r[1], *cy);
    }
    if (cx && !cy) {
      static const char *const kLeft[][2] = {
          {"Add", "add"}, {"Sub", "rsub"}, {"Mul", "mul"}, {"Div", "rdiv"}};
      for (const auto &l : kLeft)
        if (t == l[0])
          return pointwise(y, x, l[1], *cx);
    }
    // Otherwise (a constant base, a constant of many elements) binary
    // reads the constant as a buffer.
    if (!broadcastOf(x, y))
      return nullptr;
    std::string fn = t.lower();
    return checked(BinaryOp::create(b, loc, x, y, b.getStringAttr(fn)));
  }

public:
  // LayerNormalization over the dims from `axis` on, written out as ONNX's
  // function body computes it: Mean, D = X - Mean, Var = mean(D * D),
  // InvStdDev = 1 / sqrt(Var + eps), Y = D * InvStdDev * Scale (+ B). Its
  // Mean and InvStdDev outputs (dims from `axis` on kept as 1) too; the
  // fused weft.layer_norm (weft-raise-onnx) covers the last axis without
  // them. Empty on an error.
  SmallVector<Value> layerNorm() {
    if (!wellFormed(op) || op.getNumResults() > 3) {
      refuse("has " + std::to_string(inputs().size()) + " inputs and " +
             std::to_string(op.getNumResults()) +
             " results, not the counts its op type takes");
      return {};
    }
    for (auto [i, in] : llvm::enumerate(inputs())) {
      if (!isFloat(in) || typeOf(in).getElementType() != element()) {
        refuse("input " + std::to_string(i) + " is " + typeStr(in) +
               ", expected " + typeStr(op.getResult(0)) + "'s element type");
        return {};
      }
    }
    Value x = input(0);
    ArrayRef<int64_t> shape = typeOf(x).getShape();
    int64_t rank = shape.size(), axis = intAttr(op, "axis", -1);
    axis = axis < 0 ? axis + rank : axis;
    const double eps = floatAttr(op, "epsilon", 1e-5);
    if (rank == 0 || axis < 0 || axis >= rank) {
      refuse("normalizes from axis " + std::to_string(intAttr(op, "axis", -1)) +
             " of rank " + std::to_string(rank));
      return {};
    }
    if (!(eps >= 0 && std::isfinite(eps))) {
      refuse("has epsilon " + std::to_string(eps));
      return {};
    }
    Shape kept(shape);
    double count = 1;
    for (int64_t d = axis; d < rank; ++d) {
      count *= double(shape[d]);
      kept[d] = 1;
    }
    auto keptType = RankedTensorType::get(kept, element());
    auto binary = [&](Value l, Value r, const char *fn) -> Value {
      return BinaryOp::create(b, loc, l, r, b.getStringAttr(fn));
    };
    auto mean = [&](Value v) {
      return fnOf(ReduceOp::create(b, loc, keptType, v), "div", count);
    };
    Value mu = mean(x);
    Value dev = binary(x, mu, "sub");
    Value var = mean(binary(dev, dev, "mul"));
    Value inv = fnOf(fnOf(fnOf(var, "add", eps), "sqrt"), "reciprocal");
    Value y = binary(binary(dev, inv, "mul"), input(1), "mul");
    if (inputs().size() > 2)
      y = binary(y, input(2), "add");
    SmallVector<Value> out{checked(y)};
    for (unsigned i = 1; i < op.getNumResults(); ++i)
      out.push_back(typeOf(op.getResult(i)) == keptType
                        ? (i == 1 ? mu : inv)
                        : refuse("result " + std::to_string(i) + " is " +
                                 typeStr(op.getResult(i)) + ", expected " +
                                 shapeStr(kept)));
    if (llvm::is_contained(out, Value()))
      return {};
    return out;
  }

private:
  // weft.softmax normalizes the last dim. From opset 13 ONNX normalizes
  // one axis (moved last and back); before, every dim from `axis` on as
  // one (a reshape to [rows, those dims] and back).
  Value softmax() {
    Value x = input(0);
    ArrayRef<int64_t> shape = typeOf(x).getShape();
    int64_t rank = shape.size();
    const int64_t given = intAttr(op, "axis", op.getOpset() >= 13 ? -1 : 1);
    int64_t axis = given < 0 ? given + rank : given;
    if (rank == 0 || axis < 0 || axis >= rank)
      return refuse("normalizes over axis " + std::to_string(given) +
                    " of rank " + std::to_string(rank));
    if (op.getOpset() >= 13)
      return checked(
          fromLast(SoftmaxOp::create(b, loc, toLast(x, axis)), axis));
    if (axis == rank - 1)
      return checked(SoftmaxOp::create(b, loc, x));
    int64_t rows = 1, cols = 1;
    for (int64_t d = 0; d < rank; ++d)
      (d < axis ? rows : cols) *= shape[d];
    Shape flat{rows, cols};
    Value y = SoftmaxOp::create(
        b, loc,
        ReshapeOp::create(b, loc, RankedTensorType::get(flat, element()), x));
    return checked(ReshapeOp::create(b, loc, resultType(), y));
  }

  // Sum into the kept shape, then divide by the count (mean) and drop the
  // reduced dims unless keepdims.
  Value reduction(bool mean) {
    Value x = input(0);
    ArrayRef<int64_t> shape = typeOf(x).getShape();
    int64_t rank = shape.size();
    // ReduceSum takes its axes as an input from opset 13, ReduceMean from 18.
    bool axesInput = op.getOpset() >= (mean ? 18 : 13);
    Shape axes;
    if (axesInput && inputs().size() > 1) {
      auto ints = constInts(input(1));
      if (!ints)
        return refuse("takes its axes from a tensor the import could not "
                      "fold");
      axes = *ints;
    } else if (!axesInput) {
      if (auto a = op.getAttrs().getAs<DenseI64ArrayAttr>("axes"))
        axes.assign(a.asArrayRef().begin(), a.asArrayRef().end());
    }
    if (axes.empty() && intAttr(op, "noop_with_empty_axes", 0))
      return reshapeTo(x);
    SmallVector<bool> reduced(rank, axes.empty());
    for (int64_t a : axes) {
      int64_t d = a < 0 ? a + rank : a;
      if (d < 0 || d >= rank || reduced[d])
        return refuse("has axis " + std::to_string(a) +
                      ", out of range or repeated for rank " +
                      std::to_string(rank));
      reduced[d] = true;
    }
    Shape kept(shape);
    int64_t count = 1;
    for (int64_t d = 0; d < rank; ++d)
      if (reduced[d]) {
        count *= shape[d];
        kept[d] = 1;
      }
    Shape want;
    for (int64_t d = 0; d < rank; ++d)
      if (!reduced[d] || intAttr(op, "keepdims", 1))
        want.push_back(kept[d]);
    if (want != Shape(resultType().getShape()))
      return wrongShape(want);
    Value y = x;
    if (Shape(shape) != kept)
      y = ReduceOp::create(b, loc, RankedTensorType::get(kept, element()), x);
    if (mean && count != 1)
      y = fnOf(y, "div", double(count));
    return checked(reshapeTo(y));
  }

  // NumPy's matmul: [.., m, k] x [k, n] is weft.matmul (a linear layer's
  // form, which the Megatron layout knows); otherwise both operands are
  // broadcast to one batch shape and multiplied per batch index.
  Value matmul() {
    Value a = input(0), w = input(1);
    ArrayRef<int64_t> as = typeOf(a).getShape(), ws = typeOf(w).getShape();
    if (as.size() < 2 || ws.size() < 2)
      return refuse("multiplies a vector (rank 1); the generic path lowers "
                    "MatMul of operands of rank >= 2");
    if (as.back() != ws[ws.size() - 2])
      return refuse("contracts " + shapeStr(as) + " with " + shapeStr(ws));
    if (ws.size() == 2)
      return checked(MatmulOp::create(b, loc, a, w, false, false));
    size_t rank = std::max(as.size(), ws.size());
    Shape batch(rank - 2, 1);
    for (ArrayRef<int64_t> s : {as, ws})
      for (size_t i = 0; i + 2 < s.size(); ++i) {
        int64_t &d = batch[rank - s.size() + i];
        if (d != 1 && s[i] != 1 && s[i] != d)
          return refuse("has batch dims " + shapeStr(as.drop_back(2)) +
                        " and " + shapeStr(ws.drop_back(2)) +
                        " that do not broadcast");
        d = std::max(d, s[i]);
      }
    auto widen = [&](Value v) -> Value {
      ArrayRef<int64_t> s = typeOf(v).getShape();
      Shape full(batch);
      full.append(s.end() - 2, s.end());
      if (Shape(s) == full)
        return v;
      return BroadcastOp::create(b, loc, RankedTensorType::get(full, element()),
                                 v);
    };
    return checked(
        BatchMatmulOp::create(b, loc, widen(a), widen(w), false, false));
  }

  // Gemm with alpha = beta = 1: op(a) op(b) (+ c, broadcast).
  // alpha * A' B' + beta * C, in that order (as ONNX's reference).
  Value gemm() {
    const double alpha = floatAttr(op, "alpha", 1.0),
                 beta = floatAttr(op, "beta", 1.0);
    auto scaled = [&](Value v, double by) {
      return by == 1.0 ? v : fnOf(v, "mul", by);
    };
    if (typeOf(input(0)).getRank() != 2 || typeOf(input(1)).getRank() != 2)
      return refuse("multiplies operands of rank other than 2");
    bool ta = intAttr(op, "transA", 0) != 0, tb = intAttr(op, "transB", 0) != 0;
    ArrayRef<int64_t> as = typeOf(input(0)).getShape(),
                      bs = typeOf(input(1)).getShape();
    if (as[ta ? 0 : 1] != bs[tb ? 1 : 0])
      return refuse("contracts " + shapeStr(as) + " with " + shapeStr(bs));
    Value y =
        scaled(MatmulOp::create(b, loc, input(0), input(1), ta, tb), alpha);
    // beta = 0 drops C, as onnxruntime and ONNX's reference do (an inf in
    // C would otherwise make the product NaN).
    if (inputs().size() == 3 && beta != 0.0) {
      std::optional<Shape> full = broadcastOf(y, input(2));
      if (!full)
        return nullptr;
      if (*full != Shape(typeOf(y).getShape()))
        return refuse("adds C " + shapeStr(typeOf(input(2)).getShape()) +
                      ", which does not broadcast to the product " +
                      shapeStr(typeOf(y).getShape()));
      y = BinaryOp::create(b, loc, y, scaled(input(2), beta),
                           b.getStringAttr("add"));
    }
    return checked(y);
  }

  OnnxNodeOp op;
  OpBuilder b;
  Location loc;
};

struct LowerOnnxGeneric
    : weft::impl::WeftLowerOnnxGenericBase<LowerOnnxGeneric> {
  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    SmallVector<OnnxNodeOp> nodes;
    fn.walk([&](OnnxNodeOp op) { nodes.push_back(op); });
    // In program order: each node's inputs are lowered before it.
    for (OnnxNodeOp op : nodes) {
      Lowering lowering(op);
      SmallVector<Value> ys;
      if (op.getOpType() == "LayerNormalization")
        ys = lowering.layerNorm();
      else if (Value y = lowering.lower())
        ys.push_back(y);
      if (ys.size() != op.getNumResults())
        return signalPassFailure();
      for (auto [result, y] : llvm::zip(op.getResults(), ys))
        result.replaceAllUsesWith(y);
      op.erase();
    }
    // The scalars became attributes: their constants are dead. A float
    // constant read as a tensor is a program buffer (kind "constant"); any
    // other (an integer or bool one) would be refused there.
    bool stray = false;
    fn.walk([&](ConstantOp c) {
      if (c->use_empty()) {
        c.erase();
        return;
      }
      if (isFloat(c.getResult()) || stray)
        return;
      c.emitError("weft-lower-onnx-generic: a folded ")
          << c.getType() << " constant is still read by "
          << *c->getUsers().begin();
      stray = true;
    });
    if (stray)
      signalPassFailure();
  }
};

} // namespace
