#!/usr/bin/python3
"""The generic path's cost (a benchmark, not a test): a model that trains
partly on generic ops (test/e2e/fixtures/generic_model.py: written-out
norms, a relu^2 x sigmoid MLP, a softmax feature gate; its linear layers
and attention raise to fused ops), weft against PyTorch eager on the same
model, and the share of weft's step its generic ops take.

  export: generic_model.make_model(256, D, H, 4D, SEQ, L), seed 0, by
          torch.onnx.export (dynamo, optimize=False) into a scratch dir
  weft:   weft-compile model.onnx; weft-run --load model.onnx --steps N
          --threads T -> mean step_time_s over steps 2..N, and from
          --trace the time per instruction kind, generic ops summed
  torch:  the same module, fp32, forward + next-token cross-entropy +
          backward + torch.optim.AdamW(lr 1e-3, betas (0.9, 0.999), eps
          1e-8, weight_decay 0.01), 1 warm-up step, then 5 timed steps,
          torch.set_num_threads(T)

Run with the bench venv's python (test/bench/bench-venv.sh, plus `pip
install onnx onnxscript`):

  ~/.cache/weft/bench-venv/bin/python test/bench/bench_generic.py [--threads 2]
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
sys.path.insert(0, os.path.join(REPO, "test", "e2e", "fixtures"))

GENERIC = {"pointwise", "pointwise_grad", "binary", "binary_grad", "broadcast", "reduce",
           "reshape", "transpose", "softmax", "softmax_grad", "batch_matmul"}


def parse():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--bin", default=os.path.join(REPO, "build", "bin"))
    ap.add_argument("--d", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--steps", type=int, default=6)
    return ap.parse_args()


args = parse()
if os.environ.get("WEFT_BENCH_CHILD") != "1":
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads),
               OPENBLAS_NUM_THREADS=str(args.threads), WEFT_BENCH_CHILD="1")
    os.execve(sys.executable, [sys.executable] + sys.argv, env)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from generic_model import make_model  # noqa: E402


def run(cmd):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def weft(work, onnx, tokens):
    prog = os.path.join(work, "g.weft")
    run([f"{args.bin}/weft-compile", onnx, "-o", prog, "--quiet"])
    metrics, trace = os.path.join(work, "m.jsonl"), os.path.join(work, "t.json")
    run([f"{args.bin}/weft-run", prog, "--load", onnx, "--data", tokens, "--steps",
         str(args.steps), "--threads", str(args.threads), "--metrics", metrics,
         "--trace", trace, "--quiet"])
    steps = [json.loads(line)["step_time_s"] for line in open(metrics)][1:]
    spans = json.load(open(trace))
    events = spans["traceEvents"] if isinstance(spans, dict) else spans
    by_op = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "compute":
            op = e["name"].split(" ")[0]
            by_op[op] = by_op.get(op, 0.0) + e["dur"] * 1e-6
    return statistics.mean(steps), by_op


def torch_step_time(model, ids):
    torch.set_num_threads(args.threads)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    x, y = ids[:, :-1], ids[:, 1:]
    times = []
    for i in range(6):
        t0 = time.perf_counter()
        loss = F.cross_entropy(model(x).reshape(-1, 256), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if i:
            times.append(time.perf_counter() - t0)
    return statistics.mean(times)


def main():
    torch.manual_seed(0)
    d = args.d
    model = make_model(256, d, args.heads, 4 * d, args.seq, args.layers)
    with tempfile.TemporaryDirectory() as work:
        onnx_path = os.path.join(work, "g.onnx")
        x = torch.zeros(args.batch, args.seq, dtype=torch.long)
        torch.onnx.export(model, (x,), onnx_path, dynamo=True, optimize=False,
                          do_constant_folding=False, input_names=["input_ids"],
                          output_names=["logits"])
        rng = np.random.default_rng(0)
        stream = rng.integers(0, 256, args.batch * (args.seq + 1) * (args.steps + 2))
        tokens = os.path.join(work, "tokens.bin")
        stream.astype("<u2").tofile(tokens)
        w, by_op = weft(work, onnx_path, tokens)
    ids = torch.tensor(stream[:args.batch * (args.seq + 1)].reshape(args.batch, -1))
    t = torch_step_time(model, ids)
    total = sum(by_op.values())
    generic = sum(v for k, v in by_op.items() if k in GENERIC)
    toks = args.batch * args.seq
    print(f"model: d {d}, {args.layers} layers, {args.heads} heads, MLP {4 * d}, "
          f"batch {args.batch} x seq {args.seq}, {args.threads} threads")
    print(f"weft          {w * 1e3:8.1f} ms/step  {toks / w:8.0f} tok/s")
    print(f"PyTorch eager {t * 1e3:8.1f} ms/step  {toks / t:8.0f} tok/s  "
          f"(weft / PyTorch: {w / t:.2f}x the time)")
    print(f"generic ops: {generic / max(total, 1e-12):.0%} of weft's traced compute "
          f"({generic * 1e3 / args.steps:.1f} ms of {total * 1e3 / args.steps:.1f} ms per step)")
    for op, v in sorted(by_op.items(), key=lambda kv: -kv[1])[:8]:
        print(f"  {op:16s} {v * 1e3 / args.steps:7.2f} ms/step")
    print(json.dumps({"weft_step_s": w, "torch_step_s": t, "generic_share": generic / total}))


main()
