//===- ToolDiagnostics.h - diagnostics as a tool's messages ----*- C++ -*-===//
//
// MLIR prints a diagnostic without a file location as "<unknown>:0: error:";
// a user of weft-compile or weft-plan should read "weft-compile: error:"
// instead, and the ONNX node a name location names. Diagnostics with a
// file location (a .mlir model) keep MLIR's "file:line:col:" form.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_PASSES_TOOLDIAGNOSTICS_H
#define WEFT_PASSES_TOOLDIAGNOSTICS_H

#include "mlir/IR/Diagnostics.h"
#include <string>

namespace weft {

/// Installed on a context after the tool's SourceMgrDiagnosticHandler:
/// diagnostics with a file location pass on to it (MLIR's form), the rest
/// print as "TOOL: error: [at 'NAME': ]MESSAGE", with notes likewise.
class ToolDiagnostics : public mlir::ScopedDiagnosticHandler {
public:
  ToolDiagnostics(mlir::MLIRContext &context, std::string tool);
};

} // namespace weft

#endif // WEFT_PASSES_TOOLDIAGNOSTICS_H
