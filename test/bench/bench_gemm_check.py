#!/usr/bin/env python3
"""A GEMM fallback cannot pass unnoticed (issue 14, item 1).

Runs weft-bench-gemm (weft's CPU matmul path on GPT-2 and Llama shapes)
three ways in child processes, interleaved over a few rounds:
  default   as a new user runs weft: OPENBLAS_CORETYPE unset, so OpenBLAS
            detects the CPU (and weft restarts itself with the right kernels
            when OpenBLAS chose pre-AVX ones);
  best      OPENBLAS_CORETYPE forced to the kernels cpuid allows (SkylakeX
            with AVX-512, else Haswell): the library's own best here, with
            the default taken when it is faster;
  generic   OPENBLAS_CORETYPE=Prescott, the kernels a masked VM gets: the
            negative control, which the check must flag.
Passes when the default reaches FRACTION of the best on every shape, and
prints the generic control's fraction to show the check can fail.

  test/bench/bench_gemm_check.py [--bin build/bin] [--threads 2] [--fraction 0.85]
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def cpu_flags():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def run(binary, threads, core):
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENBLAS_CORETYPE", "WEFT_BLAS_RESTARTED")}
    if core:
        env["OPENBLAS_CORETYPE"] = core
    out = subprocess.run([binary, "--threads", str(threads), "--reps", "3"],
                         env=env, capture_output=True, text=True, check=True).stdout
    return {r["shape"]: r for r in map(json.loads, out.splitlines())}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--fraction", type=float, default=0.85)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    binary = os.path.join(args.bin, "weft-bench-gemm")
    flags = cpu_flags()
    forced = "SkylakeX" if "avx512f" in flags else "Haswell" if "avx2" in flags else None
    runs = {"default": [], "best": [], "generic": []}
    for _ in range(args.rounds):
        runs["default"].append(run(binary, args.threads, None))
        if forced:
            runs["best"].append(run(binary, args.threads, forced))
        runs["generic"].append(run(binary, args.threads, "Prescott"))
    best_of = lambda kind, shape: max((r[shape]["gflops"] for r in runs[kind]), default=0)
    shapes = list(runs["default"][0])
    core = runs["default"][0][shapes[0]]["core"]
    print(f"cpuid: {'AVX-512' if 'avx512f' in flags else 'AVX2' if 'avx2' in flags else 'no AVX2'}; "
          f"default core {core}; forced core {forced}; {args.threads} threads; "
          f"best of {args.rounds} rounds")
    print("| shape | default GFLOP/s | best GFLOP/s | default/best | generic GFLOP/s | generic/best |")
    print("|---|---|---|---|---|---|")
    failed = []
    for s in shapes:
        d, g = best_of("default", s), best_of("generic", s)
        b = max(d, best_of("best", s))
        print(f"| {s} | {d:.1f} | {b:.1f} | {d / b:.2f} | {g:.1f} | {g / b:.2f} |")
        if d < args.fraction * b:
            failed.append(s)
    flagged = [s for s in shapes if best_of("generic", s) < args.fraction *
               max(best_of("default", s), best_of("best", s))]
    print(f"negative control: the generic kernels fall below {args.fraction} of the best "
          f"on {len(flagged)} of {len(shapes)} shapes")
    if failed:
        print(f"FAIL: the default reaches less than {args.fraction} of the best on: "
              + ", ".join(failed))
        return 1
    print(f"PASS: the default reaches {args.fraction} of the best on every shape")
    return 0


if __name__ == "__main__":
    sys.exit(main())
