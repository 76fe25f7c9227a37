"""Graphs of the ops whose inputs moved between opsets, at the opsets
before the move, run by weft and compared with numpy; and the other place
refused. Prints one line per case for weft-compile-onnx-opsets.test.

  old_opset_graphs.py BINDIR WORKDIR

Slice's starts, ends and axes are attributes before opset 10; Squeeze's,
Unsqueeze's and ReduceSum's axes and Split's sizes before 13; Softmax
before 13 normalizes the dims from `axis` (default 1) on, flattened.
"""
import os
import subprocess
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save

BIN, WORK = sys.argv[1], sys.argv[2]
os.makedirs(WORK, exist_ok=True)
F = TensorProto.FLOAT
vi = helper.make_tensor_value_info
rng = np.random.default_rng(3)


def graph(name, opset, nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, name, [vi(n, F, s) for n, s in inputs],
                          [vi(n, F, None) for n in outputs], initializer=list(inits))
    path = os.path.join(WORK, name + ".onnx")
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]), path)
    return path


def run(path, inputs, outputs):
    prog = path + ".weft"
    r = subprocess.run([f"{BIN}/weft-compile", path, "--forward-only", "-o", prog, "--quiet"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return None, r.stderr.strip()
    cmd = [f"{BIN}/weft-run", prog, "--quiet"]
    for n, v in inputs.items():
        np.save(f"{path}.{n}.npy", v)
        cmd += ["--input", f"{n}={path}.{n}.npy"]
    for n in outputs:
        cmd += ["--output", f"{n}={path}.{n}.out.npy"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"FAIL: {path}: weft-run: {r.stderr}")
    return [np.load(f"{path}.{n}.out.npy") for n in outputs], ""


def check(name, opset, nodes, inputs, outputs, want):
    path = graph(name, opset, nodes, [(n, list(v.shape)) for n, v in inputs.items()], outputs)
    got, err = run(path, inputs, outputs)
    if got is None:
        sys.exit(f"FAIL: {name} (opset {opset}) was refused: {err}")
    for n, g, w in zip(outputs, got, want):
        if g.shape != w.shape or not np.allclose(g, w, rtol=1e-5, atol=1e-6):
            sys.exit(f"FAIL: {name}: output {n} {g.shape} differs from numpy's {w.shape}")
    print(f"{name} (opset {opset}): numpy's {', '.join(str(list(w.shape)) for w in want)}")


def refused(name, opset, nodes, inputs, outputs, inits=()):
    path = graph(name, opset, nodes, inputs, outputs, inits)
    _, err = run(path, {}, outputs)
    print(f"{name} (opset {opset}) refused: {err}")


def softmax(x, axis):
    z = np.exp(x - x.max(axis=axis, keepdims=True))
    return z / z.sum(axis=axis, keepdims=True)


x = rng.standard_normal((4, 3, 5)).astype(np.float32)
check("slice9", 9, [helper.make_node("Slice", ["x"], ["y"], starts=[1, 0], ends=[3, -1],
                                     axes=[0, 2])],
      {"x": x}, ["y"], [x[1:3, :, 0:-1]])
check("unsqueeze11", 11, [helper.make_node("Tanh", ["x"], ["t"]),
                          helper.make_node("Unsqueeze", ["t"], ["y"], axes=[0, -1])],
      {"x": x}, ["y"], [np.tanh(x)[None, ..., None]])
s = rng.standard_normal((3, 1, 4)).astype(np.float32)
check("squeeze12", 12, [helper.make_node("Squeeze", ["x"], ["q"], axes=[1]),
                        helper.make_node("Exp", ["q"], ["y"])],
      {"x": s}, ["y"], [np.exp(s[:, 0])])
m = rng.standard_normal((4, 6)).astype(np.float32)
check("split11", 11, [helper.make_node("Split", ["x"], ["a0", "b0"], axis=1, split=[2, 4]),
                      helper.make_node("Tanh", ["a0"], ["a"]),
                      helper.make_node("Exp", ["b0"], ["b"])],
      {"x": m}, ["a", "b"], [np.tanh(m[:, :2]), np.exp(m[:, 2:])])
check("reducesum12", 12, [helper.make_node("ReduceSum", ["x"], ["y"], axes=[1], keepdims=0)],
      {"x": x}, ["y"], [x.sum(1)])
# Softmax before 13: default axis 1 over [4, 3*5] flattened; axis -1 alone.
check("softmax11", 11, [helper.make_node("Softmax", ["x"], ["y"]),
                        helper.make_node("Softmax", ["x"], ["z"], axis=-1)],
      {"x": x}, ["y", "z"], [softmax(x.reshape(4, 15), 1).reshape(4, 3, 5), softmax(x, -1)])
w = rng.standard_normal((5,)).astype(np.float32)
check("add7", 7, [helper.make_node("Add", ["x", "w"], ["y"])], {"x": x, "w": w}, ["y"], [x + w])

# Opsets 21 to 23 changed these ops' type constraints only (int4, float8,
# bfloat16, float4 added): their values are numpy's as at 20.
shape = numpy_helper.from_array(np.array([3, 20], np.int64), "shape")
one = numpy_helper.from_array(np.array([1], np.int64), "one")
for opset in (21, 22, 23):
    path = graph(f"views{opset}", opset, [
        helper.make_node("Reshape", ["x", "shape"], ["r"]),
        helper.make_node("Transpose", ["r"], ["t"], perm=[1, 0]),
        helper.make_node("Cos", ["t"], ["c"]),
        helper.make_node("Sin", ["t"], ["n"]),
        helper.make_node("Add", ["c", "n"], ["a"]),
        helper.make_node("Unsqueeze", ["a", "one"], ["u"]),
        helper.make_node("Squeeze", ["u", "one"], ["q"]),
        helper.make_node("Flatten", ["x"], ["f"], axis=2),
        helper.make_node("Cast", ["q"], ["y"], to=TensorProto.FLOAT),
        helper.make_node("Identity", ["f"], ["z"])],
        [("x", [4, 3, 5])], ["y", "z"], [shape, one])
    got, err = run(path, {"x": x}, ["y", "z"])
    t = x.reshape(3, 20).T
    want = [np.cos(t) + np.sin(t), x.reshape(12, 5)]
    if got is None or not all(np.allclose(g, w, rtol=1e-5, atol=1e-6) for g, w in zip(got, want)):
        sys.exit(f"FAIL: views{opset}: {err or 'differs from numpy'}")
    print(f"views{opset} (opset {opset}): numpy's [20, 3], [12, 5]")

axes = numpy_helper.from_array(np.array([0], np.int64), "axes")
refused("unsqueeze12-input", 12, [helper.make_node("Unsqueeze", ["x", "axes"], ["y"])],
        [("x", [3])], ["y"], [axes])
refused("unsqueeze13-attr", 13, [helper.make_node("Unsqueeze", ["x"], ["y"], axes=[0])],
        [("x", [3])], ["y"])
refused("split12-input", 12, [helper.make_node("Split", ["x", "axes"], ["a", "b"])],
        [("x", [4])], ["a", "b"], [axes])
bounds = [numpy_helper.from_array(np.array([v], np.int64), n) for n, v in (("s", 0), ("e", 2))]
refused("slice9-inputs", 9, [helper.make_node("Slice", ["x", "s", "e"], ["y"])],
        [("x", [4])], ["y"], bounds)
refused("slice9-bounds", 9, [helper.make_node("Slice", ["x"], ["y"], axes=[0])],
        [("x", [4])], ["y"])
refused("slice9-int-bounds", 9, [helper.make_node("Slice", ["x"], ["y"], starts=1, ends=3)],
        [("x", [4])], ["y"])
refused("unsqueeze11-no-axes", 11, [helper.make_node("Unsqueeze", ["x"], ["y"])],
        [("x", [4])], ["y"])
refused("opset6", 6, [helper.make_node("Tanh", ["x"], ["y"])], [("x", [4])], ["y"])
refused("opset24", 24, [helper.make_node("Tanh", ["x"], ["y"])], [("x", [4])], ["y"])
# Opset 23's Attention over graph inputs, no heads of projections: not
# raised (weft-compile-onnx-attention.test has the ones that are).
refused("attention23", 23, [helper.make_node("Attention", ["q", "k", "v"], ["y"])],
        [("q", [1, 2, 4, 8]), ("k", [1, 2, 4, 8]), ("v", [1, 2, 4, 8])], ["y"])
