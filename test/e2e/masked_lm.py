"""Masked-language-model training (weft-compile --loss masked-lm) is BERT's
loss, exactly, on every layout.

  masked_lm.py BINDIR WORKDIR

1. fixtures/minilm-mlm-tiny-torch-export.onnx (Hugging Face's
   BertForMaskedLM, its decoder tied to the word embeddings) trains with
   weft-run's masked batches: step 1's loss is PyTorch's own
   BertForMaskedLM loss on the same batch (masked_lm_batch.py builds it as
   weft-run does; the fixture script stored PyTorch's loss), to 1e-6
   relative in f32 and 1e-8 in f64 (the metrics' 9 digits); analytic gradients agree with central
   differences (weft-run --grad-check, f64).
2. The same model exported at opset 12 by the TorchScript exporter (axes
   as attributes, every LayerNorm written out, which the raise recognises)
   gives PyTorch's loss, compiles to the dynamo export's program action for
   action, and trains as it does (one rank, tp=2).
   Whole samples given as .npy (weft-run --tokens/--targets: the same
   batches, built by masked_lm_batch.py) train as the token file does, on
   one rank and dp=2; malformed ones are refused by name.
   Over 3 AdamW steps in f64, dp=2, tp=2 (Megatron over BERT's names), tp=2
   with sequence parallelism and dp=2 with ZeRO-3 train like one rank
   (losses equal to the printed 9 digits).
3. The builtin gpt-tiny with a masked-LM loss (a vocab-split head on tp=2:
   the vocab-parallel cross-entropy skips ignored rows in its statistics)
   trains like one rank on tp=2, tp=2 with sequence parallelism, with 2
   micro-batches (the step's count of hidden tokens divides every
   micro-batch's sum) and on two pipeline stages (1F1B).
4. --loss cross-entropy (targets given, -100 ignored): the BERT export on
   the recipe's batches trains as the masked-lm program (one rank, tp=2);
   gpt-tiny on the next tokens trains as next-token, and with -100 on each
   row's first half (a fine-tuning prompt) like one rank on dp=2 and tp=2.
"""
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from e2e_util import launch, run  # noqa: E402
from masked_lm_batch import masked_batch  # noqa: E402

BIN, WORK = sys.argv[1], sys.argv[2]
os.makedirs(WORK, exist_ok=True)
FIXTURE = os.path.join(HERE, "fixtures", "minilm-mlm-tiny-torch-export")
ONNX = FIXTURE + ".onnx"
REF = json.load(open(FIXTURE + ".json"))
MASK = ["--loss", "masked-lm", "--mask-token", str(REF["mask_token"])]


def compile_(model, name, *flags):
    out = os.path.join(WORK, name + ".weft")
    run([f"{BIN}/weft-compile", model, "-o", out, "--quiet", *flags])
    return out


def losses(prog, data, steps, ranks=1, load=ONNX):
    metrics = prog + ".jsonl"
    if os.path.exists(metrics):
        os.remove(metrics)
    extra = ["--load", load] if load else []
    run(launch(ranks) + [f"{BIN}/weft-run", prog, "--data", data, "--steps", str(steps),
                         "--threads", "1", "--metrics", metrics, "--quiet", *extra])
    return [json.loads(line)["loss"] for line in open(metrics)]


def samples_losses(prog, tokens, targets, steps, ranks=1, load=ONNX):
    metrics = prog + ".jsonl"
    if os.path.exists(metrics):
        os.remove(metrics)
    extra = ["--load", load] if load else []
    run(launch(ranks) + [f"{BIN}/weft-run", prog, "--tokens", tokens, "--targets", targets,
                         "--steps", str(steps), "--threads", "1", "--metrics", metrics,
                         "--quiet", *extra])
    return [json.loads(line)["loss"] for line in open(metrics)]


def actions(prog):
    """The program's instruction kinds in order (weft-run --dump)."""
    dump = run([f"{BIN}/weft-run", prog, "--dump"]).split("\ninstructions:")[1]
    return [line.split()[1] for line in dump.splitlines()
            if line[:1] == " " and line.split()[0].isdigit()]


def max_rel(a, b):
    return max(abs(x - y) / abs(y) for x, y in zip(a, b))


def main():
    data = os.path.join(WORK, "ids.bin")
    np.array(REF["ids"], dtype="<u2").tofile(data)

    # 1. PyTorch's loss, and the gradient.
    # weft-run's metrics print 9 significant digits.
    for dtype, tol in (("f32", 1e-6), ("f64", 1e-8)):
        got = losses(compile_(ONNX, "bert-" + dtype, *MASK, "--dtype", dtype), data, 1)[0]
        want = REF["loss"]["float32" if dtype == "f32" else "float64"]
        rel = abs(got - want) / abs(want)
        if not rel <= tol:
            sys.exit(f"FAIL: minilm-mlm {dtype}: step-1 loss {got} != PyTorch's "
                     f"BertForMaskedLM loss {want} (relative {rel:.1e})")
        print(f"minilm-mlm {dtype}: step-1 loss {got:.8f} = PyTorch's {want:.8f} "
              f"({REF['masked']} of {REF['batch'] * REF['seq']} tokens hidden; "
              f"relative {rel:.1e})")
    out = run([f"{BIN}/weft-run", os.path.join(WORK, "bert-f64.weft"), "--data", data,
               "--grad-check", "6", "--load", ONNX])
    if "grad-check: passed" not in out:
        sys.exit(f"FAIL: minilm-mlm grad-check:\n{out[-2000:]}")
    print("minilm-mlm f64: gradients = central differences")

    # 2. Layouts of the encoder.
    one = losses(os.path.join(WORK, "bert-f64.weft"), data, 3)
    for name, flags in (("dp=2", ["--mesh", "dp=2"]),
                        ("tp=2", ["--mesh", "tp=2", "--layout", "megatron"]),
                        ("tp=2 sp", ["--mesh", "tp=2", "--layout", "megatron",
                                     "--sequence-parallel"]),
                        ("dp=2 zero3", ["--mesh", "dp=2", "--zero", "3"])):
        got = losses(compile_(ONNX, "bert-layout", *MASK, "--dtype", "f64", *flags), data, 3, 2)
        rel = max_rel(got, one)
        if not rel <= 1e-12:
            sys.exit(f"FAIL: minilm-mlm {name}: losses {got} != one rank's {one}")
        print(f"minilm-mlm {name}: trains like one rank (relative {rel:.1e})")

    # 2b. Whole samples (weft-run --tokens/--targets): the recipe's batches,
    # built here by masked_lm_batch.py, train as the token file does, on
    # one rank and on dp=2.
    rows = [masked_batch(REF["ids"], k, REF["batch"], REF["seq"], REF["mask_token"], 256)
            for k in range(3)]
    tok, tgt = os.path.join(WORK, "tok.npy"), os.path.join(WORK, "tgt.npy")
    np.save(tok, np.concatenate([r[0] for r in rows]))
    np.save(tgt, np.concatenate([r[1] for r in rows]).astype(np.int32))
    for name, flags, ranks in (("one rank", [], 1), ("dp=2", ["--mesh", "dp=2"], 2)):
        prog = compile_(ONNX, "bert-samples", *MASK, "--dtype", "f64", *flags)
        got = samples_losses(prog, tok, tgt, 3, ranks)
        if max_rel(got, one) > 1e-12:
            sys.exit(f"FAIL: minilm-mlm --tokens/--targets {name}: {got} != {one}")
        print(f"minilm-mlm --tokens/--targets {name}: trains as the token file does")
    # --loss cross-entropy: the same batches, given, train as the recipe's
    # program (one rank, tp=2); a token file is refused for it.
    for name, flags, ranks in (("one rank", [], 1),
                               ("tp=2", ["--mesh", "tp=2", "--layout", "megatron"], 2)):
        prog = compile_(ONNX, "bert-given", "--loss", "cross-entropy", "--dtype", "f64", *flags)
        got = samples_losses(prog, tok, tgt, 3, ranks)
        if max_rel(got, one) > 1e-12:
            sys.exit(f"FAIL: minilm-mlm --loss cross-entropy {name}: {got} != {one}")
        print(f"minilm-mlm --loss cross-entropy {name}: trains as the masked-lm program does")
    bad = np.load(tgt)
    bad[1, 3] = -5
    np.save(os.path.join(WORK, "bad.npy"), bad)
    for args in (["--tokens", tok], ["--tokens", tok, "--targets", os.path.join(WORK, "bad.npy")],
                 ["--tokens", tgt, "--targets", tgt],
                 ["--tokens", tok, "--targets", tgt, "--data", data]):
        r = subprocess.run([f"{BIN}/weft-run", os.path.join(WORK, "bert-f64.weft"), "--load",
                            ONNX, "--steps", "1", *args], capture_output=True, text=True)
        if r.returncode != 1:
            sys.exit(f"FAIL: weft-run {args} exited {r.returncode}: {r.stderr}")
        print("refused:", r.stderr.strip().splitlines()[-1].replace(WORK + "/", ""))

    # 2c. The same model exported at opset 12 by the TorchScript exporter
    # (axes as attributes, LayerNorm written out): PyTorch's loss, the
    # dynamo export's program action for action (parameter names aside),
    # and its losses over 3 steps, on one rank and tp=2.
    old = os.path.join(HERE, "fixtures", "minilm-mlm-opset12-torch-export.onnx")
    want = json.load(open(old[:-5] + ".json"))["loss"]["float32"]
    got = losses(compile_(old, "bert12-f32", *MASK), data, 1, load=old)[0]
    if abs(got - want) / want > 1e-6:
        sys.exit(f"FAIL: minilm-mlm opset 12: step-1 loss {got} != PyTorch's {want}")
    print(f"minilm-mlm opset 12 f32: step-1 loss {got:.8f} = PyTorch's {want:.8f}")
    mine = actions(os.path.join(WORK, "bert12-f32.weft"))
    if len(mine) < 100 or mine != actions(os.path.join(WORK, "bert-f32.weft")):
        sys.exit("FAIL: minilm-mlm opset 12: its program differs from the dynamo export's")
    print("minilm-mlm opset 12: the dynamo export's program, action for action")
    for name, flags, ranks in (("one rank", [], 1),
                               ("tp=2", ["--mesh", "tp=2", "--layout", "megatron"], 2)):
        got = losses(compile_(old, "bert12", *MASK, "--dtype", "f64", *flags), data, 3, ranks,
                     load=old)
        if max_rel(got, one) > 1e-12:
            sys.exit(f"FAIL: minilm-mlm opset 12 {name}: {got} != the dynamo export's {one}")
        print(f"minilm-mlm opset 12 {name}: trains as the dynamo export does")

    # 3. A vocab-split head, and micro-batches.
    gpt = ["--loss", "masked-lm", "--mask-token", "1", "--mask-prob", "0.3",
           "--dtype", "f64", "--batch", "4", "--seq", "16"]
    one = losses(compile_("gpt-tiny", "gpt", *gpt), data, 3, load=None)
    for name, flags, ranks in (
            ("tp=2", ["--mesh", "tp=2", "--layout", "megatron"], 2),
            ("tp=2 sp", ["--mesh", "tp=2", "--layout", "megatron", "--sequence-parallel"], 2),
            ("2 micro-batches", ["--microbatches", "2"], 1),
            ("pp=2 1f1b", ["--mesh", "pp=2", "--microbatches", "2"], 2)):
        prog = compile_("gpt-tiny", "gpt-layout", *gpt, *flags)
        if name.startswith("tp") and \
                "cross_entropy_stats" not in run([f"{BIN}/weft-run", prog, "--dump"]):
            sys.exit(f"FAIL: gpt-tiny {name}: the head's vocab is not split")
        got = losses(prog, data, 3, ranks, load=None)
        rel = max_rel(got, one)
        if not rel <= 1e-12:
            sys.exit(f"FAIL: gpt-tiny masked-lm {name}: losses {got} != one rank's {one}")
        print(f"gpt-tiny masked-lm {name}: trains like one rank (relative {rel:.1e})")
    # 4. A decoder fine-tuned on given targets (--loss cross-entropy): the
    # next tokens as targets train as next-token from the token file; -100
    # on each row's first half (a prompt) trains like one rank on dp=2 and
    # on tp=2's vocab-split head.
    ce = ["--dtype", "f64", "--batch", "4", "--seq", "16"]
    ids = np.array(REF["ids"])
    n_rows = 3 * 4
    x = np.stack([ids[(r * 16 + np.arange(16)) % len(ids)] for r in range(n_rows)])
    y = np.stack([ids[(r * 16 + 1 + np.arange(16)) % len(ids)] for r in range(n_rows)])
    np.save(tok, x)
    np.save(tgt, y.astype(np.int32))
    want = losses(compile_("gpt-tiny", "gpt-next", *ce), data, 3, load=None)
    got = samples_losses(compile_("gpt-tiny", "gpt-ce", "--loss", "cross-entropy", *ce),
                         tok, tgt, 3, load=None)
    if max_rel(got, want) > 1e-12:
        sys.exit(f"FAIL: gpt-tiny --loss cross-entropy on next tokens: {got} != {want}")
    print("gpt-tiny --loss cross-entropy on the next tokens: trains as next-token does")
    y[:, :8] = -100
    np.save(tgt, y.astype(np.int32))
    r = subprocess.run([f"{BIN}/weft-run", os.path.join(WORK, "gpt-next.weft"), "--tokens", tok,
                        "--targets", tgt, "--steps", "1"], capture_output=True, text=True)
    if r.returncode != 1:
        sys.exit(f"FAIL: a next-token program took -100 targets: exit {r.returncode}")
    print("refused:", r.stderr.strip().splitlines()[-1].replace(WORK + "/", ""))
    one = samples_losses(os.path.join(WORK, "gpt-ce.weft"), tok, tgt, 3, load=None)
    for name, flags in (("dp=2", ["--mesh", "dp=2"]),
                        ("tp=2", ["--mesh", "tp=2", "--layout", "megatron"])):
        got = samples_losses(compile_("gpt-tiny", "gpt-ce-layout", "--loss", "cross-entropy",
                                      *ce, *flags), tok, tgt, 3, 2, load=None)
        if max_rel(got, one) > 1e-12:
            sys.exit(f"FAIL: gpt-tiny prompt-masked {name}: {got} != one rank's {one}")
        print(f"gpt-tiny --loss cross-entropy, prompts -100, {name}: trains like one rank")
    print("PASS: masked-LM training is BERT's loss and trains like one rank")


main()
