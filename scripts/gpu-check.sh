#!/bin/bash
# The GPU checks (the CUDA backend, issue 12) as one prepared script.
#
#   scripts/gpu-check.sh --prepare
#       Here, after `make build` (needs weft-compile): writes gpu-bundle/
#       (git-ignored, a few MiB): the programs the checks run, compiled now
#       because the GPU machine has no MLIR, and what a bare GPU machine may
#       lack to build the runtime: nlohmann-json's headers and GoogleTest's
#       sources. Carry gpu-bundle to the GPU machine with the tree.
#   scripts/gpu-check.sh OUTDIR
#       On the GPU machine, from the repository root: builds the runtime
#       without MLIR in build-gpu/ (OpenBLAS optional), then runs the GPU
#       tests, the training checks and the benchmark, and writes every
#       result under OUTDIR (summary.txt first). Under 8 minutes on one
#       H100/H200. Every step has its own time limit (step's second
#       argument; summary.txt says TIMEOUT), so a slow one cannot hide the
#       steps after it.
#   scripts/gpu-check.sh --dry-run OUTDIR
#       The second form on a machine without a GPU: builds, checks that the
#       GPU tests skip, and lists the steps that need a device.
#   scripts/gpu-check.sh --kernel-programs BIN DIR
#       Compiles the kernel test's programs with BIN/weft-compile into DIR
#       (ctest does, before the GPU tests of a full build).
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
bundle=$root/gpu-bundle

# Every op in every dtype, on GPT-2, Llama and Qwen2 shapes (the kernel
# test, test/gpu).
kernel_programs() {
  local c="$1/weft-compile --quiet" k=$2
  mkdir -p "$k"
  for m in gpt-tiny llama-tiny; do
    for t in f64 f32 bf16; do
      $c $m --batch 4 --seq 32 --dtype $t -o "$k/$m-$t.weft" || return 1
    done
  done
  $c gpt-tiny --batch 4 --seq 32 --mesh tp=2 --layout megatron -o "$k/gpt-tiny-tp2.weft" &&
    $c "$root/test/e2e/qwen2-tiny.json" --batch 4 --seq 32 -o "$k/qwen2-tiny-f32.weft" || return 1
  # Imported graphs: the generic path (f64, f32, bf16; a windowed ALiBi
  # attention written out), a padded vocabulary over tp=2, a classifier's
  # masked loss on labels and bidirectional attention, a regression's mse;
  # dropout (hidden and attention's), a sliding window, context
  # parallelism (a block of queries; the ring's blocks), packed documents,
  # key padding and token types.
  local f=$root/test/e2e/fixtures
  for t in f64 f32 bf16; do
    $c "$f/generic-tiny-torch-export.onnx" --batch 2 --seq 16 --dtype $t -o "$k/generic-tiny-$t.weft" || return 1
  done
  $c "$f/generic-window-tiny-torch-export.onnx" --batch 2 --seq 16 -o "$k/generic-window-tiny-f32.weft" &&
    $c "$f/corpus/gpt2-v251-ts17.onnx" --batch 2 --seq 16 --tie-embeddings --mesh tp=2 --layout megatron -o "$k/gpt2-v251-tp2.weft" &&
    $c "$f/corpus/bert-cls-ts17.onnx" --batch 2 --seq 16 --loss cross-entropy --classes 3 -o "$k/bert-cls-f32.weft" &&
    $c "$f/minilm-reg-tiny-torch-export.onnx" --batch 2 --seq 16 --loss mse -o "$k/minilm-reg-f32.weft" &&
    $c "$root/test/e2e/gpt-dropout.json" --batch 4 --seq 32 -o "$k/gpt-dropout-f32.weft" &&
    $c "$root/test/e2e/mistral-window4.json" --batch 4 --seq 32 -o "$k/mistral-window-f32.weft" &&
    $c llama-tiny --batch 4 --seq 32 --mesh cp=2 -o "$k/llama-tiny-cp2.weft" &&
    $c gpt-tiny --batch 4 --seq 32 --documents 0 -o "$k/gpt-tiny-documents.weft" &&
    $c "$f/padded/llama-padded.onnx" --loss cross-entropy -o "$k/llama-padded-f32.weft" &&
    $c "$f/padded/bert-cls-types.onnx" --loss cross-entropy --classes 3 -o "$k/bert-cls-types-f32.weft" || return 1
  for t in f64 f32 bf16; do
    $c llama-tiny --batch 4 --seq 32 --dtype $t --mesh cp=2 --context-parallel ring -o "$k/llama-tiny-ring-$t.weft" || return 1
  done
}

prepare() {
  local bin=$root/build/bin
  [ -x "$bin/weft-compile" ] || { echo "gpu-check: run make build first" >&2; exit 1; }
  rm -rf "$bundle" && mkdir -p "$bundle/programs/kernels" "$bundle/deps/include"
  local c="$bin/weft-compile --quiet"
  local p=$bundle/programs
  set -e
  kernel_programs "$bin" "$p/kernels"
  # Training like the CPU (f32), gradient check (f64), bf16 against f32.
  for m in gpt-tiny llama-tiny; do
    $c $m --batch 8 --seq 64 --lr 1e-3 -o "$p/$m-f32.weft"
    $c $m --batch 8 --seq 64 --lr 1e-3 --dtype bf16 -o "$p/$m-bf16.weft"
    $c $m --batch 4 --seq 16 --dtype f64 -o "$p/$m-f64.weft"
  done
  # The masked attention's features, trained: dropout (the CPU's masks),
  # a sliding window, packed documents, and a grad check of each.
  $c "$root/test/e2e/gpt-dropout.json" --batch 8 --seq 64 --lr 1e-3 -o "$p/gpt-dropout-f32.weft"
  $c "$root/test/e2e/mistral-window4.json" --batch 8 --seq 64 --lr 1e-3 -o "$p/mistral-window-f32.weft"
  $c gpt-tiny --batch 8 --seq 64 --lr 1e-3 --documents 0 -o "$p/gpt-documents-f32.weft"
  $c "$root/test/e2e/mistral-window4.json" --batch 2 --seq 16 --dtype f64 -o "$p/mistral-window-f64.weft"
  $c gpt-tiny --batch 2 --seq 16 --dtype f64 --documents 0 -o "$p/gpt-documents-f64.weft"
  # Two ranks sharing one GPU (staged MPI), where mpirun exists there.
  $c gpt-tiny --batch 8 --seq 64 --lr 1e-3 --mesh tp=2 --layout megatron -o "$p/gpt-tiny-tp2.weft"
  $c gpt-tiny --batch 8 --seq 64 --lr 1e-3 --mesh dp=2 --zero 3 -o "$p/gpt-tiny-dp2-zero3.weft"
  # The benchmark: GPT-2 124M (16 x 1024) and Llama 3.2 1B (8 x 2048), bf16.
  $c gpt2 --batch 16 --seq 1024 --dtype bf16 -o "$p/bench-gpt2.weft"
  $c "$root/test/bench/llama-3.2-1b.json" --batch 8 --seq 2048 --dtype bf16 -o "$p/bench-llama-1b.weft"
  cp -r /usr/include/nlohmann "$bundle/deps/include/"
  local cfg
  cfg=$(dirname "$(find /usr/share/cmake /usr/lib/cmake /usr/lib/x86_64-linux-gnu/cmake \
        -name nlohmann_jsonConfig.cmake 2>/dev/null | head -1)")
  mkdir -p "$bundle/deps/share/cmake" && cp -r "$cfg" "$bundle/deps/share/cmake/"
  cp -r /usr/src/googletest "$bundle/deps/googletest"
  set +e
  du -sh "$bundle"
  echo "gpu-check: prepared $bundle; on the GPU machine run scripts/gpu-check.sh OUTDIR"
}

# One step: its name, then the command; output to OUTDIR/<name>.txt, a line
# in the summary.
# step NAME LIMIT CMD...: runs CMD (a command or one of this script's
# functions) for at most LIMIT seconds, so that one slow step cannot use up
# the machine's time and hide the steps after it (issue 17: the kernel test
# once ran past the whole run's limit).
step() {
  local name=$1 limit=$2; shift 2
  local start=$SECONDS
  timeout --kill-after=10 "$limit" bash -c '"$@"' "$name" "$@" > "$out/$name.txt" 2>&1
  local rc=$?
  local verdict=PASS
  [ $rc = 77 ] && verdict=SKIP
  [ $rc = 124 ] || [ $rc = 137 ] && verdict="TIMEOUT (${limit}s)"
  [ $rc != 0 ] && [ $rc != 77 ] && [ $rc != 124 ] && [ $rc != 137 ] && verdict="FAIL (exit $rc)"
  printf '%-28s %-14s %4ds\n' "$name" "$verdict" $((SECONDS - start)) | tee -a "$out/summary.txt"
  return $rc
}

build() {
  local gtest=()
  [ -f /usr/include/gtest/gtest.h ] || gtest=(-DWEFT_GTEST_SOURCE="$bundle/deps/googletest")
  # The GPU's compute capability (9.0 -> 90); CMake's "native" needs 3.24.
  local arch
  arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null |
         head -1 | tr -d ' .')
  [ -n "$arch" ] || arch=90
  # A dry run builds as a bare GPU machine would: GoogleTest from the
  # bundle's sources and no OpenBLAS.
  [ "$dry" = 1 ] && arch=90 gtest=(-DWEFT_GTEST_SOURCE="$bundle/deps/googletest"
    -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON -DWEFT_OPENBLAS=WEFT_OPENBLAS-NOTFOUND)
  cmake -G Ninja -S "$root" -B "$root/build-gpu" -DCMAKE_BUILD_TYPE=Release \
    -DWEFT_BUILD_COMPILER=OFF -DWEFT_CUDA=ON -DWEFT_ALLOW_REFERENCE_BLAS=ON \
    -DCMAKE_CUDA_ARCHITECTURES=$arch -DCMAKE_PREFIX_PATH="$bundle/deps" \
    "${gtest[@]}" &&
    ninja -C "$root/build-gpu" weft-run weft-tokenize weft-cuda-tests
}

# Losses of two metrics files agree to Tol relative at every step.
same_losses() {
  python3 - "$@" <<'PY'
import json, sys
a, b, tol = sys.argv[1], sys.argv[2], float(sys.argv[3])
la = [json.loads(l)["loss"] for l in open(a) if l.strip()]
lb = [json.loads(l)["loss"] for l in open(b) if l.strip()]
assert len(la) == len(lb) and la, (len(la), len(lb))
worst = max(abs(x - y) / abs(y) for x, y in zip(la, lb))
print(f"{len(la)} steps, worst relative loss difference {worst:.3g} (tolerance {tol:g})")
sys.exit(0 if worst <= tol else 1)
PY
}

train_like_cpu() {
  local m=$1 run=$bin/weft-run
  $run "$p/$m-f32.weft" --steps 20 --data "$data" --quiet --metrics "$out/$m-cpu.jsonl" &&
    $run "$p/$m-f32.weft" --steps 20 --data "$data" --quiet --device cuda \
      --metrics "$out/$m-cuda.jsonl" &&
    same_losses "$out/$m-cuda.jsonl" "$out/$m-cpu.jsonl" 1e-5
}

bf16_like_f32() {
  local m=$1 run=$bin/weft-run
  $run "$p/$m-f32.weft" --steps 300 --data "$data" --quiet --device cuda \
    --metrics "$out/$m-f32-300.jsonl" &&
    $run "$p/$m-bf16.weft" --steps 300 --data "$data" --quiet --device cuda \
      --metrics "$out/$m-bf16-300.jsonl" &&
    python3 - "$out/$m-bf16-300.jsonl" "$out/$m-f32-300.jsonl" <<'PY'
import json, sys
last = lambda f: [json.loads(l)["loss"] for l in open(f) if l.strip()][-1]
b, f = last(sys.argv[1]), last(sys.argv[2])
print(f"loss after 300 steps: bf16 {b:.5f}, f32 {f:.5f}, {100 * abs(b - f) / f:.2f}% apart (2% allowed)")
sys.exit(0 if abs(b - f) <= 0.02 * f else 1)
PY
}

mesh_on_one_gpu() {
  local prog=$1
  command -v mpirun > /dev/null || { echo "SKIP: no mpirun on this machine"; return 77; }
  $bin/weft-run "$p/gpt-tiny-f32.weft" --steps 10 --data "$data" --quiet --device cuda \
    --metrics "$out/one-rank.jsonl" &&
    mpirun --allow-run-as-root --oversubscribe -np 2 $bin/weft-run "$p/$prog.weft" \
      --steps 10 --data "$data" --quiet --device cuda --share-gpu \
      --metrics "$out/$prog.jsonl" &&
    same_losses "$out/$prog.jsonl" "$out/one-rank.jsonl" 1e-5
}

main() {
  out=$1
  mkdir -p "$out" && : > "$out/summary.txt"
  [ -d "$bundle/programs" ] || { echo "gpu-check: no $bundle (run --prepare first, here)" | tee -a "$out/summary.txt"; exit 1; }
  { date; uname -a; nvidia-smi 2>&1 | head -20; nvcc --version 2>&1 | tail -2; } > "$out/machine.txt"
  # The steps run in child shells (step's timeout): they see these.
  export root bundle out dry
  export -f build same_losses train_like_cpu bf16_like_f32 mesh_on_one_gpu
  step build 300 build || { echo "gpu-check: the build failed; see $out/build.txt"; exit 1; }
  export bin=$root/build-gpu/bin p=$bundle/programs data=$out/corpus.bin
  $bin/weft-tokenize "$root/data/corpus.txt" -o "$data" > /dev/null
  WEFT_GPU_PROGRAMS=$p/kernels step cuda-kernels 120 $bin/weft-cuda-tests
  if [ "$dry" = 1 ]; then
    echo "dry run: the steps below need a CUDA device" | tee -a "$out/summary.txt"
    for s in gpt-tiny-like-cpu llama-tiny-like-cpu grad-check-f64 dropout-like-cpu \
             window-like-cpu documents-like-cpu bf16-like-f32 tp2-on-one-gpu \
             dp2-zero3-on-one-gpu benchmark; do
      echo "  $s" | tee -a "$out/summary.txt"
    done
    exit 0
  fi
  step gpt-tiny-like-cpu 60 train_like_cpu gpt-tiny
  step llama-tiny-like-cpu 60 train_like_cpu llama-tiny
  step grad-check-f64-gpt 60 $bin/weft-run "$p/gpt-tiny-f64.weft" --device cuda --grad-check 4 --grad-tol 1e-6
  step grad-check-f64-llama 60 $bin/weft-run "$p/llama-tiny-f64.weft" --device cuda --grad-check 4 --grad-tol 1e-6
  step dropout-like-cpu 60 train_like_cpu gpt-dropout
  step window-like-cpu 60 train_like_cpu mistral-window
  step documents-like-cpu 60 train_like_cpu gpt-documents
  step grad-check-f64-window 60 $bin/weft-run "$p/mistral-window-f64.weft" --device cuda --grad-check 4 --grad-tol 1e-6
  step grad-check-f64-documents 60 $bin/weft-run "$p/gpt-documents-f64.weft" --device cuda --grad-check 4 --grad-tol 1e-6
  step bf16-like-f32 120 bf16_like_f32 gpt-tiny
  step tp2-on-one-gpu 60 mesh_on_one_gpu gpt-tiny-tp2
  step dp2-zero3-on-one-gpu 60 mesh_on_one_gpu gpt-tiny-dp2-zero3
  step benchmark 300 python3 "$root/test/bench/bench_cuda.py" --bin "$bin" \
    --programs "$p" --data "$data" --out "$out"
  echo "results in $out (summary.txt)"
}

dry=0
case "${1:-}" in
  --prepare) prepare ;;
  --kernel-programs) kernel_programs "${2:?BIN}" "${3:?DIR}" ;;
  --dry-run) dry=1; main "${2:?usage: scripts/gpu-check.sh --dry-run OUTDIR}" ;;
  ""|-h|--help) sed -n '2,22p' "$0" ;;
  *) main "$1" ;;
esac
