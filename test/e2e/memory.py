#!/usr/bin/python3
"""Per-rank memory: the compiler's report (weft-compile --explain) follows the
ZeRO formulas, and the runtime's peak (parameters, gradients, Adam state and the
activation arena it allocates once) agrees with the report within 2%. With
--microbatches M, the arena is that of one micro-batch.

fp32 training state per rank for N parameters over d data-parallel ranks:
  ZeRO-0: 4N + 4N + 8N           ZeRO-2: 4N + 4N/d + 8N/d
  ZeRO-1: 4N + 4N + 8N/d         ZeRO-3: 16N/d
(bf16 mixed precision keeps the same f32 state, and on CPUs a scratch of f32
copies of one kernel's bf16 operands, the report's "bf16 widening").

usage: memory.py BIN_DIR DATA WORKDIR
"""
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_util import launch, run  # noqa: E402





def report(text):
    out = {}
    for key in ("parameters", "gradients", "optimizer state", "activations", "total"):
        m = re.search(rf"^\s+{key}\s+(\d+) bytes", text, re.M)
        out[key] = int(m.group(1))
    return out


def main():
    bin_dir, data, work = sys.argv[1:4]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    d = 2
    base = ["gpt-tiny", "--batch", "4", "--seq", "16"]
    one = report(run([f"{bin_dir}/weft-compile"] + base + ["--explain"]))
    n4 = one["parameters"]  # 4 bytes per parameter
    expected = {0: 4 * n4, 1: 2 * n4 + 2 * n4 // d, 2: n4 + 3 * n4 // d,
                3: 4 * n4 // d}
    failures = []
    for zero in range(4):
        prog = f"{work}/z{zero}.weft"
        rep = report(run([f"{bin_dir}/weft-compile"] + base +
                         ["--mesh", f"dp={d}", "--zero", str(zero), "--explain",
                          "-o", prog, "--quiet"]))
        state = rep["parameters"] + rep["gradients"] + rep["optimizer state"]
        out = run(launch(d) + [f"{bin_dir}/weft-run", prog, "--steps", "2",
                            "--data", data, "--threads", "1", "--quiet"])
        peak = int(re.search(r"peak bytes (\d+)", out).group(1))
        formula_err = abs(state - expected[zero]) / expected[zero]
        peak_err = abs(peak - rep["total"]) / rep["total"]
        ok = formula_err <= 0.01 and peak_err <= 0.02
        print(f"{'ok  ' if ok else 'FAIL'} ZeRO-{zero} dp={d}: training state {state} B "
              f"(formula {expected[zero]}, {formula_err:.2%}), report total "
              f"{rep['total']} B, runtime peak {peak} B ({peak_err:.2%})")
        if not ok:
            failures.append(f"ZeRO-{zero}")
    # Gradient accumulation: 8 rows per step in M micro-batches. The arena
    # holds one micro-batch: the arena of a step of 8/M rows, but for one
    # gradient. A one-step program writes each gradient straight into its
    # buffer; a micro-batch makes it in the arena and adds it to the buffer
    # at once, so at most the largest (gpt-tiny's 256 x 64 f32 table, 65536
    # bytes) is there with the rest.
    for m in (2, 4):
        prog = f"{work}/mb{m}.weft"
        rep = report(run([f"{bin_dir}/weft-compile", "gpt-tiny", "--batch", "8",
                          "--seq", "16", "--microbatches", str(m), "--explain",
                          "-o", prog, "--quiet"]))
        small = report(run([f"{bin_dir}/weft-compile", "gpt-tiny", "--batch",
                            str(8 // m), "--seq", "16", "--explain"]))
        out = run([f"{bin_dir}/weft-run", prog, "--steps", "2", "--data", data,
                   "--threads", "1", "--quiet"])
        peak = int(re.search(r"peak bytes (\d+)", out).group(1))
        peak_err = abs(peak - rep["total"]) / rep["total"]
        ok = (abs(rep["activations"] - small["activations"]) <= 65536
              and peak_err <= 0.02)
        print(f"{'ok  ' if ok else 'FAIL'} batch 8 in {m} micro-batches: arena "
              f"{rep['activations']} B (a step of {8 // m} rows: "
              f"{small['activations']} B), report total {rep['total']} B, "
              f"runtime peak {peak} B ({peak_err:.2%})")
        if not ok:
            failures.append(f"{m} micro-batches")
    # bf16 mixed precision: the CPU backend runs each kernel on f32 copies
    # of its bf16 operands, in one scratch sized for the kernel with the
    # most (the report's "bf16 widening"; gpt-tiny's LM head, 7% of this
    # run's peak, which the report had left out).
    for mesh in ([], ["--mesh", "dp=2", "--zero", "3"]):
        prog = f"{work}/bf16{len(mesh)}.weft"
        text = run([f"{bin_dir}/weft-compile"] + base + mesh +
                   ["--dtype", "bf16", "--explain", "-o", prog, "--quiet"])
        rep = report(text)
        widening = re.search(r"^\s+bf16 widening\s+(\d+) bytes", text, re.M)
        cmd = [f"{bin_dir}/weft-run", prog, "--steps", "2", "--data", data,
               "--threads", "1", "--quiet"]
        out = run((launch(2) if mesh else []) + cmd)
        peak = int(re.search(r"peak bytes (\d+)", out).group(1))
        peak_err = abs(peak - rep["total"]) / rep["total"]
        ok = widening is not None and peak_err <= 0.02
        what = "bf16 " + (" ".join(mesh[1:]) if mesh else "one rank")
        print(f"{'ok  ' if ok else 'FAIL'} {what}: bf16 widening "
              f"{widening.group(1) if widening else 'missing'} B, report total "
              f"{rep['total']} B, runtime peak {peak} B ({peak_err:.2%})")
        if not ok:
            failures.append(what)
    if failures:
        sys.exit("FAIL: " + ", ".join(failures))
    print("PASS: ZeRO memory follows the formulas and the runtime agrees; "
          "micro-batches need one micro-batch's arena; bf16's widening is "
          "counted")


if __name__ == "__main__":
    main()
