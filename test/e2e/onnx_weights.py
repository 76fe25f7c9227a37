#!/usr/bin/python3
"""weft-run --load model.onnx: an ONNX model's initializers as weights.

Trains gpt-tiny (f64) for 2 steps and saves it, writes the saved weights as
the initializers of an ONNX model (python3-onnx), in every encoding a
model can use (raw_data, the typed double_data field, an external data
file beside the model) next to initializers that hold no weights (an int64
shape constant, a bool mask), then checks that training continued from
the .onnx file matches training continued from the checkpoint bit for bit,
on one rank and on tp=2; and that broken files are refused by name.

  onnx_weights.py BINDIR TOKENS WORKDIR
"""
import json
import os
import struct
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_util import MPIRUN  # noqa: E402

BIN, TOKENS, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(WORK, exist_ok=True)


def run(cmd, ok=True):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if ok and r.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {r.returncode}\n{r.stdout}")
    return r


def read_safetensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        dtype = {"F64": np.float64, "F32": np.float32}[t["dtype"]]
        out[name] = np.frombuffer(raw[8 + n + a:8 + n + b], dtype=dtype).reshape(t["shape"])
    return out


def write_onnx(weights, path, external_dir):
    inits = []
    names = sorted(weights)
    for i, name in enumerate(names):
        w = weights[name]
        if i % 3 == 0:  # raw_data
            inits.append(numpy_helper.from_array(w, name))
        elif i % 3 == 1:  # the typed field (double_data)
            inits.append(helper.make_tensor(name, TensorProto.DOUBLE, w.shape,
                                            w.flatten().tolist(), raw=False))
        else:  # external data beside the model
            fname = f"w{i}.bin"
            w.astype("<f8").tofile(os.path.join(external_dir, fname))
            t = TensorProto(name=name, data_type=TensorProto.DOUBLE, dims=w.shape)
            t.data_location = TensorProto.EXTERNAL
            for k, v in (("location", fname), ("offset", "0"), ("length", str(w.nbytes))):
                e = t.external_data.add()
                e.key, e.value = k, v
            inits.append(t)
    # Initializers that hold no weights: skipped by the loader.
    inits.append(numpy_helper.from_array(np.array([2, 16], dtype=np.int64), "shape_const"))
    inits.append(numpy_helper.from_array(np.tril(np.ones((4, 4), dtype=bool)), "causal_mask"))
    x = helper.make_tensor_value_info("input_ids", TensorProto.INT64, [2, 16])
    y = helper.make_tensor_value_info("out", TensorProto.INT64, [2, 16])
    graph = helper.make_graph([helper.make_node("Identity", ["input_ids"], ["out"])],
                              "weights", [x], [y], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with open(path, "wb") as f:
        f.write(model.SerializeToString())


def losses(metrics):
    return [json.loads(line)["loss"] for line in open(metrics)]


def train(prog, load, metrics, ranks=1):
    cmd = [f"{BIN}/weft-run", prog, "--data", TOKENS, "--steps", "3", "--threads", "1",
           "--load", load, "--metrics", metrics, "--quiet"]
    run((MPIRUN + ["-np", str(ranks)] if ranks > 1 else []) + cmd)
    return losses(metrics)


def main():
    one = os.path.join(WORK, "one.weft")
    tp2 = os.path.join(WORK, "tp2.weft")
    for prog, mesh in ((one, []), (tp2, ["--mesh", "tp=2", "--layout", "megatron"])):
        run([f"{BIN}/weft-compile", "gpt-tiny", "--batch", "2", "--seq", "16", "--dtype", "f64",
             "-o", prog, "--quiet"] + mesh)
    ckpt = os.path.join(WORK, "ckpt")
    run([f"{BIN}/weft-run", one, "--data", TOKENS, "--steps", "2", "--threads", "1",
         "--save", ckpt, "--quiet"])
    weights = read_safetensors(os.path.join(ckpt, "model.safetensors"))
    model = os.path.join(WORK, "model.onnx")
    write_onnx(weights, model, WORK)
    onnx.checker.check_model(model)

    for prog, ranks in ((one, 1), (tp2, 2)):
        a = train(prog, os.path.join(ckpt, "model.safetensors"), os.path.join(WORK, "a.jsonl"), ranks)
        b = train(prog, model, os.path.join(WORK, "b.jsonl"), ranks)
        if a != b:
            sys.exit(f"FAIL: ranks={ranks}: losses from the checkpoint {a} != from the .onnx {b}")
        print(f"ranks={ranks}: losses from model.onnx equal the checkpoint's: {b}")

    # Broken files are refused, naming what is wrong.
    raw = open(model, "rb").read()
    cases = []
    trunc = os.path.join(WORK, "truncated.onnx")
    open(trunc, "wb").write(raw[:len(raw) // 2])
    cases.append((trunc, "is not an ONNX model"))
    m = onnx.load(model, load_external_data=False)
    bad = os.path.join(WORK, "badraw.onnx")
    t = next(t for t in m.graph.initializer if t.HasField("raw_data"))
    t.raw_data = t.raw_data[:-8]
    open(bad, "wb").write(m.SerializeToString())
    cases.append((bad, f"initializer '{t.name}': raw_data holds"))
    m = onnx.load(model, load_external_data=False)
    far = os.path.join(WORK, "far.onnx")
    t = next(t for t in m.graph.initializer if t.data_location == TensorProto.EXTERNAL)
    for e in t.external_data:
        if e.key == "offset":
            e.value = "1000000"
    open(far, "wb").write(m.SerializeToString())
    cases.append((far, f"initializer '{t.name}': external data bytes"))
    m = onnx.load(model, load_external_data=False)
    shape = os.path.join(WORK, "shape.onnx")
    t = next(t for t in m.graph.initializer if t.HasField("raw_data") and len(t.dims) == 2)
    w = numpy_helper.to_array(t)
    t.CopyFrom(numpy_helper.from_array(w.reshape(-1), t.name))
    open(shape, "wb").write(m.SerializeToString())
    cases.append((shape, t.name))
    half = os.path.join(WORK, "half.onnx")
    m = onnx.load(model, load_external_data=False)
    t = next(t for t in m.graph.initializer if t.name == "transformer.ln_f.weight")
    t.CopyFrom(TensorProto(name=t.name, data_type=TensorProto.FLOAT16, dims=[64]))
    t.int32_data.extend([0x3C00, 0x1FFFF] + [0x3C00] * 62)  # [1] is no 16-bit pattern
    open(half, "wb").write(m.SerializeToString())
    cases.append((half, "int32_data[1] = 131071 is not the 16 bits of a half float"))
    for path, want in cases:
        r = run([f"{BIN}/weft-run", one, "--data", TOKENS, "--steps", "1", "--load", path,
                 "--quiet"], ok=False)
        if r.returncode == 0 or want not in r.stdout:
            sys.exit(f"FAIL: {os.path.basename(path)}: expected an error containing {want!r}, "
                     f"got exit {r.returncode}:\n{r.stdout}")
        print(f"refused {os.path.basename(path)}: "
              f"{next(l for l in r.stdout.splitlines() if want in l).strip()}")
    # A real export: torch.onnx.export of Hugging Face's GPT-2 in gpt-tiny's
    # shape (fixtures/export_gpt_tiny_onnx.py; external data, the tied
    # table only as lm_head.weight). weft's first loss on the fixture's
    # tokens equals PyTorch's cross-entropy there (f32).
    fixtures = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
    ref = json.load(open(os.path.join(fixtures, "gpt-tiny-torch-export.json")))
    toks = os.path.join(WORK, "ids.bin")
    np.array(ref["ids"], dtype="<u2").tofile(toks)
    f32 = os.path.join(WORK, "f32.weft")
    run([f"{BIN}/weft-compile", "gpt-tiny", "--batch", str(ref["batch"]), "--seq", str(ref["seq"]),
         "-o", f32, "--quiet"])
    metrics = os.path.join(WORK, "export.jsonl")
    run([f"{BIN}/weft-run", f32, "--data", toks, "--steps", "1", "--threads", "1", "--load",
         os.path.join(fixtures, "gpt-tiny-torch-export.onnx"), "--metrics", metrics, "--quiet"])
    got = losses(metrics)[0]
    rel = abs(got - ref["loss"]) / abs(ref["loss"])
    if rel > 1e-5:
        sys.exit(f"FAIL: the torch export's first loss {got} != PyTorch's {ref['loss']} (rel {rel:.2e})")
    print(f"torch export: first loss {got:.6f}, PyTorch {ref['loss']:.6f} (relative {rel:.1e})")
    print("PASS: ONNX initializers load as weights")


main()
