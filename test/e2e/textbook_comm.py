#!/usr/bin/env python3
"""The textbook minimum of collective bytes per rank per step, by layout.

Written from the papers, independently of the compiler: the model's
parameter shapes (Hugging Face names' roles, not weft's IR), the layout's
axes, and ring costs per rank (all-reduce 2(n-1)/n S, reduce-scatter and
all-gather (n-1)/n S, S the whole tensor's bytes in the group):

- DP (Li et al. 2020, PyTorch DDP): every gradient all-reduced over dp, once
  per step (micro-batches accumulate locally, as no_sync does).
- Megatron TP (Shoeybi et al. 2019): per layer and micro-batch, two
  all-reduces of the b*s*h activations forward and two backward; one more
  forward for the vocab-parallel embedding and one backward for the
  vocab-parallel head's input gradient; the vocab-parallel cross-entropy
  exchanges three statistics per row (max, sum of exponentials, target
  logit: Megatron's three all-reduces of b*s floats; weft gathers each
  shard's three, the same bytes at tp=2).
- Sequence parallelism (Korthikanti et al. 2022): each of those all-reduces
  becomes a reduce-scatter and an all-gather (the same bytes), the backward
  gathers each column-parallel matmul's input again (section 4.2.2: two per
  layer and the head's), and the
  parameters of the sequence-split ops (norms, row-parallel biases) have
  gradients partial over tp, all-reduced over tp once per step (under
  ZeRO-2/3 after the dp reduce-scatter: only the rank's dp shard).
- ZeRO (Rajbhandari et al. 2020): stage 1 and 2 reduce-scatter the gradients
  and all-gather the updated parameters; stage 3 also gathers each parameter
  for the forward and again for the backward where the backward reads it
  (matrices, norm weights; a bias's gradient does not read the bias), once
  per step when micro-batches keep the gathered copies. Stage 1 reduces once
  per step; stages 2 and 3 once per micro-batch (the gradient is not kept
  whole). A fused q|k|v bias split over tp in three blocks cannot also split
  over dp: it stays replicated over dp and is all-reduced like DP.
- The loss (one float) is all-reduced over dp once per micro-batch.

Beyond the minimum weft still sends, named per layout so that the check is
exact and says what is beyond the textbook:
- the position table's gradient rows past the sequence length (zero; the
  minimum reduces only the first seq rows): weft's all-reduces of it send
  only those rows, its ZeRO reduce-scatters (and, under ZeRO-2/3 with SP,
  the tp all-reduce of the rank's dp shard) still the whole table;
- under ZeRO-1 with sequence parallelism and micro-batches, the tp sums of
  the sequence-split parameters' gradients once per micro-batch instead of
  once per step (ZeRO-1's stored gradient may be partial over dp only).

    textbook_comm.py BIN_DIR   runs weft-compile --explain on every layout of
                               the equivalence suite and compares its totals
                               per axis with the formulas; exits 1 naming
                               any difference.
"""
import os
import re
import subprocess
import sys

ELEMENT = {"f64": 8, "f32": 4}

# The builtin presets the equivalence suite trains (frontends/builtin).
MODELS = {
    "gpt-tiny": dict(kind="gpt2", layers=2, hidden=64, heads=4, vocab=256,
                     positions=128, ffn=256, tied=True),
    "llama-tiny": dict(kind="llama", layers=2, hidden=64, heads=4, kv_heads=2,
                       vocab=256, positions=128, ffn=192, tied=False),
    # gpt-tiny with heads of 32: attention's AVX-512 products take heads of
    # 32 and more (runtime/cpu/kernels/Kernels.h, attentionPacksHeads).
    "gpt-heads32.json": dict(kind="gpt2", layers=2, hidden=64, heads=2,
                             vocab=256, positions=128, ffn=256, tied=True),
}


def parameters(m):
    """(name, shape, role) per parameter. Roles: 'matrix' (read by its
    backward), 'norm_weight' (read by its backward), 'norm_bias',
    'bias' (row-parallel: sequence-split under SP), 'qkv_bias' (fused,
    column-parallel in 3 blocks), 'col_bias' (column-parallel), 'embedding'
    (a lookup; its backward does not read it), 'positions'."""
    h, f, L = m["hidden"], m["ffn"], m["layers"]
    out = []
    if m["kind"] == "gpt2":
        out.append(("transformer.wte.weight", (m["vocab"], h), "embedding"))
        out.append(("transformer.wpe.weight", (m["positions"], h), "positions"))
        for i in range(L):
            p = f"transformer.h.{i}."
            out += [(p + "ln_1.weight", (h,), "norm_weight"),
                    (p + "ln_1.bias", (h,), "norm_bias"),
                    (p + "attn.c_attn.weight", (h, 3 * h), "matrix"),
                    (p + "attn.c_attn.bias", (3 * h,), "qkv_bias"),
                    (p + "attn.c_proj.weight", (h, h), "matrix"),
                    (p + "attn.c_proj.bias", (h,), "bias"),
                    (p + "ln_2.weight", (h,), "norm_weight"),
                    (p + "ln_2.bias", (h,), "norm_bias"),
                    (p + "mlp.c_fc.weight", (h, f), "matrix"),
                    (p + "mlp.c_fc.bias", (f,), "col_bias"),
                    (p + "mlp.c_proj.weight", (f, h), "matrix"),
                    (p + "mlp.c_proj.bias", (h,), "bias")]
        out += [("transformer.ln_f.weight", (h,), "norm_weight"),
                ("transformer.ln_f.bias", (h,), "norm_bias")]
    else:
        kv = h // m["heads"] * m["kv_heads"]
        out.append(("model.embed_tokens.weight", (m["vocab"], h), "embedding"))
        for i in range(L):
            p = f"model.layers.{i}."
            out += [(p + "input_layernorm.weight", (h,), "norm_weight"),
                    (p + "self_attn.q_proj.weight", (h, h), "matrix"),
                    (p + "self_attn.k_proj.weight", (kv, h), "matrix"),
                    (p + "self_attn.v_proj.weight", (kv, h), "matrix"),
                    (p + "self_attn.o_proj.weight", (h, h), "matrix"),
                    (p + "post_attention_layernorm.weight", (h,),
                     "norm_weight"),
                    (p + "mlp.gate_proj.weight", (f, h), "matrix"),
                    (p + "mlp.up_proj.weight", (f, h), "matrix"),
                    (p + "mlp.down_proj.weight", (h, f), "matrix")]
        out += [("model.norm.weight", (h,), "norm_weight"),
                ("lm_head.weight", (m["vocab"], h), "matrix")]
    return out


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def ring(kind, nbytes, n):
    if n <= 1:
        return 0
    return (2 * (n - 1) * nbytes // n if kind == "all_reduce"
            else (n - 1) * nbytes // n)


class Tally:
    def __init__(self):
        self.bytes = {}

    def add(self, kind, axis, nbytes, n, times=1):
        b = ring(kind, nbytes, n) * times
        if b:
            key = f"{kind}/{axis}"
            self.bytes[key] = self.bytes.get(key, 0) + b


def parse_flags(flags):
    mesh, opts = {}, {"layout": "data", "zero": 0, "sp": False, "micro": 1,
                      "gather": "step"}
    it = iter(flags)
    for f in it:
        if f == "--mesh":
            for part in next(it).split(","):
                k, v = part.split("=")
                mesh[k] = int(v)
        elif f == "--layout":
            opts["layout"] = next(it)
        elif f == "--zero":
            opts["zero"] = int(next(it))
        elif f == "--sequence-parallel":
            opts["sp"] = True
        elif f == "--microbatches":
            opts["micro"] = int(next(it))
        elif f == "--zero3-gather":
            opts["gather"] = next(it)
        elif f == "--zero-bucket-mb":
            next(it)  # buckets move the same bytes in fewer messages
        else:
            raise ValueError(f"textbook_comm: no formula for flag {f}")
    return mesh, opts


def textbook(model, dtype, batch, seq, flags):
    """(minimum, known excess): bytes per rank per step by 'kind/axis'; the
    excess by its name."""
    m = MODELS[model if model in MODELS else os.path.basename(model)]
    e = ELEMENT[dtype]
    mesh, o = parse_flags(flags)
    dp, tp, M = mesh.get("dp", 1), mesh.get("tp", 1), o["micro"]
    megatron = o["layout"] == "megatron" and tp > 1
    h, L = m["hidden"], m["layers"]
    rows = batch // M // dp * seq            # rows per rank per micro-batch
    act = rows * h * e                       # one b*s*h activation
    need, extra, per_mb = Tally(), Tally(), Tally()

    # Tensor (and sequence) parallelism: activations, per micro-batch.
    if megatron:
        reductions = 4 * L + 2
        if o["sp"]:
            need.add("reduce_scatter", "tp", act, tp, reductions * M)
            need.add("all_gather", "tp", act, tp, reductions * M)
            # The backward gathers each column-parallel input again for its
            # weight gradient (the attention's and the MLP's per layer, the
            # head's) rather than keep it whole (Korthikanti et al. 2022,
            # section 4.2.2).
            need.add("all_gather", "tp", act, tp, (2 * L + 1) * M)
        else:
            need.add("all_reduce", "tp", act, tp, reductions * M)
        # Three statistics per row from each vocab shard.
        need.add("all_gather", "tp", 3 * rows * e * tp, tp, M)

    # Per parameter: its bytes on this rank after tp, how its gradient is
    # reduced, and ZeRO's gathers.
    def tp_split(name, role):
        if not megatron:
            return 1
        if role in ("matrix", "embedding", "qkv_bias", "col_bias"):
            return tp
        return 1  # norms, row-parallel biases, positions: replicated

    for name, shape, role in parameters(m):
        full = numel(shape) * e // tp_split(name, role)
        used = full
        if role == "positions":
            used = seq * shape[1] * e  # rows past seq have zero gradients
        # Under SP these gradients are sums over the sequence shards,
        # accumulated over micro-batches and reduced once per step; where
        # ZeRO-2/3 shard the gradient over dp, only the rank's dp shard.
        zero = o["zero"] if dp > 1 else 0
        if megatron and o["sp"] and role in ("norm_weight", "norm_bias",
                                             "bias", "positions"):
            if zero >= 2:  # after the dp reduce-scatter: its dp shard
                need.add("all_reduce", "tp", used // dp, tp)
                extra.add("all_reduce", "tp", (full - used) // dp, tp)
            else:
                need.add("all_reduce", "tp", used, tp)
            # ZeRO-1 stores the gradient partial over dp only, so its tp
            # sum cannot wait for the step's end (AccumulateGradients.cpp).
            if zero == 1:
                per_mb.add("all_reduce", "tp", used, tp, M - 1)
        if dp == 1:
            continue
        replicated_over_dp = zero == 3 and role == "qkv_bias" and megatron
        if zero == 0 or replicated_over_dp:
            need.add("all_reduce", "dp", used, dp)
            continue
        per = 1 if zero == 1 else M
        need.add("reduce_scatter", "dp", used, dp, per)
        extra.add("reduce_scatter", "dp", full - used, dp, per)
        if zero in (1, 2):
            need.add("all_gather", "dp", full, dp)  # the updated parameters
            continue
        reads_in_backward = role in ("matrix", "norm_weight") or (
            role == "embedding" and m["tied"])
        if o["gather"] == "step" and M > 1:
            need.add("all_gather", "dp", full, dp)
        else:
            need.add("all_gather", "dp", full, dp,
                     M * (2 if reads_in_backward else 1))
    if dp > 1:
        need.add("all_reduce", "dp", e, dp, M)  # the loss
    return need.bytes, {"position-table rows past seq": extra.bytes,
                        "ZeRO-1+SP tp sums per micro-batch": per_mb.bytes}


def explain_totals(bin_dir, model, common, flags):
    out = subprocess.run([f"{bin_dir}/weft-compile", model] + common + flags +
                         ["--explain", "-o", os.devnull, "--quiet"],
                         capture_output=True, text=True, check=True).stdout
    totals, on = {}, False
    for line in out.splitlines():
        if line.strip() == "totals:":
            on = True
            continue
        if on:
            mt = re.match(r"\s+(\S+)\s+(\d+) bytes/rank/step", line)
            if not mt:
                break
            totals[mt.group(1)] = int(mt.group(2))
    return totals, out


def per_axis(totals):
    axes = {}
    for key, v in totals.items():
        axis = key.split("/", 1)[1]
        axes[axis] = axes.get(axis, 0) + v
    return axes


def merged(parts):
    out = {}
    for part in parts:
        for k, v in part.items():
            out[k] = out.get(k, 0) + v
    return out


def compare(measured, model, dtype, batch, seq, flags):
    """None when `measured` (bytes by kind/axis) is the textbook minimum plus
    the named excess, per axis; otherwise a message naming the difference."""
    need, excess = textbook(model, dtype, batch, seq, flags)
    want = per_axis(merged([need] + list(excess.values())))
    got = {k: v for k, v in per_axis(measured).items() if v}
    if got == {k: v for k, v in want.items() if v}:
        return None
    named = "; ".join(f"{n} {per_axis(b)}" for n, b in excess.items() if b)
    return (f"bytes per axis {got} != textbook {per_axis(need)}"
            + (f" + known excess ({named})" if named else ""))


def main():
    bin_dir = sys.argv[1]
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from equivalence import MESHES  # noqa: E402

    layouts = [(flags, 1) for _, flags in MESHES] + [
        (flags + ["--microbatches", "2"], 2) for _, flags in MESHES] + [
        (["--mesh", "dp=2", "--zero", "3", "--zero3-gather", "microbatch",
          "--microbatches", "2"], 2),
        (["--mesh", "dp=2,tp=2", "--layout", "megatron",
          "--sequence-parallel", "--zero", "1", "--microbatches", "2"], 2)]
    failures, checked = [], 0
    here = os.path.dirname(os.path.abspath(__file__))
    for model in MODELS:
        # A config file's model lies beside this script.
        source = os.path.join(here, model) if model.endswith(".json") else model
        for dtype in ("f64", "f32"):
            for flags, micro in layouts:
                batch, seq = 4 * micro, 16
                common = ["--batch", str(batch), "--seq", str(seq),
                          "--dtype", dtype]
                totals, _ = explain_totals(bin_dir, source, common, flags)
                need, excess = textbook(model, dtype, batch, seq, flags)
                err = compare(totals, model, dtype, batch, seq, flags)
                checked += 1
                named = ", ".join(f"{n} {sum(b.values())}"
                                  for n, b in excess.items() if b)
                name = f"{model} {dtype} {' '.join(flags)}"
                print(f"{'ok  ' if not err else 'FAIL'} {name}: "
                      f"{sum(totals.values())} B/rank/step = textbook "
                      f"{sum(need.values())}" +
                      (f" + {named}" if named else ""))
                if err:
                    failures.append(f"{name}: {err}")
    if failures:
        sys.exit("FAIL:\n  " + "\n  ".join(failures))
    print(f"PASS: {checked} layouts send the textbook minimum, beyond it "
          f"only the named excess")


if __name__ == "__main__":
    main()
