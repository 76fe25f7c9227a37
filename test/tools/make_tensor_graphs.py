"""Writes small ONNX graphs of float inputs for weft-run-tensor-inputs.test
into DIR (format version 8: named tensor inputs and outputs):

  make_tensor_graphs.py DIR

  tensors.onnx   x [3, 4], w [4, 5] -> y = tanh(x @ w) [3, 5] and
                 s = ReduceSum(y, axis 1) [3]: two inputs, two outputs
  identity.onnx  y = Identity(x): an output that is the input itself
  passthru.onnx  outputs x itself (no node between) and t = tanh(x)
  double.onnx    y = exp(x) of a double x [2, 3]
  cast.onnx      y = exp(Cast(x, to=DOUBLE)) of a float x
  mixed.onnx     a float x [2, 3] beside an int64 input
  symbolic.onnx  y = sigmoid(x) of x [n, 3], n symbolic
  named.onnx     x [n, 4] and b [n] (one symbolic n): logits = x + b[:, None]
                 -- a float graph's output may be named logits
  reserved.onnx  an input named tokens
  gemm0.onnx     Gemm with beta = 0 and a C input
  mlp.onnx       y = tanh(x @ fc1.weight + fc1.bias) @ fc2.weight, s = y summed
                 over dim 1: a float input and initializers, for a tp layout
  masked.onnx    y = Softmax(Where(keep, x + bias, -inf)) of x [2, 3, 4], keep
                 a causal [3, 4] bool and bias a [3, 4] float (Constant
                 nodes): constant buffers and a select (format version 10)
"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
F, D, I64 = TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.INT64
vi = helper.make_tensor_value_info


def model(nodes, inputs, outputs, inits=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


axes = numpy_helper.from_array(np.array([1], np.int64), "axes")
save(model([helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
            helper.make_node("Tanh", ["h"], ["y"], name="tanh"),
            helper.make_node("ReduceSum", ["y", "axes"], ["s"], name="sum", keepdims=0)],
           [vi("x", F, [3, 4]), vi("w", F, [4, 5])], [vi("y", F, [3, 5]), vi("s", F, [3])],
           [axes]), f"{out}/tensors.onnx")
save(model([helper.make_node("Identity", ["x"], ["y"], name="id")],
           [vi("x", F, [2, 3])], [vi("y", F, [2, 3])]), f"{out}/identity.onnx")
save(model([helper.make_node("Tanh", ["x"], ["t"], name="tanh")],
           [vi("x", F, [2, 3])], [vi("x", F, [2, 3]), vi("t", F, [2, 3])]),
     f"{out}/passthru.onnx")
save(model([helper.make_node("Exp", ["x"], ["y"], name="exp")],
           [vi("x", D, [2, 3])], [vi("y", D, [2, 3])]), f"{out}/double.onnx")
save(model([helper.make_node("Cast", ["x"], ["xd"], name="to_double", to=D),
            helper.make_node("Exp", ["xd"], ["y"], name="exp")],
           [vi("x", F, [2, 3])], [vi("y", D, [2, 3])]), f"{out}/cast.onnx")
save(model([helper.make_node("Exp", ["x"], ["y"], name="exp")],
           [vi("x", F, [2, 3]), vi("mask", I64, [2, 3])], [vi("y", F, [2, 3])]),
     f"{out}/mixed.onnx")
save(model([helper.make_node("Sigmoid", ["x"], ["y"], name="sigmoid")],
           [vi("x", F, ["n", 3])], [vi("y", F, ["n", 3])]), f"{out}/symbolic.onnx")
save(model([helper.make_node("Unsqueeze", ["b", "one"], ["b2"], name="col"),
            helper.make_node("Add", ["x", "b2"], ["logits"], name="add")],
           [vi("x", F, ["n", 4]), vi("b", F, ["n"])], [vi("logits", F, ["n", 4])],
           [numpy_helper.from_array(np.array([1], np.int64), "one")]), f"{out}/named.onnx")
save(model([helper.make_node("Exp", ["tokens"], ["y"], name="exp")],
           [vi("tokens", F, [2, 3])], [vi("y", F, [2, 3])]), f"{out}/reserved.onnx")
save(model([helper.make_node("Gemm", ["a", "w", "c"], ["y"], name="fc", beta=0.0)],
           [vi("a", F, [2, 3]), vi("w", F, [3, 4]), vi("c", F, [2, 4])], [vi("y", F, [2, 4])]),
     f"{out}/gemm0.onnx")
r = np.random.default_rng(0)
weights = [numpy_helper.from_array(r.standard_normal(shape).astype(np.float32), n)
           for n, shape in [("fc1.weight", (8, 16)), ("fc1.bias", (16,)),
                            ("fc2.weight", (16, 8))]]
save(model([helper.make_node("MatMul", ["x", "fc1.weight"], ["a"], name="fc1"),
            helper.make_node("Add", ["a", "fc1.bias"], ["ab"], name="bias1"),
            helper.make_node("Tanh", ["ab"], ["t"], name="act"),
            helper.make_node("MatMul", ["t", "fc2.weight"], ["y"], name="fc2"),
            helper.make_node("ReduceSum", ["y", "axes"], ["s"], name="sum", keepdims=0)],
           [vi("x", F, [4, 8])], [vi("y", F, [4, 8]), vi("s", F, [4])], weights + [axes]),
     f"{out}/mlp.onnx")
keep = np.tril(np.ones((3, 4), bool))
bias = (np.arange(12, dtype=np.float32).reshape(3, 4) / 8).astype(np.float32)
const = lambda name, a: helper.make_node(  # noqa: E731
    "Constant", [], [name], name=name, value=numpy_helper.from_array(a, name))
save(model([const("keep", keep), const("bias", bias),
            const("ninf", np.array(-np.inf, np.float32)),
            helper.make_node("Add", ["x", "bias"], ["xb"], name="biased"),
            helper.make_node("Where", ["keep", "xb", "ninf"], ["m"], name="causal"),
            helper.make_node("Softmax", ["m"], ["y"], name="softmax", axis=-1)],
           [vi("x", F, [2, 3, 4])], [vi("y", F, [2, 3, 4])]), f"{out}/masked.onnx")
