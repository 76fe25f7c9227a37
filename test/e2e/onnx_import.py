"""weft-compile model.onnx: torch-exported GPT-2 and Llama train as PyTorch
says, as the builtin frontend builds them, and like one rank on every
layout.

  onnx_import.py BINDIR TOKENS WORKDIR

The models are torch.onnx.export files of Hugging Face models (fixtures/,
with the scripts that made them): GPT-2 in gpt-tiny's shape (tied head),
Llama with grouped-query attention (4 heads, 2 key/value heads), RoPE and a
SwiGLU MLP, untied and tied, and Qwen2 (Llama with q/k/v biases). weft imports each graph, folds the mask,
position and rotary-table arithmetic, and weft-raise-onnx rewrites it into
weft's ops. For each model:
  1. f32: the first loss on the fixture's tokens equals PyTorch's
     cross-entropy of the same model (1e-5 relative);
  2. the import is the model weft's own frontend builds for the same
     config: the programs' actions are the same kernels on the same buffers
     (weft-run --dump; a residual add's operands may come in the other
     order), and three f64 steps from the model's weights agree (1e-9);
  3. f64: data, tensor (Megatron), sequence parallelism, ZeRO-3, a 1F1B
     pipeline (GPT-2: its tied table crosses the stages) and a
     layout file a user writes (globs over the initializers' names) train
     like the imported program on one rank (1e-9 relative).
Variants of the same models' exports (eager attention for GPT-2 and Llama,
linear RoPE scaling) give PyTorch's loss too. And GPT-2 exported with
dynamic batch and seq (its weights shared with the
static export's): bound by --batch 3 --seq 8 it gives PyTorch's loss there;
bound by --batch 4 --seq 32, dp=2 trains like one rank.
"""
import json
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_util import launch, run  # noqa: E402

BIN, TOKENS, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
os.makedirs(WORK, exist_ok=True)

LLAMA = {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128,
         "vocab_size": 256, "max_position_embeddings": 128, "rope_theta": 10000.0,
         "rms_norm_eps": 1e-05, "hidden_act": "silu"}
# fixture -> (the builtin frontend's model of the same config, layouts run)
QWEN2 = {"model_type": "qwen2", "hidden_size": 64, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128,
         "vocab_size": 256, "max_position_embeddings": 128, "rope_theta": 10000.0,
         "rms_norm_eps": 1e-06, "tie_word_embeddings": False, "use_sliding_window": False,
         "hidden_act": "silu"}
MODELS = {
    "gpt-tiny": ("gpt-tiny", ["dp=2", "tp=2", "tp=2 sp", "dp=2 zero3", "pp=2 1f1b"]),
    "llama-tiny": (dict(LLAMA, tie_word_embeddings=False),
                   ["tp=2", "dp=2 zero3", "tp=2 user json"]),
    "llama-tied": (dict(LLAMA, tie_word_embeddings=True), ["tp=2 sp"]),
    # Qwen2: q/k/v biases (MatMul then Add of the bias), split with the
    # weights under tp.
    "qwen2-tiny": (QWEN2, ["tp=2"]),
}
LAYOUTS = {
    "dp=2": ["--mesh", "dp=2"],
    "tp=2": ["--mesh", "tp=2", "--layout", "megatron"],
    "tp=2 sp": ["--mesh", "tp=2", "--layout", "megatron", "--sequence-parallel"],
    "dp=2 zero3": ["--mesh", "dp=2", "--zero", "3"],
    # A layout a user writes, by glob over the initializers' names: only
    # the MLP split over tp (gate and up by rows of out features, down by
    # its input features), attention replicated.
    # 1F1B over 2 stages and 2 micro-batches (one rank's reference runs
    # the same micro-batches).
    "pp=2 1f1b": ["--mesh", "pp=2", "--batch", "4", "--microbatches", "2"],
    # generic-tiny's MLP split over tp: its relu^2, sigmoid, tanh and
    # products run on the generic path on split activations.
    "tp=2 generic mlp": ["--mesh", "tp=2", "--layout", {"params": {
        "*.up.weight": [["tp"], []], "*.up.bias": [["tp"]],
        "*.gate.weight": [["tp"], []], "*.gate.bias": [["tp"]],
        "*.down.weight": [[], ["tp"]]}}],
    # generic-window-tiny's fused qkv split by rows (q, then half of k, on
    # rank 0) and proj by its input features: the attention's constants
    # meet split activations.
    "tp=2 generic qkv": ["--mesh", "tp=2", "--layout", {"params": {
        "*.qkv.weight": [["tp"], []], "*.qkv.bias": [["tp"]],
        "*.proj.weight": [[], ["tp"]]}}],
    "tp=2 user json": ["--mesh", "tp=2", "--layout", {"params": {
        "*.mlp.gate_proj.weight": [["tp"], []], "*.mlp.up_proj.weight": [["tp"], []],
        "*.mlp.down_proj.weight": [[], ["tp"]]}}],
}


def compile_(model, out, *flags):
    run([f"{BIN}/weft-compile", model, "-o", out, "--quiet", *flags])
    return out


def losses(prog, onnx, tokens, steps, ranks=1):
    metrics = prog + ".jsonl"
    run(launch(ranks) + [f"{BIN}/weft-run", prog, "--data", tokens, "--steps", str(steps),
                         "--threads", "1", "--load", onnx, "--metrics", metrics, "--quiet"])
    return [json.loads(line)["loss"] for line in open(metrics)]


def actions(prog):
    """The program's actions (weft-run --dump), an add's operands sorted."""
    out = []
    for line in run([f"{BIN}/weft-run", prog, "--dump"]).splitlines():
        if " in=[" not in line:
            continue
        fields = line.split()
        if fields[1] == "add":
            ins = fields[2][len("in=["):-1].split(",")
            fields[2] = "in=[" + ",".join(sorted(ins)) + "]"
        out.append(" ".join(fields))
    return out


def torch_loss(label, fixture, work, *flags):
    """weft's first loss (f32) on the fixture's tokens against PyTorch's
    (the fixture's .json), to 1e-5 relative."""
    onnx = os.path.join(FIXTURES, f"{fixture}.onnx")
    ref = json.load(open(os.path.join(FIXTURES, f"{fixture}.json")))
    toks = os.path.join(work, "ids.bin")
    np.array(ref["ids"], dtype="<u2").tofile(toks)
    got = losses(compile_(onnx, os.path.join(work, "f32.weft"), *flags), onnx, toks, 1)[0]
    rel = abs(got - ref["loss"]) / abs(ref["loss"])
    if rel > 1e-5:
        sys.exit(f"FAIL: {label}: first loss {got} != PyTorch's {ref['loss']} "
                 f"(relative {rel:.1e})")
    print(f"{label} f32: first loss {got:.6f}, PyTorch {ref['loss']:.6f} (relative {rel:.1e})")
    return ref


def max_rel(a, b):
    return max(abs(x - y) / abs(y) for x, y in zip(a, b))


def check(name, fixture, builtin, layouts):
    onnx = os.path.join(FIXTURES, f"{fixture}-torch-export.onnx")
    work = os.path.join(WORK, fixture)
    os.makedirs(work, exist_ok=True)
    if isinstance(builtin, dict):
        config = os.path.join(work, "config.json")
        json.dump(builtin, open(config, "w"))
        builtin = config
    # 1. PyTorch's loss.
    torch_loss(name, f"{fixture}-torch-export", work)

    # 2. The builtin frontend's model of the same config, same weights.
    same = actions(os.path.join(work, "f32.weft")) == actions(
        compile_(builtin, os.path.join(work, "preset32.weft"), "--batch", "2", "--seq", "16"))
    if not same:
        sys.exit(f"FAIL: {name}: the imported program's actions differ from the builtin's")
    print(f"{name}: the imported program runs the builtin's actions")
    one = compile_(onnx, os.path.join(work, "one.weft"), "--dtype", "f64")
    preset = compile_(builtin, os.path.join(work, "preset.weft"), "--dtype", "f64",
                      "--batch", "2", "--seq", "16")
    mine, theirs = losses(one, onnx, TOKENS, 3), losses(preset, onnx, TOKENS, 3)
    rel = max_rel(mine, theirs)
    if rel > 1e-9:
        sys.exit(f"FAIL: {name}: imported {mine} != builtin {theirs} (relative {rel:.1e})")
    print(f"{name} f64: imported and builtin agree over 3 steps (relative {rel:.1e})")

    # 3. Layouts against one rank.
    for i, layout in enumerate(layouts):
        flags = list(LAYOUTS[layout])
        for j, flag in enumerate(flags):
            if isinstance(flag, dict):  # a layout file
                flags[j] = os.path.join(work, f"layout{i}.json")
                json.dump(flag, open(flags[j], "w"))
        prog = compile_(onnx, os.path.join(work, f"layout{i}.weft"), "--dtype", "f64", *flags)
        got = losses(prog, onnx, TOKENS, 3, ranks=2)
        ref = mine
        if "--microbatches" in flags:  # one rank over the same micro-batches
            ref = losses(compile_(onnx, os.path.join(work, f"ref{i}.weft"), "--dtype", "f64",
                                  "--batch", "4", "--microbatches", "2"), onnx, TOKENS, 3)
        rel = max_rel(got, ref)
        if rel > 1e-9:
            sys.exit(f"FAIL: {name} {layout}: losses {got} != one rank's {ref} "
                     f"(relative {rel:.1e})")
        print(f"{name} {layout}: trains like one rank (relative {rel:.1e})")


def dynamic():
    """GPT-2 exported with dynamic batch and seq: weft binds them by flag."""
    onnx = os.path.join(FIXTURES, "gpt-tiny-dynamic-torch-export.onnx")
    work = os.path.join(WORK, "dynamic")
    os.makedirs(work, exist_ok=True)
    torch_loss("dynamic 3x8", "gpt-tiny-dynamic-torch-export", work, "--batch", "3", "--seq", "8")
    # Another binding, on dp=2 against one rank.
    shape = ["--batch", "4", "--seq", "32", "--dtype", "f64"]
    one = losses(compile_(onnx, os.path.join(work, "one.weft"), *shape), onnx, TOKENS, 3)
    dp = losses(compile_(onnx, os.path.join(work, "dp.weft"), *shape, "--mesh", "dp=2"),
                onnx, TOKENS, 3, ranks=2)
    rel = max_rel(dp, one)
    if rel > 1e-9:
        sys.exit(f"FAIL: dynamic 4x32 dp=2: losses {dp} != one rank's {one} (relative {rel:.1e})")
    print(f"dynamic 4x32 dp=2: trains like one rank (relative {rel:.1e})")


def variants():
    """Other forms the exporter writes for the same models (export_variants_
    onnx.py): eager attention (the scale after q k^T, no NaN guard) for
    GPT-2 and Llama, and Llama with linear RoPE scaling (inv_freq halved).
    Each gives PyTorch's loss."""
    for fixture in ("gpt2-eager", "llama-eager", "llama-rope-scaled"):
        work = os.path.join(WORK, fixture)
        os.makedirs(work, exist_ok=True)
        torch_loss(fixture, f"{fixture}-torch-export", work)


def generic(fixture="generic-tiny", want_ops=("reduce", "binary", "pointwise", "softmax",
                                            "attention", "matmul"), absent=(),
            layouts=("dp=2", "tp=2 generic mlp", "dp=2 zero3"), buffers=()):
    """A model no Hugging Face class builds (fixtures/export_generic_onnx.py):
    its written-out norms, relu^2-sigmoid MLP and softmax feature gate
    match no raise pattern and train on the generic path (weft.reduce,
    weft.binary, weft.pointwise, weft.softmax): the first loss is
    PyTorch's, and dp=2, tp=2 (the MLP split by a user's layout) and dp=2
    ZeRO-3 train like one rank. generic-window-tiny's attention (ALiBi
    bias, sliding window) is generic too: its bias and mask are constant
    buffers, the mask's Where a weft.select; its ALiBi slopes, registered
    buffers the export's signature names, are constants, not weights."""
    onnx = os.path.join(FIXTURES, f"{fixture}-torch-export.onnx")
    work = os.path.join(WORK, fixture)
    os.makedirs(work, exist_ok=True)
    mlir = subprocess.run([f"{BIN}/weft-compile", onnx, "--emit-mlir", "forward"],
                          capture_output=True, text=True, check=True).stdout
    ops = {op: mlir.count(f"weft.{op} ") for op in want_ops + absent}
    if not all(ops[op] for op in want_ops) or any(ops[op] for op in absent):
        sys.exit(f"FAIL: {fixture}: expected {want_ops} and no {absent}, got {ops}")
    print(f"{fixture}: ops " + ", ".join(f"{k} {v}" for k, v in ops.items()))
    want = torch_loss(fixture, f"{fixture}-torch-export", work)["loss"]
    if buffers:
        dump = run([f"{BIN}/weft-run", os.path.join(work, "f32.weft"), "--dump"])
        params = [line.split()[1] for line in dump.split("params:")[1].split(
            "arena_bytes:")[0].splitlines()[1:] if line.strip()]
        trained = [p for p in params if any(b in p for b in buffers)]
        if trained:
            sys.exit(f"FAIL: {fixture}: buffers trained as parameters: {trained}")
        print(f"{fixture}: {len(params)} parameters; buffers {', '.join(buffers)} "
              f"are constants, not weights")
    # bf16 storage (f32 compute) on the generic ops too: near PyTorch's f32.
    toks = os.path.join(work, "ids.bin")
    got = losses(compile_(onnx, os.path.join(work, "bf16.weft"), "--dtype", "bf16"),
                 onnx, toks, 1)[0]
    if not abs(got - want) <= 0.01 * abs(want):
        sys.exit(f"FAIL: {fixture} bf16: first loss {got} is not within 1% of {want}")
    print(f"{fixture} bf16: first loss {got:.4f}, PyTorch (f32) {want:.4f} "
          f"(relative {abs(got - want) / abs(want):.1e})")
    ref = losses(compile_(onnx, os.path.join(work, "ref.weft"), "--dtype", "f64"),
                 onnx, TOKENS, 3)
    for i, layout in enumerate(layouts):
        flags = list(LAYOUTS[layout])
        for j, flag in enumerate(flags):
            if isinstance(flag, dict):
                flags[j] = os.path.join(work, f"layout{i}.json")
                json.dump(flag, open(flags[j], "w"))
        got = losses(compile_(onnx, os.path.join(work, f"layout{i}.weft"), "--dtype", "f64",
                              *flags), onnx, TOKENS, 3, ranks=2)
        one = ref
        if "--microbatches" in flags:  # one rank over the same micro-batches
            one = losses(compile_(onnx, os.path.join(work, f"ref{i}.weft"), "--dtype", "f64",
                                  "--batch", "4", "--microbatches", "2"), onnx, TOKENS, 3)
        rel = max(abs(a - b) / abs(b) for a, b in zip(got, one))
        if not rel <= 1e-12:
            sys.exit(f"FAIL: {fixture} {layout}: losses {got} != one rank's {one} "
                     f"(relative {rel:.1e})")
        print(f"{fixture} {layout}: trains like one rank (relative {rel:.1e})")


def forward_only(prog, onnx, ids, ranks=1):
    """weft-run PROG --input ids --output out: the output array. MiniLM's
    file holds the pooler, which its first output does not read."""
    np.save(prog + ".ids.npy", ids.astype(np.int64))
    unused = ["--allow-unused-tensors"] if "minilm" in onnx else []
    run(launch(ranks) + [f"{BIN}/weft-run", prog, "--load", onnx, "--threads", "1",
                         "--input", prog + ".ids.npy", "--output", prog + ".out.npy",
                         "--quiet", *unused])
    return np.load(prog + ".out.npy")


def encoders():
    """DistilBERT (bidirectional attention, post-norm; sdpa and eager
    exports) and a MiniLM-shaped BERT (token-type row, pooler output
    unused): forward-only, their hidden states are PyTorch's; dp, tp, tp+SP
    and ZeRO-3 give one rank's (sdpa DistilBERT and MiniLM); next-token
    training on hidden states is refused."""
    for fixture in ("distilbert-tiny", "distilbert-eager", "minilm-tiny"):
        onnx = os.path.join(FIXTURES, f"{fixture}-torch-export.onnx")
        ref = json.load(open(os.path.join(FIXTURES, f"{fixture}-torch-export.json")))
        work = os.path.join(WORK, fixture)
        os.makedirs(work, exist_ok=True)
        ids = np.array(ref["ids"]).reshape(ref["batch"], ref["seq"])
        want = np.array(ref["hidden"]).reshape(ref["batch"], ref["seq"], -1)
        got = forward_only(compile_(onnx, os.path.join(work, "f32.weft"), "--forward-only"),
                           onnx, ids)
        err = float(np.abs(got - want).max() / np.abs(want).max())
        if not err <= 1e-5:
            sys.exit(f"FAIL: {fixture}: hidden states differ from PyTorch's by {err:.1e}")
        print(f"{fixture} f32: hidden states {list(got.shape)} = PyTorch's (error {err:.1e})")
        layouts_like_one_rank(fixture, onnx, ids, work)
        # Its output is hidden states, not logits (MiniLM's file has the
        # pooler's output too): no next-token training.
        r = subprocess.run([f"{BIN}/weft-compile", onnx, "-o",
                            os.path.join(work, "train.weft")], capture_output=True, text=True)
        why = "name the logits to train on with --onnx-output" if "minilm" in fixture \
            else "is not logits over the vocabulary"
        if r.returncode != 1 or why not in r.stderr:
            sys.exit(f"FAIL: training {fixture} was not refused as expected: {r.stderr}")
        print(f"{fixture}: next-token training refused")


def layouts_like_one_rank(fixture, onnx, ids, work):
    """Forward-only on dp=2, tp=2 (Megatron), tp=2 with SP and dp=2 ZeRO-3
    against one rank, f64."""
    one = forward_only(compile_(onnx, os.path.join(work, "one.weft"), "--forward-only",
                                "--dtype", "f64"), onnx, ids)
    for i, layout in enumerate(["dp=2", "tp=2", "tp=2 sp", "dp=2 zero3"]):
        prog = compile_(onnx, os.path.join(work, f"layout{i}.weft"), "--forward-only",
                        "--dtype", "f64", *LAYOUTS[layout])
        got = forward_only(prog, onnx, ids, ranks=2)
        err = float(np.abs(got - one).max() / np.abs(one).max())
        if not err <= 1e-12:
            sys.exit(f"FAIL: {fixture} {layout}: hidden states differ from one rank's ({err:.1e})")
        print(f"{fixture} {layout}: forward-only hidden states = one rank's (error {err:.1e})")


def main():
    for fixture, (builtin, layouts) in MODELS.items():
        check(fixture, fixture, builtin, layouts)
    variants()
    dynamic()
    generic()
    generic("generic-window-tiny", ("constant", "select", "batch_matmul", "softmax"),
            ("attention",), ("dp=2", "tp=2 generic mlp", "tp=2 generic qkv", "dp=2 zero3",
                             "pp=2 1f1b"), buffers=("h.0.slopes", "h.1.slopes"))
    encoders()
    print("PASS: imported ONNX models train as PyTorch, the builtin frontend and one rank")


main()
