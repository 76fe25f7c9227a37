//===- TorchExportSignature.h - a torch export's buffers -------*- C++ -*-===//
//
// torch.onnx.export (the dynamo exporter) writes a module's parameters,
// buffers and lifted constant tensors alike as initializers, and records
// which is which in the graph's metadata:
// "pkg.torch.export.ExportedProgram.graph_signature", lines such as
// `p_w: PARAMETER target='w'` and `b_scale: BUFFER target='scale'
// persistent=True`. Only a PARAMETER trains in PyTorch; a buffer (an ALiBi
// slope table, a registered mask) or a constant tensor is state the module
// does not train, which weft folds as a constant rather than train it as
// a weight. GraphProto.metadata_props is field 16 from ONNX IR version 10:
// read through its accessor where the ONNX headers know it, else (Debian's
// ONNX 1.12) from the graph's unknown fields, where protobuf keeps it.
// Header-only: each includer links libonnx.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_PROGRAM_TORCHEXPORTSIGNATURE_H
#define WEFT_PROGRAM_TORCHEXPORTSIGNATURE_H

#include <google/protobuf/unknown_field_set.h>

#include <set>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>

namespace weft {

/// What a torch export's graph signature says of its initializers.
struct TorchExportSignature {
  bool Present = false;
  std::set<std::string> Parameters; // PARAMETER targets: trained
  std::set<std::string> Mutated;    // BUFFER_MUTATION targets (outputs)
  /// Whether initializer Name is a weight: without a signature every float
  /// initializer is; with one, the PARAMETERs alone.
  bool isWeight(const std::string &Name) const {
    return !Present || Parameters.count(Name) > 0;
  }
};

inline TorchExportSignature parseTorchExportSignature(const std::string &Text) {
  TorchExportSignature S;
  S.Present = true;
  std::istringstream Lines(Text);
  std::string Line;
  while (std::getline(Lines, Line)) {
    size_t Colon = Line.find(": "), Target = Line.find(" target='");
    if (Colon == std::string::npos || Target == std::string::npos ||
        Target < Colon)
      continue;
    std::string Kind = Line.substr(Colon + 2, Target - Colon - 2);
    size_t Begin = Target + 9, End = Line.find('\'', Begin);
    if (End == std::string::npos || End == Begin)
      continue;
    std::string Name = Line.substr(Begin, End - Begin);
    if (Kind == "PARAMETER")
      S.Parameters.insert(Name);
    else if (Kind == "BUFFER_MUTATION")
      S.Mutated.insert(Name);
  }
  return S;
}

namespace detail {
template <typename G, typename = void>
struct KnowsGraphMetadata : std::false_type {};
template <typename G>
struct KnowsGraphMetadata<
    G, std::void_t<decltype(std::declval<const G &>().metadata_props())>>
    : std::true_type {};
constexpr const char *kSignatureKey =
    "pkg.torch.export.ExportedProgram.graph_signature";
} // namespace detail

/// The signature graph G carries; Present is false for a graph without one
/// (another exporter: every float initializer is a weight).
template <typename GraphProto, typename EntryProto>
TorchExportSignature torchExportSignature(const GraphProto &G) {
  if constexpr (detail::KnowsGraphMetadata<GraphProto>::value) {
    for (const auto &Entry : G.metadata_props())
      if (Entry.key() == detail::kSignatureKey)
        return parseTorchExportSignature(Entry.value());
  } else {
    constexpr int MetadataProps = 16; // GraphProto.metadata_props (IR 10)
    const google::protobuf::UnknownFieldSet &U = G.unknown_fields();
    for (int I = 0; I < U.field_count(); ++I) {
      const google::protobuf::UnknownField &F = U.field(I);
      if (F.number() != MetadataProps ||
          F.type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED)
        continue;
      EntryProto Entry;
      if (Entry.ParseFromString(F.length_delimited()) &&
          Entry.key() == detail::kSignatureKey)
        return parseTorchExportSignature(Entry.value());
    }
  }
  return {};
}

} // namespace weft

#endif // WEFT_PROGRAM_TORCHEXPORTSIGNATURE_H
