#!/usr/bin/env python3
"""Narayanan et al. 2021 (Megatron-LM, SC'21) Table 1 against weft-plan.

For each published row: weft-plan's predicted TFLOP/s per GPU for the
published layout (--fix tp, pp, full recompute, no ZeRO/SP, interleaved when
pp > 1; micro-batch and virtual stages searched; --no-dp-overlap and
--no-tp-overlap, as Megatron-LM 2021 overlapped neither the gradient
all-reduce nor the input gradient's tp all-reduce with the backward),
counted as the paper's eq. 3
F = 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) over the predicted step time; the
error against the published figure (target +-15%); and whether weft's best
unconstrained layout is predicted no slower. Then times the llama-3-70b /
1,024 H100 search.

  test/bench/plan_megatron.py [--bin build/bin] [--json out.json]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plan_published import a100, gpt, run_plan  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# params, heads, hidden, layers, TP, PP, GPUs, batch, published TFLOP/s/GPU
TABLE = [
    ("1.7B", 24, 2304, 24, 1, 1, 32, 512, 137),
    ("3.6B", 32, 3072, 30, 2, 1, 64, 512, 138),
    ("7.5B", 32, 4096, 36, 4, 1, 128, 512, 142),
    ("18.4B", 48, 6144, 40, 8, 1, 256, 1024, 135),
    ("39.1B", 64, 8192, 48, 8, 2, 512, 1536, 138),
    ("76.1B", 80, 10240, 60, 8, 4, 1024, 1792, 140),
    ("145.6B", 96, 12288, 80, 8, 8, 1536, 2304, 148),
    ("310.1B", 128, 16384, 96, 8, 16, 1920, 2160, 155),
    ("529.6B", 128, 20480, 105, 8, 35, 2520, 2520, 163),
    ("1008.0B", 160, 25600, 128, 8, 64, 3072, 3072, 163),
]
SEQ, VOCAB = 2048, 51200


def eq3(batch, layers, hidden):
    s, l, h, v = SEQ, layers, hidden, VOCAB
    return 96 * batch * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h))


def plan(binary, tmp, config, gpus, batch, fix=None):
    # Megatron-LM 2021 ran attention as batched GEMMs and a fused softmax,
    # not a FlashAttention kernel: the a100-80g preset without its
    # attention_efficiency; it overlapped neither the gradient all-reduce nor
    # the input gradient's tp all-reduce (Apex's
    # ColumnParallelLinearWithAsyncAllreduce came later in 2021), and held
    # bf16 weights with an fp32 master copy (--master-weights).
    return run_plan(binary, tmp, config, a100(flash=False), gpus, batch, SEQ,
                    fix, ["--no-dp-overlap", "--no-tp-overlap",
                          "--master-weights"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args()
    binary = os.path.join(args.bin, "weft-plan")
    rows, worst, all_no_slower = [], 0.0, True
    print("| params | TP | PP | GPUs | batch | published | weft (published layout) "
          "| error | mb | v | weft best layout | best TFLOP/s | no slower |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, heads, hidden, layers, tp, pp, gpus, batch, pub in TABLE:
            config = gpt(layers, hidden, heads, VOCAB, SEQ)
            fix = f"tp={tp},pp={pp},recompute=full,zero=0,sp=0"
            if pp > 1:
                fix += ",schedule=interleaved"
            fixed, err = plan(binary, tmp, config, gpus, batch, fix)
            best, err2 = plan(binary, tmp, config, gpus, batch)
            flops = eq3(batch, layers, hidden)
            if fixed is None:
                print(f"| {name} | {tp} | {pp} | {gpus} | {batch} | {pub} | "
                      f"none: {err} | | | | | | |")
                rows.append({"params": name, "error": err})
                worst = float("inf")
                continue
            pred = flops / fixed["step_time_s"] / gpus / 1e12
            error = (pred - pub) / pub
            worst = max(worst, abs(error))
            best_pred = (flops / best["step_time_s"] / gpus / 1e12) if best else 0
            no_slower = best is not None and best["step_time_s"] <= fixed["step_time_s"] * (1 + 1e-9)
            all_no_slower &= no_slower
            bl = best or {}
            best_desc = (f"dp={bl.get('dp')} tp={bl.get('tp')} pp={bl.get('pp')} "
                         f"mb={bl.get('microbatch')} {bl.get('schedule')} "
                         f"z{bl.get('zero')} sp{int(bool(bl.get('sequence_parallel')))} "
                         f"{bl.get('recompute')}") if best else err2
            print(f"| {name} | {tp} | {pp} | {gpus} | {batch} | {pub} | {pred:.1f} | "
                  f"{error * 100:+.1f}% | {fixed['microbatch']} | "
                  f"{fixed['virtual_stages']} | {best_desc} | {best_pred:.1f} | "
                  f"{'yes' if no_slower else 'NO'} |")
            rows.append({"params": name, "published": pub, "predicted": pred,
                         "error": error, "fixed": fixed["step_time_s"],
                         "best": best["step_time_s"] if best else None})
    print(f"\nworst |error| {worst * 100:.1f}% (target 15%); best layout no "
          f"slower on every row: {'yes' if all_no_slower else 'no'}")

    # The 70B / 1,024 H100 search, end to end (process start included).
    cmd = [binary, "llama-3-70b", "--cluster", "h100-80g", "--gpus", "1024",
           "--global-batch", "1024", "--seq", "4096", "--json", "--top", "1"]
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        out = subprocess.run(cmd, capture_output=True, text=True, check=True)
        times.append(time.perf_counter() - t0)
    doc = json.loads(out.stdout)
    b = doc["layouts"][0]
    print(f"llama-3-70b on 1024 x h100-80g, batch 1024 x 4096: "
          f"{doc['evaluated']} layouts, search {doc['search_seconds']:.3f} s "
          f"inside the tool, {min(times):.3f} s wall (best of 3); best "
          f"dp={b['dp']} tp={b['tp']} pp={b['pp']} mb={b['microbatch']} "
          f"{b['schedule']} v={b['virtual_stages']} zero={b['zero']} "
          f"sp={b['sequence_parallel']} recompute={b['recompute']} "
          f"step {b['step_time_s']:.2f} s MFU {b['mfu']:.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "search_wall_s": min(times)}, f, indent=1)
    return 0 if worst <= 0.15 and all_no_slower and min(times) < 2 else 1


if __name__ == "__main__":
    sys.exit(main())
