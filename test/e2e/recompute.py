#!/usr/bin/python3
"""--recompute selective|full trains exactly the model --recompute none
does: after two steps in f64 the saved gradients are the same bytes. For
each, --explain's memory total is within 5% of weft-run's measured peak,
and full recomputation gives a smaller arena than none.

usage: recompute.py BIN_DIR DATA WORKDIR MODEL"""
import filecmp
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_util import run  # noqa: E402

bin_dir, data, work, model = sys.argv[1:5]
os.makedirs(work, exist_ok=True)
flags = ["--batch", "8", "--seq", "64", "--dtype", "f64"]
arena, failures = {}, []
for mode in ("none", "selective", "full"):
    prog = f"{work}/{model}-{mode}.weft"
    explain = run([f"{bin_dir}/weft-compile", model] + flags +
                  ["--recompute", mode, "--explain", "-o", prog, "--quiet"])
    predicted = int(re.search(r"total\s+(\d+) bytes", explain).group(1))
    arena[mode] = int(re.search(r"activations\s+(\d+) bytes", explain).group(1))
    out = run([f"{bin_dir}/weft-run", prog, "--data", data, "--steps", "2",
               "--threads", "1", "--save-grads", f"{work}/{model}-{mode}"])
    measured = int(re.search(r"peak bytes (\d+)", out).group(1))
    if abs(measured - predicted) > 0.05 * predicted:
        failures.append(f"{mode}: --explain says {predicted} bytes, weft-run "
                        f"measured {measured}")
    if mode == "none":
        continue
    same = filecmp.cmp(f"{work}/{model}-none/grads.safetensors",
                       f"{work}/{model}-{mode}/grads.safetensors",
                       shallow=False)
    if not same:
        failures.append(f"{mode}: gradients differ from --recompute none")
    extra = (f", arena {arena['none']} -> {arena['full']} bytes"
             if mode == "full" else "")
    print(f"{model} {mode}: gradients {'identical' if same else 'DIFFER'}"
          f"{extra}, peak {measured} bytes measured, {predicted} predicted")
if arena["full"] >= arena["none"]:
    failures.append(f"full recomputation does not shrink the arena "
                    f"({arena['none']} -> {arena['full']} bytes)")
if failures:
    sys.exit("FAIL:\n  " + "\n  ".join(failures))
print("PASS")
