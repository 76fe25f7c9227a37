"""ONNX files made the way users make them train as PyTorch says.

  exporter_corpus.py BINDIR WORKDIR

fixtures/corpus/ holds tiny Hugging Face models (random weights, transformers
4.46, torch 2.15; fixtures/corpus5/ two of them from transformers 5.25)
exported by both torch.onnx exporters: TorchScript
(`dynamo=False`, opsets 14 and 17) and dynamo (opset 18, optimize=False),
with PyTorch's loss on the fixture's tokens in each .json
(fixtures/export_exporter_corpus.py made them; it regenerates them where
torch is installable). For each committed export:
  1. f32: weft's first loss on the json's tokens is PyTorch's (1e-5
     relative);
  2. f64: the TorchScript export trains like the dynamo export of the same
     model (4 steps, losses 1e-9 relative): a tied head that the TorchScript
     exporter writes as a transposed copy trains tied (--tie-embeddings);
  3. f64: dp=2 trains like one rank, and tp=2 megatron where the graph
     (tp=2 and tp=4 also on a GPT-2 of 251 ids, made by Debian's torch 1.13
     and transformers 4.46: fixtures/export_gpt2_vocab251_onnx.py, which
     weft-pad-vocab pads)
     raises to weft's layers (GPT-2, Llama and Qwen2 from both exporters,
     and Mistral, whose banded mask raises to weft.attention's window);
     pp=2 for the TorchScript Llama and BERT; cp=2 (context parallelism)
     for every export: exact, or refused by name (the BERT classifier's
     per-sample labels keep the natural order, so its pooler reads the
     first token gathered);
  4. every parameter is in the layer the exporter's graph puts it in: the
     TorchScript exporter names a transposed weight "onnx::MatMul_594" and
     the node that reads it "/model/layers.0/self_attn/q_proj/MatMul"
     (before, such weights all went to the head's stage, and BERT's pp=2
     did not compile).
The exporter traps (a copy of a tied head, a position table folded into a
constant by optimize=True) are refused by name: test/tools/onnx-traps.test.
"""
import json
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_util import launch, run  # noqa: E402

BIN, WORK = sys.argv[1], sys.argv[2]
CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "corpus")
os.makedirs(WORK, exist_ok=True)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# fixture -> (compile flags, the dynamo export it trains like, layouts)
FIXTURES = {
    "gpt2-ts17": (["--tie-embeddings"], "gpt2-dyn18",
                  [["dp=2"], ["tp=2", "--layout", "megatron"]]),
    "gpt2-dyn18": ([], None, [["dp=2"], ["tp=2", "--layout", "megatron"]]),
    # An odd vocabulary (251, as GPT-2's 50,257 divides by no tp): the
    # tp=2 layout pads it (weft-pad-vocab), exactly; so does ZeRO on dp.
    "gpt2-v251-ts17": (["--tie-embeddings"], None,
                       [["dp=2"], ["tp=2", "--layout", "megatron"],
                        ["tp=4", "--layout", "megatron"],
                        ["dp=2", "--zero", "1"], ["dp=2", "--zero", "3"]]),
    "qwen2-tied-ts14": (["--tie-embeddings"], None,
                        [["dp=2"], ["tp=2", "--layout", "megatron"]]),
    "llama3rope-ts17": ([], "llama3rope-dyn18",
                        [["dp=2"], ["tp=2", "--layout", "megatron"], ["pp=2"]]),
    "llama3rope-dyn18": ([], None, [["dp=2"], ["tp=2", "--layout", "megatron"]]),
    "mistral-sw8-ts14": ([], None, [["dp=2"], ["tp=2", "--layout", "megatron"]]),
    "bert-cls-ts17": (["--loss", "cross-entropy", "--classes", "3"], None,
                      [["dp=2"], ["pp=2"]]),
}


def inputs(name, meta):
    """weft-run's data flags for the json's tokens (and labels)."""
    w = f"{WORK}/{name}"
    if "labels" in meta:
        np.save(f"{w}.tok.npy", np.array(meta["tokens"], dtype=np.int64))
        np.save(f"{w}.lab.npy", np.array(meta["labels"], dtype=np.int64))
        return ["--tokens", f"{w}.tok.npy", "--targets", f"{w}.lab.npy"]
    np.array(meta["ids"], dtype="<u2").tofile(f"{w}.ids.bin")
    return ["--data", f"{w}.ids.bin"]


def losses(name, flags, dtype, steps, mesh=None, corpus=CORPUS):
    meta = json.load(open(f"{corpus}/{name}.json"))
    onnx = f"{corpus}/{name}.onnx"
    tag = f"{name}-{dtype}-{'-'.join(mesh or ['one'])}".replace("=", "")
    prog = f"{WORK}/{tag}.weft"
    layout = ["--mesh"] + mesh if mesh else []
    run([f"{BIN}/weft-compile", onnx, "--batch", str(meta["batch"]), "--seq",
         str(meta["seq"]), "--dtype", dtype, "--quiet", "-o", prog] + flags + layout)
    metrics = f"{WORK}/{tag}.jsonl"
    if os.path.exists(metrics):
        os.remove(metrics)
    ranks = int(mesh[0].split("=")[1]) if mesh else 1
    run(launch(ranks) + [f"{BIN}/weft-run", prog, "--steps", str(steps), "--threads",
                         "1", "--load", onnx, "--metrics", metrics, "--quiet"] +
        inputs(name, meta))
    return meta, [json.loads(line)["loss"] for line in open(metrics)]


def rel(a, b):
    return max(abs(x - y) / abs(y) for x, y in zip(a, b))


def layers_as_exported(name, flags):
    """Params whose weft.layer differs from the number in the scope of the
    node that first reads them (where that scope has one)."""
    import onnx
    import re
    g = onnx.load(f"{CORPUS}/{name}.onnx", load_external_data=False).graph
    inits = {t.name for t in g.initializer}
    reader = {}
    for n in g.node:
        for i in n.input:
            if i in inits:
                reader.setdefault(i, n.name)
    meta = json.load(open(f"{CORPUS}/{name}.json"))
    ir = run([f"{BIN}/weft-compile", f"{CORPUS}/{name}.onnx", "--batch", str(meta["batch"]),
              "--seq", str(meta["seq"]), "--emit-mlir=forward", "-o", f"{WORK}/layers.weft"]
             + flags)
    wrong = []
    for p, layer in re.findall(r'weft.param "([^"]+)" \{[^}]*weft.layer = (-?\d+)', ir):
        m = re.search(r"(^|[./])(h|layers|layer|blocks)\.(\d+)[./]", reader.get(p, ""))
        if m and int(m.group(3)) != int(layer):
            wrong.append(f"{p} in layer {layer}, read by {reader[p]}")
    return wrong


failures = []
for name, (flags, twin, layouts) in FIXTURES.items():
    wrong = layers_as_exported(name, flags)
    if wrong:
        failures.append(f"{name}: parameters in the wrong layer: {wrong[:3]}")
    meta, first = losses(name, flags, "f32", 1)
    err = abs(first[0] - meta["loss"]) / abs(meta["loss"])
    print(f"{name}: {meta['exporter']} opset {meta['opset']}: loss {first[0]:.7f}, "
          f"PyTorch {meta['loss']:.7f} (rel {err:.1e})")
    if err > 1e-5:
        failures.append(f"{name}: first loss {first[0]} vs PyTorch {meta['loss']}")
    _, one = losses(name, flags, "f64", 4)
    if twin:
        _, other = losses(twin, FIXTURES[twin][0], "f64", 4)
        e = rel(one, other)
        print(f"  trains like {twin} (4 f64 steps): rel {e:.1e}")
        if e > 1e-9:
            failures.append(f"{name}: trains unlike {twin}: {one} vs {other}")
    for mesh in layouts:
        _, got = losses(name, flags, "f64", 4, mesh)
        e = rel(got, one)
        print(f"  {' '.join(mesh)} trains like one rank: rel {e:.1e}")
        if e > 1e-9:
            failures.append(f"{name} on {' '.join(mesh)}: {got} vs one rank {one}")
    # Context parallelism, all-gather, all-to-all and ring attention: exact, or
    # refused by name (an op reading a sequence held out of order; heads
    # the cp ranks cannot share).
    meta = json.load(open(f"{CORPUS}/{name}.json"))
    for mesh in (["cp=2"], ["cp=2", "--context-parallel", "all-to-all"],
                 ["cp=2", "--context-parallel", "ring"]):
        what = " ".join(mesh)
        r = subprocess.run([f"{BIN}/weft-compile", f"{CORPUS}/{name}.onnx",
                            "--batch", str(meta["batch"]), "--seq", str(meta["seq"]),
                            "--dtype", "f64", "--quiet", "--mesh"] + mesh +
                           ["-o", f"{WORK}/{name}-cp-probe.weft"] + flags,
                           capture_output=True, text=True)
        if r.returncode != 0:
            refusal = [ln for ln in r.stderr.splitlines() if "error:" in ln]
            print(f"  {what} refused: "
                  f"{refusal[0][:120] if refusal else r.stderr[-200:]}")
            if r.returncode != 1 or not refusal:
                failures.append(f"{name} on {what}: refused badly "
                                f"(exit {r.returncode})")
            continue
        _, got = losses(name, flags, "f64", 4, mesh)
        e = rel(got, one)
        print(f"  {what} trains like one rank: rel {e:.1e}")
        if e > 1e-9:
            failures.append(f"{name} on {what}: {got} vs one rank {one}")
# Parameters a pipeline stage reads but another stage owns (a replica,
# received after each optimizer step): the BERT export with its node names
# cleared, so that its onnx::MatMul_N weights have no layer but the head's
# and its layer-0 biases are read in the last stage. The replicas' sends
# used to come in reverse order of their receives ("transfers between two
# stages pair in order").
def stripped_bert():
    import onnx
    import shutil
    m = onnx.load(f"{CORPUS}/bert-cls-ts17.onnx")
    for n in m.graph.node:
        n.name = ""
    onnx.save(m, f"{WORK}/bert-noscope.onnx")
    shutil.copy(f"{CORPUS}/bert-cls-ts17.json", f"{WORK}/bert-noscope.json")


stripped_bert()
bert_flags = FIXTURES["bert-cls-ts17"][0]
_, one = losses("bert-noscope", bert_flags, "f64", 4, corpus=WORK)
_, got = losses("bert-noscope", bert_flags, "f64", 4, ["pp=2"], corpus=WORK)
e = rel(got, one)
print(f"bert-cls-ts17 with replicas in the last stage: pp=2 trains like one rank: rel {e:.1e}")
if e > 1e-9:
    failures.append(f"bert with replicas on pp=2: {got} vs one rank {one}")
# transformers 5.25 (fixtures/corpus5, the same script in the bench venv):
# its decoders export through the dynamo exporter only (TorchScript stops
# at aten::diff in the masking functions). PyTorch's first loss, and dp=2
# and tp=2 train like one rank.
CORPUS5 = os.path.join(os.path.dirname(CORPUS), "corpus5")
for name in ("llama3rope-dyn18", "mistral-sw8-dyn18"):
    meta, first = losses(name, [], "f32", 1, corpus=CORPUS5)
    err = abs(first[0] - meta["loss"]) / abs(meta["loss"])
    print(f"{name} (transformers {meta['transformers']}): loss {first[0]:.7f}, "
          f"PyTorch {meta['loss']:.7f} (rel {err:.1e})")
    if err > 1e-5:
        failures.append(f"{name} (transformers 5): first loss {first[0]} vs {meta['loss']}")
    _, one = losses(name, [], "f64", 4, corpus=CORPUS5)
    for mesh in (["dp=2"], ["tp=2", "--layout", "megatron"]):
        _, got = losses(name, [], "f64", 4, mesh, corpus=CORPUS5)
        e = rel(got, one)
        print(f"  {' '.join(mesh)} trains like one rank: rel {e:.1e}")
        if e > 1e-9:
            failures.append(f"{name} (transformers 5) on {' '.join(mesh)}: {got} vs {one}")
if failures:
    sys.exit("FAIL:\n  " + "\n  ".join(failures))
print(f"PASS: {len(FIXTURES) + 2} exports")
