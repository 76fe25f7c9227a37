//===- PaddingMask.h - values computed from an attention_mask --*- C++ -*-===//
//
// A graph with an `attention_mask` input [rows, seq] (1 a token, 0 padding;
// Hugging Face's) builds its attention's mask from it: Cast, Unsqueeze,
// Expand, 1 - m, times finfo.min, Where beside the causal triangle. weft
// reads that mask as key padding (weft.attention's key_padding), and proves
// the graph computes exactly that:
//
//  - every node between the input and the attention is elementwise (with
//    numpy broadcasting) or moves elements (Reshape, Expand, Transpose,
//    Slice, Squeeze, Unsqueeze), so each element of its result follows one
//    mask element, the one its row axis and key axis name (tracked per
//    value: the axes, found for moves by folding the node on the input's
//    flat indices);
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
/// element e is ifTokens[e] where mask[e[rowAxis], e[keyAxis]] is 1 and
/// ifPadding[e] where it is 0 (an axis of -1: the mask has one row, or one
/// key, and e reads that).
struct PaddedValue {
  HostTensor ifTokens, ifPadding;
  int64_t rowAxis = -1, keyAxis = -1;
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

/// Whether v can be an attention's mask over keys: its last axis the keys
/// and its first the rows (or the mask's one row). Returns why not, or "".
std::string keyMaskForm(const PaddedValue &v);

} // namespace onnximport
} // namespace weft

#endif // WEFT_FRONTENDS_ONNX_PADDINGMASK_H
