#!/bin/sh
# The bench-only virtual environment: PyTorch 2.x and Hugging Face
# transformers from PyPI, for the peer benchmarks (bench_peers.py), and the
# ONNX packages its exports need.
# Never used by `make test`: PyTorch's wheels and their CUDA libraries are
# several gigabytes. Idempotent; prints the venv's python.
#
#   sh test/bench/bench-venv.sh [VENV]   (default ~/.cache/weft/bench-venv)
set -eu
VENV=${1:-${WEFT_BENCH_VENV:-$HOME/.cache/weft/bench-venv}}
# onnx, onnxruntime, onnxscript and safetensors: the fixture scripts that
# export with this torch (test/e2e/fixtures/export_*_onnx.py) and
# test/reference/hf_reference.py under transformers 5.
if ! "$VENV/bin/python" -c 'import torch, transformers, onnx, onnxruntime, onnxscript, safetensors' 2>/dev/null; then
  [ -x "$VENV/bin/python" ] || /usr/bin/python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --upgrade pip
  "$VENV/bin/pip" install --quiet 'torch>=2.4' 'transformers>=4.40' numpy onnx onnxruntime \
    onnxscript safetensors
fi
echo "$VENV/bin/python"
