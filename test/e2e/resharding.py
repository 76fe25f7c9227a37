#!/usr/bin/python3
"""Sharded checkpoints reshard on load: a run saved under one layout continues
under any other exactly as the uninterrupted run does.

Saves gpt-tiny (f64) after HALF steps under dp=2,tp=2 (Megatron), loads that
checkpoint under tp=4, dp=4, cp=2,tp=2 and one rank, trains HALF more
steps, and compares each continuation's losses and final parameters with one
uninterrupted 2*HALF-step run on one rank. Also loads unsharded weights (the
1-rank checkpoint) on dp=2,tp=2, and a checkpoint saved under dp=2,cp=2
with ZeRO-3 on one rank and tp=2.

MODEL (default gpt-tiny) may be a config whose vocabulary tp does not
divide (251): the tp layouts then pad it (weft-pad-vocab), and every
checkpoint still holds the model's 251 rows.

usage: resharding.py BIN_DIR DATA WORKDIR [HALF [MODEL]]
"""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_util import launch, run  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "reference"))
import wref_np  # noqa: E402
import numpy as np  # noqa: E402

TOL = 1e-9  # f64: the layouts compute the same sums in other orders




MODEL = "gpt-tiny"


def compile_(bin_dir, work, name, flags):
    prog = f"{work}/{name}.weft"
    run([f"{bin_dir}/weft-compile", MODEL, "--batch", "4", "--seq", "16",
         "--lr", "3e-3", "--dtype", "f64", "-o", prog, "--quiet"] + flags)
    return prog


def train(bin_dir, prog, ranks, data, steps, metrics, extra):
    run(launch(ranks) + [f"{bin_dir}/weft-run", prog, "--data", data, "--threads", "1",
                  "--quiet", "--steps", str(steps), "--metrics", metrics] + extra)
    return [json.loads(line)["loss"] for line in open(metrics)]


def gathered(bin_dir, one_prog, data, ckpt, out):
    """Global parameters of any checkpoint, by loading it on one rank."""
    run([f"{bin_dir}/weft-run", one_prog, "--steps", "0", "--load", ckpt,
         "--save", out, "--quiet", "--data", data])
    return wref_np.read_safetensors(f"{out}/model.safetensors")[0]


def max_rel(a, b):
    scale = np.max(np.abs(b))
    return float(np.max(np.abs(a - b)) / scale) if scale > 0 else 0.0


def main():
    bin_dir, data, work = sys.argv[1:4]
    half = int(sys.argv[4]) if len(sys.argv) > 4 else 10
    global MODEL
    MODEL = sys.argv[5] if len(sys.argv) > 5 else MODEL
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    one = compile_(bin_dir, work, "one", [])
    ref_losses = train(bin_dir, one, 1, data, 2 * half, f"{work}/ref.jsonl",
                       ["--save", f"{work}/ref"])
    ref_params = wref_np.read_safetensors(f"{work}/ref/model.safetensors")[0]
    # Every checkpoint holds the model's shapes (a padded vocabulary's
    # rows are the program's, never the file's).
    shapes = {k: v.shape for k, v in ref_params.items()}

    saved = compile_(bin_dir, work, "dp2tp2",
                     ["--mesh", "dp=2,tp=2", "--layout", "megatron"])
    first = train(bin_dir, saved, 4, data, half, f"{work}/first.jsonl",
                  ["--save", f"{work}/ckpt"])
    failures = []
    if max(abs(a - b) / abs(b) for a, b in zip(first, ref_losses)) > TOL:
        failures.append("the first half under dp=2,tp=2 differs from one rank")

    # An unsharded 1-rank checkpoint after HALF steps, to load on a mesh.
    train(bin_dir, one, 1, data, half, f"{work}/one_half.jsonl",
          ["--save", f"{work}/ckpt_one"])
    # And one saved under context parallelism with ZeRO-3 (sequences in
    # load-balanced chunks, parameters and state split over dp).
    saved_cp = compile_(bin_dir, work, "dp2cp2", ["--mesh", "dp=2,cp=2", "--zero", "3"])
    first_cp = train(bin_dir, saved_cp, 4, data, half, f"{work}/first_cp.jsonl",
                     ["--save", f"{work}/ckpt_cp"])
    if max(abs(a - b) / abs(b) for a, b in zip(first_cp, ref_losses)) > TOL:
        failures.append("the first half under dp=2,cp=2 differs from one rank")

    cases = [
        ("tp=4", 4, ["--mesh", "tp=4", "--layout", "megatron"], f"{work}/ckpt"),
        ("dp=4", 4, ["--mesh", "dp=4"], f"{work}/ckpt"),
        ("1 rank", 1, [], f"{work}/ckpt"),
        ("dp=2,tp=2 from unsharded", 4,
         ["--mesh", "dp=2,tp=2", "--layout", "megatron"], f"{work}/ckpt_one"),
        ("cp=2,tp=2", 4, ["--mesh", "cp=2,tp=2", "--layout", "megatron"],
         f"{work}/ckpt"),
        ("1 rank from dp=2,cp=2 ZeRO-3", 1, [], f"{work}/ckpt_cp"),
        ("tp=2 from dp=2,cp=2 ZeRO-3", 2, ["--mesh", "tp=2", "--layout", "megatron"],
         f"{work}/ckpt_cp"),
    ]
    for i, (name, ranks, flags, ckpt) in enumerate(cases):
        prog = compile_(bin_dir, work, f"case{i}", flags)
        losses = train(bin_dir, prog, ranks, data, half, f"{work}/case{i}.jsonl",
                       ["--load", ckpt, "--save", f"{work}/case{i}"])
        loss_err = max(abs(a - b) / abs(b)
                       for a, b in zip(losses, ref_losses[half:]))
        params = gathered(bin_dir, one, data, f"{work}/case{i}", f"{work}/g{i}")
        if {k: v.shape for k, v in params.items()} != shapes:
            failures.append(f"{name}: gathered shapes differ from the model's")
            continue
        layout = os.path.join(f"{work}/case{i}", "layout.json")
        if os.path.exists(layout):
            for k, t in json.load(open(layout))["tensors"].items():
                base = k.split(".exp_avg")[0]
                if "logical_shape" in t and base in shapes and \
                        t["logical_shape"] != list(shapes[base]) and \
                        t["logical_shape"] != [int(np.prod(shapes[base]))]:
                    failures.append(f"{name}: {k} logical_shape "
                                    f"{t['logical_shape']}")
        param_err = max(max_rel(params[k], ref_params[k]) for k in ref_params)
        ok = len(losses) == half and loss_err <= TOL and param_err <= TOL
        print(f"{'ok  ' if ok else 'FAIL'} save @{half} -> load {name:30s} "
              f"losses {loss_err:.1e}  params {param_err:.1e}")
        if not ok:
            failures.append(f"{name}: loss {loss_err:.2e} params {param_err:.2e}")
    if failures:
        sys.exit("FAIL:\n  " + "\n  ".join(failures))
    print("PASS: resharded checkpoints continue like the uninterrupted run")


if __name__ == "__main__":
    main()
