#!/bin/sh
# Copies the op, attribute and pass reference that mlir-tblgen generates
# from dialect/*.td and passes/Passes.td (the build's WeftOpsDoc.md,
# WeftAttrsDoc.md, PassesDoc.md) into docs/reference/. Run after changing
# a .td file; test/docs/reference-docs.test fails while the copies are stale.
#   scripts/update-reference-docs.sh [BUILD_DIR]
set -eu
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
ninja -C "$build" WeftIncGen WeftPassesIncGen >/dev/null
for pair in "dialect/WeftOpsDoc.md:ops.md" "dialect/WeftAttrsDoc.md:attributes.md" \
            "passes/PassesDoc.md:passes.md"; do
  cp "$build/${pair%%:*}" "$root/docs/reference/${pair##*:}"
done
echo "docs/reference/: ops.md, attributes.md, passes.md updated from $build"
