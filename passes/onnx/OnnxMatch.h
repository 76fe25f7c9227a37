//===- OnnxMatch.h - matching imported ONNX subgraphs -----------*- C++ -*-===//
//
// What weft-raise-onnx's patterns read of an imported graph: weft.onnx_node
// ops by type, folded constants, and views, i.e. what a chain of Reshape,
// Transpose, Unsqueeze and Expand does to a tensor's elements.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_PASSES_ONNXMATCH_H
#define WEFT_PASSES_ONNXMATCH_H

#include "dialect/WeftDialect.h"

#include <optional>

namespace weft::onnxmatch {

using llvm::ArrayRef;
using llvm::SmallVector;
using Shape = llvm::SmallVector<int64_t>;

Shape shapeOf(mlir::Value v);
/// Whether `op` has the inputs and results the patterns read of its type
/// (the import makes such nodes; a hand-written one may be anything).
bool wellFormed(OnnxNodeOp op);
/// The well-formed onnx_node of type `type` defining v, or null.
OnnxNodeOp nodeOf(mlir::Value v, llvm::StringRef type);
int64_t intAttr(OnnxNodeOp op, llvm::StringRef name, int64_t dflt);
double floatAttr(OnnxNodeOp op, llvm::StringRef name, double dflt);
/// Whether `pred(index, value)` holds for every element of a float
/// constant, in row-major order (stops at the first that does not).
bool allReals(mlir::DenseFPElementsAttr dense,
              llvm::function_ref<bool(int64_t, double)> pred);
/// The one value every element of a float constant holds.
std::optional<double> splat(mlir::Value v);
/// Whether every element of `v` is `want`, or want rounded to f32.
bool isConstant(mlir::Value v, double want);
bool isFloat(mlir::Value v);
/// Whether the values are floats of one element type (weft's ops take no
/// mixed types; building one with them would abort).
bool sameFloat(mlir::ValueRange values);
/// The constant integers of v (a shape or axes operand), or nullopt.
std::optional<Shape> constInts(mlir::Value v);
/// A Transpose's permutation (reversed dims by default); empty when the
/// attribute is not a permutation of the input's dims.
Shape permOf(OnnxNodeOp t);

// For commutative binary nodes: the operand other than the one `pred`
// accepts (trying both orders), or null.
template <typename Pred> mlir::Value otherOperand(OnnxNodeOp op, Pred pred) {
  if (!op || op.getInputs().size() != 2)
    return nullptr;
  if (pred(op.getInputs()[0]))
    return op.getInputs()[1];
  if (pred(op.getInputs()[1]))
    return op.getInputs()[0];
  return nullptr;
}

//===----------------------------------------------------------------------===//
// Views
//===----------------------------------------------------------------------===//

// A run of one base dim's index: `size` values, `stride` apart in it.
struct Piece {
  int64_t baseDim, size, stride;
  bool operator==(const Piece &o) const {
    return baseDim == o.baseDim && size == o.size && stride == o.stride;
  }
};
// A view of `base`: each of its dims is the pieces it enumerates, outer
// first. Two views with equal pieces hold the same elements in the same
// places.
struct View {
  mlir::Value base;
  SmallVector<SmallVector<Piece>> dims;

  static View of(mlir::Value v) {
    View view{v, {}};
    Shape s = shapeOf(v);
    for (size_t d = 0; d < s.size(); ++d) {
      view.dims.emplace_back();
      if (s[d] != 1)
        view.dims.back().push_back({int64_t(d), s[d], 1});
    }
    return view;
  }
  // Row-major reshape: the pieces, in order, regrouped into `shape`.
  bool reshape(ArrayRef<int64_t> shape) {
    SmallVector<Piece> queue;
    for (auto &d : dims)
      queue.append(d.begin(), d.end());
    std::reverse(queue.begin(), queue.end()); // pop from the back
    SmallVector<SmallVector<Piece>> out;
    for (int64_t want : shape) {
      out.emplace_back();
      int64_t have = 1;
      while (have < want) {
        if (queue.empty() || want % have)
          return false;
        Piece p = queue.pop_back_val();
        int64_t need = want / have;
        if (p.size <= need) {
          if (need % p.size)
            return false;
          out.back().push_back(p);
          have *= p.size;
          continue;
        }
        if (p.size % need) // splits p: its outer part here, the rest next
          return false;
        int64_t inner = p.size / need;
        out.back().push_back({p.baseDim, need, p.stride * inner});
        queue.push_back({p.baseDim, inner, p.stride});
        have *= need;
      }
      if (have != want)
        return false;
    }
    if (!queue.empty())
      return false;
    dims = std::move(out);
    return true;
  }
  void transpose(ArrayRef<int64_t> perm) {
    SmallVector<SmallVector<Piece>> out;
    for (int64_t p : perm)
      out.push_back(dims[p]);
    dims = std::move(out);
  }
  // Adjacent pieces of one base dim that are one run merge.
  static SmallVector<Piece> canonical(ArrayRef<Piece> in) {
    SmallVector<Piece> out;
    for (Piece p : in) {
      if (!out.empty() && out.back().baseDim == p.baseDim &&
          out.back().stride == p.stride * p.size) {
        out.back().size *= p.size;
        out.back().stride = p.stride;
        continue;
      }
      out.push_back(p);
    }
    return out;
  }
  bool operator==(const View &o) const {
    if (base != o.base || dims.size() != o.dims.size())
      return false;
    for (size_t i = 0; i < dims.size(); ++i)
      if (canonical(dims[i]) != canonical(o.dims[i]))
        return false;
    return true;
  }
};

/// The view `v` is of the first value up its chain of Reshape, Transpose,
/// Identity, Unsqueeze and Expand (of size-1 dims: a broadcast piece, as
/// grouped-query attention repeats its key/value heads).
std::optional<View> traceView(mlir::Value v);
/// The view [B, H, S, D] of x [B, S, Hx*D] that attention's heads read:
/// x's Hx heads, each repeated H/Hx times (grouped-query keys and values);
/// `keysLast`: [B, H, D, S], the transposed keys.
View headsView(mlir::Value x, int64_t heads, int64_t headDim, bool keysLast);

} // namespace weft::onnxmatch

#endif // WEFT_PASSES_ONNXMATCH_H
