"""ONNX graphs with an attention_mask input train padded batches exactly.

  padded_onnx.py BIN_DIR WORKDIR [padded5]

The fixtures (fixtures/padded, made by fixtures/export_padded_onnx.py with
transformers 4.46.3's eager attention and the TorchScript exporter; or,
with a third argument, fixtures/padded5: transformers 5.25.0's SDPA and the
dynamo exporter, whose masks index the attention_mask per score, and one
BERT through TorchScript) are a
GPT-2, a Llama (GQA, RoPE) and a BERT sequence classifier whose graphs take
input_ids and attention_mask, with a batch of 4 rows of 12: whole, right-
padded, left-padded, short. weft imports the mask's subgraph as the
attention's key padding; weft-run --attention-mask feeds it. A second BERT
classifier also takes token_type_ids (segment 1 after each row's first
third), its table read by each position's type (--token-type-ids). For each:
  1. f64: the first loss is transformers' (1e-8 relative: the metrics'
     9 digits; its float32 internals promoted) and so is every gradient
     (1e-8 of the largest), but for the row of BERT's padding_idx;
  2. f32: the first loss is onnxruntime's on the graph (1e-5), and so are
     the logits of a forward-only run (at the tokens);
  3. f64: dp=2 and tp=2 megatron train 3 steps like one rank (1e-12);
and a run without the mask, or a compile that would train the padding, is
refused by name.
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "reference"))
from e2e_util import launch  # noqa: E402
from random_layouts import max_rel  # noqa: E402
import wref_np  # noqa: E402

BIN, WORK = sys.argv[1:3]
# fixtures/padded (transformers 4, TorchScript) or another set: padded5.
FIX = os.path.join(HERE, "fixtures", sys.argv[3] if len(sys.argv) > 3 else "padded")
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
failures = []


def compile_(name, meta, tag, dtype, flags=(), check=True):
    prog = f"{WORK}/{tag}.weft"
    cmd = [f"{BIN}/weft-compile", f"{FIX}/{name}.onnx", "--dtype", dtype, "--quiet", "-o",
           prog] + list(flags)
    if "--forward-only" not in flags:
        cmd += ["--lr", "3e-3"] + (["--loss", "cross-entropy"] if "--loss" not in flags else [])
        if meta["classes"]:
            cmd += ["--classes", str(meta["classes"])]
    if ("gpt2" in name and "--forward-only" not in flags
            and "TorchScript" in meta["exporter"]):
        cmd += ["--tie-embeddings"]  # the exporter's transposed copy of the table
    r = subprocess.run(cmd, capture_output=True, text=True)
    if check and r.returncode:
        sys.exit(f"FAIL: {tag}: {r.stderr[-600:]}")
    return prog, r


def run(name, meta, tag, prog, steps, ranks=1, mask=True, grads=False):
    arrays = {"t": meta["tokens"], "y": meta["targets"], "m": meta["attention_mask"]}
    if meta.get("token_type_ids"):
        arrays["s"] = meta["token_type_ids"]
    paths = {}
    for k, v in arrays.items():
        paths[k] = f"{WORK}/{name}-{k}.npy"
        np.save(paths[k], np.array(v, dtype=np.int64))
    cmd = launch(ranks) + [f"{BIN}/weft-run", prog, "--tokens", paths["t"], "--targets",
                           paths["y"], "--load", f"{FIX}/{name}.onnx", "--threads", "1",
                           "--quiet", "--steps", str(steps), "--metrics", f"{WORK}/{tag}.jsonl"]
    if mask:
        cmd += ["--attention-mask", paths["m"]]
    if "s" in paths:
        cmd += ["--token-type-ids", paths["s"]]
    if grads:
        cmd += ["--save-grads", f"{WORK}/{tag}-g"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        return None, r.stdout + r.stderr
    losses = [json.loads(line)["loss"] for line in open(f"{WORK}/{tag}.jsonl")]
    return losses, ""


NAMES = ["gpt2-padded", "llama-padded", "bert-cls-padded", "bert-cls-types",
         "bert-cls-padded-ts", "llama-padded-op23", "bert-cls-padded-op23"]
for name in [n for n in NAMES if os.path.exists(f"{FIX}/{n}.json")]:
    meta = json.load(open(f"{FIX}/{name}.json"))
    prog, _ = compile_(name, meta, f"{name}-f64", "f64")
    losses, err = run(name, meta, f"{name}-f64", prog, 1, grads=True)
    if losses is None:
        sys.exit(f"FAIL: {name}: {err[-600:]}")
    got = wref_np.read_safetensors(f"{WORK}/{name}-f64-g/grads.safetensors")[0]
    want = wref_np.read_safetensors(f"{FIX}/{name}-grads.safetensors")[0]
    missing = sorted(set(got) - set(want))
    if missing:
        failures.append(f"{name}: no transformers gradient for {missing}")
    # BERT's word table has padding_idx=0: PyTorch never updates row 0, which
    # the graph does not say (an ONNX Gather has no padding_idx); weft
    # trains it as any row. Here only the left-padded row's pooler (at a
    # padding position) reads it. Compared without that row.
    pad_row = meta.get("padding_idx")
    if pad_row is not None:
        table = meta["word_table"]
        print(f"  {table} row {pad_row} (padding_idx): weft's gradient "
              f"{np.max(np.abs(got[table][pad_row])):.1e}, PyTorch's 0")
        got[table][pad_row] = want[table][pad_row]
    scale = max(np.max(np.abs(v)) for v in want.values())
    grad = max(np.max(np.abs(got[k] - want[k])) for k in got if k in want) / scale
    # 9 printed digits of the loss; the graph's constants are f32 (GELU's
    # 0.044715, eps), so f64 agrees to their rounding.
    loss = abs(losses[0] - meta["loss_f64"]) / abs(meta["loss_f64"])
    print(f"{name}: f64 loss {loss:.1e}, {len(got)} gradients {grad:.1e} against "
          f"transformers {meta['transformers']}")
    if loss > 1e-8 or grad > 1e-8:
        failures.append(f"{name}: f64 loss {loss:.2e} grad {grad:.2e}")

    prog32, _ = compile_(name, meta, f"{name}-f32", "f32")
    l32, err = run(name, meta, f"{name}-f32", prog32, 1)
    if l32 is None:
        sys.exit(f"FAIL: {name} f32: {err[-600:]}")
    rel = abs(l32[0] - meta["ort_loss_f32"]) / abs(meta["ort_loss_f32"])
    print(f"  f32 loss {rel:.1e} against onnxruntime {meta['onnxruntime']}")
    if rel > 1e-5:
        failures.append(f"{name}: f32 loss {rel:.2e} against onnxruntime")

    # Forward-only (inference on padded rows): onnxruntime's logits, at the
    # tokens (a padded query's output is no token's; a classifier's scores
    # are the rows').
    fwd, _ = compile_(name, meta, f"{name}-fwd", "f32", ["--forward-only"])
    cmd = [f"{BIN}/weft-run", fwd, "--input", f"{WORK}/{name}-t.npy", "--attention-mask",
           f"{WORK}/{name}-m.npy", "--load", f"{FIX}/{name}.onnx", "--output",
           f"{WORK}/{name}-logits.npy", "--quiet"]
    if meta.get("token_type_ids"):
        cmd += ["--token-type-ids", f"{WORK}/{name}-s.npy"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"FAIL: {name} forward-only: {r.stderr[-600:]}")
    got, want = np.load(f"{WORK}/{name}-logits.npy"), np.array(meta["ort_logits"])
    if got.ndim == 3:
        keep = np.array(meta["attention_mask"], dtype=bool)
        got, want = got[keep], want[keep]
    rel = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
    print(f"  forward-only logits {rel:.1e} against onnxruntime")
    if rel > 1e-5:
        failures.append(f"{name}: forward-only logits {rel:.2e} against onnxruntime")

    one, _ = run(name, meta, f"{name}-one", prog, 3)
    # The ring over contiguous blocks (cp=2): each block of keys bounded by
    # the row's tokens, as attention bounds them.
    natural = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                           "context-natural.json")
    for mesh in (["--mesh", "dp=2"], ["--mesh", "tp=2", "--layout", "megatron"],
                 ["--mesh", "cp=2", "--context-parallel", "ring", "--layout",
                  natural]):
        tag = f"{name}-{mesh[1].replace('=', '')}"
        p, _ = compile_(name, meta, tag, "f64", mesh)
        par, err = run(name, meta, tag, p, 3, ranks=2)
        if par is None:
            sys.exit(f"FAIL: {tag}: {err[-600:]}")
        worst = max(abs(a - b) / abs(b) for a, b in zip(par, one))
        shown = " ".join(mesh[1:4]) if "cp=2" in mesh else " ".join(mesh[1:])
        print(f"  {shown}: 3 steps {worst:.1e} against one rank")
        if worst > 1e-12:
            failures.append(f"{tag}: {worst:.2e} against one rank")

# Refusals, by name.
meta = json.load(open(f"{FIX}/gpt2-padded.json"))
prog, _ = compile_("gpt2-padded", meta, "refuse", "f64")
_, err = run("gpt2-padded", meta, "no-mask", prog, 1, mask=False)
print("no mask:", next(l for l in err.splitlines() if "error" in l))
_, r = compile_("gpt2-padded", meta, "next-token", "f64", ["--loss", "next-token"], check=False)
print("next-token:", r.stderr.strip().splitlines()[-1])
meta = json.load(open(f"{FIX}/bert-cls-types.json"))
meta["token_type_ids"] = None
prog, _ = compile_("bert-cls-types", meta, "types", "f64")
_, err = run("bert-cls-types", meta, "no-types", prog, 1)
print("no types:", next(l for l in err.splitlines() if "error" in l))
if failures:
    sys.exit("FAIL:\n  " + "\n  ".join(failures))
print("PASS: padded_onnx")
