#!/usr/bin/python3
"""Property test: every pipeline layout weft accepts trains like one rank.

pipeline.test checks a fixed list of pipelines; users combine the flags
freely. This draws random pipeline layouts on meshes of up to 4 ranks (pp
alone, beside dp or tp, as the outer or the inner axis): the schedule
(gpipe, 1f1b, interleaved over 2 chunks, zb-h1), micro-batches (1, 2, 4),
even or uneven stages (--stages), recomputation, the ZeRO stage with its
bucket size and ZeRO-3 gather mode, megatron with or without sequence
parallelism, for a 4-layer GPT-2 (tied head) and Llama in f64, and checks
each one:

  - accepted by weft-compile: the N-rank run under mpirun agrees with one
    rank without micro-batches: every step's loss to 1e-12 relative, the
    gradients after step 1 and the parameters after STEPS AdamW steps to
    1e-10 max-relative (max|a-b| / max|b|);
  - refused: exit status 1 with a message that names the user's flags or
    axes ("weft-compile: error: ..."), never a crash nor an op's
    diagnostic from inside the compiler.

usage: random_pipelines.py BIN_DIR DATA WORKDIR [--count N] [--seed S]
                           [--steps K] [--models a.json,b.json]
`make test` runs a fixed seed; a longer run: --count 100 --seed $RANDOM.
"""
import argparse
import os
import random
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from random_layouts import check_like_one_rank, params_of, train  # noqa: E402

BATCH, SEQ, LAYERS = 8, 16, 4
MESHES = ["pp=2", "pp=4", "pp=2,dp=2", "dp=2,pp=2", "pp=2,tp=2", "tp=2,pp=2"]
HERE = os.path.dirname(os.path.abspath(__file__))


def mesh_axes(mesh):
    return {a.split("=")[0]: int(a.split("=")[1]) for a in mesh.split(",")}


def uneven_stages(rng, stages):
    """LAYERS layers cut into `stages` non-empty runs, as --stages spells."""
    cuts = sorted(rng.sample(range(1, LAYERS), stages - 1))
    bounds = [0] + cuts + [LAYERS]
    return ",".join(f"{a}" if b - a == 1 else f"{a}-{b - 1}"
                    for a, b in zip(bounds, bounds[1:]))


def draw_flags(rng, mesh):
    axes = mesh_axes(mesh)
    flags = ["--mesh", mesh]
    schedule = rng.choice(["gpipe", "1f1b", "interleaved", "zb-h1"])
    flags += ["--pipeline-schedule", schedule]
    if schedule == "interleaved":
        flags += ["--virtual-stages", "2"]
    elif rng.random() < 0.4:
        flags += ["--stages", uneven_stages(rng, axes["pp"])]
    micro = rng.choice([1, 2, 4])
    if schedule == "interleaved" and rng.random() < 0.8:
        micro = rng.choice([m for m in (2, 4) if m % axes["pp"] == 0] or [4])
    if micro > 1:
        flags += ["--microbatches", str(micro)]
    recompute = rng.choice(["none", "none", "selective", "full"])
    if recompute != "none":
        flags += ["--recompute", recompute]
    if "dp" in axes:
        zero = rng.randint(0, 3)
        if zero:
            flags += ["--zero", str(zero)]
        if zero == 3 and micro > 1 and rng.random() < 0.5:
            flags += ["--zero3-gather", "microbatch"]
        if zero >= 2 and rng.random() < 0.3:
            flags += ["--zero-bucket-mb", "0.01"]
    if "tp" in axes:
        flags += ["--layout", "megatron"]
        if rng.random() < 0.5:
            flags += ["--sequence-parallel"]
    return flags


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin_dir")
    ap.add_argument("data")
    ap.add_argument("work")
    ap.add_argument("--count", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--models", default=f"{HERE}/gpt-tied4.json,{HERE}/llama4.json")
    args = ap.parse_args()
    b = args.bin_dir
    common = ["--batch", str(BATCH), "--seq", str(SEQ), "--lr", "3e-3",
              "--dtype", "f64", "--quiet"]
    shutil.rmtree(args.work, ignore_errors=True)
    rng = random.Random(args.seed)
    models = args.models.split(",")
    refs = {}
    for m in models:
        w = f"{args.work}/{os.path.basename(m)}-one"
        os.makedirs(w)
        subprocess.run([f"{b}/weft-compile", m] + common + ["-o", f"{w}/prog.weft"],
                       check=True)
        metrics, grads = train(b, f"{w}/prog.weft", 1, args.data, w, args.steps)
        refs[m] = (f"{w}/prog.weft", metrics, grads,
                   params_of(b, f"{w}/prog.weft", w, args.data))
    failures, accepted, refused = [], 0, 0
    for i in range(args.count):
        model = models[i % len(models)]
        mesh = rng.choice(MESHES)
        one_prog, ref_metrics, ref_grads, ref_params = refs[model]
        flags = draw_flags(rng, mesh)
        w = f"{args.work}/case{i}"
        os.makedirs(w)
        desc = f"case {i}: {os.path.basename(model)} {' '.join(flags)}"
        r = subprocess.run([f"{b}/weft-compile", model] + common + flags +
                           ["-o", f"{w}/prog.weft"], capture_output=True, text=True)
        if r.returncode != 0:
            first = (r.stderr.strip().splitlines() or [""])[0]
            # The user's words: weft-compile's own refusal, not an op's
            # diagnostic ("'weft.split' op ...") from inside a pass.
            if r.returncode != 1 or not first.startswith("weft-compile: error:") \
                    or "' op " in first:
                failures.append(f"{desc}: refused badly (exit {r.returncode}): "
                                f"{r.stderr[-500:]}")
                print(f"FAIL     {desc}\n         {first[:200]}")
                continue
            refused += 1
            print(f"refused  {desc}\n         {first[:200]}")
            continue
        accepted += 1
        ranks = 1
        for n in mesh_axes(mesh).values():
            ranks *= n
        failure = check_like_one_rank(b, f"{w}/prog.weft", ranks, args.data, w,
                                      args.steps, one_prog,
                                      (ref_metrics, ref_grads, ref_params), desc)
        if failure:
            failures.append(failure)
    print(f"tried {args.count} random pipeline layouts (seed {args.seed}): {accepted} "
          f"accepted and trained like one rank, {refused} refused with a message")
    if failures:
        sys.exit("FAIL:\n  " + "\n  ".join(failures))
    print(f"PASS: {args.count} random pipeline layouts")


if __name__ == "__main__":
    main()
