#!/bin/sh
# The reference check the test suite calls:
#   test/reference/run_reference.sh BIN_DIR [DATA] [WORKDIR]
# BIN_DIR holds weft-compile and weft-run (weft-run is also looked for in
# build-rt/bin and build/bin).  DATA is a uint16 token file ("" or absent:
# build/data/corpus.bin, else GPL-3's bytes).  Exits 0 when weft matches the
# PyTorch reference (or, without torch, the committed fixtures).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
if [ $# -lt 1 ]; then
  echo "usage: $0 BIN_DIR [DATA] [WORKDIR]" >&2
  exit 2
fi
py=/usr/bin/python3
[ -x "$py" ] || py=python3
set -- "$@" "" ""
bin=$1 data=$2 work=$3
exec "$py" "$here/torch_reference.py" --bin "$bin" ${data:+--data "$data"} ${work:+--workdir "$work"}
