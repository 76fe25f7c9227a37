#!/usr/bin/python3
"""The independent PyTorch oracle for weft's training step.

For each model (gpt-tiny, llama-tiny by default) and program dtype (f32, f64)
it runs
  weft-compile MODEL --batch 4 --seq 32 --lr 1e-3 --weight-decay 0.1 [--dtype f64] -o W/prog.weft
  weft-run W/prog.weft --steps 0 --data DATA --seed SEED --save W/init
  weft-run W/prog.weft --steps 1 --data DATA --seed SEED --save-grads W/g1 --metrics W/m1.jsonl
  weft-run W/prog.weft --steps 3 --data DATA --seed SEED --metrics W/m3.jsonl --save W/after3
and compares with plain PyTorch (test/reference/wref_models.py, Hugging Face
semantics) started from weft's initial weights:
  init   weft's initial weights vs the formula of docs/program-format.md (numpy)
  loss   step-1 loss and the losses of steps 1..3
  grad   every gradient of step 1
  param  every parameter after 3 torch.optim.AdamW steps (decay on rank >= 2)
Errors are max|weft - ref| / max|ref| per tensor (relative for losses).

The reference ("truth") is torch in float64.  A float32 torch run is made
too; the table shows weft's distance from it and torch-f32's own distance from
float64 (the float32 noise floor).

Tolerances, f32 program: loss 1e-5, grad 1e-4 (measured: ~1e-8 and ~6e-7),
param 5e-3.  1e-5 on parameters after 3 AdamW steps is out of reach for ANY
float32 implementation: torch's own float32 run is 2e-5..1.2e-3 away from
float64.  Adam's first update is lr*g/(|g|+eps) with eps = 1e-8, so a gradient
element near 1e-8 (float32 rounding noise ~1e-7 of the tensor's largest
gradient) moves by an amount decided by that noise; the key third of c_attn's
bias has an exact gradient of zero (softmax ignores a per-query constant) and
moves by pure noise.  The float32 parameter figure is printed with torch's
own noise floor beside it, gated at 5e-3; the rows `param~` leave out the
elements whose reference step-1 gradient is below 10 eps and are gated at
max(1e-4, 4 x torch-f32's own figure) (measured ~1e-5 at lr 1e-3; catches e.g.
a missing weight decay, 5e-4, or lr off by 0.1%, 3e-3).  The strict
parameter and optimizer gate is the f64
program: loss 1e-8 (metrics print 9 digits), grad and param 1e-9 (measured
~1e-15 and ~1e-12); against the fixtures (float32-rounded) 1e-6.

Modes:
  (default)              live comparison; without torch: prints SKIP and
                         falls back to --check-fixtures test/reference/fixtures
  --write-fixtures DIR   store torch's float64 results (rounded to float32)
                         from the doc's initial weights under DIR/<model>/ and
                         the data under DIR/data.bin (needs weft-compile only)
  --check-fixtures DIR   run weft and compare with DIR using numpy only

Exit status: 0 when every check passes, 1 on a mismatch, 2 on a tool error.
"""
import sys as _sys
_sys.dont_write_bytecode = True  # keep test/reference free of __pycache__
import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import numpy as np  # noqa: E402
import wref_np as W  # noqa: E402

DEFAULT_MODELS = ["gpt-tiny", "llama-tiny"]
DEFAULT_SEED = 1234  # weft-run's default, passed explicitly

TOLS = {
    # dtype -> check -> tolerance; see the module docstring for f32 params
    "f32": {"init": 1e-6, "loss": 1e-5, "grad": 1e-4, "param": 5e-3, "param~": 1e-4},
    "f64": {"init": 1e-14, "loss": 1e-8, "grad": 1e-9, "param": 1e-9},
    "f64-fixture": {"init": 1e-14, "loss": 1e-8, "grad": 1e-6, "param": 1e-6},
}


class ToolError(Exception):
    pass


# ------------------------------------------------------------------ weft side

def find_tool(name, dirs):
    for d in dirs:
        if d and os.path.isfile(os.path.join(d, name)) and os.access(os.path.join(d, name), os.X_OK):
            return os.path.join(d, name)
    raise ToolError(f"{name} not found in: " + ", ".join(d for d in dirs if d))


def sh(cmd, log):
    log.write("$ " + " ".join(cmd) + "\n")
    log.flush()
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    log.write(r.stdout)
    log.flush()
    if r.returncode != 0:
        raise ToolError(f"command failed (exit {r.returncode}): {' '.join(cmd)}\n{r.stdout[-3000:]}")
    return r.stdout


def compile_cmd(comp, model, dtype, args, out):
    cmd = [comp, model, "--batch", str(args.batch), "--seq", str(args.seq), "--lr", repr(args.lr),
           "--weight-decay", repr(args.weight_decay), "-o", out]
    if dtype != "f32":
        cmd[-2:-2] = ["--dtype", dtype]
    if getattr(args, "schedule", "constant") != "constant":
        cmd[-2:-2] = ["--schedule", args.schedule, "--warmup-steps", str(args.warmup_steps),
                      "--total-steps", str(args.total_steps), "--min-lr", repr(args.min_lr)]
    return cmd


def lr_at(opt, t):
    """docs/program-format.md, learning-rate schedule, 1-based step t:
    transformers' convention, lr * f(t - 1)."""
    import math
    lr = float(opt["lr"])
    warm = int(opt.get("warmup_steps", 0))
    s = t - 1
    if s < warm:
        return lr * s / max(1, warm)
    if opt.get("schedule", "constant") == "constant":
        return lr
    total, lo = int(opt["total_steps"]), float(opt["min_lr"])
    p = min(1.0, (s - warm) / max(1, total - warm))
    m = lo / lr
    return lr * (m + (1.0 - m) * 0.5 * (1.0 + math.cos(math.pi * p)))


def run_weft(model, dtype, comp, run, data, wd, args, log, load_f32_init=False):
    """Runs the four weft commands; returns weft's outputs as numpy.
    load_f32_init: the training runs start from weft's initial weights rounded
    to float32 (written to W/init32, read with --load), so an f64 program can
    be checked against the same fixtures as the f32 one."""
    os.makedirs(wd, exist_ok=True)
    prog = os.path.join(wd, "prog.weft")
    sh(compile_cmd(comp, model, dtype, args, prog), log)
    for sub in ("init", "g1", "after3"):
        shutil.rmtree(os.path.join(wd, sub), ignore_errors=True)
    for m in ("m1.jsonl", "m3.jsonl"):
        if os.path.exists(os.path.join(wd, m)):
            os.remove(os.path.join(wd, m))
    common = ["--data", data, "--seed", str(args.seed), "--quiet"]
    sh([run, prog, "--steps", "0", "--save", os.path.join(wd, "init")] + common, log)
    if load_f32_init:
        init, _ = W.read_safetensors(os.path.join(wd, "init", "model.safetensors"))
        shutil.rmtree(os.path.join(wd, "init32"), ignore_errors=True)
        os.makedirs(os.path.join(wd, "init32"))
        W.write_safetensors(os.path.join(wd, "init32", "model.safetensors"),
                            {n: v.astype(np.float32) for n, v in init.items()})
        common += ["--load", os.path.join(wd, "init32")]
    sh([run, prog, "--steps", "1", "--save-grads", os.path.join(wd, "g1"),
        "--metrics", os.path.join(wd, "m1.jsonl")] + common, log)
    sh([run, prog, "--steps", str(args.steps), "--metrics", os.path.join(wd, "m3.jsonl"),
        "--save", os.path.join(wd, "after3")] + common, log)
    out = {"program": W.read_program(prog)}
    out["init"], _ = W.read_safetensors(os.path.join(wd, "init", "model.safetensors"))
    out["grads1"], _ = W.read_safetensors(os.path.join(wd, "g1", "grads.safetensors"))
    out["after"], _ = W.read_safetensors(os.path.join(wd, "after3", "model.safetensors"))
    m1 = W.read_metrics(os.path.join(wd, "m1.jsonl"))
    m3 = W.read_metrics(os.path.join(wd, "m3.jsonl"))
    if 1 not in m1 or any(k not in m3 for k in range(1, args.steps + 1)):
        raise ToolError(f"metrics incomplete: {sorted(m1)} / {sorted(m3)}")
    out["loss_step1"] = float(m1[1]["loss"])
    out["losses"] = [float(m3[k]["loss"]) for k in range(1, args.steps + 1)]
    out["lrs"] = [float(m3[k]["lr"]) for k in range(1, args.steps + 1)]
    return out


def doc_init_all(program, seed):
    dt = np.float64 if program.get("dtype") == "f64" else np.float32
    return {p["name"]: W.doc_init(p["name"], tuple(p["shape"]), p["init"], seed, dt) for p in program["params"]}


# ------------------------------------------------------------------ torch side

def torch_reference(model, program, init, tokens, args, dtype_name):
    """Runs the reference in torch from `init`; returns numpy results."""
    import torch
    import wref_models as M
    torch.set_num_threads(1)
    torch.manual_seed(0)
    dtype = {"f32": torch.float32, "f64": torch.float64}[dtype_name]
    family = M.family_of(model)
    cfg = dict(M.PRESETS.get(model, {}))
    p = {q["name"]: torch.tensor(np.asarray(init[q["name"]], np.float64), dtype=dtype).requires_grad_(True)
         for q in program["params"]}
    opt = program["optimizer"]
    optim = M.make_adamw(p, lr=opt["lr"], betas=(opt["beta1"], opt["beta2"]), eps=opt["eps"],
                         weight_decay=opt["weight_decay"])
    losses, grads1 = [], None
    for k in range(args.steps):
        x, y = W.batch(tokens, k, args.batch, args.seq)
        optim.zero_grad(set_to_none=True)
        loss = M.loss_fn(family, p, torch.from_numpy(x), torch.from_numpy(y), cfg)
        loss.backward()
        losses.append(float(loss.item()))
        if k == 0:
            grads1 = {n: t.grad.detach().numpy().copy() for n, t in p.items()}
        for g in optim.param_groups:
            g["lr"] = lr_at(opt, k + 1)
        optim.step()
    return {"losses": losses, "grads1": grads1, "after": {n: t.detach().numpy().copy() for n, t in p.items()}}


def masked_rel(a, ref, g1, thr):
    """max-rel error over the elements whose reference step-1 gradient is >= thr."""
    mask = np.abs(np.asarray(g1, np.float64)) >= thr
    ref = np.asarray(ref, np.float64)
    d = np.abs(np.asarray(a, np.float64) - ref)
    den = float(np.abs(ref).max())
    return (float(d[mask].max()) / den if mask.any() and den > 0 else 0.0), int((~mask).sum())


def noise_of(r32, r64, eps=1e-8):
    return {"grads1": {n: W.max_rel(r32["grads1"][n], r64["grads1"][n]) for n in r32["grads1"]},
            "after": {n: W.max_rel(r32["after"][n], r64["after"][n]) for n in r32["after"]},
            "after_masked": {n: masked_rel(r32["after"][n], r64["after"][n], r64["grads1"][n], 10 * eps)[0]
                             for n in r32["after"]},
            "losses": [W.rel(a, b) for a, b in zip(r32["losses"], r64["losses"])]}


# ------------------------------------------------------------------ comparison

class Report:
    def __init__(self, title):
        self.title = title
        self.rows = []
        self.failures = []

    def add(self, what, name, err, tol, vs32=None, noise=None, extra=""):
        # the gate: against the float64 reference and (live, f32) against torch-f32
        ok = err <= tol and (vs32 is None or vs32 <= tol)
        self.rows.append((what, name, err, tol, vs32, noise, ok, extra))
        if not ok:
            more = ""
            if vs32 is not None:
                more += f", vs torch-f32 {vs32:.2e}"
            if noise is not None:
                more += f", torch-f32 noise floor {noise:.2e}"
            self.failures.append(f"{self.title}: {what} {name}: error {err:.3e} (tolerance {tol:.1e}){more}{extra}")

    def fail(self, msg):
        self.failures.append(f"{self.title}: {msg}")

    def print(self, out=sys.stdout):
        out.write(f"\n== {self.title} ==\n")
        out.write(f"{'check':<6} {'tensor':<44} {'err(f64 ref)':>12} {'tol':>8} {'vs torch32':>10} "
                  f"{'t32 noise':>10}  status\n")
        for what, name, err, tol, vs32, noise, ok, extra in self.rows:
            a = f"{vs32:10.2e}" if vs32 is not None else " " * 10
            b = f"{noise:10.2e}" if noise is not None else " " * 10
            out.write(f"{what:<6} {name:<44} {err:12.3e} {tol:8.1e} {a} {b}  {'ok' if ok else 'FAIL'}{extra}\n")
        worst = {}
        for what, name, err, tol, vs32, noise, ok, extra in self.rows:
            if err > worst.get(what, (-1.0, ""))[0]:
                worst[what] = (err, name)
        out.write("worst: " + "; ".join(f"{w} {e:.2e} ({n})" for w, (e, n) in worst.items()) + "\n")


def check_program(program, args, report, ref_params=None):
    opt = program["optimizer"]
    for key, want in (("lr", args.lr), ("weight_decay", args.weight_decay), ("beta1", 0.9), ("beta2", 0.95),
                      ("eps", 1e-8)):
        if abs(float(opt[key]) - want) > 1e-12 * max(1.0, abs(want)):
            report.fail(f"program optimizer.{key} = {opt[key]}, expected {want}")
    want = getattr(args, "schedule", "constant")
    if opt.get("schedule", "constant") != want:
        report.fail(f"program schedule {opt.get('schedule')}, expected {want}")
    for p in program["params"]:
        if bool(p["weight_decay"]) != (len(p["shape"]) >= 2):
            report.fail(f"param {p['name']} shape {p['shape']} has weight_decay={p['weight_decay']}; "
                        f"the reference decays exactly the rank>=2 tensors")
    if ref_params is not None:
        names = {p["name"] for p in program["params"]}
        for p in program["params"]:
            q = ref_params.get(p["name"])
            if q is None or list(q["shape"]) != list(p["shape"]) or q["init"] != p["init"]:
                report.fail(f"fixtures are stale: param {p['name']} {p['shape']} {p['init']} vs fixture {q}")
        if set(ref_params) - names:
            report.fail(f"fixtures are stale: params {sorted(set(ref_params) - names)} not in the program")


def compare(program, weft, truth, tols, report, t32=None, noise=None, init_expect=None):
    """weft: run_weft output; truth: torch float64 results; t32: torch float32
    results (live mode only); noise: torch-f32 vs torch-f64 figures."""
    names = [p["name"] for p in program["params"]]
    f32 = program.get("dtype", "f32") == "f32"
    noise = noise if (noise and f32) else {"grads1": {}, "after": {}, "losses": []}

    def v32(kind, n):
        return None if t32 is None else W.max_rel(weft[kind][n], t32[kind][n])

    if init_expect is not None:
        for n in names:
            if n not in weft["init"]:
                report.fail(f"init: {n} missing from init/model.safetensors")
                continue
            report.add("init", n, W.max_rel(weft["init"][n], init_expect[n]), tols["init"])
    report.add("loss", "step 1 (1-step run)", W.rel(weft["loss_step1"], truth["losses"][0]), tols["loss"],
               None if t32 is None else W.rel(weft["loss_step1"], t32["losses"][0]),
               noise["losses"][0] if noise["losses"] else None,
               f"  weft {weft['loss_step1']:.9g} ref {truth['losses'][0]:.9g}")
    for n in names:
        if n not in weft["grads1"]:
            report.fail(f"grad: {n} missing from grads.safetensors")
            continue
        report.add("grad", n, W.max_rel(weft["grads1"][n], truth["grads1"][n]), tols["grad"], v32("grads1", n),
                   noise["grads1"].get(n))
    for k, (a, b) in enumerate(zip(weft["losses"], truth["losses"])):
        report.add("loss", f"step {k + 1} ({len(weft['losses'])}-step run)", W.rel(a, b), tols["loss"],
                   None if t32 is None else W.rel(a, t32["losses"][k]),
                   noise["losses"][k] if len(noise["losses"]) > k else None, f"  weft {a:.9g} ref {b:.9g}")
    for k, lr in enumerate(weft.get("lrs", [])):
        want = lr_at(program["optimizer"], k + 1)
        report.add("lr", f"step {k + 1}", W.rel(lr, want) if want else abs(lr), 1e-8,
                   extra=f"  weft {lr:.9g} ref {want:.9g}")
    for n in names:
        if n not in weft["after"]:
            report.fail(f"param: {n} missing from after3/model.safetensors")
            continue
        report.add("param", n, W.max_rel(weft["after"][n], truth["after"][n]), tols["param"], v32("after", n),
                   noise["after"].get(n))
    if "param~" in tols:
        # The well-conditioned elements: |step-1 gradient| >= 10 eps (reference).
        # Elsewhere Adam's first update lr*g/(|g|+eps) is decided by rounding noise.
        thr = 10.0 * float(program["optimizer"]["eps"])
        for n in names:
            if n not in weft["after"]:
                continue
            err, left = masked_rel(weft["after"][n], truth["after"][n], truth["grads1"][n], thr)
            e32 = None if t32 is None else masked_rel(t32["after"][n], truth["after"][n], truth["grads1"][n], thr)[0]
            nz = noise.get("after_masked", {}).get(n)
            tol = max(tols["param~"], 4.0 * nz) if nz is not None else tols["param~"]
            report.add("param~", n, err, tol, e32, nz,
                       extra=f"  ({left} of {weft['after'][n].size} elements with |g1| < {thr:.0e} left out)")


# ------------------------------------------------------------------ modes

def tools(args):
    comp = find_tool("weft-compile", [args.bin, os.path.join(REPO, "build", "bin")])
    dirs = [args.run_bin, args.bin, os.path.join(REPO, "build-rt", "bin"), os.path.join(REPO, "build", "bin")]
    return comp, find_tool("weft-run", dirs)


def live(args, models, dtypes, log):
    comp, run = tools(args)
    data = args.data or W.make_default_data(os.path.join(args.workdir, "data.bin"), REPO)
    tokens = W.load_tokens(data)
    print(f"weft-compile {comp}\nweft-run     {run}\ndata         {data} ({tokens.size} tokens)\n"
          f"workdir      {args.workdir}\nseed         {args.seed}")
    failures, summary = [], []
    for model in models:
        for dtype in dtypes:
            rep = Report(f"{model} {dtype}")
            weft = run_weft(model, dtype, comp, run, data, os.path.join(args.workdir, model, dtype), args, log)
            prog = weft["program"]
            check_program(prog, args, rep)
            r64 = torch_reference(model, prog, weft["init"], tokens, args, "f64")
            r32 = torch_reference(model, prog, weft["init"], tokens, args, "f32") if dtype == "f32" else None
            compare(prog, weft, r64, TOLS[dtype], rep, t32=r32,
                    noise=noise_of(r32, r64, prog["optimizer"]["eps"]) if r32 else None,
                    init_expect=doc_init_all(prog, args.seed))
            rep.print()
            failures += rep.failures
            summary.append(summarize(rep))
    print("\nsummary (worst max-rel error per check; f32 params also vs torch-f32 and its noise floor):")
    for s in summary:
        print("  " + s)
    return failures


def summarize(rep):
    out = []
    for what in ("init", "loss", "lr", "grad", "param", "param~"):
        rows = [r for r in rep.rows if r[0] == what]
        if not rows:
            continue
        w = max(rows, key=lambda r: r[2])
        s = f"{what} {w[2]:.1e}"
        if what == "param" and w[4] is not None:
            s += f" (vs t32 {max(r[4] for r in rows):.1e}, t32 noise {max(r[5] for r in rows):.1e})"
        out.append(s)
    return f"{rep.title:<16} " + ", ".join(out) + ("  FAIL" if rep.failures else "  ok")


def write_fixtures(args, models, log, fixdir):
    """torch float64 results from the doc's initial weights rounded to float32
    (what an f32 program starts from; the f64 program is checked from the same
    weights through --load).  Needs weft-compile only: the program names the
    parameters and their init."""
    import torch
    os.makedirs(fixdir, exist_ok=True)
    src = args.data or W.make_default_data(os.path.join(args.workdir, "data.bin"), REPO)
    tokens = W.load_tokens(src)
    need = args.steps * args.batch * args.seq + 1
    if tokens.size < need:
        raise ToolError(f"{src}: {tokens.size} tokens, fixtures need {need} without wrapping")
    fx_tokens = tokens[:need].astype("<u2")
    fx_tokens.tofile(os.path.join(fixdir, "data.bin"))
    comp = find_tool("weft-compile", [args.bin, os.path.join(REPO, "build", "bin")])
    for model in models:
        md = os.path.join(fixdir, model)
        os.makedirs(md, exist_ok=True)
        prog_path = os.path.join(args.workdir, model + ".weft")
        sh(compile_cmd(comp, model, "f32", args, prog_path), log)
        prog = W.read_program(prog_path)
        init32 = doc_init_all(prog, args.seed)
        r64 = torch_reference(model, prog, init32, fx_tokens, args, "f64")
        r32 = torch_reference(model, prog, init32, fx_tokens, args, "f32")
        W.write_safetensors(os.path.join(md, "grads_step1.safetensors"),
                            {n: v.astype(np.float32) for n, v in r64["grads1"].items()},
                            {"what": "torch float64 gradients of step 1, rounded to float32"})
        W.write_safetensors(os.path.join(md, f"params_step{args.steps}.safetensors"),
                            {n: v.astype(np.float32) for n, v in r64["after"].items()},
                            {"what": f"torch float64 parameters after {args.steps} AdamW steps, "
                                     f"rounded to float32"})
        meta = {
            "model": model, "batch": args.batch, "seq": args.seq, "steps": args.steps, "seed": args.seed,
            "optimizer": prog["optimizer"],
            "data": "data.bin", "data_sha256": hashlib.sha256(fx_tokens.tobytes()).hexdigest(),
            "params": [{"name": p["name"], "shape": p["shape"], "init": p["init"],
                        "weight_decay": p["weight_decay"]} for p in prog["params"]],
            "losses": r64["losses"],
            "torch_f32_losses": r32["losses"],
            "noise_f32_vs_f64": noise_of(r32, r64, prog["optimizer"]["eps"]),
            "made_by": "test/reference/torch_reference.py --write-fixtures (PyTorch %s)" % torch.__version__,
        }
        with open(os.path.join(md, "reference.json"), "w") as f:
            json.dump(meta, f, indent=1, sort_keys=True)
            f.write("\n")
        print(f"{model}: fixtures written to {md}: losses {r64['losses']}")


def check_fixtures(args, models, dtypes, log, fixdir):
    comp, run = tools(args)
    data = os.path.join(fixdir, "data.bin")
    print(f"weft-compile {comp}\nweft-run     {run}\nfixtures     {fixdir}\nworkdir      {args.workdir}")
    failures, summary = [], []
    for model in models:
        md = os.path.join(fixdir, model)
        with open(os.path.join(md, "reference.json")) as f:
            meta = json.load(f)
        fa = argparse.Namespace(**vars(args))
        fa.batch, fa.seq, fa.steps, fa.seed = meta["batch"], meta["seq"], meta["steps"], meta["seed"]
        fa.lr, fa.weight_decay = meta["optimizer"]["lr"], meta["optimizer"]["weight_decay"]
        o = meta["optimizer"]
        fa.schedule, fa.warmup_steps, fa.total_steps, fa.min_lr = (o["schedule"], o["warmup_steps"],
                                                                   o["total_steps"], o["min_lr"])
        truth = {"losses": meta["losses"]}
        truth["grads1"], _ = W.read_safetensors(os.path.join(md, "grads_step1.safetensors"))
        truth["after"], _ = W.read_safetensors(os.path.join(md, f"params_step{fa.steps}.safetensors"))
        for dtype in dtypes:
            rep = Report(f"{model} {dtype} (fixtures)")
            with open(data, "rb") as f:
                if hashlib.sha256(f.read()).hexdigest() != meta["data_sha256"]:
                    rep.fail(f"{data} does not match the fixture's data_sha256")
            weft = run_weft(model, dtype, comp, run, data, os.path.join(args.workdir, model, dtype), fa, log,
                            load_f32_init=(dtype == "f64"))
            check_program(weft["program"], fa, rep, ref_params={p["name"]: p for p in meta["params"]})
            compare(weft["program"], weft, truth, TOLS["f64-fixture" if dtype == "f64" else dtype], rep,
                    noise=meta["noise_f32_vs_f64"], init_expect=doc_init_all(weft["program"], fa.seed))
            rep.print()
            failures += rep.failures
            summary.append(summarize(rep))
    print("\nsummary (worst max-rel error per check):")
    for s in summary:
        print("  " + s)
    return failures


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(REPO, "build", "bin"),
                    help="directory of weft-compile (and weft-run)")
    ap.add_argument("--run-bin", default=None, help="directory of weft-run when it is elsewhere "
                    "(searched first; then --bin, build-rt/bin, build/bin)")
    ap.add_argument("--data", default=None,
                    help="uint16 token file (default: build/data/corpus.bin, else GPL-3's bytes)")
    ap.add_argument("--workdir", default=None, help="scratch directory (default: a new temporary one)")
    ap.add_argument("--model", action="append", help="model preset (repeatable; default gpt-tiny, llama-tiny)")
    ap.add_argument("--dtype", action="append", choices=["f32", "f64"], help="program dtype (repeatable; default both)")
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED, help="weft-run --seed (default %(default)s)")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=32)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--schedule", choices=["constant", "cosine"], default="constant")
    ap.add_argument("--warmup-steps", type=int, default=0)
    ap.add_argument("--total-steps", type=int, default=0)
    ap.add_argument("--min-lr", type=float, default=0.0)
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--write-fixtures", metavar="DIR")
    g.add_argument("--check-fixtures", metavar="DIR")
    args = ap.parse_args(argv)
    models = args.model or DEFAULT_MODELS
    dtypes = args.dtype or ["f32", "f64"]
    args.workdir = os.path.abspath(args.workdir or tempfile.mkdtemp(prefix="weft-ref-"))
    os.makedirs(args.workdir, exist_ok=True)
    log_path = os.path.join(args.workdir, "commands.log")
    try:
        with open(log_path, "w") as log:
            if args.write_fixtures:
                write_fixtures(args, models, log, os.path.abspath(args.write_fixtures))
                return 0
            if args.check_fixtures:
                failures = check_fixtures(args, models, dtypes, log, os.path.abspath(args.check_fixtures))
            else:
                try:
                    import torch  # noqa: F401
                except Exception as e:  # noqa: BLE001
                    print(f"SKIP: torch not importable ({type(e).__name__}: {e}); "
                          f"checking the committed fixtures instead")
                    failures = check_fixtures(args, models, dtypes, log, os.path.join(HERE, "fixtures"))
                else:
                    failures = live(args, models, dtypes, log)
    except ToolError as e:
        print(f"ERROR: {e}\n(commands and their output: {log_path})")
        return 2
    if failures:
        print("\nFAIL:\n  " + "\n  ".join(failures))
        print(f"(commands and their output: {log_path})")
        return 1
    print("\nPASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
