//===- PaddingMask.cpp - values computed from an attention_mask -----------===//
#include "frontends/onnx/PaddingMask.h"

#include <onnx/onnx_pb.h>

#include <algorithm>

#include <map>
#include <set>

namespace weft {
namespace onnximport {

namespace {

using Shape = std::vector<int64_t>;

// Ops whose result element e is a function of each input's element at e
// (numpy broadcasting): a mask element stays on its axes.
const std::set<std::string> &elementwiseOps() {
  static const std::set<std::string> ops = {"Abs",
                                            "Add",
                                            "And",
                                            "Cast",
                                            "CastLike",
                                            "Ceil",
                                            "Clip",
                                            "Div",
                                            "Equal",
                                            "Exp",
                                            "Floor",
                                            "Greater",
                                            "GreaterOrEqual",
                                            "Identity",
                                            "IsInf",
                                            "IsNaN",
                                            "Less",
                                            "LessOrEqual",
                                            "Log",
                                            "Max",
                                            "Min",
                                            "Mod",
                                            "Mul",
                                            "Neg",
                                            "Not",
                                            "Or",
                                            "Pow",
                                            "Reciprocal",
                                            "Sign",
                                            "Sqrt",
                                            "Sub",
                                            "Where",
                                            "Xor"};
  return ops;
}

// Ops whose result elements are elements of some inputs (these), moved;
// the others (shapes, axes, indices) are constants. -1: every input.
const std::map<std::string, std::vector<int>> &movingOps() {
  static const std::map<std::string, std::vector<int>> ops = {
      {"Concat", {-1}},      {"Expand", {0}},   {"Flatten", {0}},
      {"Gather", {0}},       {"GatherND", {0}}, {"Reshape", {0}},
      {"ScatterND", {0, 2}}, {"Slice", {0}},    {"Squeeze", {0}},
      {"Transpose", {0}},    {"Unsqueeze", {0}}};
  return ops;
}

Shape stridesOf(const Shape &shape) {
  Shape s(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;)
    s[i - 1] = s[i] * shape[i];
  return s;
}

// x's elements broadcast (numpy, right-aligned) to `shape`, which x's shape
// broadcasts to.
std::vector<int64_t> broadcastTo(const HostTensor &x, const Shape &shape) {
  const Shape outStrides = stridesOf(shape), inStrides = stridesOf(x.shape);
  const size_t off = shape.size() - x.shape.size();
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  std::vector<int64_t> out(static_cast<size_t>(n));
  for (int64_t f = 0; f < n; ++f) {
    int64_t at = 0;
    for (size_t c = off; c < shape.size(); ++c)
      if (x.shape[c - off] != 1)
        at += (f / outStrides[c]) % shape[c] * inStrides[c - off];
    out[size_t(f)] = x.ints[size_t(at)];
  }
  return out;
}

std::string maskElement(int64_t source, int64_t seq) {
  return "attention_mask[" + std::to_string(source / seq) + ", " +
         std::to_string(source % seq) + "]";
}

// Element `flat`'s index in `shape`, or the shape itself for flat = -1.
std::string indexStr(int64_t flat, const Shape &shape) {
  const Shape strides = stridesOf(shape);
  std::string s = "[";
  for (size_t c = 0; c < shape.size(); ++c)
    s += (c ? ", " : "") +
         std::to_string(flat < 0 ? shape[c] : (flat / strides[c]) % shape[c]);
  return s + "]";
}

} // namespace

PaddedValue paddedInput(HostType type, int64_t rows, int64_t seq) {
  PaddedValue v;
  for (HostTensor *t : {&v.ifTokens, &v.ifPadding, &v.source}) {
    t->type = t == &v.source ? HostType::I64 : type;
    t->shape = {rows, seq};
    t->ints.assign(size_t(rows * seq), t == &v.ifTokens ? 1 : 0);
  }
  for (size_t i = 0; i < v.source.ints.size(); ++i)
    v.source.ints[i] = int64_t(i);
  v.rows = rows;
  v.seq = seq;
  return v;
}

std::string foldPadded(const onnx::NodeProto &n, const std::string &nodeName,
                       int64_t opset,
                       const std::vector<const HostTensor *> &constants,
                       const std::vector<const PaddedValue *> &padded,
                       std::vector<PaddedValue> &outputs) {
  const std::string &op = n.op_type();
  const bool elementwise = elementwiseOps().count(op) != 0;
  auto moves = movingOps().find(op);
  const bool moving = moves != movingOps().end();
  if ((!elementwise && !moving) || !canFold(op))
    return nodeName + " computes from the attention_mask input with " + op +
           ": weft reads attention_mask as the attention's key padding only "
           "(each score kept or dropped by its own key's mask value, through "
           "elementwise ops and views)";
  auto isData = [&](size_t i) {
    const std::vector<int> &d = moves->second;
    return d[0] < 0 || std::find(d.begin(), d.end(), int(i)) != d.end();
  };
  for (size_t i = 0; moving && i < padded.size(); ++i)
    if (padded[i] && !isData(i))
      return nodeName + " takes the shape, axes or indices of a move from "
                        "the attention_mask input; weft reads attention_mask "
                        "as key padding only";
  // The two foldings.
  std::vector<HostTensor> results[2];
  for (int k = 0; k < 2; ++k) {
    std::vector<const HostTensor *> in = constants;
    for (size_t i = 0; i < padded.size(); ++i)
      if (padded[i])
        in[i] = k ? &padded[i]->ifPadding : &padded[i]->ifTokens;
    if (std::string e = foldNode(n, opset, in, results[k]); !e.empty())
      return e;
  }
  if (results[0].size() != 1)
    return nodeName + " has " + std::to_string(results[0].size()) +
           " results; weft follows the attention_mask input through nodes "
           "of one";
  outputs.assign(1, PaddedValue());
  PaddedValue &out = outputs[0];
  out.ifTokens = std::move(results[0][0]);
  out.ifPadding = std::move(results[1][0]);
  for (const PaddedValue *p : padded)
    if (p) {
      out.rows = p->rows;
      out.seq = p->seq;
    }
  if (moving) {
    // The move folded on the sources: each data input's mask indices (-1
    // throughout a constant's).
    std::vector<HostTensor> none(padded.size());
    std::vector<const HostTensor *> args = constants;
    for (size_t i = 0; i < padded.size(); ++i) {
      if (!isData(i) || (!padded[i] && !constants[i]))
        continue;
      if (padded[i]) {
        args[i] = &padded[i]->source;
        continue;
      }
      none[i].type = HostType::I64;
      none[i].shape = constants[i]->shape;
      none[i].ints.assign(size_t(constants[i]->numel()), -1);
      args[i] = &none[i];
    }
    std::vector<HostTensor> from;
    if (std::string e = foldNode(n, opset, args, from); !e.empty())
      return e;
    out.source = std::move(from[0]);
    return "";
  }
  // Elementwise: every padded operand's source, broadcast to the result;
  // all of them must name the same mask element.
  out.source.type = HostType::I64;
  out.source.shape = out.ifTokens.shape;
  out.source.ints.assign(size_t(out.ifTokens.numel()), -1);
  for (const PaddedValue *p : padded) {
    if (!p)
      continue;
    std::vector<int64_t> mine = broadcastTo(p->source, out.source.shape);
    for (size_t f = 0; f < mine.size(); ++f) {
      int64_t &at = out.source.ints[f];
      if (mine[f] >= 0 && at >= 0 && mine[f] != at)
        return nodeName + " combines " + maskElement(at, out.seq) + " and " +
               maskElement(mine[f], out.seq) + " in its element " +
               indexStr(int64_t(f), out.source.shape) +
               "; weft reads attention_mask as key padding only";
      if (mine[f] >= 0)
        at = mine[f];
    }
  }
  return "";
}

std::string keyMaskForm(const PaddedValue &v) {
  const Shape &s = v.source.shape;
  const int64_t rank = int64_t(s.size());
  if (rank < 2)
    return "which is not an attention's mask [rows, .., keys] (rank " +
           std::to_string(rank) +
           "); weft reads attention_mask as key "
           "padding only";
  // Every row and every key, each on its own axis: the first and the last.
  auto notOwn = [&](const char *axis, int64_t has, const char *what,
                    int64_t want) {
    return "which is not an attention's mask [rows, .., keys]: its " +
           std::string(axis) + " axis has " + std::to_string(has) +
           " elements, the mask's " + what + " " + std::to_string(want) +
           " (shape " + indexStr(-1, s) +
           "); weft reads attention_mask as "
           "key padding only";
  };
  if (v.seq > 1 && s[size_t(rank - 1)] != v.seq)
    return notOwn("last", s[size_t(rank - 1)], "keys", v.seq);
  if (v.rows > 1 && s[0] != v.rows)
    return notOwn("first", s[0], "rows", v.rows);
  const Shape strides = stridesOf(s);
  for (int64_t f = 0; f < int64_t(v.source.ints.size()); ++f) {
    const int64_t src = v.source.ints[size_t(f)];
    if (src < 0)
      continue;
    const int64_t row = v.rows == 1 ? 0 : (f / strides[0]) % s[0];
    const int64_t key = v.seq == 1 ? 0 : f % s[size_t(rank - 1)];
    if (src == row * v.seq + key)
      continue;
    return "which is not an attention's mask [rows, .., keys]: its element " +
           indexStr(f, s) + " follows " + maskElement(src, v.seq) +
           ", where an attention's mask holds attention_mask[" +
           std::to_string(row) + ", " + std::to_string(key) +
           "]; weft reads attention_mask as key padding only";
  }
  return "";
}

} // namespace onnximport
} // namespace weft
