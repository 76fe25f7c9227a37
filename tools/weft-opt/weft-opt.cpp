//===- weft-opt.cpp - mlir-opt with the weft dialect and passes -----------===//
#include "dialect/WeftDialect.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<weft::WeftDialect, mlir::func::FuncDialect>();
  weft::registerWeftPassesAndPipelines();
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "weft optimizer driver\n", registry));
}
