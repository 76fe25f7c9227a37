//===- OpSchemaCheck.cpp - A node's attributes against ONNX's schema ------===//
#include "frontends/onnx/OpSchemaCheck.h"

#include <onnx/defs/schema.h>

#include <algorithm>
#include <map>
#include <set>

namespace weft {
namespace onnximport {

std::string checkNodeAttributes(const onnx::NodeProto &n, int64_t opset,
                                const std::string &where) {
  // Flags weft reads: 0 or 1, as ONNX defines them.
  static const std::set<std::string> kFlags = {
      "allowzero", "keepdims", "transA", "transB",
      "exclusive", "reverse",  "upper",  "noop_with_empty_axes"};
  for (const auto &a : n.attribute())
    if (kFlags.count(a.name()) && a.type() == onnx::AttributeProto::INT &&
        a.i() != 0 && a.i() != 1)
      return where + ": attribute '" + a.name() +
             "' = " + std::to_string(a.i()) + ", expected 0 or 1";
  const int lastKnown = onnx::OpSchemaRegistry::DomainToVersionRange::Instance()
                            .Map()
                            .at(onnx::ONNX_DOMAIN)
                            .second;
  const onnx::OpSchema *schema = onnx::OpSchemaRegistry::Schema(
      n.op_type(), int(std::min<int64_t>(opset, lastKnown)));
  if (!schema)
    return ""; // an op ONNX does not define: weft's reader names it
  std::set<std::string> known;
  for (const auto &[name, attr] : schema->attributes())
    known.insert(name);
  // Past the opsets the linked ONNX release defines, an attribute of any
  // version of the op, or one a later opset added, is let through (weft's
  // readers check how each is used).
  if (opset > lastKnown) {
    for (int v = 1; v <= lastKnown; ++v)
      if (const onnx::OpSchema *s =
              onnx::OpSchemaRegistry::Schema(n.op_type(), v))
        for (const auto &[name, attr] : s->attributes())
          known.insert(name);
    static const std::multimap<std::string, std::string> kAddedAfter17 = {
        {"Split", "num_outputs"},
        {"ReduceMean", "noop_with_empty_axes"},
        {"ReduceMax", "noop_with_empty_axes"},
        {"ReduceMin", "noop_with_empty_axes"},
        {"ReduceProd", "noop_with_empty_axes"},
        {"ReduceL1", "noop_with_empty_axes"},
        {"ReduceL2", "noop_with_empty_axes"},
        {"ReduceLogSum", "noop_with_empty_axes"},
        {"ReduceLogSumExp", "noop_with_empty_axes"},
        {"ReduceSumSquare", "noop_with_empty_axes"},
        {"Pad", "axes"},
        {"Resize", "antialias"},
        {"Resize", "axes"},
        {"Resize", "keep_aspect_ratio_policy"},
        {"ScatterElements", "reduction"},
        {"ScatterND", "reduction"},
        {"Cast", "saturate"},
        {"CastLike", "saturate"}};
    auto range = kAddedAfter17.equal_range(n.op_type());
    for (auto it = range.first; it != range.second; ++it)
      known.insert(it->second);
  }
  for (const auto &a : n.attribute()) {
    if (known.count(a.name()))
      continue;
    std::string names;
    for (const std::string &name : known)
      names += (names.empty() ? "" : ", ") + name;
    return where + ": attribute '" + a.name() + "' is not an attribute of " +
           n.op_type() + " at opset " + std::to_string(opset) + " (" +
           (names.empty() ? std::string("it has none")
                          : "its attributes: " + names) +
           ")";
  }
  return "";
}

} // namespace onnximport
} // namespace weft
