//===- WeftDialect.cpp - dialect registration -----------------------------===//
#include "dialect/WeftDialect.h"

using namespace mlir;
using namespace weft;

#include "dialect/WeftDialect.cpp.inc"
#include "dialect/WeftInterfaces.cpp.inc"

void WeftDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialect/WeftOps.cpp.inc"
      >();
}
