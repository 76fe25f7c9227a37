"""A classifier's loss on its own output (weft-compile --loss cross-entropy on
given labels) is PyTorch's, exactly, on every layout.

  classifier.py BINDIR WORKDIR

1. fixtures/minilm-cls-tiny-torch-export.onnx (Hugging Face's
   BertForSequenceClassification: logits [batch, 3], one label per
   sample) trains on whole samples (weft-run --tokens [N, seq] --targets
   [N]): step 1's loss is PyTorch's own (model(labels=...).loss, one label
   -100, ignored) to 1e-6 relative in f32 and 1e-8 in f64 (the metrics' 9
   digits); analytic gradients agree with central differences
   (weft-run --grad-check, f64, on the labels and on random ones).
2. Over 3 AdamW steps in f64, dp=2, tp=2 (Megatron over BERT's names),
   tp=2 with sequence parallelism, dp=2 with ZeRO-3, 2 micro-batches and
   two pipeline stages (1F1B) train like one rank.
3. fixtures/minilm-tok-tiny-torch-export.onnx (BertForTokenClassification:
   logits [batch, seq, 5], 5 classes where the vocabulary has 256) trains
   with PyTorch's loss, and like one rank on dp=2 and tp=2.
4. Refused by name: labels of the wrong shape or outside the classes, a
   token file for a classifier, a classifier's output without --loss
   cross-entropy (next-token or masked-LM training), and one whose classes
   are not stated (--classes) or are stated wrong: an output that is not
   logits over the vocabulary trains as a classifier only when the user
   says it is one (hidden states of a model without its LM head are not).
"""
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from e2e_util import expect_close, launch, run  # noqa: E402

BIN, WORK = sys.argv[1], sys.argv[2]
os.makedirs(WORK, exist_ok=True)
FIXTURES = os.path.join(HERE, "fixtures")
CLASSES = {"minilm-cls": "3", "minilm-tok": "5"}


def given(name):
    """--loss cross-entropy on the classifier's stated classes."""
    return ["--loss", "cross-entropy", "--classes", CLASSES[name]]


def compile_(model, name, *flags):
    out = os.path.join(WORK, name + ".weft")
    run([f"{BIN}/weft-compile", model, "-o", out, "--quiet", *flags])
    return out


def losses(prog, model, tokens, labels, steps, ranks=1):
    metrics = prog + ".jsonl"
    if os.path.exists(metrics):
        os.remove(metrics)
    run(launch(ranks) + [f"{BIN}/weft-run", prog, "--tokens", tokens, "--targets", labels,
                         "--steps", str(steps), "--threads", "1", "--metrics", metrics,
                         "--quiet", "--load", model])
    return [json.loads(line)["loss"] for line in open(metrics)]


def max_rel(a, b):
    return max(abs(x - y) / abs(y) for x, y in zip(a, b))


def fixture(stem):
    """(onnx path, reference json, tokens.npy, labels.npy)."""
    ref = json.load(open(os.path.join(FIXTURES, stem + ".json")))
    tok, lab = os.path.join(WORK, stem + "-tok.npy"), os.path.join(WORK, stem + "-lab.npy")
    np.save(tok, np.array(ref["tokens"], dtype=np.int64))
    np.save(lab, np.array(ref["labels"], dtype=np.int64))
    return os.path.join(FIXTURES, stem + ".onnx"), ref, tok, lab


def torch_loss(name, model, ref, tok, lab):
    for dtype, tol in (("f32", 1e-6), ("f64", 1e-8)):
        prog = compile_(model, f"{name}-{dtype}", *given(name), "--dtype", dtype, "--batch", "2")
        got = losses(prog, model, tok, lab, 1)[0]
        want = ref["loss"]["float32" if dtype == "f32" else "float64"]
        expect_close(f"{name} {dtype}: step-1 loss", got, want, tol, "PyTorch's")


def layouts(name, model, tok, lab, cases, batch=2):
    """Each case trains as one rank does on the same --batch."""
    rows = ["--batch", str(batch)]
    one = losses(compile_(model, f"{name}-one", *given(name), "--dtype", "f64", *rows),
                 model, tok, lab, 3)
    for case, flags, ranks in cases:
        prog = compile_(model, f"{name}-layout", *given(name), "--dtype", "f64", *rows,
                        *flags)
        got = losses(prog, model, tok, lab, 3, ranks)
        rel = max_rel(got, one)
        if not rel <= 1e-12:
            sys.exit(f"FAIL: {name} {case}: losses {got} != one rank's {one}")
        print(f"{name} {case}: trains like one rank (relative {rel:.1e})")


def refused(args, what):
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 1:
        sys.exit(f"FAIL: {what} exited {r.returncode}: {r.stderr}")
    print("refused:", r.stderr.strip().splitlines()[-1].replace(WORK + "/", ""))


def main():
    # 1. A sequence classifier: PyTorch's loss, and the gradient.
    model, ref, tok, lab = fixture("minilm-cls-tiny-torch-export")
    torch_loss("minilm-cls", model, ref, tok, lab)
    f64 = os.path.join(WORK, "minilm-cls-f64.weft")
    dump = run([f"{BIN}/weft-run", f64, "--dump"])
    if "classes 3" not in dump or "one per sample" not in dump:
        sys.exit(f"FAIL: minilm-cls: the program does not read one label per sample:\n"
                 f"{dump[:1500]}")
    for extra in (["--tokens", tok, "--targets", lab], []):
        out = run([f"{BIN}/weft-run", f64, "--grad-check", "6", "--load", model, *extra])
        if "grad-check: passed" not in out:
            sys.exit(f"FAIL: minilm-cls grad-check {extra}:\n{out[-2000:]}")
    print("minilm-cls f64: gradients = central differences (given and random labels)")

    # 2. Layouts.
    layouts("minilm-cls", model, tok, lab, (
        ("dp=2", ["--mesh", "dp=2"], 2),
        ("tp=2", ["--mesh", "tp=2", "--layout", "megatron"], 2),
        ("tp=2 sp", ["--mesh", "tp=2", "--layout", "megatron", "--sequence-parallel"], 2),
        ("dp=2 zero3", ["--mesh", "dp=2", "--zero", "3"], 2)))
    # A step of 4 samples in 2 micro-batches (the step's counted labels
    # divide each micro-batch's sum), and on two pipeline stages.
    layouts("minilm-cls", model, tok, lab, (
        ("2 micro-batches", ["--microbatches", "2"], 1),
        ("pp=2 1f1b", ["--mesh", "pp=2", "--microbatches", "2"], 2)), batch=4)

    # 3. A token classifier: 5 classes, not the vocabulary.
    tmodel, tref, ttok, tlab = fixture("minilm-tok-tiny-torch-export")
    torch_loss("minilm-tok", tmodel, tref, ttok, tlab)
    layouts("minilm-tok", tmodel, ttok, tlab, (
        ("dp=2", ["--mesh", "dp=2"], 2),
        ("tp=2", ["--mesh", "tp=2", "--layout", "megatron"], 2)))

    # 4. Refusals.
    bad = np.array(ref["labels"])
    bad[4] = 3
    np.save(os.path.join(WORK, "bad.npy"), bad)
    data = os.path.join(WORK, "ids.bin")
    np.arange(200, dtype="<u2").tofile(data)
    run_ = [f"{BIN}/weft-run", f64, "--load", model, "--steps", "1"]
    refused(run_ + ["--tokens", tok, "--targets", tlab], "per-token labels")
    refused(run_ + ["--tokens", tok, "--targets", os.path.join(WORK, "bad.npy")], "label 3")
    refused(run_ + ["--data", data], "a token file")
    for flags in ([], ["--loss", "masked-lm", "--mask-token", "4"],
                  ["--loss", "cross-entropy"], ["--loss", "cross-entropy", "--classes", "4"]):
        refused([f"{BIN}/weft-compile", model, "-o", os.path.join(WORK, "x.weft"), "--batch",
                 "2", *flags],
                f"weft-compile {flags}")
    refused([f"{BIN}/weft-compile", tmodel, "-o", os.path.join(WORK, "x.weft"), "--batch", "2"],
            "next-token on a token classifier")
    print("PASS: a classifier's loss is PyTorch's and trains like one rank")


if __name__ == "__main__":
    main()
