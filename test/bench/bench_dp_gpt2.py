#!/usr/bin/python3
"""Data-parallel GPT-2 124M, 2 ranks x 1 thread: weft (mpirun, Open MPI) beside
PyTorch 1.13 DistributedDataParallel over gloo (a benchmark, not a test).

Same model (HF GPT-2 semantics, tied head; the PyTorch model is
test/reference/wref_models.py), same global batch (GLOBAL_BATCH sequences of
SEQ tokens split over the 2 ranks), fp32, AdamW, one thread per rank.

  weft-compile gpt2 --batch 8 --seq 256 --mesh dp=2 -o W/dp2.weft
  mpirun -np 2 weft-run W/dp2.weft --threads 1 --steps STEPS
      -> mean step_time_s of steps 2..STEPS
  torch: 2 processes (torch.multiprocessing), gloo, DDP(bucket_cap_mb=25),
      1 warm-up step then TORCH_STEPS timed steps on rank 0

Usage: /usr/bin/python3 test/bench/bench_dp_gpt2.py [--steps 4] [--torch-steps 3]
Prints both step times, their ratio (target <= 0.8) and one JSON line.
"""
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
sys.path.insert(0, os.path.join(REPO, "test", "reference"))
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

GPT2 = {"vocab": 50257, "n_positions": 1024, "n_embd": 768, "n_layer": 12,
        "n_head": 12, "eps": 1e-5}
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe",
          "--mca", "btl", "self,vader"]


def parse():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(REPO, "build", "bin"))
    ap.add_argument("--data", default=os.path.join(REPO, "build", "data", "corpus.bin"))
    ap.add_argument("--global-batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--torch-steps", type=int, default=3)
    return ap.parse_args()


def run_weft(args, wd):
    prog = os.path.join(wd, "dp2.weft")
    subprocess.run([f"{args.bin}/weft-compile", "gpt2", "--batch", str(args.global_batch),
                    "--seq", str(args.seq), "--mesh", "dp=2", "--lr", "6e-4",
                    "-o", prog, "--quiet"], check=True)
    metrics = os.path.join(wd, "m.jsonl")
    subprocess.run(MPIRUN + ["-np", "2", f"{args.bin}/weft-run", prog, "--data", args.data,
                             "--threads", "1", "--steps", str(args.steps),
                             "--metrics", metrics, "--quiet"], check=True)
    rows = [json.loads(line) for line in open(metrics)]
    times = [r["step_time_s"] for r in rows[1:]]
    for r in rows:
        print(f"weft step {r['step']}: {r['step_time_s']:.3f} s, loss {r['loss']:.4f}", flush=True)
    return statistics.mean(times)


def torch_worker(rank, args, port, out):
    import torch
    import torch.distributed as dist
    import wref_models as M
    import wref_np as W
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=2)
    torch.manual_seed(0)

    class Gpt(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.params = torch.nn.ParameterDict()
            for n, s in M.gpt_param_shapes(GPT2).items():
                if n.endswith(("ln_1.weight", "ln_2.weight")) or n == "transformer.ln_f.weight":
                    t = torch.ones(s)
                elif len(s) == 1:
                    t = torch.zeros(s)
                else:
                    t = torch.randn(s) * 0.02
                self.params[n.replace(".", "__")] = torch.nn.Parameter(t)

        def forward(self, x, y):
            p = {k.replace("__", "."): v for k, v in self.params.items()}
            return M.loss_fn("gpt", p, x, y, GPT2)

    model = torch.nn.parallel.DistributedDataParallel(Gpt(), bucket_cap_mb=25)
    named = {k.replace("__", "."): v for k, v in model.module.params.items()}
    opt = M.make_adamw(named, lr=6e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    tokens = W.load_tokens(args.data)
    local = args.global_batch // 2
    times = []
    for k in range(1 + args.torch_steps):
        x, y = W.batch(tokens, k, args.global_batch, args.seq)
        x = torch.from_numpy(x[rank * local:(rank + 1) * local])
        y = torch.from_numpy(y[rank * local:(rank + 1) * local])
        dist.barrier()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = model(x, y)
        loss.backward()
        opt.step()
        dist.barrier()
        dt = time.perf_counter() - t0
        if k > 0:
            times.append(dt)
        if rank == 0:
            print(f"torch DDP step {k + 1}{' (warm-up)' if k == 0 else ''}: {dt:.3f} s, "
                  f"loss {float(loss):.4f}", flush=True)
    if rank == 0:
        with open(out, "w") as f:
            json.dump(times, f)
    dist.destroy_process_group()


def main():
    args = parse()
    with tempfile.TemporaryDirectory() as wd:
        weft_s = run_weft(args, wd)
        import torch.multiprocessing as mp
        out = os.path.join(wd, "torch.json")
        mp.spawn(torch_worker, args=(args, 29511, out), nprocs=2, join=True)
        torch_s = statistics.mean(json.load(open(out)))
    tokens = args.global_batch * args.seq
    print(f"\nDP=2 x 1 thread, GPT-2 124M, {args.global_batch}x{args.seq} tokens/step")
    print(f"  weft (Open MPI)     {weft_s:8.3f} s/step  {tokens / weft_s:8.1f} tok/s")
    print(f"  PyTorch DDP (gloo)  {torch_s:8.3f} s/step  {tokens / torch_s:8.1f} tok/s")
    print(f"  ratio weft/torch    {weft_s / torch_s:8.3f}   (target <= 0.8)")
    print(json.dumps({"bench": "dp2_gpt2", "weft_step_s": weft_s, "torch_ddp_step_s": torch_s,
                      "ratio": weft_s / torch_s, "tokens_per_step": tokens}))


if __name__ == "__main__":
    main()
