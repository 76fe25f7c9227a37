"""ONNX's own node tests (Debian's libonnx-testdata) through weft.

Each test is a small graph (usually one node) with its inputs and expected
outputs as TensorProto files. Every test whose nodes are all of op types
weft's import reads is attempted: the graph is compiled forward-only
(`weft-compile --forward-only`), run (`weft-run --input NAME=FILE`) and its
outputs compared with the expected ones. Each attempt ends one of three
ways:

  passed   the outputs match (|got - want| <= 1e-6 + 1e-5 |want|);
  refused  weft-compile or weft-run refuses the graph with a message and a
           non-zero exit (an attribute, op form or shape weft does not
           implement);
  wrong    anything else: outputs that differ, a crash, a hang, a compile
           that succeeds and a run that then fails.

The test fails on any `wrong`, and when fewer than --min-passed pass (a
supported case that regressed into a refusal).

One rewrite is made before compiling, and it is reported: weft compiles
static shapes and folds shape arithmetic at compile time, so an integer
graph input (a Reshape's shape, Unsqueeze's axes, Gather's indices) becomes
an initializer holding the test's value. Float inputs stay inputs.

Usage: onnx_node_tests.py BINDIR WORKDIR [--min-passed N] [--data DIR]
       [--list] [--only SUBSTRING]
"""
import argparse
import collections
import glob
import os
import re
import subprocess
import sys

import numpy as np
import onnx
from onnx import numpy_helper

DATA = "/usr/share/libonnx-testdata/data/node"

# The op types weft's ONNX import reads (issue 13's list, and the generic
# path's additions); a test of any other op is not attempted.
SUPPORTED = {
    "MatMul", "Gemm", "Add", "Sub", "Mul", "Div", "Pow", "Sqrt", "Neg",
    "Tanh", "Erf", "Sigmoid", "Relu", "Softmax", "LayerNormalization",
    "ReduceMean", "ReduceSum", "Cast", "CastLike", "Reshape", "Transpose",
    "Unsqueeze", "Squeeze", "Flatten", "Expand", "Split", "Slice", "Concat",
    "Gather", "Where", "Equal", "And", "LessOrEqual", "Constant",
    "ConstantOfShape", "Cos", "Sin", "Range", "Shape", "Exp", "Log",
    "Reciprocal", "Identity", "Trilu", "Abs", "Less", "Greater",
    "GreaterOrEqual", "Or", "Not", "IsNaN", "Max", "Min", "Clip",
}
RTOL, ATOL = 1e-5, 1e-6


def load_tensors(dataset, prefix):
    out = []
    for path in sorted(glob.glob(os.path.join(dataset, prefix + "_*.pb")),
                       key=lambda p: int(p.rsplit("_", 1)[1][:-3])):
        t = onnx.TensorProto()
        with open(path, "rb") as f:
            t.ParseFromString(f.read())
        out.append(numpy_helper.to_array(t))
    return out


def run(cmd, timeout=120):
    try:
        r = subprocess.run(cmd, capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"no exit after {timeout} s"
    return r.returncode, (r.stdout + r.stderr).strip()


def is_refusal(code, text):
    """A clear refusal: exit status 1 with a message naming what (a crash
    exits by signal, a negative or >= 128 status, or without a message; a
    program the compiler wrote and its own loader refuses is a bug)."""
    return code == 1 and "error" in text and "compiler bug" not in text


def attempt(name, bindir, work):
    """(verdict, detail) for node test `name`."""
    src = os.path.join(DATA, name)
    model = onnx.load(os.path.join(src, "model.onnx"))
    dataset = os.path.join(src, "test_data_set_0")
    try:
        inputs = load_tensors(dataset, "input")
        wants = load_tensors(dataset, "output")
    except ValueError:  # a sequence or optional, not a TensorProto
        return "skipped", "test data that is not a tensor"
    g = model.graph
    init_names = {t.name for t in g.initializer}
    graph_inputs = [i for i in g.input if i.name not in init_names]
    if len(graph_inputs) != len(inputs):
        return "skipped", "test data does not match the graph's inputs"
    floats = {a.dtype for a in inputs + wants if a.dtype.kind == "f"}
    if len(floats) > 1:
        return "skipped", ("mixes float types; weft computes a graph in one "
                           "(--dtype)")
    f64 = floats == {np.dtype(np.float64)}
    os.makedirs(work, exist_ok=True)
    feeds = []
    for info, value in zip(graph_inputs, inputs):
        if value.dtype.kind == "f":
            path = os.path.join(work, f"in{len(feeds)}.npy")
            np.save(path, value)
            feeds.append(f"{info.name}={path}")
        else:
            # Rewritten: weft folds integer inputs at compile time.
            g.initializer.append(numpy_helper.from_array(value, info.name))
    model_path = os.path.join(work, "model.onnx")
    onnx.save(model, model_path)
    prog = os.path.join(work, "prog.weft")
    compile_cmd = [os.path.join(bindir, "weft-compile"), model_path,
                   "--forward-only", "-o", prog, "--quiet"]
    if f64:
        compile_cmd += ["--dtype", "f64"]
    code, text = run(compile_cmd)
    if code != 0:
        if is_refusal(code, text):
            return "refused", text.splitlines()[-1]
        return "wrong", f"weft-compile exit {code}: {text[-300:]}"
    outs = []
    run_cmd = [os.path.join(bindir, "weft-run"), prog, "--quiet"]
    for f in feeds:
        run_cmd += ["--input", f]
    for k, out in enumerate(g.output):
        path = os.path.join(work, f"out{k}.npy")
        outs.append(path)
        run_cmd += ["--output", f"{out.name}={path}"]
    code, text = run(run_cmd)
    if code != 0:
        return "wrong", f"compiled, then weft-run exit {code}: {text[-300:]}"
    for k, (path, want) in enumerate(zip(outs, wants)):
        got = np.load(path)
        if got.shape != want.shape or got.dtype != want.dtype:
            return "wrong", (f"output {k}: {got.dtype} {got.shape}, expected "
                             f"{want.dtype} {want.shape}")
        err = np.abs(got.astype(np.float64) - want.astype(np.float64))
        bound = ATOL + RTOL * np.abs(want.astype(np.float64))
        if not np.all(err <= bound) or np.isnan(got).any() != np.isnan(
                want).any():
            worst = np.unravel_index(np.argmax(err - bound), err.shape)
            return "wrong", (f"output {k} at {tuple(int(i) for i in worst)}: "
                             f"{got[worst]!r}, expected {want[worst]!r}")
    return "passed", ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bindir")
    ap.add_argument("work")
    ap.add_argument("--min-passed", type=int, default=0)
    ap.add_argument("--data", default=None)
    ap.add_argument("--only", default="")
    ap.add_argument("--list", action="store_true",
                    help="print every attempted test's verdict")
    args = ap.parse_args()
    global DATA
    DATA = args.data or DATA
    if not os.path.isdir(DATA):
        print(f"SKIP: no ONNX node tests at {DATA} (Debian package "
              "libonnx-testdata; scripts/install-deps.sh installs it)")
        return 0
    names = sorted(os.listdir(DATA))
    verdicts = collections.defaultdict(list)
    not_attempted = 0
    for name in names:
        if args.only and args.only not in name:
            continue
        model = onnx.load(os.path.join(DATA, name, "model.onnx"),
                          load_external_data=False)
        ops = {n.op_type for n in model.graph.node}
        if not ops or not ops <= SUPPORTED:
            not_attempted += 1
            continue
        verdict, detail = attempt(name, args.bindir,
                                  os.path.join(args.work, name))
        verdicts[verdict].append((name, detail))
        if args.list:
            print(f"{verdict:8} {name}  {detail}")
    attempted = sum(len(v) for k, v in verdicts.items() if k != "skipped")
    passed = len(verdicts["passed"])
    print(f"ONNX node tests: {passed} passed of {attempted} attempted "
          f"({len(verdicts['refused'])} refused, {len(verdicts['wrong'])} "
          f"wrong; {len(verdicts['skipped'])} skipped: mixed float types "
          f"or non-tensor data; {not_attempted} of other ops not "
          f"attempted)")
    reasons = collections.Counter(
        re.sub(r".*error: ('[^']*': )?(loc\([^)]*\): )?", "", d)[:100]
        for _, d in verdicts["refused"])
    for reason, count in reasons.most_common(8):
        print(f"  refused x{count}: {reason}")
    for name, detail in verdicts["wrong"]:
        print(f"WRONG {name}: {detail}")
    if verdicts["wrong"]:
        return 1
    if passed < args.min_passed:
        print(f"FAIL: {passed} passed, fewer than the {args.min_passed} "
              "that passed when this floor was set")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
