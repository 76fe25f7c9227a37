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
      {"Concat", {-1}}, {"Expand", {0}},       {"Flatten", {0}},
      {"Reshape", {0}}, {"ScatterND", {0, 2}}, {"Slice", {0}},
      {"Squeeze", {0}}, {"Transpose", {0}},    {"Unsqueeze", {0}}};
  return ops;
}

Shape stridesOf(const Shape &shape) {
  Shape s(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;)
    s[i - 1] = s[i] * shape[i];
  return s;
}

// One input a moving op reads elements from: its flat indices start at
// `first` in the tagged folding; a constant's elements are tagged -1.
struct Source {
  const PaddedValue *padded = nullptr;
  int64_t first = 0, size = 0;
};

// Where a moving op puts the mask's rows (row) or keys: the output axis
// whose index equals, at every element taken from a padded input, that
// input's index along its own row (key) axis; `from` holds each output
// element's tagged source index. -1: no padded input has such an axis (the
// mask has one row, or one key); -2: no output axis does it.
int64_t movedAxis(bool row, const std::vector<Source> &sources,
                  const HostTensor &from) {
  bool any = false;
  for (const Source &src : sources)
    any |= src.padded && (row ? src.padded->rowAxis : src.padded->keyAxis) >= 0;
  if (!any)
    return -1;
  const Shape outStrides = stridesOf(from.shape);
  for (size_t c = 0; c < from.shape.size(); ++c) {
    bool same = true;
    for (int64_t f = 0; f < int64_t(from.ints.size()) && same; ++f) {
      const int64_t k = from.ints[size_t(f)];
      for (const Source &src : sources) {
        if (k < src.first || k >= src.first + src.size || !src.padded)
          continue;
        const Shape &in = src.padded->ifTokens.shape;
        const int64_t axis = row ? src.padded->rowAxis : src.padded->keyAxis;
        if (axis >= 0)
          same = ((k - src.first) / stridesOf(in)[size_t(axis)]) %
                     in[size_t(axis)] ==
                 (f / outStrides[c]) % from.shape[c];
      }
    }
    if (same)
      return int64_t(c);
  }
  return -2;
}

} // namespace

PaddedValue paddedInput(HostType type, int64_t rows, int64_t seq) {
  PaddedValue v;
  for (HostTensor *t : {&v.ifTokens, &v.ifPadding}) {
    t->type = type;
    t->shape = {rows, seq};
    t->ints.assign(size_t(rows * seq), t == &v.ifTokens ? 1 : 0);
  }
  v.rowAxis = rows > 1 ? 0 : -1;
  v.keyAxis = seq > 1 ? 1 : -1;
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
  // The two foldings (and, for a move, a third of tagged flat indices).
  std::vector<HostTensor> results[2];
  for (int k = 0; k < 2; ++k) {
    std::vector<const HostTensor *> in = constants;
    for (size_t i = 0; i < padded.size(); ++i)
      if (padded[i])
        in[i] = k ? &padded[i]->ifPadding : &padded[i]->ifTokens;
    if (std::string e = foldNode(n, opset, in, results[k]); !e.empty())
      return e;
  }
  outputs.assign(results[0].size(), PaddedValue());
  for (size_t o = 0; o < outputs.size(); ++o) {
    outputs[o].ifTokens = std::move(results[0][o]);
    outputs[o].ifPadding = std::move(results[1][o]);
  }
  if (outputs.size() != 1)
    return nodeName + " has " + std::to_string(outputs.size()) +
           " results; weft follows the attention_mask input through nodes "
           "of one";
  PaddedValue &out = outputs[0];
  const int64_t rank = int64_t(out.ifTokens.shape.size());
  if (moving) {
    std::vector<Source> sources(padded.size());
    std::vector<HostTensor> tagged(padded.size());
    std::vector<const HostTensor *> args = constants;
    int64_t next = 0;
    for (size_t i = 0; i < padded.size(); ++i) {
      if (!isData(i) || (!padded[i] && !constants[i]))
        continue;
      const HostTensor &like = padded[i] ? padded[i]->ifTokens : *constants[i];
      tagged[i].type = HostType::I64;
      tagged[i].shape = like.shape;
      tagged[i].ints.resize(size_t(like.numel()));
      for (size_t j = 0; j < tagged[i].ints.size(); ++j)
        tagged[i].ints[j] = padded[i] ? next + int64_t(j) : -1;
      sources[i] = Source{padded[i], next, like.numel()};
      next += padded[i] ? like.numel() : 0;
      args[i] = &tagged[i];
    }
    std::vector<HostTensor> from;
    if (std::string e = foldNode(n, opset, args, from); !e.empty())
      return e;
    out.rowAxis = movedAxis(true, sources, from[0]);
    out.keyAxis = movedAxis(false, sources, from[0]);
    if (out.rowAxis == -2 || out.keyAxis == -2)
      return nodeName + " moves the attention_mask input's " +
             (out.rowAxis == -2 ? "rows" : "keys") +
             " off an axis of their own (a reshape that merges or splits "
             "them, a slice of part of them); weft reads attention_mask as "
             "key padding only";
    return "";
  }
  // Elementwise: each padded operand's axes, right-aligned to the result's;
  // all of them must name the same mask element.
  for (const PaddedValue *p : padded) {
    if (!p)
      continue;
    const int64_t off = rank - int64_t(p->ifTokens.shape.size());
    for (auto [mine, theirs] : {std::pair{&out.rowAxis, p->rowAxis},
                                std::pair{&out.keyAxis, p->keyAxis}}) {
      if (theirs < 0)
        continue;
      if (*mine >= 0 && *mine != theirs + off)
        return nodeName + " combines attention_mask values of different " +
               (mine == &out.rowAxis ? "rows" : "keys") +
               " in one element; weft reads attention_mask as key padding "
               "only";
      *mine = theirs + off;
    }
  }
  return "";
}

std::string keyMaskForm(const PaddedValue &v) {
  const Shape &s = v.ifTokens.shape;
  const int64_t rank = int64_t(s.size());
  if (rank < 2 || (v.keyAxis >= 0 && v.keyAxis != rank - 1) ||
      (v.rowAxis >= 0 && v.rowAxis != 0))
    return "which is not an attention's mask [rows, .., keys] (its row "
           "axis is " +
           std::to_string(v.rowAxis) + " and key axis " +
           std::to_string(v.keyAxis) + " of " + std::to_string(rank) +
           "); weft reads attention_mask as key padding only";
  return "";
}

} // namespace onnximport
} // namespace weft
