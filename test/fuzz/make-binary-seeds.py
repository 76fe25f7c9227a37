#!/usr/bin/env python3
"""Writes the tiny binary seeds of test/fuzz/corpus/ (make-corpus.sh calls it):
safetensors files in the layout weft and the safetensors package write, token
files in nanoGPT's and llm.c's formats, and weft-plan hardware files. The
token target reads two leading bytes (vocabulary and sequence length) before
the file."""
import json
import os
import struct
import sys

out = sys.argv[1]


def safetensors(name, tensors, metadata=None, pad=True):
    header, data = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for tname, dtype, shape, payload in tensors:
        header[tname] = {"dtype": dtype, "shape": shape,
                         "data_offsets": [len(data), len(data) + len(payload)]}
        data += payload
    h = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        h += b" " * (-len(h) % 8)
    with open(os.path.join(out, "safetensors", name), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)


f32 = lambda *v: struct.pack("<%df" % len(v), *v)
f64 = lambda *v: struct.pack("<%dd" % len(v), *v)
safetensors("f32.safetensors", [("wte.weight", "F32", [2, 3],
                                 f32(1, -2, 3.5, 0, 1e-3, -7))])
safetensors("f64-scalar.safetensors", [("s", "F64", [], f64(2.5))],
            metadata={"format": "pt"})
safetensors("f16-bf16.safetensors", [
    ("h", "F16", [4], struct.pack("<4H", 0x3c00, 0x0001, 0x7c00, 0xfe00)),
    ("b", "BF16", [2, 1], struct.pack("<2H", 0x3f80, 0xff80)),
    ("i", "I64", [1], struct.pack("<q", -1))])
safetensors("empty.safetensors", [("z", "F32", [0, 4], b"")], pad=False)

tok = os.path.join(out, "tokens")
ids = [(i * 37) % 250 for i in range(40)]
# vocab byte 1 -> vocab 513; seq byte 7 -> seq 8
pre = bytes([1, 7])
with open(os.path.join(tok, "nanogpt.bin"), "wb") as f:
    f.write(pre + struct.pack("<%dH" % len(ids), *ids))
for version, fmt in ((1, "H"), (2, "I")):
    hdr = struct.pack("<256i", 20240520, version, len(ids), *([0] * 253))
    with open(os.path.join(tok, "llmc-v%d.bin" % version), "wb") as f:
        f.write(pre + hdr + struct.pack("<%d%s" % (len(ids), fmt), *ids))

link = {"bandwidth_gbps": 300, "latency_us": 3, "efficiency": 0.8}
hw = {"name": "x", "compute_dtype": "bf16", "gpus_per_node": 8,
      "peak_tflops": 312, "memory_gb": 80, "hbm_gbps": 2000,
      "links": {"intra_node": link,
                "inter_node": dict(link, bandwidth_gbps=25, latency_us=8)},
      "gemm_efficiency": {"max": 0.7, "half_dim": 160}}
with open(os.path.join(out, "hardware", "a100-like.json"), "w") as f:
    json.dump(hw, f, indent=2)
hw.update(name="cpu", compute_dtype="f32", gpus_per_node=1,
          measured="2026-11-30")
with open(os.path.join(out, "hardware", "local-like.json"), "w") as f:
    json.dump(hw, f)


# ONNX models whose initializers are weights (python3-onnx): every encoding
# the reader takes, constants it skips, and an external-data reference.
def onnx_seeds():
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper
    os.makedirs(os.path.join(out, "onnx"), exist_ok=True)
    ext = TensorProto(name="ext", data_type=TensorProto.FLOAT, dims=[2])
    ext.data_location = TensorProto.EXTERNAL
    for k, v in (("location", "w.bin"), ("offset", "0"), ("length", "8")):
        e = ext.external_data.add()
        e.key, e.value = k, v
    inits = [
        numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "raw"),
        helper.make_tensor("typed", TensorProto.FLOAT, [3], [1.0, -2.0, 0.5]),
        helper.make_tensor("dbl", TensorProto.DOUBLE, [2], [1e-3, 7.0]),
        helper.make_tensor("half", TensorProto.FLOAT16, [2], [0x3c00, 0x7c00]),
        helper.make_tensor("bf", TensorProto.BFLOAT16, [1], [0x3f80]),
        numpy_helper.from_array(np.array([4, 2], dtype=np.int64), "shape_const"),
        numpy_helper.from_array(np.zeros((0, 4), dtype=np.float32), "empty"),
        ext,
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    for name, init in (("weights.onnx", inits[:-1]), ("external.onnx", inits)):
        g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g", [x], [y],
                              initializer=init)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        with open(os.path.join(out, "onnx", name), "wb") as f:
            f.write(m.SerializeToString())


onnx_seeds()
