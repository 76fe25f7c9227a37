//===- ToolDiagnostics.cpp - diagnostics as a tool's messages -------------===//
#include "passes/ToolDiagnostics.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Location.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace {
const char *severity(DiagnosticSeverity s) {
  switch (s) {
  case DiagnosticSeverity::Error:
    return "error";
  case DiagnosticSeverity::Warning:
    return "warning";
  case DiagnosticSeverity::Note:
    return "note";
  case DiagnosticSeverity::Remark:
    return "remark";
  }
  return "error";
}

// The name a location carries (an ONNX node's, a module path), if any.
std::string nameOf(Location loc) {
  std::string name;
  loc->walk([&](Location l) {
    if (auto n = dyn_cast<NameLoc>(l)) {
      name = n.getName().str();
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return name;
}

bool hasFile(Location loc) {
  bool file = false;
  loc->walk([&](Location l) {
    file |= isa<FileLineColLoc>(l);
    return file ? WalkResult::interrupt() : WalkResult::advance();
  });
  return file;
}
} // namespace

weft::ToolDiagnostics::ToolDiagnostics(MLIRContext &context, std::string tool)
    : ScopedDiagnosticHandler(&context) {
  // Registered last, so asked first; a failure passes the diagnostic on.
  setHandler([tool](Diagnostic &d) -> LogicalResult {
    if (hasFile(d.getLocation()))
      return failure();
    auto print = [&](Diagnostic &one) {
      std::string name = nameOf(one.getLocation());
      llvm::errs() << tool << ": " << severity(one.getSeverity()) << ": "
                   << (name.empty() ? "" : "at '" + name + "': ") << one.str()
                   << "\n";
    };
    print(d);
    for (Diagnostic &note : d.getNotes())
      print(note);
    return success();
  });
}
