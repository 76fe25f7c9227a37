#!/bin/sh
# The bench-only virtual environment: PyTorch 2.x and Hugging Face
# transformers from PyPI, for the peer benchmarks (bench_peers.py).
# Never used by `make test`: PyTorch's wheels and their CUDA libraries are
# several gigabytes. Idempotent; prints the venv's python.
#
#   sh test/bench/bench-venv.sh [VENV]   (default ~/.cache/weft/bench-venv)
set -eu
VENV=${1:-${WEFT_BENCH_VENV:-$HOME/.cache/weft/bench-venv}}
if ! "$VENV/bin/python" -c 'import torch, transformers' 2>/dev/null; then
  /usr/bin/python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --upgrade pip
  "$VENV/bin/pip" install --quiet 'torch>=2.4' 'transformers>=4.40' numpy
fi
echo "$VENV/bin/python"
