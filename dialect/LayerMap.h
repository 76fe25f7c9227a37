//===- LayerMap.h - which layer each forward op belongs to ------*- C++ -*-===//
//
// Frontends mark each weft.param with its layer (weft.layer: -1 before the
// first transformer layer, L after the last). Every other forward op
// belongs to the latest layer among its operands': a layer's norms, GEMMs,
// attention and residual add read its own parameters and the previous
// layer's output. Values defined outside (the function's inputs) belong to
// no layer (-1). The pipeline cut, recomputation and the planner all read
// layers this way.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_DIALECT_LAYERMAP_H
#define WEFT_DIALECT_LAYERMAP_H

#include "dialect/AttrNames.h"

#include "mlir/IR/Operation.h"
#include "llvm/ADT/DenseMap.h"

#include <algorithm>

namespace weft {

class LayerMap {
public:
  /// The layer of `op` (its own weft.layer when it has one, else the
  /// latest of its operands'), recorded for its results. Visit ops in order.
  int64_t visit(mlir::Operation *op) {
    int64_t layer = -1;
    if (auto own = op->getAttrOfType<mlir::IntegerAttr>(attrname::kLayer))
      layer = own.getInt();
    else
      for (mlir::Value v : op->getOperands())
        layer = std::max(layer, of(v));
    for (mlir::Value r : op->getResults())
      layers[r] = layer;
    return layer;
  }
  /// The layer recorded for `v`, -1 for a value no visited op defined.
  int64_t of(mlir::Value v) const {
    auto it = layers.find(v);
    return it == layers.end() ? -1 : it->second;
  }

  /// Whether a visited op defined `v`.
  bool contains(mlir::Value v) const { return layers.count(v); }

private:
  llvm::DenseMap<mlir::Value, int64_t> layers;
};

} // namespace weft

#endif // WEFT_DIALECT_LAYERMAP_H
