"""Mutates the torch-exported ONNX fixtures and runs weft-compile on each
mutant: every run must end with exit 0 (the mutant still is a model weft
implements) or 1 (refused with a message), never a crash, an abort or a
sanitizer report. Run it against a sanitizer build (make sanitize builds
build-asan) for memory errors:

  python3 test/fuzz/mutate_onnx.py build-asan/bin/weft-compile [N] [SEED] [DIR]

Mutants of GPT-2, Llama and a model that trains on the generic path
(export_generic_onnx.py) compile for training, of DistilBERT and a
MiniLM-shaped BERT forward-only.
Mutations: a node's op type, attribute or input swapped or dropped, a shape
constant's value changed, an initializer's or the input's dims changed, the
opset changed, a node removed; and, for a third of the mutants, the file's
bytes: one to four bytes overwritten (a length, a tag, a value) or the file
cut short. The TorchScript exports of the exporter corpus (fixtures/corpus)
are mutated too. Failing mutants are kept in DIR (default
/tmp/weft-onnx-mutants) with the command's output. make test runs 40 of
them (test/tools/onnx-mutants.test).
"""
import os
import random
import shutil
import subprocess
import sys

import onnx
from onnx import helper

BIN = sys.argv[1]
N = int(sys.argv[2]) if len(sys.argv) > 2 else 200
rng = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 0)
HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "e2e", "fixtures")
OUT = sys.argv[4] if len(sys.argv) > 4 else "/tmp/weft-onnx-mutants"
os.makedirs(OUT, exist_ok=True)
OPS = ["Add", "Mul", "Sub", "Div", "MatMul", "Gemm", "Reshape", "Transpose", "Softmax",
       "Gather", "Concat", "Slice", "Unsqueeze", "Squeeze", "Expand", "Where", "Tanh",
       "Sqrt", "Pow", "Cast", "LayerNormalization", "ReduceMean", "Split", "Range",
       "Shape", "CumSum", "GatherND", "Neg", "Identity", "SplitToSequence", "Erf",
       "GatherElements", "ReduceSum", "Exp", "Log", "Reciprocal", "Sigmoid", "Relu",
       "Trilu"]


def mutate(m):
    g = m.graph
    kind = rng.randrange(9)
    n = g.node[rng.randrange(len(g.node))]
    if kind == 0:
        n.op_type = rng.choice(OPS)
    elif kind == 1 and n.attribute:
        a = n.attribute[rng.randrange(len(n.attribute))]
        if a.type == onnx.AttributeProto.INT:
            a.i = rng.choice([-3, -1, 0, 1, 2, 3, 7, 1 << 40])
        elif a.type == onnx.AttributeProto.INTS and a.ints:
            a.ints[rng.randrange(len(a.ints))] = rng.choice([-2, -1, 0, 1, 2, 3, 5, 1 << 62])
        elif a.type == onnx.AttributeProto.FLOAT:
            a.f = rng.choice([0.0, -1.0, 1e30, float("nan")])
        elif a.type == onnx.AttributeProto.TENSOR:
            t = a.t
            if t.raw_data:
                b = bytearray(t.raw_data)
                if b:
                    b[rng.randrange(len(b))] = rng.randrange(256)
                t.raw_data = bytes(b)
            elif t.dims:
                t.dims[rng.randrange(len(t.dims))] = rng.choice([0, 1, 2, 3, 1 << 40])
    elif kind == 2 and len(n.input) >= 2:
        i, j = rng.sample(range(len(n.input)), 2)
        n.input[i], n.input[j] = n.input[j], n.input[i]
    elif kind == 3 and n.input:
        n.input[rng.randrange(len(n.input))] = rng.choice(
            [x for node in g.node for x in node.output] + [""])
    elif kind == 4:
        g.node.remove(n)
    elif kind == 5 and g.initializer:
        t = g.initializer[rng.randrange(len(g.initializer))]
        if t.dims:
            t.dims[rng.randrange(len(t.dims))] = rng.choice([0, 1, 3, 7, 1 << 40])
    elif kind == 6:
        d = g.input[0].type.tensor_type.shape.dim[rng.randrange(2)]
        if rng.random() < 0.5:
            d.dim_value = rng.choice([0, 1, 3, 1 << 40])
        else:
            d.dim_param = "s"
    elif kind == 7:
        m.opset_import[0].version = rng.choice([10, 13, 17, 18, 21])
    else:
        n.output[0] = rng.choice([x for node in g.node for x in node.output])


# Decoders compile for training; the encoders (bidirectional attention,
# token-type rows, hidden-state outputs) forward-only.
FIXTURE_FLAGS = [("gpt-tiny-torch-export.onnx", []), ("llama-tiny-torch-export.onnx", []),
                 ("distilbert-tiny-torch-export.onnx", ["--forward-only"]),
                 ("minilm-tiny-torch-export.onnx", ["--forward-only"]),
                 ("generic-tiny-torch-export.onnx", []),
                 ("corpus/gpt2-ts17.onnx", ["--tie-embeddings"]),
                 ("corpus/llama3rope-ts17.onnx", [])]


def mutate_bytes(data):
    """The serialized model with bytes overwritten, or cut short."""
    b = bytearray(data)
    if rng.random() < 0.3:
        return bytes(b[:rng.randrange(1, len(b))])
    for _ in range(rng.randrange(1, 5)):
        b[rng.randrange(len(b))] = rng.randrange(256)
    return bytes(b)


def main():
    models = [onnx.load(os.path.join(FIXTURES, f), load_external_data=False)
              for f, _ in FIXTURE_FLAGS]
    # External data (integer buffers the import folds) beside the mutants.
    for f, _ in FIXTURE_FLAGS:
        data = os.path.join(FIXTURES, f + ".data")
        if os.path.exists(data):
            shutil.copyfile(data, os.path.join(OUT, os.path.basename(f) + ".data"))
    seen = {0: 0, 1: 0}
    bad = changed = 0
    raised = []
    for k, m in enumerate(models):
        path = os.path.join(OUT, f"original{k}.onnx")
        onnx.save(m, path)
        raised.append(subprocess.run([BIN, path, "--emit-mlir", "forward",
                                      *FIXTURE_FLAGS[k][1]], capture_output=True, errors="replace",
                                     text=True, timeout=300).stdout)
    for i in range(N):
        m = onnx.ModelProto()
        k = rng.randrange(len(models))
        m.CopyFrom(models[k])
        path = os.path.join(OUT, f"m{i}.onnx")
        if rng.random() < 1 / 3:
            with open(path, "wb") as f:
                f.write(mutate_bytes(m.SerializeToString()))
        else:
            for _ in range(rng.randrange(1, 4)):
                mutate(m)
            onnx.save(m, path)
        r = subprocess.run([BIN, path, "--emit-mlir", "forward", *FIXTURE_FLAGS[k][1]],
                           capture_output=True, text=True, errors="replace", timeout=300,
                           env=dict(os.environ, ASAN_OPTIONS="detect_leaks=0"))
        if r.returncode in seen and "Sanitizer" not in r.stderr and "runtime error" not in r.stderr:
            seen[r.returncode] += 1
            # A mutant that compiles to other ops than its original is kept
            # for a look: it must be a model weft implements exactly.
            if r.returncode == 0 and r.stdout.replace(f"m{i}", f"original{k}") != raised[k]:
                changed += 1
                open(path + ".mlir", "w").write(r.stdout)
            else:
                os.remove(path)
            continue
        bad += 1
        open(path + ".log", "w").write(r.stdout[-3000:] + r.stderr[-6000:])
        print(f"FAIL m{i}.onnx: exit {r.returncode}: {r.stderr.strip()[-400:]}")
    print(f"{N} mutants: {seen[0]} compiled ({changed} to other ops than the "
          f"original, kept in {OUT}), {seen[1]} refused, {bad} failed")
    sys.exit(1 if bad else 0)


main()
