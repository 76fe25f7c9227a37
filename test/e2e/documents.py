"""Packed documents train exactly like the same documents one per row.

  documents.py BIN_DIR DATA WORKDIR

weft-compile --documents EOS: each row holds documents ending with EOS;
attention stays inside a document and positions (GPT-2's learned table,
Llama's RoPE) restart with each, and an EOS's target (the next document's
first token) counts for nothing. For gpt-tiny and llama-tiny in f64:
  1. packed rows (4 rows of 16 tokens, documents of 3 to 16 tokens) and the
     same documents one per row (16 tokens, right-padded, the padding's
     targets -100: a causal model never reads what follows) give the same
     losses over 3 steps (1e-12) and the same step-1 gradients (1e-10);
  2. on a token file with EOS ids (--data), dp=2,tp=2 with sequence
     parallelism, a 1F1B pipeline over 4 micro-batches, and context
     parallelism in contiguous blocks (all-gather on cp=2, the ring on cp=2
     and cp=4) train like one rank (1e-12 / 1e-10).
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from random_layouts import max_rel, train  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
import wref_np  # noqa: E402

BIN, DATA, WORK = sys.argv[1:4]
EOS, SEQ = 10, 16
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
failures = []
rng = np.random.default_rng(3)
# Rows of documents (lengths include the EOS), each row filling SEQ.
ROWS = [[5, 11], [7, 9], [3, 6, 7], [16]]


def document(length):
    body = rng.integers(11, 256, length - 1)
    return list(body) + [EOS]


docs = [[document(n) for n in row] for row in ROWS]


def targets_of(tokens):
    """Next tokens inside a document; -100 at an EOS and past the end."""
    t = []
    for i, tok in enumerate(tokens):
        t.append(-100 if tok == EOS or i + 1 == len(tokens) else tokens[i + 1])
    return t


packed_tokens = [sum(row, []) for row in docs]
packed_targets = [targets_of(r) for r in packed_tokens]
single_tokens, single_targets = [], []
for row in docs:
    for d in row:
        pad = SEQ - len(d)
        single_tokens.append(d + [0] * pad)
        single_targets.append(targets_of(d) + [-100] * pad)


def save(name, rows):
    path = f"{WORK}/{name}.npy"
    np.save(path, np.array(rows, dtype=np.int64))
    return path


def run_given(model, tag, tokens, targets, flags):
    prog = f"{WORK}/{tag}.weft"
    subprocess.run([f"{BIN}/weft-compile", model, "--batch", str(len(tokens)), "--seq",
                    str(SEQ), "--dtype", "f64", "--lr", "3e-3", "--loss", "cross-entropy",
                    "--quiet", "-o", prog] + flags, check=True)
    t, g = save(f"{tag}-tokens", tokens), save(f"{tag}-targets", targets)
    base = [f"{BIN}/weft-run", prog, "--tokens", t, "--targets", g, "--threads", "1",
            "--quiet"]
    subprocess.run(base + ["--steps", "3", "--metrics", f"{WORK}/{tag}.jsonl"], check=True)
    subprocess.run(base + ["--steps", "1", "--save-grads", f"{WORK}/{tag}-g"], check=True)
    losses = [json.loads(line)["loss"] for line in open(f"{WORK}/{tag}.jsonl")]
    return losses, wref_np.read_safetensors(f"{WORK}/{tag}-g/grads.safetensors")[0]


for model in ("gpt-tiny", "llama-tiny"):
    packed = run_given(model, f"{model}-packed", packed_tokens, packed_targets,
                       ["--documents", str(EOS)])
    single = run_given(model, f"{model}-single", single_tokens, single_targets, [])
    loss = max(abs(a - b) / abs(b) for a, b in zip(packed[0], single[0]))
    grad = max(max_rel(packed[1][k], single[1][k]) for k in single[1])
    print(f"{model}: {len(packed_tokens)} packed rows vs {len(single_tokens)} documents "
          f"one per row: loss {loss:.1e}, grad {grad:.1e}")
    if loss > 1e-12 or grad > 1e-10:
        failures.append(f"{model} packed vs one per row: loss {loss:.2e} grad {grad:.2e}")

    # Layouts on a token file holding EOS ids.
    common = ["--batch", "8", "--seq", str(SEQ), "--dtype", "f64", "--lr", "3e-3",
              "--documents", str(EOS), "--quiet"]
    one = f"{WORK}/{model}-one.weft"
    subprocess.run([f"{BIN}/weft-compile", model, "-o", one] + common, check=True)
    os.makedirs(f"{WORK}/{model}-one")
    ref_m, ref_g = train(BIN, one, 1, DATA, f"{WORK}/{model}-one", 3)
    # Context parallelism keeps documents' positions in the natural order:
    # contiguous blocks (a layout file's "context_order"), all-gathered
    # keys and the ring's blocks.
    natural = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                           "context-natural.json")
    for i, (ranks, flags) in enumerate((
            (4, ["--mesh", "dp=2,tp=2", "--layout", "megatron",
                 "--sequence-parallel"]),
            (2, ["--mesh", "pp=2", "--microbatches", "4"]),
            (2, ["--mesh", "cp=2", "--layout", natural]),
            (2, ["--mesh", "cp=2", "--layout", natural,
                 "--context-parallel", "ring"]),
            (4, ["--mesh", "cp=4", "--layout", natural,
                 "--context-parallel", "ring"]))):
        tag = f"{model}-layout{i}"
        prog = f"{WORK}/{tag}.weft"
        subprocess.run([f"{BIN}/weft-compile", model, "-o", prog] + common + flags,
                       check=True)
        os.makedirs(f"{WORK}/{tag}")
        m, g = train(BIN, prog, ranks, DATA, f"{WORK}/{tag}", 3)
        loss = max(abs(a["loss"] - b["loss"]) / abs(b["loss"]) for a, b in zip(m, ref_m))
        grad = max(max_rel(g[k], ref_g[k]) for k in ref_g)
        shown = " ".join("natural" if f == natural else f for f in flags)
        print(f"{model} --documents {shown}: loss {loss:.1e}, grad {grad:.1e}")
        if loss > 1e-12 or grad > 1e-10:
            failures.append(f"{model} {' '.join(flags)}: loss {loss:.2e} grad {grad:.2e}")
if failures:
    sys.exit("FAIL:\n  " + "\n  ".join(failures))
print("PASS: documents")
