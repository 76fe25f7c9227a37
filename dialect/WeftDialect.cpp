//===- WeftDialect.cpp - dialect registration -----------------------------===//
#include "dialect/WeftDialect.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace weft;

#include "dialect/WeftDialect.cpp.inc"
#include "dialect/WeftInterfaces.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialect/WeftAttrs.cpp.inc"

void WeftDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialect/WeftOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialect/WeftAttrs.cpp.inc"
      >();
}
