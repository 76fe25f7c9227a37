#!/usr/bin/python3
"""Context parallelism at long sequences: cp=2 beside one rank.

    /usr/bin/python3 test/bench/bench_context.py [--bin build/bin] [--seqs 2048,4096] [--steps 4]

A Llama of 4 layers (hidden 256, 4 heads, 2 KV heads, RoPE), batch 1, f32,
on this machine's 2 cores, trained three ways from the same data:
  - one rank, 2 threads (the reference);
  - cp=2, 2 ranks of 1 thread, load-balanced (rank i holds chunks i and 3-i);
  - cp=2 in contiguous blocks (a layout file's "context_order": "natural");
  - cp=2 load-balanced with all-to-all attention (--context-parallel
    all-to-all: cp moves to the heads around attention, DeepSpeed's Ulysses);
  - cp=2 load-balanced with ring attention (--context-parallel ring): key
    and value blocks passed around, each shift started before the step on
    the block it sends. From --trace, rank 0's exposed communication: the
    time in its ring_shift starts and in every wait (the gradient buckets'
    too, so an upper bound), beside a run with WEFT_NO_ASYNC=1, whose
    shifts block.
Each prints the mean step time (steps 2..), tokens/s, the peak bytes of
rank 0 and the bytes it sent per step; the cp runs also the attention time
(forward and backward kernels, from --trace) of each rank and their ratio,
which load balancing should bring to about 1. The last line is the figures
as JSON. Losses of the three runs agree (f32: to rounding).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
from e2e_util import launch  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--bin", default="build/bin")
ap.add_argument("--data", default="build/data/corpus.bin")
ap.add_argument("--seqs", default="2048,4096")
ap.add_argument("--steps", type=int, default=4)
args = ap.parse_args()

CONFIG = {"model_type": "llama", "hidden_size": 256, "num_hidden_layers": 4,
          "num_attention_heads": 4, "num_key_value_heads": 2,
          "intermediate_size": 704, "vocab_size": 256,
          "max_position_embeddings": 8192, "rope_theta": 10000.0,
          "tie_word_embeddings": False, "rms_norm_eps": 1e-5,
          "hidden_act": "silu"}


def run(work, name, seq, ranks, flags, env=None):
    prog = os.path.join(work, f"{name}-{seq}.weft")
    subprocess.run([f"{args.bin}/weft-compile", os.path.join(work, "llama.json"),
                    "--batch", "1", "--seq", str(seq), "-o", prog, "--quiet"] + flags,
                   check=True)
    metrics = os.path.join(work, f"{name}-{seq}.jsonl")
    trace = os.path.join(work, f"{name}-{seq}.trace.json")
    base = launch(ranks) + [f"{args.bin}/weft-run", prog, "--data", args.data,
                            "--steps", str(args.steps), "--threads",
                            str(2 // ranks), "--quiet"]
    subprocess.run(base + ["--metrics", metrics], check=True, stdout=subprocess.DEVNULL,
                   env=env)
    rows = [json.loads(line) for line in open(metrics)]
    # A second run, traced (tracing costs time of its own): attention's
    # kernels per rank.
    subprocess.run(base + ["--trace", trace], check=True, stdout=subprocess.DEVNULL,
                   env=env)
    events = json.load(open(trace))
    events = events["traceEvents"] if isinstance(events, dict) else events
    attention = {}
    exposed = 0.0  # rank 0's ring_shift starts and waits, ms per step
    for e in events:
        if e.get("ph") != "X":
            continue
        if e.get("cat") == "compute" and e.get("name", "").startswith("attention"):
            attention[e["pid"]] = attention.get(e["pid"], 0.0) + e["dur"] * 1e-3 / args.steps
        if e.get("pid") == 0 and ((e.get("cat") == "collective" and
                                   e.get("name") == "ring_shift") or
                                  e.get("name", "").startswith("wait")):
            exposed += e["dur"] * 1e-3 / args.steps
    step = statistics.mean(r["step_time_s"] for r in rows[1:])
    return {"step_ms": step * 1e3, "tokens_per_s": seq / step,
            "peak_bytes": rows[-1]["peak_bytes"],
            "sent_bytes": sum(rows[-1].get("comm_bytes", {}).values()),
            "attention_ms": [attention[k] for k in sorted(attention)],
            "exposed_ms": exposed,
            "losses": [r["loss"] for r in rows]}


def main():
    load = os.getloadavg()[0]
    print(f"load average {load:.2f} (2 cores; other work depresses every figure)")
    results = {}
    with tempfile.TemporaryDirectory() as work:
        json.dump(CONFIG, open(os.path.join(work, "llama.json"), "w"))
        natural = os.path.join(work, "natural.json")
        json.dump({"context_order": "natural"}, open(natural, "w"))
        for seq in [int(s) for s in args.seqs.split(",")]:
            one = run(work, "one", seq, 1, [])
            cp = run(work, "cp2", seq, 2, ["--mesh", "cp=2"])
            nat = run(work, "cp2-natural", seq, 2, ["--mesh", "cp=2", "--layout", natural])
            a2a = run(work, "cp2-a2a", seq, 2, ["--mesh", "cp=2", "--context-parallel",
                                                "all-to-all"])
            ring = run(work, "cp2-ring", seq, 2, ["--mesh", "cp=2", "--context-parallel",
                                                  "ring"])
            blocking = run(work, "cp2-ring-blocking", seq, 2,
                           ["--mesh", "cp=2", "--context-parallel", "ring"],
                           env=dict(os.environ, WEFT_NO_ASYNC="1"))
            results[seq] = {"one": one, "cp2": cp, "cp2_natural": nat, "cp2_a2a": a2a,
                            "cp2_ring": ring, "cp2_ring_blocking": blocking}
            print(f"seq {seq}, batch 1:")
            print(f"  {'':22s} {'step ms':>9s} {'tokens/s':>9s} {'peak MB':>8s} "
                  f"{'sent MB':>8s}  attention ms per rank (max/min)")
            for name, r in (("one rank, 2 threads", one), ("cp=2 load-balanced", cp),
                            ("cp=2 contiguous", nat), ("cp=2 all-to-all", a2a),
                            ("cp=2 ring", ring), ("cp=2 ring, blocking", blocking)):
                a = r["attention_ms"]
                ratio = max(a) / min(a) if a and min(a) > 0 else 1.0
                print(f"  {name:22s} {r['step_ms']:9.1f} {r['tokens_per_s']:9.0f} "
                      f"{r['peak_bytes'] / 1e6:8.1f} {r['sent_bytes'] / 1e6:8.2f}  "
                      + " ".join(f"{x:.1f}" for x in a) + f" ({ratio:.2f})")
            print(f"  speed-up of cp=2 over one rank: {one['step_ms'] / cp['step_ms']:.2f}x; "
                  f"peak bytes {cp['peak_bytes'] / one['peak_bytes']:.2f}x; "
                  f"first losses {one['losses'][0]:.6f} {cp['losses'][0]:.6f} "
                  f"{nat['losses'][0]:.6f} {a2a['losses'][0]:.6f} "
                  f"{ring['losses'][0]:.6f}")
            print(f"  ring, rank 0's exposed communication (shift starts and all "
                  f"waits): {ring['exposed_ms']:.1f} ms/step overlapped, "
                  f"{blocking['exposed_ms']:.1f} ms/step blocking (its shifts' own "
                  f"spans)")
    print(json.dumps({str(k): {n: {f: v for f, v in r.items() if f != "losses"}
                               for n, r in d.items()} for k, d in results.items()}))


if __name__ == "__main__":
    main()
