"""Forward parity with onnxruntime: weft computes the logits onnxruntime
computes for the same ONNX file, and trains from the loss they give.

  onnx_parity.py BINDIR WORKDIR

Runs onnxruntime from the project-local venv test/e2e/ort_venv.sh makes
(onnxruntime from PyPI over Debian's numpy and onnx); exits 3 (SKIP, with
the reason) when that venv cannot be had. For every torch.onnx.export
fixture of test/e2e/fixtures (GPT-2, Llama with grouped-query attention,
tied Llama, Qwen2, eager attention, scaled RoPE, dynamic batch and seq, a
model that trains on the generic path, and
the DistilBERT and MiniLM-shaped BERT encoders, whose output is hidden
states):
  1. `weft-compile --forward-only` and `weft-run --input ids.npy --output
     logits.npy` give onnxruntime's logits on the fixture's tokens, in f32:
     max |weft - ort| <= 1e-5 x max |ort| (and the median relative error
     is printed);
  2. the training program's step-1 loss is the next-token cross-entropy
     of onnxruntime's logits (computed here in float64), to 1e-5 relative;
  3. the forward-only program on a mesh (dp=2, tp=2 with the vocab-split
     head, tp=2 with sequence parallelism) gives one rank's logits (f64,
     1e-12 x max |logit|).
And for the classifier exports (minilm-cls-tiny: BertForSequenceClassification,
scores [batch, 3]; minilm-tok-tiny: BertForTokenClassification, [batch,
seq, 5]), the forward-only scores are onnxruntime's (1e-5 of the largest),
the --loss cross-entropy program's step-1 loss is the cross-entropy of
onnxruntime's scores against the labels (-100 ignored), to 1e-5 relative,
and dp=2 and tp=2 forward-only give one rank's scores.
And for the BertForMaskedLM export (minilm-mlm-tiny), the masked-LM
program's step-1 loss is the cross-entropy of onnxruntime's logits over
the hidden positions of weft-run's masked batch (masked_lm_batch.py), to
1e-5 relative, with one micro-batch and with two (a step of 4 samples,
which onnxruntime computes two at a time).
"""
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from e2e_util import launch, run  # noqa: E402
from masked_lm_batch import masked_batch, masked_cross_entropy  # noqa: E402

BIN, WORK = sys.argv[1], sys.argv[2]
FIXTURES = os.path.join(HERE, "fixtures")
os.makedirs(WORK, exist_ok=True)

# fixture -> (weft-compile flags binding its dims, layouts run forward-only)
MODELS = {
    "gpt-tiny": ([], ["dp=2", "tp=2", "tp=2 sp"]),
    "llama-tiny": ([], ["tp=2", "dp=2"]),
    "llama-tied": ([], ["tp=2 sp"]),
    "qwen2-tiny": ([], ["tp=2"]),
    "gpt2-eager": ([], []),
    "llama-eager": ([], []),
    "llama-rope-scaled": ([], []),
    "gpt-tiny-dynamic": (["--batch", "3", "--seq", "8"], ["tp=2"]),
    # Written-out norms, a relu^2-sigmoid MLP, a softmax gate: the generic
    # path (fixtures/export_generic_onnx.py).
    "generic-tiny": ([], ["dp=2"]),
    # Encoders: forward-only hidden states (no loss).
    "distilbert-tiny": ([], ["tp=2", "dp=2"]),
    "distilbert-eager": ([], []),
    "minilm-tiny": ([], ["tp=2"]),
}
LAYOUTS = {
    "dp=2": ["--mesh", "dp=2"],
    "tp=2": ["--mesh", "tp=2", "--layout", "megatron"],
    "tp=2 sp": ["--mesh", "tp=2", "--layout", "megatron", "--sequence-parallel"],
}


def ort_python():
    """The venv's python, or exit 3 (SKIP) with ort_venv.sh's reason."""
    r = subprocess.run([os.path.join(HERE, "ort_venv.sh")], capture_output=True, text=True)
    if r.returncode == 3:
        print(r.stdout.strip() or "SKIP: ort-venv unavailable")
        sys.exit(3)
    if r.returncode != 0:
        sys.exit(f"FAIL: ort_venv.sh: {r.stdout}{r.stderr}")
    return r.stdout.strip().splitlines()[-1]


def ort_logits(python, onnx, ids, out):
    """onnxruntime's logits of ids (int64 [B, S]) to out (.npy)."""
    np.save(out + ".ids.npy", ids.astype(np.int64))
    code = ("import sys, numpy as np, onnxruntime as ort\n"
            "o = ort.SessionOptions(); o.log_severity_level = 3\n"
            "s = ort.InferenceSession(sys.argv[1], o, providers=['CPUExecutionProvider'])\n"
            "ids = np.load(sys.argv[2])\n"
            "np.save(sys.argv[3], s.run(None, {s.get_inputs()[0].name: ids})[0])\n")
    run([python, "-c", code, onnx, out + ".ids.npy", out])
    return np.load(out)


def weft_logits(onnx, ids, work, name, ranks=1, *flags):
    prog = os.path.join(work, f"{name}.weft")
    run([f"{BIN}/weft-compile", onnx, "--forward-only", "-o", prog, "--quiet", *flags])
    np.save(os.path.join(work, "ids.npy"), ids.astype(np.int32))
    out = os.path.join(work, f"{name}.npy")
    # MiniLM's file holds the pooler, which its first output does not read.
    unused = ["--allow-unused-tensors"] if "minilm-tiny" in onnx else []
    run(launch(ranks) + [f"{BIN}/weft-run", prog, "--load", onnx, "--threads", "1",
                         "--input", os.path.join(work, "ids.npy"), "--output", out, "--quiet",
                         *unused])
    return np.load(out)


def cross_entropy(logits, targets):
    """Mean next-token cross-entropy in float64."""
    z = logits.astype(np.float64).reshape(-1, logits.shape[-1])
    z = z - z.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return float(-logp[np.arange(len(z)), targets.reshape(-1)].mean())


def token_file(ids_stream, work):
    """weft-run's arguments reading ids_stream as a token file."""
    toks = os.path.join(work, "ids.bin")
    np.array(ids_stream, dtype="<u2").tofile(toks)
    return ["--data", toks]


def first_loss(onnx, data, work, flags):
    """Step 1's loss of the training program, on weft-run's data args."""
    prog = os.path.join(work, "train.weft")
    run([f"{BIN}/weft-compile", onnx, "-o", prog, "--quiet", *flags])
    metrics = prog + ".jsonl"
    run([f"{BIN}/weft-run", prog, *data, "--steps", "1", "--threads", "1",
         "--load", onnx, "--metrics", metrics, "--quiet"])
    return json.loads(open(metrics).readline())["loss"]


def check(python, fixture, flags, layouts):
    onnx = os.path.join(FIXTURES, f"{fixture}-torch-export.onnx")
    ref = json.load(open(os.path.join(FIXTURES, f"{fixture}-torch-export.json")))
    work = os.path.join(WORK, fixture)
    os.makedirs(work, exist_ok=True)
    b, s = ref["batch"], ref["seq"]
    stream = np.array(ref["ids"])
    encoder = "hidden" in ref
    # Sample i of step 1 starts at token i*seq (weft-run --data), its
    # targets one token later.
    ids = np.stack([stream[i * s:(i + 1) * s] for i in range(b)])
    targets = None if encoder else np.stack([stream[i * s + 1:(i + 1) * s + 1]
                                             for i in range(b)])

    # 1. Logits (an encoder: hidden states), f32.
    theirs = ort_logits(python, onnx, ids, os.path.join(work, "ort.npy"))
    mine = weft_logits(onnx, ids, work, "f32", 1, *flags)
    if mine.shape != theirs.shape:
        sys.exit(f"FAIL: {fixture}: weft's logits {mine.shape}, onnxruntime's {theirs.shape}")
    scale = float(np.abs(theirs).max())
    err = float(np.abs(mine - theirs).max()) / scale
    median = float(np.median(np.abs(mine - theirs) / np.maximum(np.abs(theirs), 1e-30)))
    if not err <= 1e-5:
        sys.exit(f"FAIL: {fixture}: outputs differ from onnxruntime's by {err:.1e} of their "
                 f"largest magnitude {scale:.3g}")
    what = "hidden states" if encoder else "logits"
    print(f"{fixture} f32: {what} {list(mine.shape)} = onnxruntime's "
          f"(max error {err:.1e} of max |value|, median relative {median:.1e})")

    # 2. Step 1's loss against the cross-entropy of onnxruntime's logits
    # (an encoder's hidden states have no loss).
    if not encoder:
        step_one(onnx, token_file(stream, work), work, flags,
                 cross_entropy(theirs, targets), fixture)

    # 3. Layouts, f64, against one rank.
    layouts_like_one_rank(onnx, ids, work, flags, layouts, fixture, what)


def step_one(onnx, data, work, flags, want, fixture, what="logits"):
    got = first_loss(onnx, data, work, flags)
    rel = abs(got - want) / abs(want)
    if not rel <= 1e-5:
        sys.exit(f"FAIL: {fixture}: step-1 loss {got} != cross-entropy of onnxruntime's "
                 f"{what} {want} (relative {rel:.1e})")
    print(f"{fixture}: step-1 loss {got:.6f} = cross-entropy of onnxruntime's {what} "
          f"{want:.6f} (relative {rel:.1e})")


def layouts_like_one_rank(onnx, ids, work, flags, layouts, fixture, what):
    if not layouts:
        return
    one = weft_logits(onnx, ids, work, "one", 1, *flags, "--dtype", "f64")
    for i, layout in enumerate(layouts):
        got = weft_logits(onnx, ids, work, f"layout{i}", 2, *flags, "--dtype", "f64",
                          *LAYOUTS[layout])
        err = float(np.abs(got - one).max()) / float(np.abs(one).max())
        if not err <= 1e-12:
            sys.exit(f"FAIL: {fixture} {layout}: forward-only {what} differ from one "
                     f"rank's by {err:.1e}")
        print(f"{fixture} {layout}: forward-only {what} = one rank's (error {err:.1e})")


def masked_lm(python):
    fixture = "minilm-mlm-tiny"
    onnx = os.path.join(FIXTURES, f"{fixture}-torch-export.onnx")
    ref = json.load(open(os.path.join(FIXTURES, f"{fixture}-torch-export.json")))
    work = os.path.join(WORK, fixture)
    os.makedirs(work, exist_ok=True)
    b, s, mask = ref["batch"], ref["seq"], ref["mask_token"]
    for micro in (1, 2):
        # The step's global batch is micro x the export's static batch.
        inputs, targets = masked_batch(ref["ids"], 0, micro * b, s, mask, 256)
        logits = np.concatenate([
            ort_logits(python, onnx, inputs[k * b:(k + 1) * b],
                       os.path.join(work, f"ort{micro}-{k}.npy"))
            for k in range(micro)])
        flags = ["--loss", "masked-lm", "--mask-token", str(mask),
                 "--microbatches", str(micro)]
        step_one(onnx, token_file(ref["ids"], work), work, flags,
                 masked_cross_entropy(logits, targets),
                 f"{fixture} masked-lm, {micro} micro-batch(es)")


def classifiers(python):
    """A classifier's scores, forward-only, and its loss on labels."""
    for fixture in ("minilm-cls-tiny", "minilm-tok-tiny"):
        onnx = os.path.join(FIXTURES, f"{fixture}-torch-export.onnx")
        ref = json.load(open(os.path.join(FIXTURES, f"{fixture}-torch-export.json")))
        work = os.path.join(WORK, fixture)
        os.makedirs(work, exist_ok=True)
        b = ref["batch"]
        ids, labels = np.array(ref["tokens"]), np.array(ref["labels"])
        theirs = ort_logits(python, onnx, ids[:b], os.path.join(work, "ort.npy"))
        flags = ["--batch", str(b)]
        mine = weft_logits(onnx, ids[:b], work, "f32", 1, *flags)
        err = float(np.abs(mine - theirs).max()) / float(np.abs(theirs).max())
        if mine.shape != theirs.shape or not err <= 1e-5:
            sys.exit(f"FAIL: {fixture}: scores {mine.shape} differ from onnxruntime's "
                     f"{theirs.shape} by {err:.1e} of their largest")
        print(f"{fixture} f32: scores {list(mine.shape)} = onnxruntime's (max error "
              f"{err:.1e} of max |value|)")
        # The loss on the labels, -100 ignored (PyTorch's CrossEntropyLoss).
        z = theirs.astype(np.float64).reshape(-1, theirs.shape[-1])
        t = labels[:b].reshape(-1)
        z = z - z.max(axis=1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
        keep = t != -100
        want = float(-logp[np.arange(len(z))[keep], t[keep]].mean())
        tok, lab = os.path.join(work, "tok.npy"), os.path.join(work, "lab.npy")
        np.save(tok, ids)
        np.save(lab, labels)
        step_one(onnx, ["--tokens", tok, "--targets", lab], work,
                 ["--loss", "cross-entropy", "--classes", str(theirs.shape[-1]), *flags],
                 want, fixture, "scores on the labels")
        layouts_like_one_rank(onnx, ids[:b], work, flags, ["dp=2", "tp=2"], fixture,
                              "scores")


def main():
    python = ort_python()
    for fixture, (flags, layouts) in MODELS.items():
        check(python, fixture, flags, layouts)
    classifiers(python)
    masked_lm(python)
    print("PASS: weft's logits and losses are onnxruntime's; forward-only layouts = one rank")


main()
