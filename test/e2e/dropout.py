"""Dropout trains exactly like one rank on every layout, and is applied.

  dropout.py BIN_DIR DATA WORKDIR

GPT-2 with embd/resid/attn dropout 0.1 and Llama with attention_dropout 0.1
(4 layers, f64; masks keyed by seed, step, site and each element's global
coordinates, program/Dropout.h):
  1. dp=2,tp=2 megatron with sequence parallelism, a 1F1B pipeline pp=2
     over 4 micro-batches, ZeRO-3 on dp=2 and full recomputation each give
     one rank's losses (1e-12 relative) and gradients after step 1 (1e-10);
  2. p=0.1 trains differently from p=0 (the step-1 loss moves);
  3. the gradient check (finite differences, f64) passes through the
     masks, the attention's included;
  4. a forward-only program has no dropout: its logits are the p=0
     model's, bit for bit.
"""
import os
import re
import shutil
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from random_layouts import max_rel, train  # noqa: E402

BIN, DATA, WORK = sys.argv[1:4]
HERE = os.path.dirname(os.path.abspath(__file__))
COMMON = ["--batch", "8", "--seq", "16", "--lr", "3e-3", "--dtype", "f64", "--quiet"]
LAYOUTS = [
    (4, ["--mesh", "dp=2,tp=2", "--layout", "megatron", "--sequence-parallel"]),
    (2, ["--mesh", "pp=2", "--microbatches", "4"]),
    (2, ["--mesh", "dp=2", "--zero", "3"]),
    (1, ["--recompute", "full"]),
]
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
failures = []


def compile_(model, tag, flags=()):
    prog = f"{WORK}/{tag}.weft"
    common = [f for f in COMMON if f not in ("--lr", "3e-3")] \
        if "--forward-only" in flags else COMMON
    subprocess.run([f"{BIN}/weft-compile", model] + common + list(flags) + ["-o", prog],
                   check=True)
    return prog


def trained(prog, ranks, tag):
    w = f"{WORK}/{tag}"
    os.makedirs(w, exist_ok=True)
    return train(BIN, prog, ranks, DATA, w, 3)


for model, plain in (("gpt-dropout4.json", "gpt-tied4.json"),
                     ("llama-dropout4.json", "llama4.json")):
    path, name = f"{HERE}/{model}", model[:-5]
    one = compile_(path, f"{name}-one")
    ref_metrics, ref_grads = trained(one, 1, f"{name}-one")
    for ranks, flags in LAYOUTS:
        tag = f"{name}-" + "-".join(f.strip("-").replace("=", "") for f in flags)
        metrics, grads = trained(compile_(path, tag, flags), ranks, tag)
        loss = max(abs(m["loss"] - r["loss"]) / abs(r["loss"])
                   for m, r in zip(metrics, ref_metrics))
        grad = max(max_rel(grads[k], ref_grads[k]) for k in ref_grads)
        print(f"{name} {' '.join(flags)}: loss {loss:.1e}, grad {grad:.1e}")
        if loss > 1e-12 or grad > 1e-10:
            failures.append(f"{name} {' '.join(flags)}: loss {loss:.2e} grad {grad:.2e}")
    # p = 0: the same model without dropout trains differently.
    plain_metrics, _ = trained(compile_(f"{HERE}/{plain}", f"{name}-p0"), 1, f"{name}-p0")
    moved = abs(plain_metrics[0]["loss"] - ref_metrics[0]["loss"]) / abs(plain_metrics[0]["loss"])
    print(f"{name}: step-1 loss with p=0.1 {ref_metrics[0]['loss']:.9f}, "
          f"p=0 {plain_metrics[0]['loss']:.9f} (moves {moved:.1e})")
    if moved < 1e-6:
        failures.append(f"{name}: p=0.1 trains like p=0")
    # Finite differences through the masks.
    r = subprocess.run([f"{BIN}/weft-run", one, "--grad-check", "3", "--grad-tol", "1e-6",
                        "--threads", "1"], capture_output=True, text=True)
    print(f"{name}: grad-check {'passed' if r.returncode == 0 else 'FAILED'}")
    if r.returncode != 0:
        failures.append(f"{name}: grad-check: {r.stdout[-800:]}{r.stderr[-400:]}")
    # Forward-only: evaluation, no dropout.
    tokens = f"{WORK}/tokens.npy"
    np.save(tokens, np.arange(8 * 16, dtype=np.int64).reshape(8, 16) % 256)
    logits = []
    for m, tag in ((path, f"{name}-fwd"), (f"{HERE}/{plain}", f"{name}-fwd-p0")):
        prog = compile_(m, tag, ["--forward-only"])
        dump = subprocess.run([f"{BIN}/weft-run", prog, "--dump"], capture_output=True,
                              text=True, check=True).stdout
        if re.search(r"\sdropout\s+in=|dropout=", dump):
            failures.append(f"{tag}: a forward-only program has dropout")
        subprocess.run([f"{BIN}/weft-run", prog, "--input", tokens, "--output",
                        f"{WORK}/{tag}.npy", "--threads", "1"], check=True,
                       capture_output=True)
        logits.append(np.load(f"{WORK}/{tag}.npy"))
    same = np.array_equal(logits[0], logits[1])
    print(f"{name}: forward-only logits {'equal' if same else 'DIFFER from'} the p=0 model's")
    if not same:
        failures.append(f"{name}: forward-only logits differ from p=0's")

if failures:
    sys.exit("FAIL:\n  " + "\n  ".join(failures))
print("PASS: dropout")
