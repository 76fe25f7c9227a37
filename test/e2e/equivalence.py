#!/usr/bin/python3
"""The oracle for every parallel layout: an N-rank run trains exactly like the
1-rank run (docs/design.md decision 9).

For one model and each mesh below, compiles the 1-rank and the N-rank program
from the same flags, runs both under the same seed and data, and checks:
  - the loss at every step agrees to LOSS_TOL relative;
  - every gradient after step 1 (gathered to global tensors) to GRAD_TOL
    max-relative (max|a-b| / max|b|);
  - the final parameters (gathered by --save) to PARAM_TOL max-relative;
  - the bytes each rank sent per collective kind and axis equal the compiler's
    prediction (weft-compile --explain) exactly, every step, and (f32, f64,
    not pipelines) the textbook minimum per axis (textbook_comm.py).

In f32, Adam turns summation-order noise in near-zero gradients into
lr-sized parameter differences (the PyTorch reference sees the same between
torch-f32 and torch-f64: about 1e-3), so the parameter check runs on f64
programs (--dtype f64), where the layouts must agree to far better than 1e-4;
f32 programs are checked on losses and gradients, and their parameter error is
reported. bf16 programs (mixed precision) are checked the same way with
bf16's tolerances: their gradients are f32 but computed from bf16 activations.

With MICROBATCHES M > 1, every layout (and one rank) is compiled with
--microbatches M, and each must still train like the 1-rank program without
micro-batches: gradient accumulation changes the order of sums, not the
model.

With LAYOUTS=context, the meshes split every sequence over a cp axis
(CONTEXT: cp alone and beside dp, ZeRO-3, tp with sequence parallelism and
pp); LAYOUTS=context-a2a the same with --context-parallel all-to-all
(CONTEXT_A2A; a refusal for the heads counts as refused, not failed), and
LAYOUTS=context-ring with --context-parallel ring (CONTEXT_RING).
LAYOUTS=vocab-pad: Megatron layouts of a model whose vocabulary tp does not
divide (VOCAB_PAD: padded by weft-pad-vocab). With
LAYOUTS=pipeline, the meshes are pipeline layouts (PIPELINES: pp alone
and beside dp, tp, sequence parallelism and ZeRO 1-3, GPipe and 1F1B, with
activation recomputation;
LAYOUTS=pipeline4: four and three uneven stages; pipeline-interleaved:
interleaved 1F1B, pipeline-interleaved4: on four stages; pipeline-zb: ZB-H1); each is compiled with --microbatches MICROBATCHES (at least
the stage count) and checked the same way; rank 0 runs stage 0, whose
bytes (collectives, and transfers to other stages as send/pp) are checked
against the first stage --explain prints.

usage: equivalence.py BIN_DIR DATA WORKDIR MODEL DTYPE [STEPS [MICROBATCHES
                      [LAYOUTS]]]
"""
import json
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_util import launch, run  # noqa: E402
import textbook_comm  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "reference"))
import wref_np  # noqa: E402  (numpy-only safetensors reader)
import numpy as np  # noqa: E402

LOSS_TOL, GRAD_TOL, PARAM_TOL = 1e-4, 1e-5, 1e-4
# bf16 (mixed precision): a layout rounds activations where one rank does not
# (a tensor-parallel partial sum is rounded to bf16 before its all-reduce, a
# sequence shard's norm sees other rows), so layouts agree only to bf16's
# rounding: its 8-bit significand is ~4e-3 relative per rounding.
BF16_LOSS_TOL, BF16_GRAD_TOL = 2e-3, 5e-2

# (ranks, weft-compile flags): the meshes the sharding issue names.
MESHES = [
    (2, ["--mesh", "dp=2"]),
    (2, ["--mesh", "tp=2", "--layout", "megatron"]),
    (2, ["--mesh", "tp=2", "--layout", "megatron", "--sequence-parallel"]),
    (4, ["--mesh", "dp=2,tp=2", "--layout", "megatron"]),
    (2, ["--mesh", "dp=2", "--zero", "1"]),
    (2, ["--mesh", "dp=2", "--zero", "2"]),
    (2, ["--mesh", "dp=2", "--zero", "3"]),
    (4, ["--mesh", "dp=4", "--zero", "3"]),
    (4, ["--mesh", "dp=2,tp=2", "--layout", "megatron", "--zero", "3",
         "--sequence-parallel"]),
    # ZeRO buckets: a layer's parameters by one all-gather (blocked unpack),
    # gradients by one reduce-scatter per bucket (blocked pack).
    (2, ["--mesh", "dp=2", "--zero", "3", "--zero-bucket-mb", "1"]),
]


# A vocabulary tp does not divide (251): Megatron's layout pads it
# (weft-pad-vocab) to 252, the padding outside the loss and the
# checkpoints, alone and beside dp with ZeRO-1 and -3 and sequence
# parallelism. ZeRO on data parallelism alone pads it for dp, so its
# tables' state splits over dp too.
VOCAB_PAD = [
    (2, ["--mesh", "tp=2", "--layout", "megatron"]),
    (4, ["--mesh", "tp=4", "--layout", "megatron"]),
    (4, ["--mesh", "dp=2,tp=2", "--layout", "megatron", "--zero", "1",
         "--sequence-parallel"]),
    (4, ["--mesh", "dp=2,tp=2", "--layout", "megatron", "--zero", "3",
         "--sequence-parallel"]),
    (2, ["--mesh", "dp=2", "--zero", "1"]),
    (4, ["--mesh", "dp=4", "--zero", "3"]),
]


# Pipeline layouts (2 to 4 ranks): the model needs a layer per stage.
PIPELINES = [
    (2, ["--mesh", "pp=2", "--pipeline-schedule", "gpipe"]),
    (2, ["--mesh", "pp=2"]),
    (4, ["--mesh", "pp=2,dp=2"]),
    (4, ["--mesh", "pp=2,tp=2", "--layout", "megatron",
         "--sequence-parallel"]),
    (4, ["--mesh", "pp=2,dp=2", "--zero", "1"]),
    (4, ["--mesh", "pp=2,dp=2", "--zero", "2"]),
    (4, ["--mesh", "pp=2,dp=2", "--zero", "3"]),
    (4, ["--mesh", "dp=2,pp=2"]),
    (4, ["--mesh", "pp=2,dp=2", "--recompute", "full"]),
    (4, ["--mesh", "pp=2,tp=2", "--layout", "megatron", "--sequence-parallel",
         "--recompute", "selective"]),
    (2, ["--mesh", "pp=2", "--pipeline-schedule", "gpipe", "--recompute",
         "full"]),
    (2, ["--mesh", "pp=2", "--recompute", "full"]),
    (4, ["--mesh", "pp=2,tp=2", "--layout", "megatron", "--sequence-parallel",
         "--recompute", "full"]),
    (4, ["--mesh", "pp=2,dp=2", "--zero", "1", "--recompute", "full"]),
]
# Four stages, the middle one uneven: for models of four layers.
PIPELINES4 = [
    (4, ["--mesh", "pp=4"]),
    (4, ["--mesh", "pp=4", "--recompute", "full"]),
    (3, ["--mesh", "pp=3", "--stages", "0,1-2,3", "--pipeline-schedule",
         "gpipe"]),
    (3, ["--mesh", "pp=3", "--stages", "0,1-2,3", "--recompute", "full"]),
]
# Interleaved 1F1B: two chunks per stage (a layer each on four layers).
INTERLEAVED = [
    (2, ["--mesh", "pp=2", "--pipeline-schedule", "interleaved",
         "--virtual-stages", "2"]),
    (2, ["--mesh", "pp=2", "--pipeline-schedule", "interleaved",
         "--virtual-stages", "2", "--recompute", "full"]),
    (4, ["--mesh", "pp=2,dp=2", "--pipeline-schedule", "interleaved",
         "--virtual-stages", "2", "--zero", "1"]),
    (4, ["--mesh", "pp=2,tp=2", "--layout", "megatron", "--sequence-parallel",
         "--pipeline-schedule", "interleaved", "--virtual-stages", "2"]),
]


# Interleaved on four stages (eight layers): a tied embedding's gradient
# from the head skips chunks, so it crosses once per step.
INTERLEAVED4 = [
    (4, ["--mesh", "pp=4", "--pipeline-schedule", "interleaved",
         "--virtual-stages", "2"]),
]


# Zero-bubble ZB-H1: backwards split into B and W (four layers for pp=4).
ZERO_BUBBLE = [
    (2, ["--mesh", "pp=2", "--pipeline-schedule", "zb-h1"]),
    (2, ["--mesh", "pp=2", "--pipeline-schedule", "zb-h1", "--recompute",
         "full"]),
    (4, ["--mesh", "pp=2,dp=2", "--pipeline-schedule", "zb-h1", "--zero",
         "1"]),
    (4, ["--mesh", "pp=2,tp=2", "--layout", "megatron", "--sequence-parallel",
         "--pipeline-schedule", "zb-h1"]),
    (4, ["--mesh", "pp=4", "--pipeline-schedule", "zb-h1"]),
]

# Context parallelism: every sample's sequence split over cp, alone and
# beside dp (with ZeRO-3), tp with sequence parallelism, and pp; cp=4; with
# full recomputation; load-balanced (head-tail chunks) and, with a layout
# file's "context_order": "natural", in contiguous blocks.
CONTEXT = [
    (2, ["--mesh", "cp=2"]),
    (4, ["--mesh", "cp=4"]),
    (4, ["--mesh", "dp=2,cp=2"]),
    (4, ["--mesh", "dp=2,cp=2", "--zero", "3"]),
    (4, ["--mesh", "cp=2,tp=2", "--layout", "megatron",
         "--sequence-parallel"]),
    (4, ["--mesh", "pp=2,cp=2"]),
    (2, ["--mesh", "cp=2", "--recompute", "full"]),
    # Contiguous blocks (no load balancing): rank i holds block i.
    (2, ["--mesh", "cp=2", "--layout",
         os.path.join(os.path.dirname(os.path.abspath(__file__)),
                      "context-natural.json")]),
]


# All-to-all context parallelism (Ulysses): the same layouts, cp moved from
# attention's sequence to its heads. Where the heads are not divisible by
# cp (times tp), weft-compile refuses by name; those count as refused.
CONTEXT_A2A = [(ranks, flags + ["--context-parallel", "all-to-all"])
               for ranks, flags in CONTEXT]
HEADS_REFUSAL = "all-to-all context parallelism splits the heads over cp="
# Ring attention: the same layouts, key and value blocks passed around the cp
# ranks and merged by an online softmax (exact to rounding).
CONTEXT_RING = [(ranks, flags + ["--context-parallel", "ring"])
                for ranks, flags in CONTEXT]


def predicted_comm(bin_dir, model, common, flags):
    out = run([f"{bin_dir}/weft-compile", model] + common + flags + ["--explain"])
    totals = {}
    in_totals = False
    for line in out.splitlines():
        if line.strip() == "totals:":  # a pipeline's first: stage 0's
            in_totals = True
            continue
        if in_totals:
            m = re.match(r"\s+(\S+)\s+(\d+) bytes/rank/step", line)
            if not m:
                break
            totals[m.group(1)] = int(m.group(2))
    return totals


def train(bin_dir, prog, ranks, data, work, steps, load=None):
    """Runs STEPS steps (metrics, final params) and 1 step (gradients),
    from the weights in `load` if given (a model.onnx's)."""
    base = launch(ranks) + [f"{bin_dir}/weft-run", prog, "--data", data, "--threads", "1",
                     "--quiet"] + (["--load", load] if load else [])
    run(base + ["--steps", str(steps), "--metrics", f"{work}/m.jsonl",
                "--save", f"{work}/final"])
    run(base + ["--steps", "1", "--save-grads", f"{work}/g1"])
    metrics = [json.loads(line) for line in open(f"{work}/m.jsonl")]
    params = wref_np.read_safetensors(f"{work}/final/model.safetensors")[0] \
        if os.path.exists(f"{work}/final/model.safetensors") else None
    grads = wref_np.read_safetensors(f"{work}/g1/grads.safetensors")[0]
    return metrics, params, grads


def load_params(work):
    """Global parameters from a (possibly sharded) checkpoint directory."""
    plain = f"{work}/final/model.safetensors"
    if os.path.exists(plain):
        return wref_np.read_safetensors(plain)[0]
    return None


def max_rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    scale = np.max(np.abs(b))
    return float(np.max(np.abs(a - b)) / scale) if scale > 0 else float(np.max(np.abs(a - b)))


def main():
    bin_dir, data, work, model, dtype = sys.argv[1:6]
    steps = int(sys.argv[6]) if len(sys.argv) > 6 else 20
    micro = int(sys.argv[7]) if len(sys.argv) > 7 else 1
    # Micro-batches of 4 rows: every mesh's dp divides them.
    common = ["--batch", str(4 * micro), "--seq", "16", "--lr", "3e-3",
              "--dtype", dtype]
    layouts = sys.argv[8] if len(sys.argv) > 8 else "spmd"
    meshes = MESHES
    if layouts.startswith("pipeline"):
        meshes = {"pipeline4": PIPELINES4, "pipeline-interleaved": INTERLEAVED,
                  "pipeline-interleaved4": INTERLEAVED4,
                  "pipeline-zb": ZERO_BUBBLE}.get(layouts, PIPELINES)
    elif layouts == "context":
        meshes = CONTEXT
    elif layouts == "context-a2a":
        meshes = CONTEXT_A2A
    elif layouts == "context-ring":
        meshes = CONTEXT_RING
    elif layouts == "vocab-pad":
        meshes = VOCAB_PAD
    elif micro > 1:
        # One rank, every layout, and ZeRO-3 regathering per micro-batch
        # (the default gathers once per step).
        meshes = [(1, [])] + MESHES + [
            (2, ["--mesh", "dp=2", "--zero", "3", "--zero3-gather",
                 "microbatch"]),
            # A norm weight's gradient partial over dp (ZeRO-1) and tp (SP).
            (4, ["--mesh", "dp=2,tp=2", "--layout", "megatron",
                 "--sequence-parallel", "--zero", "1"]),
            # ZeRO-2's bucketed reduce-scatters, once per micro-batch.
            (2, ["--mesh", "dp=2", "--zero", "2", "--zero-bucket-mb", "1"])]
    extra = ["--microbatches", str(micro)] if micro > 1 else []
    check_params = dtype == "f64"
    loss_tol, grad_tol = ((BF16_LOSS_TOL, BF16_GRAD_TOL) if dtype == "bf16"
                          else (LOSS_TOL, GRAD_TOL))
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(f"{work}/one")
    run([f"{bin_dir}/weft-compile", model] + common +
        ["-o", f"{work}/one/prog.weft", "--quiet"])
    ref_metrics, ref_params, ref_grads = train(
        bin_dir, f"{work}/one/prog.weft", 1, data, f"{work}/one", steps)
    failures = []
    refused = []
    for i, (ranks, flags) in enumerate(meshes):
        flags = flags + extra
        name = " ".join(flags)
        w = f"{work}/mesh{i}"
        os.makedirs(w)
        r = subprocess.run([f"{bin_dir}/weft-compile", model] + common + flags +
                           ["-o", f"{w}/prog.weft", "--quiet"],
                           capture_output=True, text=True)
        if r.returncode != 0 and layouts == "context-a2a" and \
                HEADS_REFUSAL in r.stderr:
            refused.append(name)
            print(f"refused {model} np={ranks} {name}: "
                  f"{r.stderr.strip().splitlines()[0]}")
            continue
        if r.returncode != 0:
            failures.append(f"{name}: does not compile: {r.stderr.strip()}")
            continue
        metrics, _, grads = train(bin_dir, f"{w}/prog.weft", ranks, data, w, steps)
        params = load_params(w)
        loss_err = max(abs(m["loss"] - r["loss"]) / abs(r["loss"])
                       for m, r in zip(metrics, ref_metrics))
        grad_err = max(max_rel(grads[k], ref_grads[k]) for k in ref_grads)
        if params is None:
            # A sharded checkpoint: load it back on one rank to gather it.
            run([f"{bin_dir}/weft-run", f"{work}/one/prog.weft", "--steps", "0",
                 "--load", f"{w}/final", "--save", f"{w}/gathered", "--quiet",
                 "--data", data])
            params = wref_np.read_safetensors(f"{w}/gathered/model.safetensors")[0]
        param_err = max(max_rel(params[k], ref_params[k]) for k in ref_params)
        measured = metrics[-1].get("comm_bytes", {})
        predicted = predicted_comm(bin_dir, model, common, flags)
        comm_ok = {k: v for k, v in measured.items() if v} == \
            {k: v for k, v in predicted.items() if v}
        # And the measured bytes are the textbook's (textbook_comm.py).
        textbook_err = None
        # (textbook_comm.py knows no context parallelism yet.)
        if dtype in textbook_comm.ELEMENT and layouts == "spmd":
            textbook_err = textbook_comm.compare(
                measured, model, dtype, 4 * micro, 16, flags)
            comm_ok = comm_ok and textbook_err is None
        ok = (len(metrics) == steps and loss_err <= loss_tol and
              grad_err <= grad_tol and comm_ok and
              (param_err <= PARAM_TOL or not check_params))
        print(f"{'ok  ' if ok else 'FAIL'} {model} {dtype} np={ranks} {name:58s} "
              f"loss {loss_err:.1e}  grad {grad_err:.1e}  param {param_err:.1e}  "
              f"comm {'= predicted' if comm_ok else 'MISMATCH'} "
              f"({sum(measured.values())} B/step)")
        if not ok:
            failures.append(f"{name}: loss {loss_err:.2e} grad {grad_err:.2e} "
                            f"param {param_err:.2e} comm measured {measured} "
                            f"predicted {predicted}"
                            + (f"; {textbook_err}" if textbook_err else ""))
    if failures:
        sys.exit("FAIL:\n  " + "\n  ".join(failures))
    what = f" in {micro} micro-batches" if micro > 1 else ""
    if layouts.startswith("pipeline"):
        what += " (pipelines)"
    if layouts == "context":
        what += " (context parallel)"
    if layouts == "context-a2a":
        what += (f" (all-to-all context parallel; {len(refused)} refused "
                 f"for their heads)")
    if layouts == "context-ring":
        what += " (ring context parallel)"
    if layouts == "vocab-pad":
        what += " (vocabulary padded for tp and ZeRO)"
    print(f"PASS: {len(meshes) - len(refused)} layouts of {model} ({dtype}){what} "
          f"train like one rank for {steps} steps")


if __name__ == "__main__":
    main()
