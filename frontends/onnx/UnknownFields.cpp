//===- UnknownFields.cpp - fields the ONNX schema weft reads lacks --------===//
#include "frontends/onnx/UnknownFields.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <google/protobuf/unknown_field_set.h>
#include <onnx/onnx_pb.h>

#include <map>
#include <utility>

namespace weft {
namespace onnximport {

namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;
using google::protobuf::UnknownField;
using google::protobuf::UnknownFieldSet;

// What a field added after ONNX 1.12 holds (onnx.proto of ONNX 1.18).
enum class Added { String, Metadata, Message };

const std::map<std::pair<std::string, int>, Added> &addedFields() {
  static const std::map<std::pair<std::string, int>, Added> fields = {
      {{"onnx.NodeProto", 8}, Added::String},   // overload
      {{"onnx.NodeProto", 9}, Added::Metadata}, // metadata_props
      {{"onnx.NodeProto", 10}, Added::Message}, // device_configurations
      {{"onnx.ValueInfoProto", 4}, Added::Metadata},
      {{"onnx.GraphProto", 16}, Added::Metadata},
      {{"onnx.TensorProto", 16}, Added::Metadata},
      {{"onnx.ModelProto", 26}, Added::Message}, // configuration
      {{"onnx.TypeProto", 7}, Added::Message},
      {{"onnx.FunctionProto", 11}, Added::Message}, // value_info
      {{"onnx.FunctionProto", 12}, Added::Message},
      {{"onnx.FunctionProto", 13}, Added::String}, // overload
      {{"onnx.FunctionProto", 14}, Added::Metadata}};
  return fields;
}

std::string checkMessage(const Message &m, const std::string &path) {
  const Reflection *r = m.GetReflection();
  const UnknownFieldSet &unknown = r->GetUnknownFields(m);
  const std::string &type = m.GetDescriptor()->full_name();
  for (int i = 0; i < unknown.field_count(); ++i) {
    const UnknownField &f = unknown.field(i);
    auto it = addedFields().find({type, f.number()});
    const std::string what =
        path + " (" + type + ") field " + std::to_string(f.number());
    if (it == addedFields().end() ||
        f.type() != UnknownField::TYPE_LENGTH_DELIMITED)
      return what + " is no field of ONNX's schema (a damaged file?)";
    if (it->second == Added::Metadata) {
      onnx::StringStringEntryProto entry;
      if (!entry.ParseFromString(f.length_delimited()) ||
          !entry.GetReflection()->GetUnknownFields(entry).empty())
        return what + " (metadata_props) is not a key-value entry: its " +
               std::to_string(f.length_delimited().size()) +
               " bytes are corrupt";
    } else if (it->second == Added::Message) {
      UnknownFieldSet payload;
      if (!payload.ParseFromString(f.length_delimited()))
        return what + ": its " + std::to_string(f.length_delimited().size()) +
               " bytes are not protobuf wire format (corrupt)";
    }
  }
  std::vector<const FieldDescriptor *> fields;
  r->ListFields(m, &fields);
  for (const FieldDescriptor *fd : fields) {
    if (fd->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE)
      continue;
    if (!fd->is_repeated()) {
      if (std::string e =
              checkMessage(r->GetMessage(m, fd), path + "." + fd->name());
          !e.empty())
        return e;
      continue;
    }
    for (int i = 0, n = r->FieldSize(m, fd); i < n; ++i)
      if (std::string e = checkMessage(r->GetRepeatedMessage(m, fd, i),
                                       path + "." + fd->name() + "[" +
                                           std::to_string(i) + "]");
          !e.empty())
        return e;
  }
  return "";
}

} // namespace

std::string checkUnknownFields(const Message &model) {
  return checkMessage(model, "model");
}

} // namespace onnximport
} // namespace weft
