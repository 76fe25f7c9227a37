//===- PaddingMask.h - values computed from an attention_mask --*- C++ -*-===//
//
// A graph with an `attention_mask` input [rows, seq] (1 a token, 0 padding;
// Hugging Face's) builds its attention's mask from it: Cast, Unsqueeze,
// Expand, 1 - m, times finfo.min, Where beside the causal triangle
// (transformers 4); or, through transformers 5's masking functions, each
// score's mask element picked by index (Flatten and Gather, GatherND). weft
// reads that mask as key padding (weft.attention's key_padding), and proves
// the graph computes exactly that:
//
//  - every node between the input and the attention is elementwise (with
//    numpy broadcasting) or moves elements (Reshape, Flatten, Expand,
//    Transpose, Slice, Squeeze, Unsqueeze, Concat, Gather and GatherND at
//    constant indices), so each element of its result follows one mask
//    element (tracked per element: the mask's flat index, found for moves
//    by folding the node on the sources' indices);
//  - the value the attention reads follows, at element [r, .., k], the
//    mask's element [r, k];
//  - then two foldings give the element for any mask: ifTokens (every mask
//    value 1) and ifPadding (every value 0).
//
// A node that reads the mask any other way (a reduction, a cumulative sum
// of positions) is refused by name.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_FRONTENDS_ONNX_PADDINGMASK_H
#define WEFT_FRONTENDS_ONNX_PADDINGMASK_H

#include "frontends/onnx/HostTensor.h"

namespace weft {
namespace onnximport {

/// A value computed from the attention_mask input and constants alone: its
/// element e is ifTokens[e] where the mask's element source[e] (its flat
/// index, row * seq + key) is 1 and ifPadding[e] where it is 0; a source
/// of -1: e reads no mask element (ifTokens[e] is ifPadding[e]).
struct PaddedValue {
  HostTensor ifTokens, ifPadding, source;
  int64_t rows = 1, seq = 1; // the mask's shape
};

/// The attention_mask input itself, [rows, seq] of `type`.
PaddedValue paddedInput(HostType type, int64_t rows, int64_t seq);

/// Node n's outputs from its inputs: padded[i] where input i is computed
/// from the mask, else constants[i] (nullptr: an absent optional input).
/// Returns an error naming the node, or "".
std::string foldPadded(const onnx::NodeProto &n, const std::string &nodeName,
                       int64_t opset,
                       const std::vector<const HostTensor *> &constants,
                       const std::vector<const PaddedValue *> &padded,
                       std::vector<PaddedValue> &outputs);

/// Whether v can be an attention's mask over keys: its element [r, .., k]
/// follows the mask's element [r, k] (its first axis the rows, unless the
/// mask has one; its last the keys). Returns why not, or "".
std::string keyMaskForm(const PaddedValue &v);

} // namespace onnximport
} // namespace weft

#endif // WEFT_FRONTENDS_ONNX_PADDINGMASK_H
