#!/usr/bin/python3
"""Mixed precision (--dtype bf16, docs/design.md decision 15) trains like f32.

For one model, compiles the same training run in f32 and in bf16 (bf16
activations and GEMM inputs, f32 master weights, gradients, Adam state and
loss), trains both STEPS steps from the same seed and data, and checks:
  - the mean loss of the last 20 steps of bf16 is within 2% of f32's, and
    both learned (below the first step's loss by a clear margin);
  - the bf16 program's activation arena is smaller than the f32 one's;
  - its checkpoint holds f32 master weights (every tensor F32), which load
    into the f32 program unchanged (loaded and saved again, bit for bit).

usage: mixed_precision.py BIN_DIR DATA WORKDIR MODEL STEPS
"""
import json
import os
import re
import shutil
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_util import run  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "reference"))
import wref_np  # noqa: E402

LAST = 20
TOL = 0.02


def header_dtypes(path):
    """{tensor name: safetensors dtype} of a file."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    return {k: v["dtype"] for k, v in header.items() if k != "__metadata__"}


def arena_bytes(out):
    m = re.search(r"activations\s+(\d+) bytes", out)
    if not m:
        sys.exit(f"FAIL: no activation line in --explain:\n{out}")
    return int(m.group(1))


def main():
    bin_dir, data, work, model, steps = sys.argv[1:6]
    steps = int(steps)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    common = ["--batch", "8", "--seq", "64", "--lr", "1e-3"]
    results = {}
    for dtype in ["f32", "bf16"]:
        prog = f"{work}/{dtype}.weft"
        out = run([f"{bin_dir}/weft-compile", model] + common +
                  ["--dtype", dtype, "--explain", "-o", prog])
        metrics = f"{work}/{dtype}.jsonl"
        run([f"{bin_dir}/weft-run", prog, "--steps", str(steps), "--data", data,
             "--metrics", metrics, "--save", f"{work}/{dtype}-final",
             "--quiet"])
        losses = [json.loads(line)["loss"] for line in open(metrics)]
        if len(losses) != steps:
            sys.exit(f"FAIL: {dtype} ran {len(losses)} of {steps} steps")
        results[dtype] = (losses, arena_bytes(out))
    f32, bf16 = results["f32"], results["bf16"]
    mean32 = sum(f32[0][-LAST:]) / LAST
    mean16 = sum(bf16[0][-LAST:]) / LAST
    rel = abs(mean16 - mean32) / mean32
    print(f"{model}: {steps} steps, mean loss of the last {LAST}: f32 "
          f"{mean32:.4f}, bf16 {mean16:.4f} ({100 * rel:.2f}% apart); first "
          f"loss {f32[0][0]:.4f}; arena f32 {f32[1]} B, bf16 {bf16[1]} B")
    failures = []
    if rel > TOL:
        failures.append(f"bf16 ends {100 * rel:.2f}% from f32 (> {100 * TOL}%)")
    for dtype, (losses, _) in results.items():
        if sum(losses[-LAST:]) / LAST > 0.8 * losses[0]:
            failures.append(f"{dtype} did not learn")
    if not bf16[1] < f32[1]:
        failures.append(f"the bf16 arena ({bf16[1]} B) is not smaller")
    # The bf16 run's checkpoint: f32 master weights, loadable by f32.
    saved = f"{work}/bf16-final/model.safetensors"
    tensors = wref_np.read_safetensors(saved)[0]
    bad = sorted(n for n, t in header_dtypes(saved).items() if t != "F32")
    if bad:
        failures.append(f"checkpoint tensors not F32: {bad[:3]}")
    run([f"{bin_dir}/weft-run", f"{work}/f32.weft", "--steps", "0",
         "--load", f"{work}/bf16-final", "--save", f"{work}/reloaded",
         "--quiet", "--data", data])
    again = wref_np.read_safetensors(f"{work}/reloaded/model.safetensors")[0]
    for name, t in tensors.items():
        if not (again[name] == t).all():
            failures.append(f"'{name}' changed through the f32 program")
            break
    if failures:
        sys.exit("FAIL: " + "; ".join(failures))
    print(f"PASS: {model} in bf16 ends within {100 * TOL:.0f}% of f32; its "
          f"f32 master weights load into the f32 program")


if __name__ == "__main__":
    main()
