#!/usr/bin/python3
"""weft beside PyTorch 2.x running Hugging Face's GPT-2 (a benchmark, not a test).

GPT-2 124M (Hugging Face's GPT2LMHeadModel from `transformers`, SDPA
attention, tied head, dropout 0), fp32, next-token cross-entropy, AdamW
(lr 6e-4, betas 0.9/0.95, weight decay 0.1 on matrices), the same tokens:

  one    1 process x T threads: weft-run  vs  torch eager  vs  torch.compile
  dp2    2 ranks x 1 thread:    weft --mesh dp=2  vs  DistributedDataParallel
  zero3  2 ranks x 1 thread:    weft --mesh dp=2 --zero 3  vs  FSDP2 (fully_shard
         on every block and the root)
  sgemm  the best sgemm of the run: torch.mm (MKL) and weft-bench-gemm
         (OpenBLAS through weft's matmul), T threads, GPT-2 shapes

Each contender runs in its own process(es), and the contenders alternate
within each of --rounds rounds, so a slow phase of the machine hits all of
them. A figure is the mean step time after warm-up (weft: steps 2..N;
torch: after 1 warm-up step, 2 for torch.compile). PyTorch comes from the
bench-only venv made by test/bench/bench-venv.sh (several GB; never used by
`make test`); torch.distributed runs over gloo on 127.0.0.1.

FLOPs per step = 6*N*tokens + 6*n_layer*seq*d_model*tokens (N: all
parameters but wpe, the tied table once), as bench_gpt2.py.

  /usr/bin/python3 test/bench/bench_peers.py [--modes one,dp2,zero3] [--rounds 2]
      [--threads 2] [--python VENV/bin/python] [--bin build/bin]
Prints each measurement, a table of means and ratios, and one JSON line.
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
REF = os.path.join(REPO, "test", "reference")
DEFAULT_VENV_PY = os.path.join(os.path.expanduser("~"), ".cache", "weft", "bench-venv", "bin", "python")
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--mca", "btl", "self,vader"]
GPT2 = dict(n_layer=12, n_embd=768, n_head=12, vocab=50257, n_positions=1024)
# Issue 36's goals (weft / peer step time; the one-rank step's fraction of
# the run's best sgemm below).
GOALS = {"eager": 0.55, "compile": 0.7, "ddp": 0.6, "fsdp2": 0.55}
SGEMM_GOAL = 0.92


def flops_per_step(B, S):
    D, L, V = GPT2["n_embd"], GPT2["n_layer"], GPT2["vocab"]
    per_layer = 2 * D + 3 * D * D + 3 * D + D * D + D + 2 * D + 4 * D * D + 4 * D + 4 * D * D + D
    n = V * D + L * per_layer + 2 * D
    T = B * S
    return 6 * n * T + 6 * L * S * D * T


# ----------------------------------------------------------------------------
# torch workers: run in the venv's python, print one JSON line last.
# ----------------------------------------------------------------------------

def torch_worker(a):
    import numpy as np
    import torch
    import torch.nn.functional as F
    from transformers import GPT2Config, GPT2LMHeadModel
    sys.path.insert(0, REF)
    import wref_np as W

    torch.set_num_threads(a.threads)
    rank, world = 0, 1
    if a.worker in ("ddp", "fsdp2"):
        import torch.distributed as dist
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=GPT2["vocab"], n_positions=GPT2["n_positions"], n_embd=GPT2["n_embd"],
                     n_layer=GPT2["n_layer"], n_head=GPT2["n_head"], resid_pdrop=0.0, embd_pdrop=0.0,
                     attn_pdrop=0.0, layer_norm_epsilon=1e-5, use_cache=False)
    cfg._attn_implementation = "sdpa"
    model = GPT2LMHeadModel(cfg)
    model.train()
    if a.worker == "ddp":
        model = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=25)
    elif a.worker == "fsdp2":
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard
        mesh = init_device_mesh("cpu", (world,))
        for block in model.transformer.h:
            fully_shard(block, mesh=mesh)
        fully_shard(model, mesh=mesh)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}]
    try:
        opt = torch.optim.AdamW(groups, lr=6e-4, betas=(0.9, 0.95), eps=1e-8, fused=True)
        opt_kind = "fused"
    except (RuntimeError, TypeError, ValueError):
        opt = torch.optim.AdamW(groups, lr=6e-4, betas=(0.9, 0.95), eps=1e-8)
        opt_kind = "default"

    def loss_of(x, y):
        logits = model(input_ids=x).logits
        return F.cross_entropy(logits.view(-1, logits.size(-1)), y.reshape(-1))

    step_fn = torch.compile(loss_of) if a.worker == "compile" else loss_of
    warm = 2 if a.worker == "compile" else 1
    tokens = W.load_tokens(a.data)
    local = a.batch // world
    times, losses = [], []
    for k in range(warm + a.torch_steps):
        x, y = W.batch(tokens, k, a.batch, a.seq)
        x = torch.from_numpy(np.ascontiguousarray(x[rank * local:(rank + 1) * local]))
        y = torch.from_numpy(np.ascontiguousarray(y[rank * local:(rank + 1) * local]))
        if world > 1:
            dist.barrier()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = step_fn(x, y)
        loss.backward()
        opt.step()
        if world > 1:
            dist.barrier()
        dt = time.perf_counter() - t0
        losses.append(float(loss.item()))
        if k >= warm:
            times.append(dt)
    if world > 1:
        dist.destroy_process_group()
    if rank == 0:
        print(json.dumps({"step_times": times, "step_s": statistics.mean(times), "losses": losses,
                          "torch": torch.__version__, "adamw": opt_kind,
                          "blas": torch.backends.mkl.is_available() and "mkl" or "other"}))


def sgemm_worker(a):
    import torch
    torch.set_num_threads(a.threads)
    best = 0.0
    # GPT-2 124M at 1,024 tokens: c_attn, mlp.c_fc, mlp.c_proj forward, and a square.
    for m, n, k in ((1024, 2304, 768), (1024, 3072, 768), (1024, 768, 3072), (1024, 1024, 1024)):
        x, w = torch.randn(m, k), torch.randn(k, n)
        for _ in range(3):
            torch.mm(x, w)
        reps, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < 1.0:
            torch.mm(x, w)
            reps += 1
        best = max(best, 2.0 * m * n * k * reps / (time.perf_counter() - t0) / 1e9)
    print(json.dumps({"gflops": best}))


# ----------------------------------------------------------------------------
# The orchestrator (any python3).
# ----------------------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def last_json(text, what):
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise SystemExit(f"{what}: no result\n{text[-3000:]}")


def run_torch(a, worker, batch, threads, ranks):
    cmd = [a.python, os.path.abspath(__file__), "--worker", worker, "--batch", str(batch),
           "--seq", str(a.seq), "--threads", str(threads), "--torch-steps", str(a.torch_steps),
           "--data", a.data]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads),
               OPENBLAS_NUM_THREADS=str(threads))
    if ranks == 1:
        r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            raise SystemExit(f"torch {worker} failed (exit {r.returncode})\n{r.stdout[-3000:]}")
        return last_json(r.stdout, f"torch {worker}")
    env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE=str(ranks))
    procs = [subprocess.Popen(cmd, env=dict(env, RANK=str(r)), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for r in range(ranks)]
    outs = [p.communicate()[0] for p in procs]
    for r, p in enumerate(procs):
        if p.returncode != 0:
            raise SystemExit(f"torch {worker} rank {r} failed (exit {p.returncode})\n{outs[r][-3000:]}")
    return last_json(outs[0], f"torch {worker}")


def run_weft(a, wd, batch, threads, mesh, zero):
    prog = os.path.join(wd, f"gpt2-{mesh or 'one'}-z{zero}.weft")
    if not os.path.exists(prog):
        cmd = [os.path.join(a.bin, "weft-compile"), "gpt2", "--batch", str(batch), "--seq", str(a.seq),
               "--lr", "6e-4", "-o", prog, "--quiet"]
        if mesh:
            cmd += ["--mesh", mesh, "--zero", str(zero)]
        subprocess.run(cmd, check=True)
    metrics = os.path.join(wd, "m.jsonl")
    if os.path.exists(metrics):
        os.remove(metrics)
    cmd = [os.path.join(a.bin, "weft-run"), prog, "--data", a.data, "--threads", str(threads),
           "--steps", str(a.steps), "--metrics", metrics, "--quiet"]
    if mesh:
        cmd = MPIRUN + ["-np", "2"] + cmd
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        raise SystemExit(f"weft-run failed (exit {r.returncode})\n{r.stdout[-3000:]}")
    rows = [json.loads(line) for line in open(metrics)]
    times = [float(m["step_time_s"]) for m in rows[1:]]
    return {"step_times": times, "step_s": statistics.mean(times), "losses": [float(m["loss"]) for m in rows]}


def run_weft_gemm(a):
    r = subprocess.run([os.path.join(a.bin, "weft-bench-gemm"), "--threads", str(a.threads)],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        raise SystemExit(f"weft-bench-gemm failed\n{r.stdout[-2000:]}")
    rows = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    # The kernels weft-run gets too: both restart over a core older than the
    # CPU's (a VM's masked model, an image's OPENBLAS_CORETYPE=Haswell).
    return {"gflops": max(float(x["gflops"]) for x in rows if x["shape"].startswith("gpt2")),
            "core": rows[0].get("core"), "restarted": rows[0].get("restarted")}


def contenders(a):
    """(label, peer key or None, thunk) in the order they alternate."""
    one_b, dist_b = a.batch, a.dist_batch
    c = []
    if "one" in a.modes:
        c += [("weft 1 rank", "one", lambda wd: run_weft(a, wd, one_b, a.threads, None, 0)),
              ("torch eager", "eager", lambda wd: run_torch(a, "eager", one_b, a.threads, 1)),
              ("torch.compile", "compile", lambda wd: run_torch(a, "compile", one_b, a.threads, 1))]
    if "dp2" in a.modes:
        c += [("weft dp=2", "dp2", lambda wd: run_weft(a, wd, dist_b, 1, "dp=2", 0)),
              ("torch DDP", "ddp", lambda wd: run_torch(a, "ddp", dist_b, 1, 2))]
    if "zero3" in a.modes:
        c += [("weft dp=2 ZeRO-3", "zero3", lambda wd: run_weft(a, wd, dist_b, 1, "dp=2", 3)),
              ("torch FSDP2", "fsdp2", lambda wd: run_torch(a, "fsdp2", dist_b, 1, 2))]
    c += [("sgemm torch.mm", "sgemm_torch", lambda wd: run_torch_sgemm(a)),
          ("sgemm weft", "sgemm_weft", lambda wd: run_weft_gemm(a))]
    return c


def run_torch_sgemm(a):
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads), MKL_NUM_THREADS=str(a.threads))
    r = subprocess.run([a.python, os.path.abspath(__file__), "--worker", "sgemm", "--threads", str(a.threads)],
                       env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        raise SystemExit(f"torch sgemm failed\n{r.stdout[-2000:]}")
    return last_json(r.stdout, "torch sgemm")


def main(a):
    if not os.access(a.python, os.X_OK):
        sys.exit(f"no PyTorch venv at {a.python}: run `sh test/bench/bench-venv.sh` first (several GB "
                 "from PyPI), or pass --python")
    a.data = a.data or os.path.join(REPO, "build", "data", "corpus.bin")
    if not os.path.exists(a.data):
        sys.exit(f"no token file {a.data}: run `make data` first, or pass --data")
    results = {}
    print(f"load average at start {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)", flush=True)
    with tempfile.TemporaryDirectory(prefix="weft-peers-") as wd:
        for rnd in range(a.rounds):
            for label, key, thunk in contenders(a):
                res = thunk(wd)
                results.setdefault(key, []).append(res)
                fig = f"{res['step_s']:.3f} s/step" if "step_s" in res else f"{res['gflops']:.1f} GFLOP/s"
                extra = f", losses {res['losses'][0]:.4f} .. {res['losses'][-1]:.4f}" if "losses" in res else ""
                print(f"round {rnd + 1}: {label:18s} {fig}{extra}", flush=True)
    mean = {k: statistics.mean(r["step_s"] if "step_s" in r else r["gflops"] for r in v)
            for k, v in results.items()}
    out = {"bench": "peers", "rounds": a.rounds, "threads": a.threads, "seq": a.seq,
           "means": mean, "per_round": {k: [r.get("step_s", r.get("gflops")) for r in v]
                                        for k, v in results.items()}}
    for k in ("eager", "compile", "ddp", "fsdp2"):
        if k in results:
            out.setdefault("torch", results[k][0].get("torch"))
            out.setdefault("adamw", results[k][0].get("adamw"))
    best_sgemm = max(mean.get("sgemm_torch", 0.0), mean.get("sgemm_weft", 0.0))
    print(f"\nGPT-2 124M, seq {a.seq}; one rank: batch {a.batch}, {a.threads} threads; "
          f"2 ranks: global batch {a.dist_batch}, 1 thread each; torch {out.get('torch')}, "
          f"AdamW {out.get('adamw')}")
    print(f"best sgemm this run: {best_sgemm:.1f} GFLOP/s "
          f"(torch.mm {mean.get('sgemm_torch', 0):.1f}, weft {mean.get('sgemm_weft', 0):.1f})")
    if "sgemm_weft" in results:
        gemm = results["sgemm_weft"][0]
        out["weft_blas"] = {"core": gemm["core"], "restarted": gemm["restarted"],
                            "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE")}
        print(f"weft's GEMMs: {gemm['core']}"
              + (f", restarted over OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE')}"
                 if gemm["restarted"] and os.environ.get("OPENBLAS_CORETYPE") else
                 ", restarted over OpenBLAS's own choice" if gemm["restarted"] else ""))
    rows = [("one", "eager"), ("one", "compile"), ("dp2", "ddp"), ("zero3", "fsdp2")]
    print(f"{'weft':18s} {'s/step':>8s}   {'peer':14s} {'s/step':>8s}   ratio  goal")
    ratios = {}
    for w, p in rows:
        if w in mean and p in mean:
            ratios[f"{w}/{p}"] = mean[w] / mean[p]
            print(f"{w:18s} {mean[w]:8.3f}   {p:14s} {mean[p]:8.3f}   {mean[w] / mean[p]:5.2f}  "
                  f"<= {GOALS[p]}{'' if mean[w] / mean[p] <= GOALS[p] else '  (missed)'}")
    # What each goal asks of weft's step, beside the step's FLOPs run at the
    # best sgemm and nothing else (a rank of the 2-rank runs: its half of
    # the global batch on 1 of the run's threads): a goal below that floor
    # needs a faster GEMM than the machine's best, not less glue.
    if best_sgemm > 0:
        for w, p in rows:
            if p not in mean:
                continue
            one = w == "one"
            floor = flops_per_step(a.batch if one else a.dist_batch // 2, a.seq) / 1e9 / (
                best_sgemm * (1.0 if one else 1.0 / a.threads))
            want = GOALS[p] * mean[p]
            out.setdefault("goal_step_s", {})[f"{w}/{p}"] = want
            out.setdefault("flops_floor_s", {})[w] = floor
            print(f"goal {w}/{p}: a {want:.2f} s step; the FLOPs alone at the best sgemm: {floor:.2f} s"
                  f"{'  (below that floor)' if want < floor else ''}")
    if "one" in mean and best_sgemm > 0:
        gf = flops_per_step(a.batch, a.seq) / mean["one"] / 1e9
        out["weft_one_gflops"] = gf
        out["fraction_of_best_sgemm"] = gf / best_sgemm
        print(f"weft one-rank step: {gf:.1f} GFLOP/s = {gf / best_sgemm:.2f} of the best sgemm (goal >= {SGEMM_GOAL})")
    out["ratios"] = ratios
    print(json.dumps(out))


def parse():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--modes", default="one,dp2,zero3")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=4, help="one rank's batch")
    ap.add_argument("--dist-batch", type=int, default=8, help="global batch of the 2-rank runs")
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--steps", type=int, default=5, help="weft steps (step 1 excluded)")
    ap.add_argument("--torch-steps", type=int, default=4, help="timed torch steps after warm-up")
    ap.add_argument("--python", default=os.environ.get("WEFT_BENCH_PYTHON", DEFAULT_VENV_PY))
    ap.add_argument("--bin", default=os.path.join(REPO, "build", "bin"))
    ap.add_argument("--data", default=None)
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    a.modes = a.modes.split(",")
    return a


if __name__ == "__main__":
    args = parse()
    if args.worker == "sgemm":
        sgemm_worker(args)
    elif args.worker:
        torch_worker(args)
    else:
        main(args)
