#!/usr/bin/env python3
"""weft-plan's predicted step time against weft-run's measured one, here.

Calibrates this machine (weft-plan --calibrate), then for a small GPT on the
CPU meshes the sharding issue runs (1 rank, dp=2, tp=2 Megatron, tp=2 + SP,
dp=2 ZeRO-1, and pipelines: pp=2 under 1F1B and interleaved over 4
micro-batches) compiles the program, runs it under mpirun (one core per rank),
takes the median step time of steps 3..N and prints it beside weft-plan's
prediction for the same layout (--fix). Target: within +-25%.

  test/bench/plan_local.py [--bin build/bin] [--steps 12]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = {"model_type": "gpt2", "n_layer": 4, "n_embd": 256, "n_head": 4,
         "vocab_size": 256, "n_positions": 256, "resid_pdrop": 0.0,
         "embd_pdrop": 0.0, "attn_pdrop": 0.0}
BATCH, SEQ = 8, 128
# name, ranks, weft-compile flags, weft-plan --fix
MESHES = [
    ("1 rank", 1, [], "dp=1,tp=1,pp=1"),
    ("dp=2", 2, ["--mesh", "dp=2"], "dp=2,tp=1,pp=1,zero=0"),
    ("dp=2 zero-1", 2, ["--mesh", "dp=2", "--zero", "1"], "dp=2,tp=1,pp=1,zero=1"),
    ("tp=2", 2, ["--mesh", "tp=2", "--layout", "megatron"], "dp=1,tp=2,pp=1,sp=0"),
    ("tp=2 sp", 2, ["--mesh", "tp=2", "--layout", "megatron", "--sequence-parallel"],
     "dp=1,tp=2,pp=1,sp=1"),
    # Pipelines over 4 micro-batches of 2 rows.
    ("pp=2 1f1b", 2, ["--mesh", "pp=2", "--microbatches", "4"],
     "dp=1,tp=1,pp=2,schedule=1f1b"),
    ("pp=2 interleaved", 2, ["--mesh", "pp=2", "--microbatches", "4",
                             "--pipeline-schedule", "interleaved",
                             "--virtual-stages", "2"],
     "dp=1,tp=1,pp=2,v=2,schedule=interleaved"),
]


def micro_rows(name, flags):
    """Rows per micro-batch per rank: the batch over dp and micro-batches."""
    m = int(flags[flags.index("--microbatches") + 1]) if "--microbatches" in flags else 1
    return BATCH // (2 if "dp=2" in name else 1) // m


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--steps", type=int, default=12)
    args = ap.parse_args()
    b = lambda n: os.path.join(args.bin, n)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        cluster = os.path.join(tmp, "local.json")
        cal = run([b("weft-plan"), "--calibrate", "-o", cluster])
        print(cal.stderr.strip())
        config = os.path.join(tmp, "gpt-small.json")
        with open(config, "w") as f:
            json.dump(MODEL, f)
        data = os.path.join(tmp, "data.bin")
        run([b("weft-tokenize"), os.path.join(ROOT, "data", "corpus.txt"), "-o", data])
        print(f"\nmodel {MODEL}, batch {BATCH} x seq {SEQ}, f32, 1 core per rank")
        print("| mesh | measured step s | predicted step s | error |")
        print("|---|---|---|---|")
        for name, ranks, flags, fix in MESHES:
            prog = os.path.join(tmp, "p.weft")
            run([b("weft-compile"), config, "--batch", str(BATCH), "--seq",
                 str(SEQ), "--quiet", "-o", prog] + flags)
            metrics = os.path.join(tmp, "m.jsonl")
            cmd = [b("weft-run"), prog, "--steps", str(args.steps), "--data",
                   data, "--metrics", metrics, "--threads", "1", "--quiet"]
            if ranks > 1:
                cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe",
                       "--mca", "btl", "self,vader", "-np", str(ranks),
                       "-x", "OMP_NUM_THREADS=1"] + cmd
            run(cmd, env=env)
            with open(metrics) as f:
                times = [json.loads(l)["step_time_s"] for l in f if l.strip()]
            measured = statistics.median(times[2:])
            plan = run([b("weft-plan"), config, "--cluster", cluster, "--gpus",
                        str(ranks), "--global-batch", str(BATCH), "--seq",
                        str(SEQ), "--json", "--top", "1", "--fix",
                        fix + f",mb={micro_rows(name, flags)},recompute=none"])
            predicted = json.loads(plan.stdout)["layouts"][0]["step_time_s"]
            error = (predicted - measured) / measured
            worst = max(worst, abs(error))
            print(f"| {name} | {measured:.4f} | {predicted:.4f} | {error * 100:+.1f}% |")
    print(f"\nworst |error| {worst * 100:.1f}% (target 25%)")
    return 0 if worst <= 0.25 else 1


if __name__ == "__main__":
    sys.exit(main())
