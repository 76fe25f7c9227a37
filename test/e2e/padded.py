"""Padded rows train exactly like the unpadded sequences.

  padded.py BIN_DIR WORKDIR

weft-compile --attention-mask --loss cross-entropy; weft-run --tokens
--targets --attention-mask (1 a token, 0 padding; a padded target -100).
Four sequences of 12 tokens (next-token targets, none after the last), for
gpt-tiny (learned positions) and llama-tiny (RoPE) in f64:
  - unpadded, --seq 12: the reference;
  - right-padded, left-padded and mixed to --seq 16: the same losses over 3
    steps (1e-12) and step-1 gradients (1e-10);
  - left-padded on dp=2,tp=2 with sequence parallelism, left-padded on cp=2
    (contiguous blocks, keys all-gathered) and mixed on cp=2's ring: the
    same again;
  - a padded position whose target is not -100, padding inside a sequence,
    and a run without the mask are refused by name.
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_util import launch  # noqa: E402
from random_layouts import max_rel  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
import wref_np  # noqa: E402

BIN, WORK = sys.argv[1:3]
L, SEQ, PAD = 12, 16, 0
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
rng = np.random.default_rng(5)
seqs = [list(rng.integers(1, 256, L)) for _ in range(4)]
failures = []


def targets(s):
    return s[1:] + [-100]


def padded(where):
    toks, tgts, mask = [], [], []
    for i, s in enumerate(seqs):
        side = where if where != "mixed" else ("left" if i % 2 else "right")
        n = SEQ - L
        if side == "left":
            toks.append([PAD] * n + s), tgts.append([-100] * n + targets(s))
            mask.append([0] * n + [1] * L)
        else:
            toks.append(s + [PAD] * n), tgts.append(targets(s) + [-100] * n)
            mask.append([1] * L + [0] * n)
    return toks, tgts, mask


def save(tag, name, rows):
    path = f"{WORK}/{tag}-{name}.npy"
    np.save(path, np.array(rows, dtype=np.int64))
    return path


def run(model, tag, seq, toks, tgts, mask=None, flags=(), ranks=1, check=True):
    prog = f"{WORK}/{tag}.weft"
    subprocess.run([f"{BIN}/weft-compile", model, "--batch", "4", "--seq", str(seq),
                    "--dtype", "f64", "--lr", "3e-3", "--loss", "cross-entropy",
                    "--quiet", "-o", prog] + (["--attention-mask"] if mask else [])
                   + list(flags), check=True)
    base = launch(ranks) + [f"{BIN}/weft-run", prog, "--tokens", save(tag, "t", toks),
                            "--targets", save(tag, "y", tgts), "--threads", "1", "--quiet"]
    if mask:
        base += ["--attention-mask", save(tag, "m", mask)]
    r = subprocess.run(base + ["--steps", "3", "--metrics", f"{WORK}/{tag}.jsonl"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        if check:
            sys.exit(f"FAIL: {tag}: {r.stdout[-500:]}{r.stderr[-500:]}")
        return None, r.stdout + r.stderr
    subprocess.run(base + ["--steps", "1", "--save-grads", f"{WORK}/{tag}-g"], check=True,
                   capture_output=True)
    losses = [json.loads(line)["loss"] for line in open(f"{WORK}/{tag}.jsonl")]
    return (losses, wref_np.read_safetensors(f"{WORK}/{tag}-g/grads.safetensors")[0]), ""


for model in ("gpt-tiny", "llama-tiny"):
    (ref_l, ref_g), _ = run(model, f"{model}-unpadded", L, seqs, [targets(s) for s in seqs])
    cases = [(w, padded(w), (), 1) for w in ("right", "left", "mixed")]
    cases.append(("left, dp=2,tp=2 SP", padded("left"),
                  ("--mesh", "dp=2,tp=2", "--layout", "megatron", "--sequence-parallel"), 4))
    # Context parallelism in contiguous blocks: the keys all-gathered, and
    # the ring's blocks, bounded by each row's tokens.
    natural = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                           "context-natural.json")
    cases.append(("left, cp=2 all-gather", padded("left"),
                  ("--mesh", "cp=2", "--layout", natural), 2))
    cases.append(("mixed, cp=2 ring", padded("mixed"),
                  ("--mesh", "cp=2", "--layout", natural, "--context-parallel", "ring"), 2))
    for name, (toks, tgts, mask), flags, ranks in cases:
        tag = f"{model}-" + name.replace(" ", "").replace(",", "-").replace("=", "")
        (losses, grads), _ = run(model, tag, SEQ, toks, tgts, mask, flags, ranks)
        loss = max(abs(a - b) / abs(b) for a, b in zip(losses, ref_l))
        grad = max(max_rel(grads[k], ref_g[k]) for k in ref_g)
        print(f"{model} {name}-padded: loss {loss:.1e}, grad {grad:.1e} against unpadded")
        if loss > 1e-12 or grad > 1e-10:
            failures.append(f"{model} {name}: loss {loss:.2e} grad {grad:.2e}")

# Refusals, each naming what is wrong.
toks, tgts, mask = padded("left")
bad = [row[:] for row in tgts]
bad[1][0] = 7
_, err = run("gpt-tiny", "bad-target", SEQ, toks, bad, mask, check=False)
print("padded target:", next(l for l in err.splitlines() if "error" in l))
hole = [row[:] for row in mask]
hole[2][10] = 0
holed_t = [row[:] for row in tgts]
holed_t[2][10] = -100
_, err = run("gpt-tiny", "hole", SEQ, toks, holed_t, hole, check=False)
print("hole:", next(l for l in err.splitlines() if "error" in l))
if failures:
    sys.exit("FAIL:\n  " + "\n  ".join(failures))
print("PASS: padded")
