//===- UnknownFields.h - fields the ONNX schema weft reads lacks -*- C++
//-*-===//
//
// weft parses models with Debian's ONNX schema (libonnx 1.12). Fields that
// later ONNX versions added (a node's metadata_props, a model's
// configuration, ...) reach it as protobuf's unknown fields, kept as opaque
// bytes, so damage inside them would pass the parse that the ONNX library
// of today (onnx 1.2x, upb) refuses as "Wire format was corrupt". Such a
// field is checked here: a metadata entry must parse as a
// StringStringEntryProto, another message's bytes as protobuf wire format;
// and a field no ONNX version has is refused, naming the message and the
// field number.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_FRONTENDS_ONNX_UNKNOWNFIELDS_H
#define WEFT_FRONTENDS_ONNX_UNKNOWNFIELDS_H

#include <string>

namespace google {
namespace protobuf {
class Message;
} // namespace protobuf
} // namespace google

namespace weft {
namespace onnximport {

/// Why `model` (a parsed onnx::ModelProto) holds a field weft cannot vouch
/// for, or "".
std::string checkUnknownFields(const google::protobuf::Message &model);

} // namespace onnximport
} // namespace weft

#endif // WEFT_FRONTENDS_ONNX_UNKNOWNFIELDS_H
