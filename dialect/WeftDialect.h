//===- WeftDialect.h - the weft dialect and its ops -------------*- C++ -*-===//
#ifndef WEFT_DIALECT_WEFTDIALECT_H
#define WEFT_DIALECT_WEFTDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialect/ShardingRule.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/SymbolTable.h"

#include "dialect/WeftDialect.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialect/WeftAttrs.h.inc"

#include "dialect/WeftInterfaces.h.inc"

#define GET_OP_CLASSES
#include "dialect/WeftOps.h.inc"

namespace weft {
/// The mesh that op's shardings and collectives refer to: the one its
/// function names (`weft.mesh = @name`), else the module's only mesh; null
/// when there is none, or several and the function names none. A pipeline
/// stage's function will name its own sub-mesh.
MeshOp meshFor(mlir::Operation *op);
} // namespace weft

#endif // WEFT_DIALECT_WEFTDIALECT_H
