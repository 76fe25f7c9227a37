//===- OpSchemaCheck.cpp - A node's attributes against ONNX's schema ------===//
#include "frontends/onnx/OpSchemaCheck.h"

#include <onnx/defs/schema.h>

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
  const auto &range =
      onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map().at(
          onnx::ONNX_DOMAIN);
  if (opset > range.second)
    return "";
  const onnx::OpSchema *schema =
      onnx::OpSchemaRegistry::Schema(n.op_type(), int(opset));
  if (!schema)
    return ""; // an op ONNX does not define: weft's reader names it
  const auto &known = schema->attributes();
  for (const auto &a : n.attribute()) {
    if (known.count(a.name()))
      continue;
    std::string names;
    for (const auto &[name, attr] : known)
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
