#!/usr/bin/python3
"""GPT-2 124M training step: weft vs PyTorch 1.13 vs sgemm (a benchmark, not a test).

  weft-compile gpt2 --batch 4 --seq 256 -o W/gpt2.weft
  weft-run W/gpt2.weft --steps 6 --data DATA --metrics W/m.jsonl --threads T --quiet
      -> mean step_time_s over steps 2..6
  PyTorch (this process, torch.set_num_threads(T)): the same model
  (test/reference/wref_models.py, HF GPT-2 semantics, tied LM head), fp32,
  forward + backward + torch.optim.AdamW (nanoGPT grouping), 1 warm-up step,
  then 5 timed steps
  sgemm 1024^3 float32: torch.mm and numpy (both system OpenBLAS) in this
  process (OPENBLAS_CORETYPE as preset), and numpy in a child process with
  OPENBLAS_CORETYPE unset (autodetected kernels) for comparison.

FLOPs per step = 6*N*tokens + 6*n_layer*seq*d_model*tokens
  N = every parameter that takes part in a matmul or elementwise op per token:
      all parameters except wpe (wte counted once: it is also the LM head);
  the second term is causal self-attention (QK^T and AV), forward + backward,
  counting only the causal half of the S x S scores.

Usage: /usr/bin/python3 test/bench/bench_gpt2.py [--threads 2] [--bin build/bin] [--data F]
Prints a table and, last, one JSON line.
"""
import sys as _sys
_sys.dont_write_bytecode = True  # keep test/reference free of __pycache__
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
REF = os.path.join(REPO, "test", "reference")


def parse():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--bin", default=os.path.join(REPO, "build", "bin"))
    ap.add_argument("--run-bin", default=None, help="directory of weft-run (default: --bin, build-rt/bin)")
    ap.add_argument("--data", default=None, help="uint16 tokens (default build/data/corpus.bin, else GPL-3 bytes)")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--steps", type=int, default=6, help="weft steps (step 1 is excluded)")
    ap.add_argument("--torch-steps", type=int, default=5, help="timed torch steps after 1 warm-up")
    ap.add_argument("--skip-weft", action="store_true")
    ap.add_argument("--skip-torch", action="store_true")
    return ap.parse_args()


args = parse()
# Thread counts must be fixed before OpenBLAS / OpenMP load.
if os.environ.get("WEFT_BENCH_CHILD") != "1":
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(args.threads), OMP_NUM_THREADS=str(args.threads),
               WEFT_BENCH_CHILD="1")
    os.execve(sys.executable, [sys.executable] + sys.argv, env)

import numpy as np  # noqa: E402

sys.path.insert(0, REF)
import wref_np as W  # noqa: E402

GPT2 = dict(family="gpt", n_layer=12, n_embd=768, n_head=12, vocab=50257, n_positions=1024, eps=1e-5)


def flops_per_step(cfg, B, S):
    D, L, V, P = cfg["n_embd"], cfg["n_layer"], cfg["vocab"], cfg["n_positions"]
    per_layer = 2 * D + 3 * D * D + 3 * D + D * D + D + 2 * D + 4 * D * D + 4 * D + 4 * D * D + D
    n_all = V * D + P * D + L * per_layer + 2 * D
    n = n_all - P * D
    T = B * S
    return 6 * n * T + 6 * L * S * D * T, n, n_all


def sgemm_numpy(n=1024, seconds=1.5):
    a = np.random.default_rng(0).standard_normal((n, n), dtype=np.float32)
    b = np.random.default_rng(1).standard_normal((n, n), dtype=np.float32)
    for _ in range(3):
        a @ b
    reps, t0 = 0, time.perf_counter()
    while True:
        a @ b
        reps += 1
        dt = time.perf_counter() - t0
        if dt > seconds:
            return 2.0 * n ** 3 * reps / dt / 1e9


def sgemm_torch(torch, n=1024, seconds=1.5):
    a = torch.randn(n, n)
    b = torch.randn(n, n)
    for _ in range(3):
        torch.mm(a, b)
    reps, t0 = 0, time.perf_counter()
    while True:
        torch.mm(a, b)
        reps += 1
        dt = time.perf_counter() - t0
        if dt > seconds:
            return 2.0 * n ** 3 * reps / dt / 1e9


def sgemm_numpy_autodetect(threads):
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    env.update(OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    code = ("import sys; sys.path.insert(0, %r); import numpy as np, time\n"
            "a=np.random.default_rng(0).standard_normal((1024,1024),dtype=np.float32); b=a.copy()\n"
            "[a@b for _ in range(3)]\nr=0; t=time.perf_counter()\n"
            "while time.perf_counter()-t<1.5: a@b; r+=1\n"
            "print(2*1024**3*r/(time.perf_counter()-t)/1e9)\n") % HERE
    try:
        out = subprocess.run([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True, timeout=120)
        return float(out.stdout.strip())
    except Exception:  # noqa: BLE001
        return None


def run_weft(data, wd):
    comp = os.path.join(args.bin, "weft-compile")
    run = None
    for d in (args.run_bin, args.bin, os.path.join(REPO, "build-rt", "bin"), os.path.join(REPO, "build", "bin")):
        if d and os.access(os.path.join(d, "weft-run"), os.X_OK):
            run = os.path.join(d, "weft-run")
            break
    if run is None:
        raise SystemExit("weft-run not found")
    prog = os.path.join(wd, "gpt2.weft")
    metrics = os.path.join(wd, "m.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    subprocess.run([comp, "gpt2", "--batch", str(args.batch), "--seq", str(args.seq), "-o", prog], check=True)
    cmd = [run, prog, "--steps", str(args.steps), "--data", data, "--metrics", metrics,
           "--threads", str(args.threads), "--quiet"]
    print("$ " + " ".join(cmd), flush=True)
    t0 = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wall = time.perf_counter() - t0
    print(r.stdout.rstrip(), flush=True)
    if r.returncode != 0:
        raise SystemExit(f"weft-run failed (exit {r.returncode})")
    m = W.read_metrics(metrics)
    times = [float(m[k]["step_time_s"]) for k in sorted(m) if k >= 2]
    peak = max(int(m[k].get("peak_bytes", 0)) for k in m)
    return {"step_times": times, "step_s": statistics.mean(times), "wall_s": wall,
            "first_step_s": float(m[1]["step_time_s"]), "peak_bytes": peak,
            "losses": [float(m[k]["loss"]) for k in sorted(m)]}


def run_torch(torch, tokens):
    import wref_models as M
    torch.manual_seed(0)
    p = {}
    for n, s in M.gpt_param_shapes(GPT2).items():
        if n.endswith("ln_1.weight") or n.endswith("ln_2.weight") or n == "transformer.ln_f.weight":
            t = torch.ones(s)
        elif len(s) == 1:
            t = torch.zeros(s)
        else:
            t = torch.randn(s) * 0.02
        p[n] = t.requires_grad_(True)
    opt = M.make_adamw(p, lr=6e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    times, losses = [], []
    for k in range(1 + args.torch_steps):
        x, y = W.batch(tokens, k, args.batch, args.seq)
        x, y = torch.from_numpy(x), torch.from_numpy(y)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = M.loss_fn("gpt", p, x, y, GPT2)
        loss.backward()
        opt.step()
        dt = time.perf_counter() - t0
        losses.append(float(loss.item()))
        if k > 0:
            times.append(dt)
        print(f"torch step {k + 1}{' (warm-up)' if k == 0 else ''}: {dt:.3f} s, loss {losses[-1]:.4f}", flush=True)
    return {"step_times": times, "step_s": statistics.mean(times), "losses": losses}


def main():
    wd = os.path.abspath(args.workdir or tempfile.mkdtemp(prefix="weft-bench-"))
    os.makedirs(wd, exist_ok=True)
    data = args.data or W.make_default_data(os.path.join(wd, "data.bin"), REPO)
    tokens = W.load_tokens(data)
    flops, n_params, n_all = flops_per_step(GPT2, args.batch, args.seq)
    tok_per_step = args.batch * args.seq
    T = args.threads
    load0 = os.getloadavg()[0]
    print(f"load average at start {load0:.2f} ({os.cpu_count()} cores)")
    print(f"GPT-2 124M ({n_all:,} params), batch {args.batch} x seq {args.seq}, {T} threads, "
          f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}")
    print(f"FLOPs/step = 6*N*tokens + 6*n_layer*seq*d_model*tokens, N = {n_params:,} (all params but wpe), "
          f"tokens = {tok_per_step} -> {flops / 1e9:.1f} GFLOP")

    sg_np = sgemm_numpy()
    torch = None
    try:
        import torch as _t
        torch = _t
        torch.set_num_threads(T)
    except Exception as e:  # noqa: BLE001
        print(f"torch not importable ({e}); torch columns skipped")
    sg_t = sgemm_torch(torch) if torch else None
    sg_auto = sgemm_numpy_autodetect(T)
    print(f"sgemm 1024^3: numpy/OpenBLAS {sg_np:.1f} GFLOP/s, torch.mm "
          f"{sg_t if sg_t is None else round(sg_t, 1)} GFLOP/s, numpy with OPENBLAS_CORETYPE unset "
          f"{sg_auto if sg_auto is None else round(sg_auto, 1)} GFLOP/s", flush=True)
    sg_ref = max(x for x in (sg_np, sg_t) if x is not None)

    res = {"model": "gpt2", "batch": args.batch, "seq": args.seq, "threads": T,
           "flops_per_step": flops, "flops_formula": "6*N*tokens + 6*n_layer*seq*d_model*tokens, N = params - wpe",
           "sgemm_numpy_gflops": round(sg_np, 1), "sgemm_torch_gflops": sg_t and round(sg_t, 1),
           "sgemm_numpy_autodetect_gflops": sg_auto and round(sg_auto, 1),
           "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE")}
    if not args.skip_weft:
        sg_before = sgemm_numpy(seconds=1.0)
        w = run_weft(data, wd)
        res["sgemm_numpy_gflops_before_weft"] = round(sg_before, 1)
        gf = flops / w["step_s"] / 1e9
        res.update(weft_step_s=round(w["step_s"], 4), weft_tokens_per_s=round(tok_per_step / w["step_s"], 1),
                   weft_gflops=round(gf, 1), weft_pct_of_sgemm=round(100 * gf / sg_ref, 1),
                   weft_first_step_s=round(w["first_step_s"], 3), weft_peak_bytes=w["peak_bytes"],
                   weft_step_times=[round(t, 4) for t in w["step_times"]], weft_losses=w["losses"])
    if torch is not None and not args.skip_torch:
        res["sgemm_torch_gflops_before_torch"] = round(sgemm_torch(torch, seconds=1.0), 1)
        t = run_torch(torch, tokens)
        res.update(torch_step_s=round(t["step_s"], 4), torch_tokens_per_s=round(tok_per_step / t["step_s"], 1),
                   torch_gflops=round(flops / t["step_s"] / 1e9, 1),
                   torch_pct_of_sgemm=round(100 * flops / t["step_s"] / 1e9 / sg_ref, 1),
                   torch_step_times=[round(x, 4) for x in t["step_times"]])
    if "weft_step_s" in res and "torch_step_s" in res:
        res["weft_over_torch_step_time"] = round(res["weft_step_s"] / res["torch_step_s"], 3)

    load1 = os.getloadavg()[0]
    res["loadavg_start_end"] = [round(load0, 2), round(load1, 2)]
    if max(load0, load1) > T + 0.5:
        print(f"\nWARNING: the machine was busy (load average {load0:.1f} -> {load1:.1f} on {os.cpu_count()} cores): "
              f"every figure below is depressed; compare only figures from the same run")
    print("\n| what | step time (s) | tokens/s | GFLOP/s | % of sgemm |")
    print("|---|---|---|---|---|")
    for who in ("weft", "torch"):
        if f"{who}_step_s" in res:
            print(f"| {who} | {res[who + '_step_s']:.3f} | {res[who + '_tokens_per_s']:.0f} | "
                  f"{res[who + '_gflops']:.1f} | {res[who + '_pct_of_sgemm']:.1f} |")
    print(f"| sgemm 1024^3 (best of numpy/torch.mm at start, as preset) | | | {sg_ref:.1f} | 100 |")
    if "sgemm_numpy_gflops_before_weft" in res or "sgemm_torch_gflops_before_torch" in res:
        print(f"sgemm measured again just before each run (contention check): before weft (numpy) "
              f"{res.get('sgemm_numpy_gflops_before_weft')}, before torch (torch.mm) "
              f"{res.get('sgemm_torch_gflops_before_torch')} GFLOP/s")
    if "weft_over_torch_step_time" in res:
        r = res["weft_over_torch_step_time"]
        print(f"weft/torch step time: {r:.3f} (target <= 1: {'met' if r <= 1 else 'NOT met'}); "
              f"weft at {res['weft_pct_of_sgemm']:.1f}% of sgemm (target >= 50%: "
              f"{'met' if res['weft_pct_of_sgemm'] >= 50 else 'NOT met'})")
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
