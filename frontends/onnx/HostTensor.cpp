//===- HostTensor.cpp - folding ONNX nodes at import ----------------------===//
#include "frontends/onnx/HostTensor.h"
#include "frontends/onnx/ShapeRules.h"
#include "program/OnnxExternalData.h"
#include "program/ShapeString.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <optional>

namespace weft {
namespace onnximport {
namespace {

using Shape = std::vector<int64_t>;

std::string shapeStr(const Shape &s) {
  return weft::shapeString(s.data(), s.size(), /*Spaced=*/true);
}

// The element count of `s`, or -1 past kMaxFoldedElements (or negative dims).
int64_t count(const Shape &s) {
  int64_t n = 1;
  for (int64_t d : s) {
    if (d < 0 || (d > 0 && n > kMaxFoldedElements / d))
      return -1;
    n *= d;
  }
  return n;
}

Shape strides(const Shape &s) {
  Shape st(s.size(), 1);
  for (int i = int(s.size()) - 2; i >= 0; --i)
    st[i] = st[i + 1] * s[i + 1];
  return st;
}

// Rounds to the element type: f32 values are doubles that are floats.
double roundTo(HostType t, double v) {
  return t == HostType::F32 ? double(float(v)) : v;
}

HostTensor make(HostType type, Shape shape) {
  HostTensor t;
  t.type = type;
  t.shape = std::move(shape);
  int64_t n = count(t.shape);
  if (t.isFloat())
    t.reals.assign(size_t(n), 0.0);
  else
    t.ints.assign(size_t(n), 0);
  return t;
}

// out[i] = in[index[i]] for every element of `shape`.
HostTensor take(const HostTensor &in, Shape shape,
                const std::vector<int64_t> &index) {
  HostTensor t;
  t.type = in.type;
  t.shape = std::move(shape);
  if (in.isFloat())
    for (int64_t i : index)
      t.reals.push_back(in.reals[i]);
  else
    for (int64_t i : index)
      t.ints.push_back(in.ints[i]);
  return t;
}

// The flat index into `from` (broadcast to `to`) of each element of `to`.
std::vector<int64_t> broadcastIndex(const Shape &from, const Shape &to) {
  const int64_t n = count(to);
  std::vector<int64_t> index(size_t(std::max<int64_t>(n, 0)));
  if (n <= 0 || count(from) == 1) // a scalar: every index 0
    return index;
  if (from == to) {
    std::iota(index.begin(), index.end(), int64_t(0));
    return index;
  }
  // An odometer over `to`; step[d] is the source stride of target dim d
  // (0 where `from` broadcasts it).
  const size_t rank = to.size(), off = rank - from.size();
  Shape fs = strides(from), step(rank, 0), coord(rank, 0);
  for (size_t d = 0; d < from.size(); ++d)
    step[d + off] = from[d] == 1 ? 0 : fs[d];
  int64_t src = 0;
  for (int64_t i = 0; i < n; ++i) {
    index[size_t(i)] = src;
    for (size_t d = rank; d-- > 0;) {
      if (++coord[d] < to[d]) {
        src += step[d];
        break;
      }
      src -= step[d] * (to[d] - 1);
      coord[d] = 0;
    }
  }
  return index;
}

struct NodeFolder {
  const onnx::NodeProto &node;
  int64_t opset;
  const std::vector<const HostTensor *> &in;
  std::vector<HostTensor> &out;
  std::string error;

  bool fail(const std::string &why) {
    error = nodeLabel(node) + ": " + why;
    return false;
  }
  const onnx::AttributeProto *attr(const char *name) const {
    return findAttribute(node, name);
  }
  int64_t intAttr(const char *name, int64_t dflt) const {
    const auto *a = attr(name);
    return a ? a->i() : dflt;
  }
  // Index j of idx into a dim of n (negative: from the end), range-checked.
  bool index(const std::vector<int64_t> &idx, size_t j, int64_t n, int64_t &k) {
    k = idx[j] < 0 ? idx[j] + n : idx[j];
    if (k >= 0 && k < n)
      return true;
    return fail("index " + std::to_string(idx[j]) + " at " + std::to_string(j) +
                " is out of range for dim " + std::to_string(n));
  }
  bool input(size_t i, const HostTensor *&t) {
    if (i >= in.size() || !in[i])
      return fail("input " + std::to_string(i) + " is missing");
    t = in[i];
    return true;
  }
  // An integer tensor's values (shapes, axes, indices).
  bool ints(size_t i, std::vector<int64_t> &v, const char *what) {
    const HostTensor *t;
    if (!input(i, t))
      return false;
    if (t->isFloat())
      return fail(std::string(what) + " (input " + std::to_string(i) +
                  ") must be integers, got " + hostTypeName(t->type));
    v = t->ints;
    return true;
  }
  bool axis(int64_t a, int64_t rank, int64_t &norm) {
    if (a < -rank || a >= rank)
      return fail("axis " + std::to_string(a) + " is out of range for rank " +
                  std::to_string(rank));
    norm = a < 0 ? a + rank : a;
    return true;
  }
  bool sized(const Shape &s) {
    if (count(s) < 0)
      return fail("a folded tensor of shape " + shapeStr(s) +
                  " is larger than weft folds at import (" +
                  std::to_string(kMaxFoldedElements) + " elements)");
    return true;
  }

  bool run();
  bool constant();
  bool cast(HostType to);
  bool unary(const std::string &op);
  bool binary(const std::string &op);
  bool where();
  bool range();
  bool reshape();
  bool flatten();
  bool unsqueeze(bool squeeze);
  bool concat();
  bool slice();
  bool transpose();
  bool expand();
  bool gather();
  bool gatherElements();
  bool gatherNd();
  bool scatterNd();
  bool cumsum();
  bool trilu();
  bool constantOfShape();
  bool shapeOf();
  bool matmul();
};

// MatMul of float constants [.., M, K] x [.., K, N], leading dims
// broadcast (RoPE's inv_freq x positions, as the TorchScript exporter
// leaves them): each sum taken in double and rounded to the type once, so
// a one-term product (K = 1) is exactly torch's.
bool NodeFolder::matmul() {
  const HostTensor *a, *b;
  if (!input(0, a) || !input(1, b))
    return false;
  if (!a->isFloat() || a->type != b->type)
    return fail("folds float MatMul of one type only, got " +
                std::string(hostTypeName(a->type)) + " and " +
                hostTypeName(b->type));
  if (a->shape.size() < 2 || b->shape.size() < 2)
    return fail("folds operands of rank 2 or more only");
  const int64_t M = a->shape[a->shape.size() - 2], K = a->shape.back(),
                N = b->shape.back();
  if (b->shape[b->shape.size() - 2] != K)
    return fail("contracting dims differ: " + shapeStr(a->shape) + " x " +
                shapeStr(b->shape));
  Shape lead, la(a->shape.begin(), a->shape.end() - 2),
      lb(b->shape.begin(), b->shape.end() - 2);
  if (!broadcastShapes(la, lb, lead))
    return fail("batch dims " + shapeStr(la) + " and " + shapeStr(lb) +
                " do not broadcast");
  Shape shape = lead;
  shape.push_back(M);
  shape.push_back(N);
  if (!sized(shape))
    return false;
  std::vector<int64_t> ia = broadcastIndex(la, lead),
                       ib = broadcastIndex(lb, lead);
  HostTensor t = make(a->type, shape);
  for (size_t g = 0; g < ia.size(); ++g)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double sum = 0;
        for (int64_t k = 0; k < K; ++k)
          sum += a->reals[size_t((ia[g] * M + i) * K + k)] *
                 b->reals[size_t((ib[g] * K + k) * N + j)];
        t.reals[size_t((int64_t(g) * M + i) * N + j)] = roundTo(t.type, sum);
      }
  out.push_back(std::move(t));
  return true;
}

bool NodeFolder::constant() {
  const auto &a = node.attribute();
  if (a.size() != 1)
    return fail("a Constant needs exactly one value attribute");
  const std::string &n = a[0].name();
  HostTensor t;
  if (n == "value") {
    std::string e = tensorFromProto(a[0].t(), t);
    if (!e.empty())
      return fail(e);
  } else if (n == "value_int" || n == "value_ints") {
    t.type = HostType::I64;
    if (n == "value_int")
      t.ints = {a[0].i()};
    else
      t.ints.assign(a[0].ints().begin(), a[0].ints().end()),
          t.shape = {int64_t(t.ints.size())};
  } else if (n == "value_float" || n == "value_floats") {
    t.type = HostType::F32;
    if (n == "value_float")
      t.reals = {double(a[0].f())};
    else
      t.reals.assign(a[0].floats().begin(), a[0].floats().end()),
          t.shape = {int64_t(t.reals.size())};
  } else {
    return fail("attribute '" + n + "' is not supported");
  }
  out.push_back(std::move(t));
  return true;
}

bool NodeFolder::cast(HostType to) {
  const HostTensor *x;
  if (!input(0, x))
    return false;
  HostTensor t = make(to, x->shape);
  for (int64_t i = 0, n = x->numel(); i < n; ++i) {
    double v = x->real(i);
    if (t.isFloat())
      t.reals[i] = roundTo(to, x->isFloat() ? x->reals[i] : double(x->ints[i]));
    else if (to == HostType::Bool)
      t.ints[i] = x->isFloat() ? v != 0 : x->ints[i] != 0;
    else if (x->isFloat()) {
      if (!(std::fabs(v) < 9.2e18))
        return fail("casting " + std::to_string(v) + " to an integer");
      t.ints[i] = int64_t(v); // toward zero
    } else {
      t.ints[i] = x->ints[i]; // int32 range checked in foldNode
    }
  }
  out.push_back(std::move(t));
  return true;
}

bool NodeFolder::unary(const std::string &op) {
  const HostTensor *x;
  if (!input(0, x))
    return false;
  if (op == "Not" || op == "IsNaN") {
    if (op == "Not" && x->type != HostType::Bool)
      return fail("takes bools, got " + std::string(hostTypeName(x->type)));
    HostTensor t = make(HostType::Bool, x->shape);
    for (int64_t i = 0, n = x->numel(); i < n; ++i)
      t.ints[i] =
          op == "Not" ? !x->ints[i] : (x->isFloat() && std::isnan(x->reals[i]));
    out.push_back(std::move(t));
    return true;
  }
  HostTensor t = *x;
  if (op == "Identity") {
    out.push_back(std::move(t));
    return true;
  }
  if (op == "Neg" && !t.isFloat()) {
    for (int64_t &v : t.ints)
      v = -v;
    out.push_back(std::move(t));
    return true;
  }
  if (op == "Abs" && !t.isFloat()) {
    for (int64_t &v : t.ints)
      v = v < 0 ? -v : v;
    out.push_back(std::move(t));
    return true;
  }
  if (!t.isFloat())
    return fail("folds on floats only, got " +
                std::string(hostTypeName(t.type)));
  std::function<double(double)> f;
  if (op == "Sqrt")
    f = [](double v) { return std::sqrt(v); };
  else if (op == "Neg")
    f = [](double v) { return -v; };
  else if (op == "Abs")
    f = [](double v) { return std::fabs(v); };
  else if (op == "Exp")
    f = [](double v) { return std::exp(v); };
  else if (op == "Log")
    f = [](double v) { return std::log(v); };
  else if (op == "Reciprocal")
    f = [](double v) { return 1.0 / v; };
  else if (op == "Floor")
    f = [](double v) { return std::floor(v); };
  else if (op == "Ceil")
    f = [](double v) { return std::ceil(v); };
  else if (op == "Tanh")
    f = [](double v) { return std::tanh(v); };
  else if (op == "Sin")
    f = [](double v) { return std::sin(v); };
  else if (op == "Cos")
    f = [](double v) { return std::cos(v); };
  // f32: computed in double, then rounded; ONNX leaves the f32 rounding of
  // these to the runtime, and correctly rounded is what torch's are close to.
  for (double &v : t.reals)
    v = roundTo(t.type, f(v));
  out.push_back(std::move(t));
  return true;
}

namespace {
enum class BinOp {
  Add,
  Sub,
  Mul,
  Div,
  Pow,
  Max,
  Min,
  Equal,
  Less,
  LessOrEqual,
  Greater,
  GreaterOrEqual,
  And,
  Or,
  Xor
};
template <typename T> bool compareOp(BinOp code, T x, T y) {
  switch (code) {
  case BinOp::Equal:
    return x == y;
  case BinOp::Less:
    return x < y;
  case BinOp::LessOrEqual:
    return x <= y;
  case BinOp::Greater:
    return x > y;
  default:
    return x >= y;
  }
}
bool decodeBinOp(const std::string &op, BinOp &code) {
  static const std::map<std::string, BinOp> kOps = {
      {"Add", BinOp::Add},         {"Sub", BinOp::Sub},
      {"Mul", BinOp::Mul},         {"Div", BinOp::Div},
      {"Pow", BinOp::Pow},         {"Max", BinOp::Max},
      {"Min", BinOp::Min},         {"Equal", BinOp::Equal},
      {"Less", BinOp::Less},       {"LessOrEqual", BinOp::LessOrEqual},
      {"Greater", BinOp::Greater}, {"GreaterOrEqual", BinOp::GreaterOrEqual},
      {"And", BinOp::And},         {"Or", BinOp::Or},
      {"Xor", BinOp::Xor}};
  auto it = kOps.find(op);
  if (it == kOps.end())
    return false;
  code = it->second;
  return true;
}
} // namespace

bool NodeFolder::binary(const std::string &op) {
  const HostTensor *a, *b;
  if (!input(0, a) || !input(1, b))
    return false;
  BinOp code;
  if (!decodeBinOp(op, code))
    return fail("is not a binary op weft folds");
  const bool logic =
      code == BinOp::And || code == BinOp::Or || code == BinOp::Xor;
  const bool compare = code >= BinOp::Equal && code <= BinOp::GreaterOrEqual;
  const bool pow = code == BinOp::Pow;
  if (a->type != b->type && !pow)
    return fail("inputs of types " + std::string(hostTypeName(a->type)) +
                " and " + hostTypeName(b->type));
  if (logic && (a->isFloat() || b->isFloat()))
    return fail("is not defined on floats");
  Shape shape;
  if (!broadcastShapes(a->shape, b->shape, shape))
    return fail("shapes " + shapeStr(a->shape) + " and " + shapeStr(b->shape) +
                " do not broadcast");
  if (!sized(shape))
    return false;
  std::vector<int64_t> ia = broadcastIndex(a->shape, shape),
                       ib = broadcastIndex(b->shape, shape);
  HostType type = logic || compare ? HostType::Bool : a->type;
  HostTensor t = make(type, shape);
  const bool real = a->isFloat() || pow;
  for (size_t i = 0; i < ia.size(); ++i) {
    if (compare) { // alike on reals and integers
      t.ints[i] = real ? compareOp(code, a->real(ia[i]), b->real(ib[i]))
                       : compareOp(code, a->ints[ia[i]], b->ints[ib[i]]);
      continue;
    }
    if (real) {
      double x = a->real(ia[i]), y = b->real(ib[i]), r = 0;
      switch (code) {
      case BinOp::Add:
        r = x + y;
        break;
      case BinOp::Sub:
        r = x - y;
        break;
      case BinOp::Mul:
        r = x * y;
        break;
      case BinOp::Div:
        r = x / y;
        break;
      case BinOp::Pow:
        r = std::pow(x, y);
        break;
      case BinOp::Max:
        r = std::isnan(x) || std::isnan(y) ? NAN : std::max(x, y);
        break;
      case BinOp::Min:
        r = std::isnan(x) || std::isnan(y) ? NAN : std::min(x, y);
        break;
      default:
        return fail("is not defined on floats");
      }
      if (t.isFloat())
        t.reals[i] = roundTo(type, r);
      else if (pow && !(std::fabs(r) < 9.2e18))
        return fail("integer power overflows");
      else
        t.ints[i] = int64_t(r);
      continue;
    }
    int64_t x = a->ints[ia[i]], y = b->ints[ib[i]], r = 0;
    // Integer arithmetic on shapes: checked, an overflow is refused.
    switch (code) {
    case BinOp::Add:
      if (__builtin_add_overflow(x, y, &r))
        return fail("integer overflow");
      break;
    case BinOp::Sub:
      if (__builtin_sub_overflow(x, y, &r))
        return fail("integer overflow");
      break;
    case BinOp::Mul:
      if (__builtin_mul_overflow(x, y, &r))
        return fail("integer overflow");
      break;
    case BinOp::Div:
      if (y == 0 || (x == INT64_MIN && y == -1))
        return fail("integer division by " + std::to_string(y));
      r = x / y; // C truncation, as ONNX's integer Div
      break;
    case BinOp::Max:
      r = std::max(x, y);
      break;
    case BinOp::Min:
      r = std::min(x, y);
      break;
    case BinOp::And:
      r = x && y;
      break;
    case BinOp::Or:
      r = x || y;
      break;
    case BinOp::Xor:
      r = (x != 0) != (y != 0);
      break;
    default: // Pow folds as reals, comparisons above
      break;
    }
    t.ints[i] = r;
  }
  out.push_back(std::move(t));
  return true;
}

bool NodeFolder::where() {
  const HostTensor *c, *x, *y;
  if (!input(0, c) || !input(1, x) || !input(2, y))
    return false;
  if (x->type != y->type)
    return fail("branches of types " + std::string(hostTypeName(x->type)) +
                " and " + hostTypeName(y->type));
  Shape s1, shape;
  if (!broadcastShapes(c->shape, x->shape, s1) ||
      !broadcastShapes(s1, y->shape, shape))
    return fail("shapes do not broadcast");
  if (!sized(shape))
    return false;
  auto ic = broadcastIndex(c->shape, shape),
       ix = broadcastIndex(x->shape, shape),
       iy = broadcastIndex(y->shape, shape);
  HostTensor t = make(x->type, shape);
  for (size_t i = 0; i < ic.size(); ++i) {
    bool pick = c->isFloat() ? c->reals[ic[i]] != 0 : c->ints[ic[i]] != 0;
    if (t.isFloat())
      t.reals[i] = pick ? x->reals[ix[i]] : y->reals[iy[i]];
    else
      t.ints[i] = pick ? x->ints[ix[i]] : y->ints[iy[i]];
  }
  out.push_back(std::move(t));
  return true;
}

bool NodeFolder::range() {
  const HostTensor *s, *l, *d;
  if (!input(0, s) || !input(1, l) || !input(2, d))
    return false;
  if (s->numel() != 1 || l->numel() != 1 || d->numel() != 1)
    return fail("start, limit and delta must be scalars");
  if (s->type != l->type || s->type != d->type)
    return fail("start, limit and delta differ in type");
  double start = s->real(0), limit = l->real(0), delta = d->real(0);
  if (delta == 0)
    return fail("delta is 0");
  double n = std::max(std::ceil((limit - start) / delta), 0.0);
  if (!(n <= double(kMaxFoldedElements)))
    return fail("a range of " + std::to_string(n) + " elements");
  HostTensor t = make(s->type, {int64_t(n)});
  for (int64_t i = 0; i < int64_t(n); ++i)
    if (t.isFloat())
      t.reals[i] = roundTo(t.type, start + double(i) * delta);
    else if (__builtin_mul_overflow(i, d->ints[0], &t.ints[i]) ||
             __builtin_add_overflow(t.ints[i], s->ints[0], &t.ints[i]))
      return fail("integer overflow");
  out.push_back(std::move(t));
  return true;
}

bool NodeFolder::reshape() {
  const HostTensor *x;
  std::vector<int64_t> target;
  if (!input(0, x) || !ints(1, target, "shape"))
    return false;
  Shape shape;
  std::string e =
      reshapeTarget(x->shape, target, intAttr("allowzero", 0), shape);
  if (!e.empty())
    return fail(e);
  HostTensor t = *x;
  t.shape = shape;
  out.push_back(std::move(t));
  return true;
}

// [d0 .. d(axis-1)] and [d(axis) ..] each multiplied out.
bool NodeFolder::flatten() {
  const HostTensor *x;
  if (!input(0, x))
    return false;
  const int64_t rank = int64_t(x->shape.size());
  int64_t axis = intAttr("axis", 1);
  if (axis < -rank || axis > rank)
    return fail("axis " + std::to_string(axis) + " is out of range for rank " +
                std::to_string(rank));
  axis = axis < 0 ? axis + rank : axis;
  HostTensor t = *x;
  t.shape = {1, 1};
  for (int64_t d = 0; d < rank; ++d)
    t.shape[d < axis ? 0 : 1] *= x->shape[size_t(d)];
  out.push_back(std::move(t));
  return true;
}

bool NodeFolder::unsqueeze(bool squeeze) {
  const HostTensor *x;
  if (!input(0, x))
    return false;
  std::vector<int64_t> axes;
  bool fromAttr;
  const bool given = in.size() > 1 && in[1];
  std::string why =
      listBeforeInput(node, opset, 13, "axes", given, fromAttr, axes);
  if (!why.empty())
    return fail(why);
  if (given && !ints(1, axes, "axes"))
    return false;
  Shape shape;
  std::string e = squeeze ? squeezeShape(x->shape, axes, shape)
                          : unsqueezeShape(x->shape, axes, shape);
  if (!e.empty())
    return fail(e);
  HostTensor t = *x;
  t.shape = shape;
  out.push_back(std::move(t));
  return true;
}

bool NodeFolder::concat() {
  if (in.empty())
    return fail("has no inputs");
  const HostTensor *first;
  if (!input(0, first))
    return false;
  const int64_t rank = int64_t(first->shape.size());
  int64_t ax;
  if (!axis(intAttr("axis", 0), rank, ax))
    return false;
  Shape shape = first->shape;
  shape[ax] = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const HostTensor *t;
    if (!input(i, t))
      return false;
    if (t->type != first->type || int64_t(t->shape.size()) != rank)
      return fail("input " + std::to_string(i) + " differs in type or rank");
    for (int64_t d = 0; d < rank; ++d)
      if (d != ax && t->shape[d] != first->shape[d])
        return fail("input " + std::to_string(i) + " has shape " +
                    shapeStr(t->shape) + ", input 0 " + shapeStr(first->shape));
    shape[ax] += t->shape[ax];
  }
  if (!sized(shape))
    return false;
  HostTensor t = make(first->type, shape);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < ax; ++d)
    outer *= shape[d];
  for (int64_t d = ax + 1; d < rank; ++d)
    inner *= shape[d];
  int64_t pos = 0;
  for (int64_t o = 0; o < outer; ++o)
    for (const HostTensor *x : in) {
      int64_t chunk = x->shape[ax] * inner;
      for (int64_t k = 0; k < chunk; ++k, ++pos)
        if (t.isFloat())
          t.reals[pos] = x->reals[o * chunk + k];
        else
          t.ints[pos] = x->ints[o * chunk + k];
    }
  out.push_back(std::move(t));
  return true;
}

bool NodeFolder::slice() {
  const HostTensor *x;
  std::vector<int64_t> starts, ends, axes, steps;
  if (!input(0, x))
    return false;
  if (opset < 10) {
    std::string why = sliceAttrs(node, in.size(), starts, ends, axes);
    if (!why.empty())
      return fail(why);
  } else {
    if (!ints(1, starts, "starts") || !ints(2, ends, "ends"))
      return false;
    if (in.size() > 3 && in[3] && !ints(3, axes, "axes"))
      return false;
    if (in.size() > 4 && in[4] && !ints(4, steps, "steps"))
      return false;
  }
  SliceSpec spec;
  std::string e = sliceSpec(x->shape, starts, ends, axes, steps, spec);
  if (!e.empty())
    return fail(e);
  std::vector<int64_t> index;
  const Shape &shape = spec.shape;
  Shape xs = strides(x->shape), os = strides(shape);
  for (int64_t i = 0, n = count(shape); i < n; ++i) {
    int64_t src = 0;
    for (size_t d = 0; d < shape.size(); ++d)
      src += (spec.start[d] + ((i / os[d]) % shape[d]) * spec.step[d]) * xs[d];
    index.push_back(src);
  }
  out.push_back(take(*x, shape, index));
  return true;
}

bool NodeFolder::transpose() {
  const HostTensor *x;
  if (!input(0, x))
    return false;
  std::vector<int64_t> perm;
  if (const auto *a = attr("perm"))
    perm.assign(a->ints().begin(), a->ints().end());
  Shape shape;
  std::string e = transposeShape(x->shape, perm, shape);
  if (!e.empty())
    return fail(e);
  if (perm.empty())
    for (int64_t d = int64_t(x->shape.size()) - 1; d >= 0; --d)
      perm.push_back(d);
  Shape xs = strides(x->shape), os = strides(shape);
  std::vector<int64_t> index;
  for (int64_t i = 0, n = count(shape); i < n; ++i) {
    int64_t src = 0;
    for (size_t d = 0; d < shape.size(); ++d)
      src += ((i / os[d]) % shape[d]) * xs[perm[d]];
    index.push_back(src);
  }
  out.push_back(take(*x, shape, index));
  return true;
}

bool NodeFolder::expand() {
  const HostTensor *x;
  std::vector<int64_t> target;
  if (!input(0, x) || !ints(1, target, "shape"))
    return false;
  Shape shape;
  if (!broadcastShapes(x->shape, target, shape))
    return fail("shape " + shapeStr(x->shape) + " does not expand to " +
                shapeStr(target));
  if (!sized(shape))
    return false;
  out.push_back(take(*x, shape, broadcastIndex(x->shape, shape)));
  return true;
}

bool NodeFolder::gather() {
  const HostTensor *x;
  std::vector<int64_t> idx;
  if (!input(0, x) || !ints(1, idx, "indices"))
    return false;
  const int64_t rank = int64_t(x->shape.size());
  int64_t ax;
  if (!axis(intAttr("axis", 0), rank, ax))
    return false;
  const Shape &is = in[1]->shape;
  Shape shape(x->shape.begin(), x->shape.begin() + ax);
  shape.insert(shape.end(), is.begin(), is.end());
  shape.insert(shape.end(), x->shape.begin() + ax + 1, x->shape.end());
  if (!sized(shape))
    return false;
  int64_t outer = 1, inner = 1, n = x->shape[ax];
  for (int64_t d = 0; d < ax; ++d)
    outer *= x->shape[d];
  for (int64_t d = ax + 1; d < rank; ++d)
    inner *= x->shape[d];
  std::vector<int64_t> from;
  for (int64_t o = 0; o < outer; ++o)
    for (size_t j = 0; j < idx.size(); ++j) {
      int64_t k;
      if (!index(idx, j, n, k))
        return false;
      for (int64_t i = 0; i < inner; ++i)
        from.push_back((o * n + k) * inner + i);
    }
  out.push_back(take(*x, shape, from));
  return true;
}

// out[i_0, .., i_r] = x[i_0, .., idx[i_0, .., i_r], .., i_r], idx at `axis`;
// indices of x's rank, no dim larger than x's (ONNX GatherElements).
bool NodeFolder::gatherElements() {
  const HostTensor *x;
  std::vector<int64_t> idx;
  if (!input(0, x) || !ints(1, idx, "indices"))
    return false;
  const int64_t rank = int64_t(x->shape.size());
  const Shape &is = in[1]->shape;
  int64_t ax;
  if (!axis(intAttr("axis", 0), rank, ax))
    return false;
  if (int64_t(is.size()) != rank)
    return fail("indices of rank " + std::to_string(is.size()) +
                " for data of rank " + std::to_string(rank));
  for (int64_t d = 0; d < rank; ++d)
    if (d != ax && is[size_t(d)] > x->shape[size_t(d)])
      return fail("indices dim " + std::to_string(d) + " = " +
                  std::to_string(is[size_t(d)]) + " exceeds the data's " +
                  std::to_string(x->shape[size_t(d)]));
  if (!sized(is))
    return false;
  const Shape xs = strides(x->shape), ist = strides(is);
  const int64_t n = x->shape[size_t(ax)];
  std::vector<int64_t> from(idx.size());
  for (size_t j = 0; j < idx.size(); ++j) {
    int64_t k;
    if (!index(idx, j, n, k))
      return false;
    int64_t at = 0, rest = int64_t(j);
    for (int64_t d = 0; d < rank; ++d) {
      int64_t c = rest / ist[size_t(d)];
      rest %= ist[size_t(d)];
      at += (d == ax ? k : c) * xs[size_t(d)];
    }
    from[j] = at;
  }
  out.push_back(take(*x, is, from));
  return true;
}

bool NodeFolder::gatherNd() {
  const HostTensor *x;
  std::vector<int64_t> idx;
  if (!input(0, x) || !ints(1, idx, "indices"))
    return false;
  if (intAttr("batch_dims", 0) != 0)
    return fail("batch_dims other than 0 is not supported");
  const Shape &is = in[1]->shape;
  if (is.empty())
    return fail("indices must have rank >= 1");
  const int64_t k = is.back();
  if (k < 1 || k > int64_t(x->shape.size()))
    return fail("index tuples of length " + std::to_string(k) +
                " for data of rank " + std::to_string(x->shape.size()));
  Shape shape(is.begin(), is.end() - 1);
  shape.insert(shape.end(), x->shape.begin() + k, x->shape.end());
  if (!sized(shape))
    return false;
  int64_t inner = 1;
  for (size_t d = size_t(k); d < x->shape.size(); ++d)
    inner *= x->shape[d];
  Shape xs = strides(x->shape);
  std::vector<int64_t> index;
  for (size_t t = 0; t + size_t(k) <= idx.size(); t += size_t(k)) {
    int64_t base = 0;
    for (int64_t d = 0; d < k; ++d) {
      int64_t v = idx[t + d], n = x->shape[d];
      v = v < 0 ? v + n : v;
      if (v < 0 || v >= n)
        return fail("index " + std::to_string(idx[t + d]) +
                    " is out of range for dim " + std::to_string(n));
      base += v * xs[d];
    }
    for (int64_t i = 0; i < inner; ++i)
      index.push_back(base + i);
  }
  out.push_back(take(*x, shape, index));
  return true;
}

// ScatterND without reduction: data, with each index tuple's slice (the
// index tuples are the last dim of indices) replaced by the updates' next
// one, in order (torch's slice assignment `m[:, :, :, :n] = ...`).
bool NodeFolder::scatterNd() {
  const HostTensor *x, *u;
  std::vector<int64_t> idx;
  if (!input(0, x) || !ints(1, idx, "indices") || !input(2, u))
    return false;
  const auto *reduction = attr("reduction");
  if (reduction && reduction->s() != "none")
    return fail("reduction '" + reduction->s() + "' is not folded");
  if (u->type != x->type)
    return fail("updates of type " + std::string(hostTypeName(u->type)) +
                " for data of type " + hostTypeName(x->type));
  const Shape &is = in[1]->shape;
  const int64_t k = is.empty() ? 0 : is.back();
  if (k < 1 || k > int64_t(x->shape.size()))
    return fail("index tuples of length " + std::to_string(k) +
                " for data of rank " + std::to_string(x->shape.size()));
  Shape want(is.begin(), is.end() - 1);
  want.insert(want.end(), x->shape.begin() + k, x->shape.end());
  if (u->shape != want)
    return fail("updates of shape " + shapeStr(u->shape) + ", expected " +
                shapeStr(want));
  int64_t inner = 1;
  for (size_t d = size_t(k); d < x->shape.size(); ++d)
    inner *= x->shape[d];
  Shape xs = strides(x->shape);
  HostTensor t = *x;
  int64_t from = 0;
  for (size_t j = 0; j + size_t(k) <= idx.size(); j += size_t(k)) {
    int64_t base = 0;
    for (int64_t d = 0; d < k; ++d) {
      int64_t v;
      if (!index(idx, j + size_t(d), x->shape[size_t(d)], v))
        return false;
      base += v * xs[size_t(d)];
    }
    for (int64_t i = 0; i < inner; ++i, ++from) {
      if (t.isFloat())
        t.reals[size_t(base + i)] = u->reals[size_t(from)];
      else
        t.ints[size_t(base + i)] = u->ints[size_t(from)];
    }
  }
  out.push_back(std::move(t));
  return true;
}

// Trilu (opset 14): the upper (default) or lower triangle of the last two
// dims, from diagonal k (input 1, default 0); the rest zero.
bool NodeFolder::trilu() {
  const HostTensor *x;
  if (!input(0, x))
    return false;
  if (x->shape.size() < 2)
    return fail("needs rank >= 2, got " + std::to_string(x->shape.size()));
  int64_t k = 0;
  if (in.size() > 1 && in[1]) {
    std::vector<int64_t> kv;
    if (!ints(1, kv, "k"))
      return false;
    if (kv.size() != 1)
      return fail("k must be one value");
    k = kv[0];
  }
  const bool upper = intAttr("upper", 1) != 0;
  const int64_t rows = x->shape[x->shape.size() - 2], cols = x->shape.back();
  HostTensor t = *x;
  for (int64_t at = 0; at < t.numel(); ++at) {
    int64_t j = at % cols, i = (at / cols) % rows;
    if (upper ? j - i >= k : j - i <= k)
      continue;
    if (t.isFloat())
      t.reals[at] = 0;
    else
      t.ints[at] = 0;
  }
  out.push_back(std::move(t));
  return true;
}

bool NodeFolder::cumsum() {
  const HostTensor *x;
  std::vector<int64_t> axv;
  if (!input(0, x) || !ints(1, axv, "axis"))
    return false;
  if (axv.size() != 1)
    return fail("axis must be one value");
  int64_t ax;
  if (!axis(axv[0], int64_t(x->shape.size()), ax))
    return false;
  const bool exclusive = intAttr("exclusive", 0),
             reverse = intAttr("reverse", 0);
  HostTensor t = *x;
  int64_t outer = 1, inner = 1, n = x->shape[ax];
  for (int64_t d = 0; d < ax; ++d)
    outer *= x->shape[d];
  for (size_t d = size_t(ax) + 1; d < x->shape.size(); ++d)
    inner *= x->shape[d];
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      double rsum = 0;
      int64_t isum = 0;
      for (int64_t j = 0; j < n; ++j) {
        int64_t k = reverse ? n - 1 - j : j;
        int64_t at = (o * n + k) * inner + i;
        if (t.isFloat()) {
          double v = x->reals[at];
          if (!exclusive)
            rsum = roundTo(t.type, rsum + v);
          t.reals[at] = rsum;
          if (exclusive)
            rsum = roundTo(t.type, rsum + v);
        } else {
          int64_t v = x->ints[at];
          if (!exclusive && __builtin_add_overflow(isum, v, &isum))
            return fail("integer overflow");
          t.ints[at] = isum;
          if (exclusive && __builtin_add_overflow(isum, v, &isum))
            return fail("integer overflow");
        }
      }
    }
  out.push_back(std::move(t));
  return true;
}

bool NodeFolder::constantOfShape() {
  std::vector<int64_t> shape;
  if (!ints(0, shape, "shape"))
    return false;
  HostTensor value;
  value.type = HostType::F32;
  value.reals = {0.0};
  if (const auto *a = attr("value")) {
    std::string e = tensorFromProto(a->t(), value);
    if (!e.empty())
      return fail(e);
    if (value.numel() != 1)
      return fail("value must hold one element");
  }
  if (!sized(shape))
    return false;
  out.push_back(
      take(value, shape, std::vector<int64_t>(size_t(count(shape)), 0)));
  return true;
}

bool NodeFolder::shapeOf() {
  const HostTensor *x;
  if (!input(0, x))
    return false;
  HostTensor t;
  std::string e = shapeTensor(
      x->shape, intAttr("start", 0),
      attr("end") ? std::optional<int64_t>(attr("end")->i()) : std::nullopt, t);
  if (!e.empty())
    return fail(e);
  out.push_back(std::move(t));
  return true;
}

// The folding of each op type weft folds, by name.
using FoldFn = std::function<bool(NodeFolder &)>;
const std::map<std::string, FoldFn> &folders() {
  static const std::map<std::string, FoldFn> table = [] {
    std::map<std::string, FoldFn> t;
    for (const char *op :
         {"Identity", "Sqrt", "Neg", "Not", "IsNaN", "Abs", "Exp", "Log",
          "Reciprocal", "Floor", "Ceil", "Tanh", "Sin", "Cos"})
      t[op] = [op](NodeFolder &f) { return f.unary(op); };
    for (const char *op :
         {"Add", "Sub", "Mul", "Div", "Pow", "Equal", "Less", "LessOrEqual",
          "Greater", "GreaterOrEqual", "And", "Or", "Xor"})
      t[op] = [op](NodeFolder &f) { return f.binary(op); };
    for (const char *op : {"Max", "Min"}) // variadic in ONNX; two folded
      t[op] = [op](NodeFolder &f) {
        return f.in.size() == 2 ? f.binary(op)
                                : f.fail("folds with two inputs only, got " +
                                         std::to_string(f.in.size()));
      };
    t["Constant"] = &NodeFolder::constant;
    t["Cast"] = [](NodeFolder &f) {
      HostType to;
      int64_t code = f.intAttr("to", 0);
      return hostTypeOf(int(code), to)
                 ? f.cast(to)
                 : f.fail("casts to ONNX type " + onnxTypeString(code) +
                          ", which weft does not fold");
    };
    t["CastLike"] = [](NodeFolder &f) {
      const HostTensor *like;
      return f.input(1, like) && f.cast(like->type);
    };
    t["Where"] = &NodeFolder::where;
    t["Range"] = &NodeFolder::range;
    t["Reshape"] = &NodeFolder::reshape;
    t["Flatten"] = &NodeFolder::flatten;
    t["Unsqueeze"] = [](NodeFolder &f) { return f.unsqueeze(false); };
    t["Squeeze"] = [](NodeFolder &f) { return f.unsqueeze(true); };
    t["Concat"] = &NodeFolder::concat;
    t["Slice"] = &NodeFolder::slice;
    t["Transpose"] = &NodeFolder::transpose;
    t["Expand"] = &NodeFolder::expand;
    t["Gather"] = &NodeFolder::gather;
    t["GatherND"] = &NodeFolder::gatherNd;
    t["ScatterND"] = &NodeFolder::scatterNd;
    t["GatherElements"] = &NodeFolder::gatherElements;
    t["CumSum"] = &NodeFolder::cumsum;
    t["Trilu"] = &NodeFolder::trilu;
    t["ConstantOfShape"] = &NodeFolder::constantOfShape;
    t["Shape"] = &NodeFolder::shapeOf;
    t["MatMul"] = &NodeFolder::matmul;
    return t;
  }();
  return table;
}

bool NodeFolder::run() {
  auto it = folders().find(node.op_type());
  return it != folders().end() ? it->second(*this)
                               : fail("is not folded by weft");
}

} // namespace

int64_t HostTensor::numel() const {
  return isFloat() ? int64_t(reals.size()) : int64_t(ints.size());
}

bool hostTypeOf(int code, HostType &type) {
  switch (code) {
  case onnx::TensorProto_DataType_FLOAT:
  case onnx::TensorProto_DataType_INT32:
  case onnx::TensorProto_DataType_INT64:
  case onnx::TensorProto_DataType_BOOL:
  case onnx::TensorProto_DataType_DOUBLE:
    type = HostType(code);
    return true;
  default:
    return false;
  }
}

std::string nodeLabel(const onnx::NodeProto &node) {
  if (node.name().empty() && node.output_size() > 0)
    return node.op_type() + " node writing '" + node.output(0) + "'";
  return node.op_type() + " node '" + node.name() + "'";
}

std::string onnxTypeString(int64_t code) {
  std::string s = std::to_string(code);
  if (code >= 0 && code <= std::numeric_limits<int>::max() &&
      onnx::TensorProto_DataType_IsValid(int(code)))
    s += " (" +
         onnx::TensorProto_DataType_Name(onnx::TensorProto_DataType(code)) +
         ")";
  return s;
}

const char *hostTypeName(HostType type) {
  switch (type) {
  case HostType::F32:
    return "float32";
  case HostType::F64:
    return "float64";
  case HostType::I32:
    return "int32";
  case HostType::I64:
    return "int64";
  case HostType::Bool:
    return "bool";
  }
  return "?";
}

bool broadcastShapes(const Shape &a, const Shape &b, Shape &out) {
  const size_t rank = std::max(a.size(), b.size());
  out.assign(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t x = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t y = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (x != y && x != 1 && y != 1)
      return false;
    out[i] = x == 1 ? y : x;
  }
  return true;
}

std::string tensorFromProto(const onnx::TensorProto &proto, HostTensor &out,
                            const std::string &modelDir) {
  const std::string what = "tensor '" + proto.name() + "'";
  if (!hostTypeOf(proto.data_type(), out.type))
    return what + " has ONNX type " + onnxTypeString(proto.data_type()) +
           ", which weft does not fold";
  const bool external =
      proto.data_location() == onnx::TensorProto_DataLocation_EXTERNAL;
  if (external && modelDir.empty())
    return what + " keeps its data in an external file; weft folds only "
                  "constants stored in the model";
  out.shape.assign(proto.dims().begin(), proto.dims().end());
  const int64_t n = count(out.shape);
  if (n < 0)
    return what + " of shape " + shapeStr(out.shape) +
           " is larger than weft folds at import";
  // An exported buffer (position ids) may sit in the data file beside the
  // model: its bytes are raw_data's.
  std::string stored;
  if (external) {
    const uint64_t width =
        out.type == HostType::Bool                               ? 1
        : out.type == HostType::I32 || out.type == HostType::F32 ? 4
                                                                 : 8;
    std::string e = readOnnxExternalData(proto, uint64_t(n) * width, modelDir,
                                         what, &stored);
    if (!e.empty())
      return e;
  }
  auto expect = [&](int64_t got) -> std::string {
    return got == n ? ""
                    : what + " holds " + std::to_string(got) +
                          " values, expected " + std::to_string(n) +
                          " for its shape " + shapeStr(out.shape);
  };
  out.reals.clear();
  out.ints.clear();
  if (external || proto.has_raw_data()) {
    const std::string &raw = external ? stored : proto.raw_data();
    size_t width = out.type == HostType::Bool                               ? 1
                   : out.type == HostType::I32 || out.type == HostType::F32 ? 4
                                                                            : 8;
    if (raw.size() % width)
      return what + ": raw_data of " + std::to_string(raw.size()) +
             " bytes is not whole elements";
    std::string e = expect(int64_t(raw.size() / width));
    if (!e.empty())
      return e;
    // Little-endian elements of the stored type (x86-64's order).
    auto load = [&](auto zero, auto &into) {
      for (int64_t i = 0; i < n; ++i) {
        decltype(zero) v;
        std::memcpy(&v, raw.data() + i * sizeof(v), sizeof(v));
        into.push_back(v);
      }
    };
    switch (out.type) {
    case HostType::F32:
      load(float(0), out.reals);
      break;
    case HostType::F64:
      load(double(0), out.reals);
      break;
    case HostType::I32:
      load(int32_t(0), out.ints);
      break;
    case HostType::I64:
      load(int64_t(0), out.ints);
      break;
    case HostType::Bool:
      for (int64_t i = 0; i < n; ++i)
        out.ints.push_back(raw[size_t(i)] != 0);
      break;
    }
    return "";
  }
  std::string e;
  switch (out.type) {
  case HostType::F32:
    e = expect(proto.float_data_size());
    out.reals.assign(proto.float_data().begin(), proto.float_data().end());
    break;
  case HostType::F64:
    e = expect(proto.double_data_size());
    out.reals.assign(proto.double_data().begin(), proto.double_data().end());
    break;
  case HostType::I64:
    e = expect(proto.int64_data_size());
    out.ints.assign(proto.int64_data().begin(), proto.int64_data().end());
    break;
  default: // INT32 and BOOL live in int32_data
    e = expect(proto.int32_data_size());
    out.ints.assign(proto.int32_data().begin(), proto.int32_data().end());
    if (out.type == HostType::Bool)
      for (int64_t &v : out.ints)
        v = v != 0;
  }
  return e;
}

bool canFold(const std::string &op) { return folders().count(op) != 0; }

const onnx::AttributeProto *findAttribute(const onnx::NodeProto &node,
                                          const char *key) {
  for (const auto &x : node.attribute())
    if (x.name() == key)
      return &x;
  return nullptr;
}

std::string listBeforeInput(const onnx::NodeProto &node, int64_t opset,
                            int64_t since, const char *key, bool hasInput,
                            bool &fromAttr, std::vector<int64_t> &out) {
  const onnx::AttributeProto *a = findAttribute(node, key);
  fromAttr = false;
  const std::string when = " opset " + std::to_string(since);
  if (opset >= since)
    return a ? std::string("takes its ") + key + " as an input from" + when +
                   ", not as an attribute"
             : "";
  if (hasInput)
    return std::string("takes its ") + key + " as an attribute before" + when +
           ", not as an input";
  if (a) {
    fromAttr = true;
    out.assign(a->ints().begin(), a->ints().end());
  }
  return "";
}

std::string sliceAttrs(const onnx::NodeProto &node, size_t inputs,
                       std::vector<int64_t> &starts, std::vector<int64_t> &ends,
                       std::vector<int64_t> &axes) {
  if (inputs != 1)
    return "reads " + std::to_string(inputs) +
           " inputs; before opset 10 starts, ends and axes are attributes";
  const onnx::AttributeProto *s = findAttribute(node, "starts"),
                             *e = findAttribute(node, "ends"),
                             *a = findAttribute(node, "axes");
  if (!s || !e)
    return "has no starts or ends attribute (required before opset 10)";
  starts.assign(s->ints().begin(), s->ints().end());
  ends.assign(e->ints().begin(), e->ints().end());
  if (a)
    axes.assign(a->ints().begin(), a->ints().end());
  return "";
}

std::string foldNode(const onnx::NodeProto &node, int64_t opset,
                     const std::vector<const HostTensor *> &inputs,
                     std::vector<HostTensor> &outputs) {
  NodeFolder folder{node, opset, inputs, outputs, ""};
  outputs.clear();
  if (!folder.run())
    return folder.error;
  // int32 results are computed in int64: one out of int32's range would
  // wrap where ONNX's runtime does.
  for (const HostTensor &t : outputs)
    if (t.type == HostType::I32)
      for (int64_t v : t.ints)
        if (v < INT32_MIN || v > INT32_MAX)
          return nodeLabel(node) + ": the int32 result " + std::to_string(v) +
                 " is out of int32's range";
  return "";
}

} // namespace onnximport
} // namespace weft
