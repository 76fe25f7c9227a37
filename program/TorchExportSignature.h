//===- TorchExportSignature.h - a torch export's buffers -------*- C++ -*-===//
//
// torch.onnx.export (the dynamo exporter) writes a module's parameters and
// its buffers alike as initializers, and records which is which in the
// graph's metadata: "pkg.torch.export.ExportedProgram.graph_signature",
// lines such as `b_scale: BUFFER target='scale' persistent=True`. A buffer
// is state the module does not train (an ALiBi slope table, a registered
// mask): weft folds it as a constant rather than train it as a weight.
// GraphProto.metadata_props is field 16 from ONNX IR version 10, which
// Debian's ONNX 1.12 does not know: protobuf keeps it among the graph's
// unknown fields, read here. Header-only: each includer links libonnx.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_PROGRAM_TORCHEXPORTSIGNATURE_H
#define WEFT_PROGRAM_TORCHEXPORTSIGNATURE_H

#include <google/protobuf/unknown_field_set.h>

#include <set>
#include <sstream>
#include <string>

namespace weft {

/// The targets the signature's lines mark BUFFER (a target's name is the
/// initializer's).
inline std::set<std::string> signatureBuffers(const std::string &Text) {
  std::set<std::string> Names;
  std::istringstream Lines(Text);
  std::string Line;
  const std::string Kind = ": BUFFER target='";
  while (std::getline(Lines, Line)) {
    size_t At = Line.find(Kind);
    if (At == std::string::npos)
      continue;
    size_t Begin = At + Kind.size(), End = Line.find('\'', Begin);
    if (End != std::string::npos && End > Begin)
      Names.insert(Line.substr(Begin, End - Begin));
  }
  return Names;
}

/// The initializers graph G's torch export signature calls buffers; empty
/// for a graph without one (another exporter: every float initializer is
/// a weight).
template <typename GraphProto, typename EntryProto>
std::set<std::string> torchExportBuffers(const GraphProto &G) {
  constexpr int MetadataProps = 16; // GraphProto.metadata_props (IR 10)
  const google::protobuf::UnknownFieldSet &U = G.unknown_fields();
  for (int I = 0; I < U.field_count(); ++I) {
    const google::protobuf::UnknownField &F = U.field(I);
    if (F.number() != MetadataProps ||
        F.type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED)
      continue;
    EntryProto Entry;
    if (Entry.ParseFromString(F.length_delimited()) &&
        Entry.key() == "pkg.torch.export.ExportedProgram.graph_signature")
      return signatureBuffers(Entry.value());
  }
  return {};
}

} // namespace weft

#endif // WEFT_PROGRAM_TORCHEXPORTSIGNATURE_H
