#!/usr/bin/python3
"""Property test: every layout weft accepts trains exactly like one rank.

The equivalence suite checks the built-in layouts; users write their own.
This draws random layout files (random parameters, dims and mesh axes, the
inputs' split, ZeRO stage and sequence parallelism) on dp/tp meshes of up to
4 ranks, for gpt-tiny and llama-tiny (or any --models, presets or
config.json paths) in f64, and checks each one:

  - accepted by weft-compile: an N-rank run under mpirun agrees with the
    1-rank run: every step's loss to 1e-12 relative (exact at the 9 digits
    the metrics print), every gradient after step 1 and every parameter
    after STEPS AdamW steps to 1e-10 max-relative (max|a-b| / max|b|);
  - refused: exit status 1 with a message ("weft-compile: error: ..." or an
    MLIR diagnostic naming the value), never a crash.

A few draws are deliberately bad (an axis the mesh lacks, one axis on two
dims of a tensor, a split that does not divide, a mesh axis that splits
nothing) so refusals are exercised.

usage: random_layouts.py BIN_DIR DATA WORKDIR [--count N] [--seed S]
                         [--steps K] [--models gpt-tiny,llama-tiny]
                         [--compile-flags '--loss masked-lm --mask-token 1']
`make test` runs a fixed seed; a longer run: --count 200 --seed $RANDOM.
"""
import argparse
import json
import os
import random
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_util import launch, run  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "reference"))
import wref_np  # noqa: E402
import numpy as np  # noqa: E402

LOSS_TOL, GRAD_TOL, PARAM_TOL = 1e-12, 1e-10, 1e-10
BATCH, SEQ = 4, 16
MESHES = ["dp=2", "tp=2", "dp=2,tp=2", "tp=2,dp=2", "dp=4", "tp=4"]


def mesh_axes(mesh):
    return {a.split("=")[0]: int(a.split("=")[1]) for a in mesh.split(",")}


def draw_spec(rng, shape, axes, bad):
    """A random sharding of a tensor: per dim, no axis, one or two axes."""
    names = list(axes)
    spec = [[] for _ in shape]
    free = names[:]
    rng.shuffle(free)
    for d in rng.sample(range(len(shape)), len(shape)):
        if not free or rng.random() < 0.4:
            continue
        take = 2 if len(free) >= 2 and rng.random() < 0.2 else 1
        spec[d] = free[:take]
        free = free[take:]
    if bad == "unknown-axis":
        spec[rng.randrange(len(shape))] = ["pp"]
    elif bad == "axis-twice" and len(shape) >= 2 and names:
        a = rng.choice(names)
        spec[0], spec[1] = [a], [a]
    return spec


def draw_layout(rng, params, mesh):
    axes = mesh_axes(mesh)
    bad = rng.choice(["unknown-axis", "axis-twice"]) if rng.random() < 0.1 else None
    layout = {"params": {}}
    for p in rng.sample(params, rng.randint(1, min(6, len(params)))):
        layout["params"][p["name"]] = draw_spec(rng, p["shape"], axes, bad)
        bad = None
    if rng.random() < 0.5:
        layout["inputs"] = draw_spec(rng, [BATCH, SEQ], axes, None)
    if "dp" in axes and rng.random() < 0.5:
        layout["zero"] = rng.randint(0, 3)
    if "tp" in axes and rng.random() < 0.4:
        layout["sequence_parallel"] = True
    if "cp" in axes and rng.random() < 0.3:
        layout["context_order"] = "natural"
    if "cp" in axes and rng.random() < 0.6:
        layout["context_parallel"] = rng.choice(["all-to-all", "ring"])
    # weft refuses a mesh axis that splits nothing (its ranks would repeat
    # each other's work): most draws give such an axis to the inputs.
    used = {a for spec in layout["params"].values() for dim in spec for a in dim}
    used |= {a for dim in layout.get("inputs", [[], []]) for a in dim}
    if layout.get("sequence_parallel"):
        used.add("tp")
    if "inputs" not in layout and "dp" in axes:
        used.add("dp")  # the default inputs split the batch over dp
    for a in axes:
        if a not in used and rng.random() < 0.9:
            inputs = layout.setdefault("inputs", [["dp"] if "dp" in axes else [], []])
            inputs[0 if not inputs[0] else 1].append(a)
    return layout


def train(bin_dir, prog, ranks, data, work, steps):
    base = launch(ranks) + [f"{bin_dir}/weft-run", prog, "--data", data,
                            "--threads", "1", "--quiet"]
    run(base + ["--steps", str(steps), "--metrics", f"{work}/m.jsonl",
                "--save", f"{work}/final"])
    run(base + ["--steps", "1", "--save-grads", f"{work}/g1"])
    metrics = [json.loads(line) for line in open(f"{work}/m.jsonl")]
    grads = wref_np.read_safetensors(f"{work}/g1/grads.safetensors")[0]
    return metrics, grads


def params_of(bin_dir, one_prog, work, data):
    plain = f"{work}/final/model.safetensors"
    if not os.path.exists(plain):  # sharded: gather it on one rank
        run([f"{bin_dir}/weft-run", one_prog, "--steps", "0", "--load",
             f"{work}/final", "--save", f"{work}/gathered", "--quiet", "--data", data])
        plain = f"{work}/gathered/model.safetensors"
    return wref_np.read_safetensors(plain)[0]


def check_like_one_rank(b, prog, ranks, data, work, steps, one_prog, ref, desc):
    """Trains PROG on RANKS and compares it with one rank's REF (metrics,
    gradients after step 1, parameters after STEPS); prints the case's line
    and returns its failure, or None."""
    ref_metrics, ref_grads, ref_params = ref
    metrics, grads = train(b, prog, ranks, data, work, steps)
    params_after = params_of(b, one_prog, work, data)
    loss_err = max(abs(m["loss"] - r["loss"]) / abs(r["loss"])
                   for m, r in zip(metrics, ref_metrics))
    grad_err = max(max_rel(grads[k], ref_grads[k]) for k in ref_grads)
    param_err = max(max_rel(params_after[k], ref_params[k]) for k in ref_params)
    ok = (len(metrics) == steps and loss_err <= LOSS_TOL and
          grad_err <= GRAD_TOL and param_err <= PARAM_TOL)
    print(f"{'ok      ' if ok else 'FAIL    '} {desc}\n         loss {loss_err:.1e} "
          f"grad {grad_err:.1e} param {param_err:.1e}")
    if ok:
        return None
    worst = max(ref_grads, key=lambda k: max_rel(grads[k], ref_grads[k]))
    return (f"{desc}: loss {loss_err:.2e} grad {grad_err:.2e} (worst {worst}) "
            f"param {param_err:.2e}")


def max_rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    scale = np.max(np.abs(b))
    diff = np.max(np.abs(a - b))
    return float(diff / scale) if scale > 0 else float(diff)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin_dir")
    ap.add_argument("data")
    ap.add_argument("work")
    ap.add_argument("--count", type=int, default=16)
    ap.add_argument("--seed", type=int, default=8)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--models", default="gpt-tiny,llama-tiny")
    ap.add_argument("--meshes", default=" ".join(MESHES),
                    help="the meshes to draw from, separated by spaces")
    ap.add_argument("--compile-flags", default="",
                    help="more weft-compile flags for every program, e.g. "
                         "'--loss masked-lm --mask-token 1'")
    args = ap.parse_args()
    b = args.bin_dir
    common = ["--batch", str(BATCH), "--seq", str(SEQ), "--lr", "3e-3",
              "--dtype", "f64", "--quiet"] + args.compile_flags.split()
    shutil.rmtree(args.work, ignore_errors=True)
    rng = random.Random(args.seed)
    models = args.models.split(",")
    refs = {}
    for m in models:
        w = f"{args.work}/{os.path.basename(m)}-one"
        os.makedirs(w)
        run([f"{b}/weft-compile", m] + common + ["-o", f"{w}/prog.weft"])
        metrics, grads = train(b, f"{w}/prog.weft", 1, args.data, w, args.steps)
        refs[m] = (f"{w}/prog.weft", metrics, grads,
                   params_of(b, f"{w}/prog.weft", w, args.data),
                   wref_np.read_program(f"{w}/prog.weft")["params"])
    failures, accepted, refused = [], 0, 0
    for i in range(args.count):
        model = models[i % len(models)]
        mesh = rng.choice(args.meshes.split())
        one_prog, ref_metrics, ref_grads, ref_params, params = refs[model]
        layout = draw_layout(rng, params, mesh)
        w = f"{args.work}/case{i}"
        os.makedirs(w)
        with open(f"{w}/layout.json", "w") as f:
            json.dump(layout, f)
        desc = f"case {i}: {model} --mesh {mesh} layout {json.dumps(layout)}"
        r = subprocess.run([f"{b}/weft-compile", model] + common +
                           ["--mesh", mesh, "--layout", f"{w}/layout.json",
                            "-o", f"{w}/prog.weft"], capture_output=True, text=True)
        if r.returncode != 0:
            message = r.stderr.strip().splitlines()
            if r.returncode != 1 or not message or "error" not in r.stderr:
                failures.append(f"{desc}: refused badly (exit {r.returncode}): "
                                f"{r.stderr[-500:]}")
                continue
            refused += 1
            print(f"refused  {desc}\n         {message[0][:160]}")
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
    print(f"tried {args.count} random layouts (seed {args.seed}): {accepted} accepted "
          f"and trained like one rank, {refused} refused with a message")
    if failures:
        sys.exit("FAIL:\n  " + "\n  ".join(failures))
    print(f"PASS: {args.count} random layouts")


if __name__ == "__main__":
    main()
