#!/usr/bin/python3
"""weft-plan's memory per GPU beside weft-compile's own plan of the same
layout (weft-compile --plan ... --explain, the rank that holds the most).
Prints one line per layout, "ok" within TOLERANCE or "OFF" beyond it, with
each component (plan / weft, GB). No training runs: both are compile-time.
usage: plan_memory.py BIN_DIR"""
import json
import os
import re
import subprocess
import sys
import tempfile

TOLERANCE = 0.15
# Llama 3 8B at 4,096 tokens on H100s (bf16): every ZeRO stage, tensor,
# sequence and pipeline parallelism, each recomputation.
CASES = [
    (8, 8, "dp=8,tp=1,pp=1,mb=1,zero=0,recompute=none"),
    (8, 8, "dp=8,tp=1,pp=1,mb=1,zero=1,recompute=none"),
    (8, 8, "dp=8,tp=1,pp=1,mb=1,zero=2,recompute=selective"),
    (8, 8, "dp=8,tp=1,pp=1,mb=1,zero=3,recompute=none"),
    (8, 8, "dp=8,tp=1,pp=1,mb=1,zero=3,recompute=full"),
    (8, 8, "tp=8,pp=1,dp=1,mb=1,sp=1,zero=0,recompute=selective"),
    (16, 32, "dp=4,tp=4,pp=1,mb=1,zero=3,sp=1,recompute=selective"),
    (8, 64, "tp=2,pp=2,dp=2,mb=1,zero=1,sp=1,recompute=selective,schedule=1f1b"),
    (8, 32, "tp=2,pp=4,dp=1,mb=1,zero=0,sp=1,recompute=full,schedule=1f1b"),
    (8, 32, "tp=4,pp=2,dp=1,mb=1,zero=0,sp=1,recompute=selective,"
            "schedule=interleaved,v=2"),
]
PARTS = [("parameters", "parameters"), ("gradients", "gradients"),
         ("optimizer_state", "optimizer state"), ("activations", "activations")]

bin_dir = sys.argv[1]
with tempfile.TemporaryDirectory() as work:
    plan_file = os.path.join(work, "plan.json")
    for gpus, batch, fix in CASES:
        p = subprocess.run([os.path.join(bin_dir, "weft-plan"), "llama-3-8b", "--cluster",
                            "h100-80g", "--gpus", str(gpus), "--seq", "4096",
                            "--global-batch", str(batch), "--fix", fix, "--json",
                            "--memory-unchecked"], capture_output=True, text=True)
        if p.returncode != 0:
            print(f"FAILED weft-plan {fix}: {p.stderr.strip()}")
            continue
        with open(plan_file, "w") as f:
            f.write(p.stdout)
        row = json.loads(p.stdout)["layouts"][0]
        c = subprocess.run([os.path.join(bin_dir, "weft-compile"), "llama-3-8b", "--plan",
                            plan_file, "--explain", "-o", os.path.join(work, "p.weft")],
                           capture_output=True, text=True)
        if c.returncode != 0:
            print(f"FAILED weft-compile {fix}: {c.stderr.strip()[-300:]}")
            continue

        def column(name):
            return [int(x) for x in re.findall(r"^\s+" + name + r"\s+(\d+) bytes", c.stdout, re.M)]
        totals = column("total")
        rank = max(range(len(totals)), key=lambda i: totals[i])
        planned = row["memory_per_gpu_bytes"]
        error = planned / totals[rank] - 1
        memory = row["breakdown"]["memory"]
        parts = "  ".join(f"{short} {memory[key]['bytes'] / 1e9:.2f}/{column(short)[rank] / 1e9:.2f}"
                          for key, short in PARTS)
        print(f"{'ok ' if abs(error) <= TOLERANCE else 'OFF'} {fix}: plan {planned / 1e9:.2f} GB, "
              f"weft {totals[rank] / 1e9:.2f} GB ({100 * error:+.1f}%)  {parts}")
