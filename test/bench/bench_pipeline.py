#!/usr/bin/env python3
"""Pipeline bubbles and activation memory, measured against the schedules'
predictions.

For an 8-layer GPT (d 384, batch 16 x seq 128, f32, one core per rank) runs
pp=2 under GPipe, 1F1B, interleaved 1F1B (V=2) and ZB-H1, and pp=4 under
1F1B, each
over M micro-batches, with weft-run --trace. From the trace of steps 3..N:

  busy_r   the time rank r spends in its forward and backward instructions;
  window   from the first forward instruction of any rank to the last
           backward instruction of any rank (one clock: the ranks share a
           machine);
  bubble   (window - busy_r) / busy_r, the median over ranks and steps: the
           idle time in the pipelined part of the step per unit of work
           (waiting in transfers included).

It prints each beside the textbook bubble of ideal stages, (p-1)/M, or
(p-1)/(V M) interleaved (Narayanan et al. 2021), or (p-1)/(3M) for ZB-H1
with F, B and W equally long (Qi et al. 2023); beside the bubble of an ideal
pipeline of the measured runs: each rank's schedule (weft-run --dump)
replayed with every run (a forward, backward or weight-gradient fragment of
one micro-batch) as long as the trace measured it and transfers that take
no time, a run starting once its receives' sends have run (the bubble that
unequal stages and unequal F, B and W leave even with perfect transfers);
and rank 0's peak bytes.
The orderings the schedules promise: interleaved has a smaller bubble than
1F1B and GPipe, 1F1B a smaller peak than GPipe; and each pp=2 bubble is
within 15% of the ideal of its runs (transfers that overlap compute). pp=4
on a 2-core machine runs 4 ranks on 2 cores, so its figures include
time-sharing; pp=2 is quiet
(one rank per core). ZB-H1 promises a smaller bubble than 1F1B too.

  test/bench/bench_pipeline.py [--bin build/bin] [--steps 8] [--microbatches 8]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = {"model_type": "gpt2", "n_layer": 8, "n_embd": 384, "n_head": 6,
         "vocab_size": 256, "n_positions": 256, "resid_pdrop": 0.0,
         "embd_pdrop": 0.0, "attn_pdrop": 0.0}
BATCH, SEQ = 16, 128
# name, pp, V, weft-compile flags
RUNS = [
    ("gpipe", 2, 1, ["--pipeline-schedule", "gpipe"]),
    ("1f1b", 2, 1, []),
    ("interleaved V=2", 2, 2, ["--pipeline-schedule", "interleaved",
                               "--virtual-stages", "2"]),
    ("zb-h1", 2, 1, ["--pipeline-schedule", "zb-h1"]),
    ("1f1b", 4, 1, []),
]


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def fragments(dump):
    """Per stage, the instruction ranges of its forward, backward and weight
    fragments by name, and its schedule's actions."""
    stages, current = [], None
    for line in dump.splitlines():
        if re.match(r"stage \d+:", line):
            current = {"ranges": {}, "schedule": []}
            stages.append(current)
        m = re.match(r"\s+-- fragment ((?:forward|backward|weight)\S*) \[(\d+), (\d+)\)", line)
        if m and current is not None:
            current["ranges"][m.group(1)] = (int(m.group(2)), int(m.group(3)))
        if line.startswith("schedule:") and current is not None:
            for tok in line.split()[1:]:
                m = re.match(r"(send|recv)\[\d+\](?:->|<-)(\d+)(?:\((\d+)\))?$", tok)
                if m:
                    current["schedule"].append(
                        (m.group(1), int(m.group(2)), int(m.group(3) or -1)))
                    continue
                m = re.match(r"([\w.]+)(?:\((\d+)\))?$", tok)
                current["schedule"].append(("run", m.group(1), int(m.group(2) or -1)))
    return stages


def run_durations(spans, stage):
    """Each per-micro-batch run of the stage's schedule (in order): its
    instructions' summed time, read off the step's spans in time order."""
    by_frag = {}
    for name, (b, e) in stage["ranges"].items():
        mine = [x for x in spans if b <= x["args"]["instruction"] < e]
        n = max(e - b, 1)  # an empty fragment's runs take no time
        by_frag[name] = [sum(x["dur"] for x in mine[i:i + n])
                         for i in range(0, len(mine), n)]
    used, out = {}, []
    for kind, name, mb in stage["schedule"]:
        if kind == "run" and name in stage["ranges"]:
            k = used.get(name, 0)
            used[name] = k + 1
            out.append(by_frag[name][k] if k < len(by_frag[name]) else 0.0)
    return out


def ideal_window(stages, durations):
    """The step's pipelined window with every run as long as measured and
    transfers free: a run starts when its rank is free and the sends of its
    receives (its micro-batch's, before it) have run."""
    n = len(stages)
    acts = []
    for s, st in enumerate(stages):
        a = [x for x in st["schedule"] if x[0] != "run" or x[1] in st["ranges"]]
        acts.append([x for x in a if x[2] >= 0])  # the pipelined part
    sent = {}  # (from, to) -> times of its sends, in order
    taken = {}  # (from, to) -> receives matched so far
    pos, clock, run_no = [0] * n, [0.0] * n, [0] * n
    last_end = [0.0] * n  # per rank: end of its latest run (its sends' time)
    waiting = [[] for _ in range(n)]  # receives posted before the next run
    progress = True
    while progress:
        progress = False
        for s in range(n):
            while pos[s] < len(acts[s]):
                kind, other, mb = acts[s][pos[s]]
                if kind == "send":
                    sent.setdefault((s, other), []).append(last_end[s])
                elif kind == "recv":
                    key = (other, s)
                    waiting[s].append((key, taken.get(key, 0), mb))
                    taken[key] = taken.get(key, 0) + 1
                else:
                    ready = clock[s]
                    blocked = False
                    for key, k, rmb in waiting[s]:
                        if rmb != mb:
                            continue
                        times = sent.get(key, [])
                        if k >= len(times):
                            blocked = True
                            break
                        ready = max(ready, times[k])
                    if blocked:
                        break
                    waiting[s] = [w for w in waiting[s] if w[2] != mb]
                    clock[s] = ready + durations[s][run_no[s]]
                    last_end[s] = clock[s]
                    run_no[s] += 1
                pos[s] += 1
                progress = True
    return max(clock)


def bubble(trace, stages, first_step):
    """The measured bubble per rank and step, and the one of an ideal
    pipeline of the same runs (ideal_window)."""
    events = json.load(open(trace))
    events = events["traceEvents"] if isinstance(events, dict) else events
    per_step = {}
    for e in events:
        if e.get("ph") != "X" or e.get("cat") != "compute" or e["tid"] != 0:
            continue
        step, inst = e["args"]["step"], e["args"]["instruction"]
        ranges = stages[e["pid"]]["ranges"].values()
        if step < first_step or not any(b <= inst < end for b, end in ranges):
            continue
        per_step.setdefault(step, {}).setdefault(e["pid"], []).append(e)
    ratios, ideal = [], []
    for ranks in per_step.values():
        for spans in ranks.values():
            spans.sort(key=lambda x: x["ts"])
        lo = min(x["ts"] for sp in ranks.values() for x in sp)
        hi = max(x["ts"] + x["dur"] for sp in ranks.values() for x in sp)
        busy = {r: sum(x["dur"] for x in sp) for r, sp in ranks.items()}
        durations = [run_durations(ranks[r], stages[r]) for r in range(len(stages))]
        window = ideal_window(stages, durations)
        ratios += [(hi - lo - b) / b for b in busy.values()]
        ideal += [(window - b) / b for b in busy.values()]
    return statistics.median(ratios), statistics.median(ideal)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--microbatches", type=int, default=8)
    args = ap.parse_args()
    b = lambda n: os.path.join(args.bin, n)
    m = args.microbatches
    env = dict(os.environ, OMP_NUM_THREADS="1")
    print(f"load average {os.getloadavg()[0]:.2f} (a concurrent build skews every figure)")
    print(f"model {MODEL['n_layer']} layers d {MODEL['n_embd']}, batch {BATCH} x seq {SEQ}, "
          f"f32, {m} micro-batches, 1 core per rank, steps 3..{args.steps}")
    print("| schedule | pp | step s | bubble measured | (p-1)/(V M) | error | "
          "ideal of these runs | over it | rank 0 peak MiB |")
    print("|---|---|---|---|---|---|---|---|---|")
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        config = os.path.join(tmp, "gpt4.json")
        with open(config, "w") as f:
            json.dump(MODEL, f)
        data = os.path.join(tmp, "data.bin")
        run([b("weft-tokenize"), os.path.join(ROOT, "data", "corpus.txt"), "-o", data])
        for name, pp, v, flags in RUNS:
            prog = os.path.join(tmp, "p.weft")
            run([b("weft-compile"), config, "--batch", str(BATCH), "--seq", str(SEQ),
                 "--mesh", f"pp={pp}", "--microbatches", str(m), "--quiet", "-o",
                 prog] + flags)
            stages = fragments(run([b("weft-run"), prog, "--dump"]).stdout)
            trace = os.path.join(tmp, "t.json")
            metrics = os.path.join(tmp, "m.jsonl")
            run(["mpirun", "--allow-run-as-root", "--oversubscribe", "--mca", "btl",
                 "self,vader", "-np", str(pp), "-x", "OMP_NUM_THREADS=1",
                 b("weft-run"), prog, "--steps", str(args.steps), "--data", data,
                 "--threads", "1", "--quiet", "--trace", trace, "--metrics", metrics],
                env=env)
            rows = [json.loads(l) for l in open(metrics) if l.strip()]
            step = statistics.median(r["step_time_s"] for r in rows[2:])
            peak = rows[-1]["peak_bytes"] / 2**20
            # ZB-H1 with F, B and W equally long: (p-1)/(3M).
            predicted = (pp - 1) / ((3 if name == "zb-h1" else v) * m)
            measured, ideal = bubble(trace, stages, 3)
            error = (measured - predicted) / predicted
            results[(name, pp)] = (measured, peak, ideal)
            print(f"| {name} | {pp} | {step:.3f} | {measured:.3f} | {predicted:.3f} | "
                  f"{error * 100:+.0f}% | {ideal:.3f} | {(measured - ideal) / ideal * 100:+.0f}% | "
                  f"{peak:.1f} |")
    gp, ob, il = (results[(n, 2)] for n in ("gpipe", "1f1b", "interleaved V=2"))
    zb = results[("zb-h1", 2)]
    orders = [("interleaved bubble < 1f1b's", il[0] < ob[0]),
              ("zb-h1 bubble < 1f1b's", zb[0] < ob[0]),
              ("interleaved bubble < gpipe's", il[0] < gp[0]),
              ("1f1b peak < gpipe's", ob[1] < gp[1])]
    # Issue 36's goal: every pp=2 bubble within 15% of the ideal of its runs.
    orders += [(f"{name} bubble within 15% of the ideal of its runs",
                r[0] <= 1.15 * r[2])
               for (name, pp), r in results.items() if pp == 2]
    for what, ok in orders:
        print(f"{'holds ' if ok else 'FAILS '} {what}")
    return 0 if all(ok for _, ok in orders) else 1


if __name__ == "__main__":
    sys.exit(main())
