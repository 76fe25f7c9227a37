#!/usr/bin/python3
"""Tensor parallelism reads structure, not names (weft-infer-tp-roles).

For gpt-tiny and llama-tiny, the forward IR with every parameter renamed
("w0", "w1", ...) and, for the GPT-2 ONNX export, the model with every
initializer renamed (as torch.onnx's TorchScript exporter names them,
"onnx::MatMul_<n>"), compiled with --layout megatron on tp=2 and on
dp=2,tp=2 with sequence parallelism:
  - gets exactly the named model's collectives and per-rank memory
    (weft-compile --explain, names mapped back, equal line for line);
  - trains like one rank (f64): losses to 1e-9 relative at every step,
    gradients after step 1 to 1e-9.

usage: renamed_roles.py BIN_DIR DATA WORKDIR ONNX_FIXTURE
"""
import os
import re
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_util import run  # noqa: E402
from equivalence import max_rel, train  # noqa: E402

TOL = 1e-9
MESHES = [(2, ["--mesh", "tp=2", "--layout", "megatron"]),
          (4, ["--mesh", "dp=2,tp=2", "--layout", "megatron",
               "--sequence-parallel"])]
STEPS = 3


def explain(bin_dir, model, flags):
    return run([f"{bin_dir}/weft-compile", model] + flags + ["--explain"])


def unname(text, names):
    """`text` with every renamed parameter given its original name back."""
    pattern = re.compile("|".join(re.escape(n) for n in
                                  sorted(names, key=len, reverse=True)))
    return pattern.sub(lambda m: names[m.group(0)], text)


def check(bin_dir, data, work, label, named, renamed, names, common, load):
    for ranks, flags in MESHES:
        want = explain(bin_dir, named, common + flags)
        got = unname(explain(bin_dir, renamed, common + flags), names)
        # Lines of equal bytes are listed by name: compare them as sets.
        if sorted(got.splitlines()) != sorted(want.splitlines()):
            sys.exit(f"FAIL: {label} {' '.join(flags)}: the renamed model's "
                     f"collectives and memory differ from the named one's\n"
                     f"named:\n{want}\nrenamed:\n{got}")
    # The renamed model on each mesh trains like itself on one rank.
    one = f"{work}/{label}-one"
    os.makedirs(one)
    run([f"{bin_dir}/weft-compile", renamed] + common +
        ["-o", f"{one}/prog.weft", "--quiet"])
    ref_metrics, _, ref_grads = train(bin_dir, f"{one}/prog.weft", 1, data,
                                      one, STEPS, load)
    for i, (ranks, flags) in enumerate(MESHES):
        w = f"{work}/{label}-mesh{i}"
        os.makedirs(w)
        run([f"{bin_dir}/weft-compile", renamed] + common + flags +
            ["-o", f"{w}/prog.weft", "--quiet"])
        metrics, _, grads = train(bin_dir, f"{w}/prog.weft", ranks, data, w,
                                  STEPS, load)
        loss_err = max(abs(m["loss"] - r["loss"]) / abs(r["loss"])
                       for m, r in zip(metrics, ref_metrics))
        grad_err = max(max_rel(grads[k], ref_grads[k]) for k in ref_grads)
        ok = len(metrics) == STEPS and loss_err <= TOL and grad_err <= TOL
        print(f"{'ok  ' if ok else 'FAIL'} {label} np={ranks} "
              f"{' '.join(flags):50s} loss {loss_err:.1e} grad {grad_err:.1e}")
        if not ok:
            sys.exit(f"FAIL: {label} {' '.join(flags)} does not train like "
                     f"one rank")


def main():
    bin_dir, data, work, onnx_fixture = sys.argv[1:5]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    common = ["--batch", "4", "--seq", "16", "--lr", "3e-3"]
    for model in ["gpt-tiny", "llama-tiny"]:
        forward = run([f"{bin_dir}/weft-compile", model] + common +
                      ["--dtype", "f64", "--emit-mlir=forward"])
        forward = forward[forward.index("module"):]
        names = {}

        def rename(m):
            new = f"w{len(names)}"
            names[new] = m.group(1)
            return f'weft.param "{new}"'
        renamed_ir = re.sub(r'weft\.param "([^"]+)"', rename, forward)
        named_ir = f"{work}/{model}.mlir"
        renamed = f"{work}/{model}-renamed.mlir"
        with open(named_ir, "w") as f:
            f.write(forward)
        with open(renamed, "w") as f:
            f.write(renamed_ir)
        check(bin_dir, data, work, model, named_ir, renamed, names, common,
              None)

    # An ONNX export whose initializers carry no module names.
    import onnx
    model = onnx.load(onnx_fixture)
    names = {}
    for i, init in enumerate(model.graph.initializer):
        new = f"onnx::MatMul_{100 + i}"
        names[new] = init.name
    back = {v: k for k, v in names.items()}
    for init in model.graph.initializer:
        init.name = back[init.name]
    for node in model.graph.node:
        for j, name in enumerate(node.input):
            if name in back:
                node.input[j] = back[name]
    for inp in model.graph.input:
        if inp.name in back:
            inp.name = back[inp.name]
    # The TorchScript exporter writes no graph signature (the dynamo one's
    # names parameters by module path): drop it, as that export has none.
    # It is graph field 16, unknown to Debian's onnx 1.12.
    model.graph.DiscardUnknownFields()
    if hasattr(model.graph, "metadata_props"):
        del model.graph.metadata_props[:]
    renamed = f"{work}/anonymous.onnx"
    onnx.save(model, renamed, save_as_external_data=False)
    check(bin_dir, data, work, "gpt-tiny-onnx", onnx_fixture, renamed, names,
          ["--lr", "3e-3", "--dtype", "f64"], renamed)
    print("PASS: renamed gpt-tiny, llama-tiny and an anonymous ONNX export "
          "get the named models' megatron layouts and train like one rank")


if __name__ == "__main__":
    main()
