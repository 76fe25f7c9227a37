"""Opset 23's Attention op, as torch exports scaled_dot_product_attention at
opset 23, in small graphs: weft raises it to weft.attention and gives
numpy's logits, or refuses it by name. Prints one line per case for
weft-compile-onnx-attention.test.

  attention_op_graphs.py BINDIR WORKDIR

Each graph: token ids [2, 6] -> table [16, 8] -> q, k, v projections ->
heads views [2, H, 6, D] -> Attention -> back to [2, 6, H*D] -> the
table's transpose as the head. numpy computes the same attention
(ONNX's: the scale, the mask added or kept where true, is_causal's
triangle, each query head reading key head h // (H / Hkv)).
"""
import os
import subprocess
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save

BIN, WORK = sys.argv[1], sys.argv[2]
os.makedirs(WORK, exist_ok=True)
rng = np.random.default_rng(5)
B, S, E, V = 2, 6, 8, 16
WTE = rng.standard_normal((V, E)).astype(np.float32)
IDS = rng.integers(0, V, (B, S)).astype(np.int64)
CAUSAL = np.tril(np.ones((S, S), bool))


def const(name, value):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(value, name))


def graph(name, heads, kv_heads, attrs, mask=None, extra_inputs=(), outputs=1, rank=4):
    """The model's path and its numpy logits (None where weft should refuse)."""
    d = E // heads
    w = {p: (rng.standard_normal((E, n * d)) * 0.5).astype(np.float32)
         for p, n in (("wq", heads), ("wk", kv_heads), ("wv", kv_heads))}
    inits = [numpy_helper.from_array(WTE, "wte")] + [numpy_helper.from_array(a, n)
                                                     for n, a in w.items()]
    nodes = [helper.make_node("Gather", ["wte", "input_ids"], ["x"], axis=0)]
    for p, n in (("q", heads), ("k", kv_heads), ("v", kv_heads)):
        nodes += [helper.make_node("MatMul", ["x", "w" + p], [p]),
                  const(p + "_shape", np.array([B, S, n, d], np.int64))]
        if rank == 4:
            nodes += [helper.make_node("Reshape", [p, p + "_shape"], [p + "4"]),
                      helper.make_node("Transpose", [p + "4"], [p + "h"], perm=[0, 2, 1, 3])]
        else:
            nodes.append(helper.make_node("Identity", [p], [p + "h"]))
    inputs = ["qh", "kh", "vh"]
    if mask is not None:
        nodes.append(const("mask", mask))
        inputs.append("mask")
    inputs += list(extra_inputs)
    outs = ["y"] + [f"extra{i}" for i in range(1, outputs)]
    nodes += [helper.make_node("Attention", inputs, outs, **attrs),
              helper.make_node("Transpose", ["y"], ["yt"], perm=[0, 2, 1, 3]),
              const("back", np.array([B, S, heads * d], np.int64)),
              helper.make_node("Reshape", ["yt", "back"], ["o"]),
              helper.make_node("Transpose", ["wte"], ["wteT"], perm=[1, 0]),
              helper.make_node("MatMul", ["o", "wteT"], ["logits"])]
    g = helper.make_graph(
        nodes, name, [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [B, S])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [B, S, V])],
        initializer=inits)
    path = os.path.join(WORK, name + ".onnx")
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 23)]), path)
    # numpy, in float64
    x = WTE[IDS].astype(np.float64)
    q, k, v = (x @ w["w" + p] for p in "qkv")
    q = q.reshape(B, S, heads, d).transpose(0, 2, 1, 3)
    k, v = (t.reshape(B, S, kv_heads, d).transpose(0, 2, 1, 3) for t in (k, v))
    k, v = (np.repeat(t, heads // kv_heads, axis=1) for t in (k, v))
    s = q @ k.transpose(0, 1, 3, 2) * attrs.get("scale", 1 / np.sqrt(d))
    if mask is not None:
        s = np.where(mask, s, -np.inf) if mask.dtype == bool else s + mask
    if attrs.get("is_causal"):
        s = np.where(CAUSAL, s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    o = (p @ v).transpose(0, 2, 1, 3).reshape(B, S, heads * d)
    return path, o @ WTE.T.astype(np.float64)


def compile_(path):
    prog = path + ".weft"
    r = subprocess.run([f"{BIN}/weft-compile", path, "--forward-only", "-o", prog, "--quiet"],
                       capture_output=True, text=True)
    return prog, r


def check(name, heads, kv_heads, attrs, mask=None, **kw):
    path, want = graph(name, heads, kv_heads, attrs, mask, **kw)
    prog, r = compile_(path)
    if r.returncode:
        sys.exit(f"FAIL: {name} refused: {r.stderr.strip()}")
    ir = subprocess.run([f"{BIN}/weft-compile", path, "--forward-only", "--emit-mlir=forward",
                         "-o", prog + ".ir"], capture_output=True, text=True).stdout
    np.save(f"{path}.ids.npy", IDS)
    r = subprocess.run([f"{BIN}/weft-run", prog, "--quiet", "--load", path, "--input",
                        f"{path}.ids.npy",
                        "--output", f"{path}.out.npy"], capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"FAIL: {name}: weft-run: {r.stderr}")
    got = np.load(f"{path}.out.npy")
    err = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
    raised = ir.count("weft.attention")
    if err > 1e-5 or raised != 1:
        sys.exit(f"FAIL: {name}: logits {err:.1e} from numpy's, {raised} weft.attention")
    print(f"{name}: weft.attention, logits {'within 1e-5' if err <= 1e-5 else err} of numpy's")


def refused(name, heads, kv_heads, attrs, mask=None, **kw):
    path, _ = graph(name, heads, kv_heads, attrs, mask, **kw)
    _, r = compile_(path)
    if r.returncode != 1:
        sys.exit(f"FAIL: {name}: exit {r.returncode}: {r.stderr[-300:]}")
    print(f"{name} refused: {r.stderr.strip().splitlines()[-1]}")


check("causal_flag", 2, 2, {"is_causal": 1})
check("causal_mask_gqa", 4, 2, {"scale": 0.5}, CAUSAL.reshape(1, 1, S, S))
check("window_mask", 2, 1, {}, np.tril(CAUSAL, 0) & ~np.tril(CAUSAL, -3))
check("additive_visible", 2, 2, {}, np.zeros((1, 1, S, S), np.float32))
check("additive_causal", 2, 2, {}, np.where(CAUSAL, 0, -np.inf).astype(np.float32))
refused("softcap", 2, 2, {"softcap": 30.0, "is_causal": 1})
refused("qk_output", 2, 2, {"is_causal": 1}, outputs=4)
refused("past_key", 2, 2, {"is_causal": 1}, CAUSAL, extra_inputs=["mask"])
refused("rank3", 2, 2, {"is_causal": 1, "q_num_heads": 2, "kv_num_heads": 2}, rank=3)
refused("random_mask", 2, 2, {}, rng.random((1, 1, S, S)) < 0.7)
refused("head_count", 2, 2, {"is_causal": 1, "q_num_heads": 4})
# Absent optional inputs listed by empty names are absent.
check("empty_inputs", 2, 2, {"is_causal": 1}, CAUSAL, extra_inputs=["", ""])
print("PASS: attention_op_graphs")
