#!/bin/sh
# Regenerates the committed seed corpora under test/fuzz/corpus/ from real
# files: programs written by weft-compile (whole containers, and their JSON
# payloads, which the program target parses without the container's hash),
# the configs in test/configs/, weft-plan hardware files, tiny
# safetensors files and token files in both formats.
#   test/fuzz/make-corpus.sh [BIN]   (BIN: build/bin)
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${1:-$root/build/bin}
out=$root/test/fuzz/corpus
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out/program" "$out/safetensors" "$out/config" "$out/hardware" \
  "$out/tokens" "$out/onnx"

# Programs: small shapes, every layout feature the compiler emits.
i=0
while read -r args; do
  i=$((i + 1))
  # shellcheck disable=SC2086
  "$bin/weft-compile" $args --quiet -o "$tmp/p$i.weft"
  tail -c +29 "$tmp/p$i.weft" >"$out/program/payload-$i.json"
done <<'LIST'
gpt-tiny --batch 2 --seq 8
llama-tiny --batch 2 --seq 8
gpt-tiny --batch 2 --seq 8 --dtype f64 --schedule cosine --warmup-steps 2 --total-steps 10
gpt-tiny --batch 4 --seq 8 --mesh dp=2 --layout data --bucket-mb 1
gpt-tiny --batch 2 --seq 8 --mesh tp=2 --layout megatron --sequence-parallel
llama-tiny --batch 4 --seq 8 --mesh dp=2 --layout data --zero 3 --prefetch-ops 2
llama-tiny --batch 4 --seq 8 --mesh dp=2,tp=2 --layout megatron --zero 1
gpt-tiny --batch 8 --seq 8 --mesh dp=2 --microbatches 2
llama-tiny --batch 4 --seq 8 --mesh dp=2,tp=2 --layout megatron --sequence-parallel --dtype bf16
llama-tiny --batch 4 --seq 8 --mesh pp=2,dp=2 --microbatches 2
llama-tiny --batch 4 --seq 8 --mesh pp=2 --microbatches 2 --pipeline-schedule gpipe
LIST
cp "$tmp/p1.weft" "$out/program/container-gpt-tiny.weft"
# The smallest: the hand-written model of test/passes/weft-emit-program.mlir.
"$bin/weft-opt" "$root/test/passes/weft-emit-program.mlir" -weft-autodiff \
  -weft-insert-adamw -weft-plan-memory \
  -weft-emit-program="output=$tmp/tiny.weft" -o /dev/null
tail -c +29 "$tmp/tiny.weft" >"$out/program/payload-tiny.json"
cp "$tmp/p5.weft" "$out/program/container-gpt-tiny-tp2.weft"
cp "$tmp/p10.weft" "$out/program/container-llama-tiny-pp2.weft"
# Pipelines of several chunks per stage and of split backwards (4 layers).
"$bin/weft-compile" "$root/test/e2e/llama4.json" --batch 4 --seq 8 \
  --mesh pp=2 --microbatches 2 --pipeline-schedule interleaved \
  --virtual-stages 2 --quiet -o "$tmp/interleaved.weft"
tail -c +29 "$tmp/interleaved.weft" >"$out/program/payload-interleaved.json"
"$bin/weft-compile" "$root/test/e2e/llama4.json" --batch 4 --seq 8 \
  --mesh pp=2 --microbatches 2 --pipeline-schedule zb-h1 --quiet \
  -o "$tmp/zb.weft"
tail -c +29 "$tmp/zb.weft" >"$out/program/payload-zb-h1.json"

# Hugging Face configs (the published ones, verbatim).
for f in "$root"/test/configs/*.json; do
  cp "$f" "$out/config/$(basename "$f")"
done


# Tiny safetensors and token files.
/usr/bin/python3 "$root/test/fuzz/make-binary-seeds.py" "$out"
