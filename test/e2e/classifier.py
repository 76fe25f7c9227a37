"""A classifier's loss on its own output (weft-compile --loss cross-entropy on
given labels) and a regression's (--loss mse on float targets) are
PyTorch's, exactly, on every layout.

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
5. fixtures/minilm-reg-tiny-torch-export.onnx (BertForSequenceClassification
   with num_labels=1: a regression head, [batch, 1], PyTorch's MSELoss)
   trains under --loss mse on float targets [N, 1]: PyTorch's loss (f32,
   f64), --grad-check, and like one rank on dp=2, tp=2, tp=2 with sequence
   parallelism, ZeRO-3, 2 micro-batches and two pipeline stages. The
   MiniLM encoder's hidden states [batch, seq, 64] (an output no head
   reads) regress on random targets: the step-1 loss is the mean squared
   error of its forward-only output, and tp=2 with sequence parallelism
   (its targets split along the rows only) and dp=2 train like one rank.
   Integer, misshapen and non-finite targets are refused by name.
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


def regression():
    """--loss mse: a regression head, and hidden states."""
    model = os.path.join(FIXTURES, "minilm-reg-tiny-torch-export.onnx")
    ref = json.load(open(os.path.join(FIXTURES, "minilm-reg-tiny-torch-export.json")))
    tok = os.path.join(WORK, "reg-tok.npy")
    np.save(tok, np.array(ref["tokens"], dtype=np.int64))
    y = np.array(ref["labels"], dtype=np.float64).reshape(-1, 1)
    lab = {"f32": os.path.join(WORK, "reg-y32.npy"), "f64": os.path.join(WORK, "reg-y64.npy")}
    np.save(lab["f32"], y.astype(np.float32))
    np.save(lab["f64"], y)
    mse = ["--loss", "mse"]
    for dtype, tol in (("f32", 1e-6), ("f64", 1e-8)):
        prog = compile_(model, f"reg-{dtype}", *mse, "--dtype", dtype, "--batch", "2")
        got = losses(prog, model, tok, lab[dtype], 1)[0]
        want = ref["loss"]["float32" if dtype == "f32" else "float64"]
        expect_close(f"minilm-reg {dtype}: step-1 loss", got, want, tol, "PyTorch's MSELoss")
    f64 = os.path.join(WORK, "reg-f64.weft")
    if "loss: mse on float targets [2,1]" not in run([f"{BIN}/weft-run", f64, "--dump"]):
        sys.exit("FAIL: minilm-reg: the program does not read float targets [2,1]")
    for extra in (["--tokens", tok, "--targets", lab["f64"]], []):
        out = run([f"{BIN}/weft-run", f64, "--grad-check", "6", "--load", model, *extra])
        if "grad-check: passed" not in out:
            sys.exit(f"FAIL: minilm-reg grad-check {extra}:\n{out[-2000:]}")
    print("minilm-reg f64: gradients = central differences (given and random targets)")
    cases = (("dp=2", ["--mesh", "dp=2"], 2),
             ("tp=2", ["--mesh", "tp=2", "--layout", "megatron"], 2),
             ("tp=2 sp", ["--mesh", "tp=2", "--layout", "megatron", "--sequence-parallel"], 2),
             ("dp=2 zero3", ["--mesh", "dp=2", "--zero", "3"], 2))
    steps = (("one", [], 2, cases),
             ("step of 4", [], 4, (("2 micro-batches", ["--microbatches", "2"], 1),
                                   ("pp=2 1f1b", ["--mesh", "pp=2", "--microbatches", "2"], 2))))
    for _, _, batch, group in steps:
        one = losses(compile_(model, "reg-one", *mse, "--dtype", "f64", "--batch", str(batch)),
                     model, tok, lab["f64"], 3)
        for case, flags, ranks in group:
            prog = compile_(model, "reg-layout", *mse, "--dtype", "f64", "--batch", str(batch),
                            *flags)
            got = losses(prog, model, tok, lab["f64"], 3, ranks)
            if not max_rel(got, one) <= 1e-12:
                sys.exit(f"FAIL: minilm-reg {case}: losses {got} != one rank's {one}")
            print(f"minilm-reg {case}: trains like one rank (relative {max_rel(got, one):.1e})")

    # Hidden states [2, 16, 64] against random targets: the step-1 loss is
    # the mean squared error of the forward-only output.
    enc = os.path.join(FIXTURES, "minilm-tiny-torch-export.onnx")
    eref = json.load(open(os.path.join(FIXTURES, "minilm-tiny-torch-export.json")))
    b, s = eref["batch"], eref["seq"]
    ids = np.array(eref["ids"][:b * s], dtype=np.int64).reshape(b, s)
    etok, ey = os.path.join(WORK, "enc-tok.npy"), os.path.join(WORK, "enc-y.npy")
    np.save(etok, ids)
    target = np.random.default_rng(4).standard_normal((b, s, 64))
    np.save(ey, target)
    out = ["--onnx-output", "layer_norm_4", "--dtype", "f64"]
    fwd = compile_(enc, "enc-fwd", "--forward-only", *out)
    np.save(os.path.join(WORK, "enc-ids.npy"), ids.astype(np.int32))
    run([f"{BIN}/weft-run", fwd, "--load", enc, "--allow-unused-tensors", "--input",
         os.path.join(WORK, "enc-ids.npy"), "--output", os.path.join(WORK, "enc-h.npy"),
         "--quiet"])
    want = float(((np.load(os.path.join(WORK, "enc-h.npy")) - target) ** 2).mean())
    unused = ["--allow-unused-tensors"]

    def enc_losses(prog, steps, ranks=1):
        metrics = prog + ".jsonl"
        if os.path.exists(metrics):
            os.remove(metrics)
        run(launch(ranks) + [f"{BIN}/weft-run", prog, "--tokens", etok, "--targets", ey,
                             "--steps", str(steps), "--threads", "1", "--metrics", metrics,
                             "--quiet", "--load", enc, *unused])
        return [json.loads(line)["loss"] for line in open(metrics)]
    one = enc_losses(compile_(enc, "enc-one", *mse, *out), 3)
    expect_close("minilm hidden states: step-1 loss", one[0], want, 1e-8,
                 "the forward-only output's mean squared error")
    for case, flags in (("tp=2 sp", ["--mesh", "tp=2", "--layout", "megatron",
                                     "--sequence-parallel"]),
                        ("dp=2", ["--mesh", "dp=2"])):
        got = enc_losses(compile_(enc, "enc-layout", *mse, *out, *flags), 3, 2)
        if not max_rel(got, one) <= 1e-12:
            sys.exit(f"FAIL: minilm hidden states {case}: losses {got} != one rank's {one}")
        print(f"minilm hidden states {case}: trains like one rank")

    # Refusals: integer targets, another shape, a NaN, and --loss mse on a
    # builtin model.
    bad = y.copy()
    bad[3, 0] = np.nan
    np.save(os.path.join(WORK, "reg-nan.npy"), bad)
    np.save(os.path.join(WORK, "reg-flat.npy"), y.reshape(-1))
    run_ = [f"{BIN}/weft-run", f64, "--load", model, "--steps", "1", "--tokens", tok]
    for name in ("cls-lab", "reg-flat", "reg-nan"):
        path = os.path.join(WORK, name + ".npy")
        if name == "cls-lab":
            np.save(path, np.array(ref["tokens"])[:, :1])  # ints [6, 1]
        refused(run_ + ["--targets", path], name)
    refused([f"{BIN}/weft-compile", "gpt-tiny", "--loss", "mse", "-o",
             os.path.join(WORK, "x.weft")], "--loss mse on a builtin model")


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
    # 5. Regression.
    regression()
    print("PASS: a classifier's and a regression's losses are PyTorch's and train like "
          "one rank")


if __name__ == "__main__":
    main()
