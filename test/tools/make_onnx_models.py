"""Writes small ONNX models for weft-compile-onnx.test into DIR:

  make_onnx_models.py DIR FIXTURE

  bigram.onnx    good: ids [2, 4] -> Gather(wte) -> MatMul(., wte^T), a tied
                 one-layer-free model weft imports and raises
  dynamic.onnx   the same with ids [batch, seq] symbolic
  truncated.onnx the first half of FIXTURE's bytes
  unknown.onnx   a Hardmax, which weft does not import
  generic.onnx   an Erf no pattern raises (no GELU around it): the generic path
  constant.onnx  x + a constant [4, 8] (a constant buffer of the program)
  relu_where.onnx  Where(And(Not(IsNaN(x)), Greater(x, 0)), x, 0): a
                 condition computed from the input, relu for finite x
  relu.onnx      Relu(x), to train beside relu_where.onnx
  clamp.onnx     Max(c, -x) + Min(c, x), c = Clip(x, mean(x), 0.5): torch's
                 maximum, minimum and clamp, by a computed and a constant
                 bound, for a gradient check
  buffer.onnx    x * scale, scale [8] an initializer torch.export's graph
                 signature calls a BUFFER (in the graph's metadata_props,
                 field 16 from ONNX IR 10, written here by hand)
  unmarked.onnx  the same without the signature: scale is a weight
  lifted.onnx    the same, scale a CONSTANT_TENSOR (torch's lifted constant)
  mutated.onnx   the same, the forward updating scale (BUFFER_MUTATION)
  softmax_axis.onnx  a Softmax over axis 1 (moved last for weft.softmax)
  shape.onnx     a Gemm whose weight [5, 8] does not contract with [.., 8]
  declared.onnx  logits declared [2, 4, 32] where the table makes 16
  opset.onnx     opset 6 (before numpy broadcasting)
  inputs.onnx    a second input, attention_mask, which nothing reads
  inputs3.onnx   input_ids, attention_mask and position_ids
  types_cast.onnx  token_type_ids cast before the table reads them
  meta_corrupt.onnx  the embedding node with a metadata_props entry (field 9,
                 which ONNX 1.12's schema lacks) of corrupt bytes: onnx 1.2x
                 refuses the file ("Wire format was corrupt")
  meta_ok.onnx   the same entry well formed (the dynamo exporter writes them)
  field99.onnx   the embedding node with a field 99, no ONNX version's
  mask_cumsum.onnx  positions counted from attention_mask (CumSum)
  mask_hidden.onnx  attention_mask multiplying the hidden states
  mask_scores.onnx  attention_mask added to scores that are no attention
  mask_gather.onnx  the same mask picked per score from the flattened
                 attention_mask (transformers 5's masks through TorchScript:
                 Flatten, then Gather at b * seq + k)
  mask_gather_shifted.onnx  the same, each score picking the next key's
  no_outputs.onnx  the bigram with no graph outputs
  ir0/ir99.onnx, both_data.onnx, short_weights.onnx, duplicate_weights.onnx,
  external_{escape,absolute,missing}.onnx: malformed headers and weights
  domain.onnx    a node of the com.microsoft domain
  attrtype.onnx  the head's Transpose with perm as FLOATS (onnx.checker and
                 onnxruntime refuse it; read as the default it would be
                 another model)
  redefined.onnx a node whose output reuses the name of an earlier value
  attr_unknown.onnx, attr_flag.onnx, output_int.onnx: an attribute the op
                 lacks, a flag out of its domain, logits declared int64
  half_table.onnx, cast_bf16.onnx: a float16 table, a cast to bfloat16
                 (half-precision exports: weft imports f32 and f64)
"""
import os
import sys

import numpy as np
from onnx import GraphProto, StringStringEntryProto, TensorProto, helper, numpy_helper, save

out, fixture = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(0)
WTE = numpy_helper.from_array(rng.standard_normal((16, 8)).astype(np.float32), "wte")


def model(nodes, inits, ids_dims=(2, 4), opset=17, extra_inputs=(), logits_dims=(2, 4, 16)):
    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, list(ids_dims))
    logits = helper.make_tensor_value_info("logits", TensorProto.FLOAT, list(logits_dims))
    graph = helper.make_graph(nodes, "g", [ids, *extra_inputs], [logits], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def head(x="x"):
    return [helper.make_node("Transpose", ["wte"], ["wteT"], name="t", perm=[1, 0]),
            helper.make_node("MatMul", [x, "wteT"], ["logits"], name="head")]


embed = helper.make_node("Gather", ["wte", "input_ids"], ["x"], name="embed", axis=0)
save(model([embed] + head(), [WTE]), f"{out}/bigram.onnx")
save(model([embed] + head(), [WTE], ids_dims=("batch", "seq"),
           logits_dims=("batch", "seq", 16)), f"{out}/dynamic.onnx")
data = open(fixture, "rb").read()
open(f"{out}/truncated.onnx", "wb").write(data[: len(data) // 2])
save(model([embed, helper.make_node("Hardmax", ["x"], ["h"], name="hardmax")] + head("h"),
           [WTE]), f"{out}/unknown.onnx")
save(model([embed, helper.make_node("Erf", ["x"], ["e"], name="erf")] + head("e"), [WTE]),
     f"{out}/generic.onnx")
table = helper.make_node("Constant", [], ["table"], value=numpy_helper.from_array(
    np.ones((4, 8), np.float32), "table"))
save(model([embed, table, helper.make_node("Add", ["x", "table"], ["a"], name="plus_table")]
           + head("a"), [WTE]), f"{out}/constant.onnx")
zero = helper.make_node("Constant", [], ["zero"], value=numpy_helper.from_array(
    np.zeros((), np.float32), "zero"))
save(model([embed, zero, helper.make_node("IsNaN", ["x"], ["nan"], name="nan"),
            helper.make_node("Not", ["nan"], ["ok"], name="ok"),
            helper.make_node("Greater", ["x", "zero"], ["pos"], name="positive"),
            helper.make_node("And", ["ok", "pos"], ["keep"], name="keep"),
            helper.make_node("Where", ["keep", "x", "zero"], ["r"], name="relu")]
           + head("r"), [WTE]), f"{out}/relu_where.onnx")
save(model([embed, helper.make_node("Relu", ["x"], ["r"], name="relu")] + head("r"), [WTE]),
     f"{out}/relu.onnx")
save(model([embed, helper.make_node("Softmax", ["x"], ["s"], name="softmax", axis=1)]
           + head("s"), [WTE]), f"{out}/softmax_axis.onnx")
W = numpy_helper.from_array(np.zeros((5, 8), np.float32), "fc.weight")
shape = [embed,
         helper.make_node("Reshape", ["x", "rows"], ["x2"], name="rows"),
         helper.make_node("Gemm", ["x2", "fc.weight"], ["y"], name="fc")]
rows = helper.make_node("Constant", [], ["rows"], value_ints=[-1, 8])
save(model([rows] + shape + head("y"), [WTE, W]), f"{out}/shape.onnx")
save(model([embed] + head(), [WTE], logits_dims=(2, 4, 32)), f"{out}/declared.onnx")
save(model([embed] + head(), [WTE], opset=6), f"{out}/opset.onnx")
mask = helper.make_tensor_value_info("attention_mask", TensorProto.INT64, [2, 4])
save(model([embed] + head(), [WTE], extra_inputs=[mask]), f"{out}/inputs.onnx")


def with_raw(node, raw):
    """node with raw bytes appended to its wire format: fields this onnx
    may not know, kept by protobuf as unknown fields."""
    from onnx import NodeProto
    out = NodeProto()
    out.ParseFromString(node.SerializeToString() + raw)
    return out


def entry(key, value):
    body = bytes([0x0a, len(key)]) + key + bytes([0x12, len(value)]) + value
    return bytes([0x4a, len(body)]) + body


save(model([with_raw(embed, entry(b"k", b"v"))] + head(), [WTE]), f"{out}/meta_ok.onnx")
save(model([with_raw(embed, bytes([0x4a, 3, 0x2f, 0x6d, 0x6f]))] + head(), [WTE]),
     f"{out}/meta_corrupt.onnx")
save(model([with_raw(embed, bytes([0x9a, 0x06, 1, 0]))] + head(), [WTE]), f"{out}/field99.onnx")
positions = helper.make_tensor_value_info("position_ids", TensorProto.INT64, [2, 4])
save(model([embed] + head(), [WTE], extra_inputs=[mask, positions]), f"{out}/inputs3.onnx")
types = helper.make_tensor_value_info("token_type_ids", TensorProto.INT64, [2, 4])
TTE = numpy_helper.from_array(rng.standard_normal((2, 8)).astype(np.float32), "tte")
save(model([embed, helper.make_node("Cast", ["token_type_ids"], ["tt"], name="types_cast", to=6),
            helper.make_node("Gather", ["tte", "tt"], ["t"], name="tte_at", axis=0),
            helper.make_node("Add", ["x", "t"], ["xt"], name="plus_types")] + head("xt"),
           [WTE, TTE], extra_inputs=[types]), f"{out}/types_cast.onnx")
WPE = numpy_helper.from_array(rng.standard_normal((4, 8)).astype(np.float32), "wpe")
axis1 = helper.make_node("Constant", [], ["axis1"], value=numpy_helper.from_array(
    np.array(1, np.int64), "axis1"))
save(model([embed, axis1, helper.make_node("CumSum", ["attention_mask", "axis1"], ["pos"],
                                           name="positions"),
            helper.make_node("Gather", ["wpe", "pos"], ["p"], name="wpe_at", axis=0),
            helper.make_node("Add", ["x", "p"], ["xp"], name="plus_pos")] + head("xp"),
           [WTE, WPE], extra_inputs=[mask]), f"{out}/mask_cumsum.onnx")
last = helper.make_node("Constant", [], ["last"], value_ints=[2])
save(model([embed, last, helper.make_node("Cast", ["attention_mask"], ["mf"], name="mf", to=1),
            helper.make_node("Unsqueeze", ["mf", "last"], ["m3"], name="m3"),
            helper.make_node("Mul", ["x", "m3"], ["xm"], name="zero_padding")] + head("xm"),
           [WTE], extra_inputs=[mask]), f"{out}/mask_hidden.onnx")
mid = helper.make_node("Constant", [], ["mid"], value_ints=[1])
save(model([embed, mid, helper.make_node("Cast", ["attention_mask"], ["mf"], name="mf", to=1),
            helper.make_node("Unsqueeze", ["mf", "mid"], ["m3"], name="m3"),
            helper.make_node("Transpose", ["x"], ["xt"], name="xt", perm=[0, 2, 1]),
            helper.make_node("MatMul", ["x", "xt"], ["s"], name="scores"),
            helper.make_node("Add", ["s", "m3"], ["sm"], name="plus_mask"),
            helper.make_node("MatMul", ["sm", "x"], ["y"], name="mix")] + head("y"),
           [WTE], extra_inputs=[mask]), f"{out}/mask_scores.onnx")
for name, shift in (("mask_gather", 0), ("mask_gather_shifted", 1)):
    at = np.array([[[b * 4 + (k + shift) % 4 for k in range(4)]] for b in range(2)])
    save(model([embed, helper.make_node("Cast", ["attention_mask"], ["mf"], name="mf", to=1),
                helper.make_node("Flatten", ["mf"], ["flat"], name="flat", axis=2),
                helper.make_node("Constant", [], ["at"], name="at",
                                 value=numpy_helper.from_array(at.astype(np.int64))),
                helper.make_node("Gather", ["flat", "at"], ["picked"], name="picked", axis=0),
                helper.make_node("Constant", [], ["to3"], value_ints=[2, 1, 4]),
                helper.make_node("Reshape", ["picked", "to3"], ["m3"], name="m3"),
                helper.make_node("Transpose", ["x"], ["xt"], name="xt", perm=[0, 2, 1]),
                helper.make_node("MatMul", ["x", "xt"], ["s"], name="scores"),
                helper.make_node("Add", ["s", "m3"], ["sm"], name="plus_mask"),
                helper.make_node("MatMul", ["sm", "x"], ["y"], name="mix")] + head("y"),
               [WTE], extra_inputs=[mask]), f"{out}/{name}.onnx")
fused = helper.make_node("FastGelu", ["x"], ["g"], name="fastgelu", domain="com.microsoft")
m = model([embed, fused] + head("g"), [WTE])
m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
save(m, f"{out}/domain.onnx")
bad_perm = helper.make_node("Transpose", ["wte"], ["wteT"], name="t")
bad_perm.attribute.append(helper.make_attribute("perm", [1.0, 0.0]))
save(model([embed, bad_perm, helper.make_node("MatMul", ["x", "wteT"], ["logits"], name="head")],
           [WTE]), f"{out}/attrtype.onnx")
again = helper.make_node("Identity", ["x"], ["x"], name="again")
save(model([embed, again] + head(), [WTE]), f"{out}/redefined.onnx")
# No LM head: the output is hidden states [2, 4, 24] (a projection wider
# than the 16-token vocabulary), not logits.
P = numpy_helper.from_array(np.zeros((8, 24), np.float32), "proj")
save(model([embed, helper.make_node("MatMul", ["x", "proj"], ["logits"], name="proj")],
           [WTE, P], logits_dims=(2, 4, 24)), f"{out}/headless.onnx")
# Two outputs, the hidden states first: training names the logits.
two = model([embed] + head(), [WTE])
two.graph.output.insert(0, helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, 8]))
save(two, f"{out}/two-outputs.onnx")


def with_signature(m, text):
    """m with the dynamo exporter's graph signature in its graph's
    metadata_props (field 16, which ONNX 1.12's GraphProto does not know:
    appended as raw bytes, kept by protobuf as an unknown field)."""
    entry = StringStringEntryProto(
        key="pkg.torch.export.ExportedProgram.graph_signature", value=text).SerializeToString()
    n, size = len(entry), b""
    while True:
        size += bytes([(n & 0x7F) | (0x80 if n > 0x7F else 0)])
        n >>= 7
        if not n:
            break
    g = GraphProto()
    g.ParseFromString(m.graph.SerializeToString() + b"\x82\x01" + size + entry)
    m.graph.CopyFrom(g)
    return m


SCALE = numpy_helper.from_array(np.linspace(0.5, 2.0, 8).astype(np.float32), "scale")
scaled = [embed, helper.make_node("Mul", ["x", "scale"], ["s"], name="scaled")] + head("s")
save(with_signature(model(scaled, [WTE, SCALE]),
                    "\n# inputs\np_wte: PARAMETER target='wte'\n"
                    "b_scale: BUFFER target='scale' persistent=True\n"
                    "input_ids: USER_INPUT\n\n# outputs\nlogits: USER_OUTPUT\n"),
     f"{out}/buffer.onnx")
save(model(scaled, [WTE, SCALE]), f"{out}/unmarked.onnx")
save(with_signature(model(scaled, [WTE, SCALE]),
                    "\n# inputs\np_wte: PARAMETER target='wte'\n"
                    "c_scale: CONSTANT_TENSOR target='scale'\n"
                    "input_ids: USER_INPUT\n\n# outputs\nlogits: USER_OUTPUT\n"),
     f"{out}/lifted.onnx")
save(with_signature(model(scaled, [WTE, SCALE]),
                    "\n# inputs\np_wte: PARAMETER target='wte'\n"
                    "b_scale: BUFFER target='scale' persistent=True\n"
                    "input_ids: USER_INPUT\n\n# outputs\n"
                    "scale_1: BUFFER_MUTATION target='scale'\nlogits: USER_OUTPUT\n"),
     f"{out}/mutated.onnx")

half = numpy_helper.from_array(np.array(0.5, np.float32), "half")
save(model([embed, helper.make_node("ReduceMean", ["x"], ["lo"], name="mean", keepdims=0),
            helper.make_node("Clip", ["x", "lo", "half"], ["c"], name="clip"),
            helper.make_node("Neg", ["x"], ["nx"], name="neg"),
            helper.make_node("Max", ["c", "nx"], ["hi"], name="max"),
            helper.make_node("Min", ["c", "x"], ["low"], name="min"),
            helper.make_node("Add", ["hi", "low"], ["r"], name="sum")] + head("r"),
           [WTE, half]), f"{out}/clamp.onnx")

# no_outputs.onnx: a graph that declares no outputs (it crashed the importer).
no_out = model([embed] + head(), [WTE])
del no_out.graph.output[:]
save(no_out, f"{out}/no_outputs.onnx")

# Malformed weights and headers, each refused by weft-compile by name (they
# were accepted and refused only by weft-run --load, or not at all).
for version, label in ((0, "ir0"), (99, "ir99")):
    m = model([embed] + head(), [WTE])
    m.ir_version = version
    save(m, f"{out}/{label}.onnx")
both = numpy_helper.from_array(rng.standard_normal((16, 8)).astype(np.float32), "wte")
both.float_data.extend([0.0] * 128)  # raw_data and float_data at once
save(model([embed] + head(), [both]), f"{out}/both_data.onnx")
short = numpy_helper.from_array(rng.standard_normal((16, 8)).astype(np.float32), "wte")
short.raw_data = short.raw_data[:100]  # truncated
save(model([embed] + head(), [short]), f"{out}/short_weights.onnx")
save(model([embed] + head(), [WTE, WTE]), f"{out}/duplicate_weights.onnx")
for location, label in (("../../../../etc/passwd", "escape"), ("/dev/zero", "absolute"),
                        ("missing.bin", "missing")):
    ext = TensorProto()
    ext.name, ext.data_type = "wte", TensorProto.FLOAT
    ext.dims.extend([16, 8])
    ext.data_location = TensorProto.EXTERNAL
    entry = ext.external_data.add()
    entry.key, entry.value = "location", location
    save(model([embed] + head(), [ext]), f"{out}/external_{label}.onnx")

# An attribute the op does not have (ReduceMean's axis, opset 17), a 0/1 flag
# of another value (Reshape allowzero=2^40), logits declared int64.
mean_axis = helper.make_node("ReduceMean", ["x"], ["m"], name="mean_axis", axes=[2], axis=1)
save(model([embed, mean_axis, helper.make_node("Add", ["x", "m"], ["xm"], name="plus_mean")]
           + head("xm"), [WTE]), f"{out}/attr_unknown.onnx")
target = helper.make_node("Constant", [], ["target"], name="target",
                          value=numpy_helper.from_array(np.array([2, 4, 8], np.int64)))
reshape = helper.make_node("Reshape", ["x", "target"], ["r"], name="reshape", allowzero=1 << 40)
save(model([embed, target, reshape] + head("r"), [WTE]), f"{out}/attr_flag.onnx")
int_logits = model([embed] + head(), [WTE])
int_logits.graph.output[0].type.tensor_type.elem_type = TensorProto.INT64
save(int_logits, f"{out}/output_int.onnx")
half = numpy_helper.from_array(numpy_helper.to_array(WTE).astype(np.float16), "wte")
save(model([embed] + head(), [half]), f"{out}/half_table.onnx")
to_bf16 = helper.make_node("Cast", ["x"], ["xb"], name="to_bf16", to=TensorProto.BFLOAT16)
back = helper.make_node("Cast", ["xb"], ["xf"], name="to_f32", to=TensorProto.FLOAT)
save(model([embed, to_bf16, back] + head("xf"), [WTE]), f"{out}/cast_bf16.onnx")
# The same unknown attribute at opset 18, past the linked ONNX release's
# schemas (ReduceMean-18 reads its axes as an input).
mean18 = helper.make_node("ReduceMean", ["x"], ["m"], name="mean_axis18", axis=99)
save(model([embed, mean18, helper.make_node("Add", ["x", "m"], ["xm"], name="plus_mean")]
           + head("xm"), [WTE], opset=18), f"{out}/attr_unknown18.onnx")
