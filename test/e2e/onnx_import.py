"""weft-compile model.onnx: a torch-exported GPT-2 trains as PyTorch says,
as the builtin preset does, and like one rank on every layout.

  onnx_import.py BINDIR TOKENS WORKDIR

The model is fixtures/gpt-tiny-torch-export.onnx (torch.onnx.export of
Hugging Face's GPT2LMHeadModel in gpt-tiny's shape; see
fixtures/export_gpt_tiny_onnx.py). weft imports its graph, folds the mask
and position arithmetic, and weft-raise-onnx rewrites it into weft's ops.
  1. f32: the first loss on the fixture's tokens equals PyTorch's
     cross-entropy of the same model (1e-5 relative).
  2. f64: three steps of the imported program and of the builtin gpt-tiny
     preset, both from the model's weights, agree (1e-9 relative): the
     import is the model the preset builds.
  3. f64: dp=2, tp=2 (Megatron), tp=2 with sequence parallelism, and
     dp=2 with ZeRO-3 train like the imported program on one rank.
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_util import launch, run  # noqa: E402

BIN, TOKENS, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
MODEL = os.path.join(FIXTURES, "gpt-tiny-torch-export.onnx")
os.makedirs(WORK, exist_ok=True)


def compile_(model, out, *flags):
    run([f"{BIN}/weft-compile", model, "-o", out, "--quiet", *flags])
    return out


def losses(prog, tokens, steps, ranks=1, name="m"):
    metrics = os.path.join(WORK, f"{name}.jsonl")
    run(launch(ranks) + [f"{BIN}/weft-run", prog, "--data", tokens, "--steps", str(steps),
                         "--threads", "1", "--load", MODEL, "--metrics", metrics, "--quiet"])
    return [json.loads(line)["loss"] for line in open(metrics)]


def max_rel(a, b):
    return max(abs(x - y) / abs(y) for x, y in zip(a, b))


def main():
    # 1. PyTorch's loss.
    ref = json.load(open(os.path.join(FIXTURES, "gpt-tiny-torch-export.json")))
    toks = os.path.join(WORK, "ids.bin")
    np.array(ref["ids"], dtype="<u2").tofile(toks)
    f32 = compile_(MODEL, os.path.join(WORK, "f32.weft"))
    got = losses(f32, toks, 1, name="f32")[0]
    rel = abs(got - ref["loss"]) / abs(ref["loss"])
    if rel > 1e-5:
        sys.exit(f"FAIL: the imported model's first loss {got} != PyTorch's {ref['loss']} "
                 f"(relative {rel:.1e})")
    print(f"f32: first loss {got:.6f}, PyTorch {ref['loss']:.6f} (relative {rel:.1e})")

    # 2. The builtin preset of the same shape, from the same weights.
    one = compile_(MODEL, os.path.join(WORK, "one.weft"), "--dtype", "f64")
    preset = compile_("gpt-tiny", os.path.join(WORK, "preset.weft"), "--dtype", "f64",
                      "--batch", "2", "--seq", "16")
    mine, theirs = losses(one, TOKENS, 3, name="one"), losses(preset, TOKENS, 3, name="preset")
    rel = max_rel(mine, theirs)
    if rel > 1e-9:
        sys.exit(f"FAIL: imported {mine} != builtin gpt-tiny {theirs} (relative {rel:.1e})")
    print(f"f64: imported and builtin gpt-tiny agree over 3 steps (relative {rel:.1e})")

    # 3. Layouts against one rank.
    layouts = {
        "dp=2": ["--mesh", "dp=2"],
        "tp=2": ["--mesh", "tp=2", "--layout", "megatron"],
        "tp=2 sp": ["--mesh", "tp=2", "--layout", "megatron", "--sequence-parallel"],
        "dp=2 zero3": ["--mesh", "dp=2", "--zero", "3"],
    }
    for i, (name, flags) in enumerate(layouts.items()):
        prog = compile_(MODEL, os.path.join(WORK, f"layout{i}.weft"), "--dtype", "f64", *flags)
        got = losses(prog, TOKENS, 3, ranks=2, name=f"layout{i}")
        rel = max_rel(got, mine)
        if rel > 1e-9:
            sys.exit(f"FAIL: {name}: losses {got} != one rank's {mine} (relative {rel:.1e})")
        print(f"{name}: trains like one rank (relative {rel:.1e})")
    print("PASS: an imported ONNX GPT-2 trains as PyTorch, the preset and one rank")


main()
