#!/usr/bin/python3
"""Rewrites a weft program with one deliberate flaw, for the loader's lit tests.
usage: mutate_program.py IN.weft OUT.weft MUTATION
MUTATION: empty | swap-inputs | loss-unwritten | overlap | in-place |
          denominator | eps-zero | deep | huge-blocks | other-blocks |
          pp-deadlock | pp-order | pp-shape | pp-foreign | pp-slots |
          pp-arena | pp-arena-big | pp-slot-across | pp-slot-shared |
          pp-shared-kept | pp-sum-unzeroed | pp-sum-late (the last twelve on
          a program of pipeline stages whose stage 0 splits its arena, the
          last two of a tied head's) | fo-v6 | fo-loss | fo-targets | fo-grad | fo-shape |
          fo-unwritten | fo-adamw | fo-fragment | fo-pipeline | fo-batch (the
          last ten on a forward-only program; fo-pipeline on one with a
          mesh) | t-v7 | t-dtype | t-sharded | t-batch | t-dup-output |
          t-dup-input | t-train (the last seven on a program of tensor
          inputs) | m-unmasked | m-no-recipe | m-loss | m-token | m-prob |
          m-v8 | m-attr (the last seven on a masked-LM program) | c-write |
          c-base64 | c-size | c-dtype | c-layout | c-v9 (the last six on a
          program with a constant buffer) | s-v9 (a program with a select
          and no constant, written as version 9) | k-v10 | k-v10-labels |
          k-classes | k-unmasked | k-denominator | k-rows | k-sharding (the
          last seven on a
          sequence classifier's program: classes, one label per sample) |
          r-v10 | r-int | r-denominator (the last three on a regression's
          program: float targets, mse_loss) | pack-shift (a data-parallel
          program whose bucket holds gradients written in place) |
          bf16-bias (a bf16 program) | table-base-v16 | table-base-shape"""
import base64
import json
import struct
import sys


def fnv1a64(data):
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def instructions(program):
    """Every instruction of every fragment (format version 3), in order."""
    return [i for s in program["stages"] for f in s["fragments"]
            for i in f["instructions"]]


def buffer_bytes(b):
    size = {"f64": 8, "bf16": 2}.get(b["dtype"], 4)
    for d in b["shape"]:
        size *= d
    return size


def first(program, op):
    return next(i for i in instructions(program) if i["op"] == op)


def first_of(program, ops):
    return next(i for i in instructions(program) if i["op"] in ops)


def loss_op(program):
    """The op that computes the loss: a cross_entropy, or the mean from a
    cross_entropy_stats' statistics (weft-share-loss-stats)."""
    return first_of(program, ("cross_entropy", "cross_entropy_from_stats"))


def loss_grad_op(program):
    return first_of(program, ("cross_entropy_grad", "cross_entropy_stats_grad"))


src, dst, mutation = sys.argv[1:4]
blob = open(src, "rb").read()
version = struct.unpack("<I", blob[8:12])[0]
(n,) = struct.unpack("<Q", blob[12:20])
p = json.loads(blob[28:28 + n])
if mutation == "empty":
    for s in p["stages"]:
        for f in s["fragments"]:
            f["instructions"] = []
elif mutation == "swap-inputs":
    for b in p["buffers"]:
        if b["kind"] == "input":
            b["name"] = "targets" if b["name"] == "tokens" else "tokens"
elif mutation == "loss-unwritten":
    fresh = dict(p["buffers"][p["loss"]])
    fresh["offset"] = p["arena_bytes"]
    p["arena_bytes"] += 64
    p["buffers"].append(fresh)
    p["loss"] = len(p["buffers"]) - 1
elif mutation == "overlap":
    # The first matmul's output onto its activation input's bytes.
    mm = next(i for i in instructions(p) if i["op"] == "matmul"
              and p["buffers"][i["in"][0]]["kind"] == "arena")
    p["buffers"][mm["out"][0]]["offset"] = p["buffers"][mm["in"][0]]["offset"]
elif mutation == "pack-shift":
    # A gradient written into its bucket, moved 64 bytes off where the
    # pack puts it: it then shares the bucket's bytes at the pack.
    done = False
    for i in instructions(p):
        if i["op"] != "pack" or done:
            continue
        out = p["buffers"][i["out"][0]]
        for b in i["in"]:
            if p["buffers"][b]["kind"] == "arena" and p["buffers"][b]["offset"] == out["offset"]:
                p["buffers"][b]["offset"] += 64
                done = True
                break
    assert done, "no gradient written into its bucket"
elif mutation in ("table-base-v16", "table-base-shape"):
    # A tied table's gradient with its head's as the base (weft-fuse-table-
    # grad): written as version 16, or with dy of another shape as the base.
    g = next(i for i in instructions(p)
             if i["op"] == "embedding_grad" and len(i["in"]) == 3)
    if mutation == "table-base-v16":
        version = 16
    else:
        g["in"][2] = g["in"][0]
elif mutation == "bf16-bias":
    # A bf16 program's first bias_add folded into its matmul by hand (the
    # compiler leaves bf16's bias_add unfused).
    for f in (f for s in p["stages"] for f in s["fragments"]):
        ins = f["instructions"]
        mms = {i["out"][0]: i for i in ins if i["op"] == "matmul"}
        add = next((i for i in ins if i["op"] == "bias_add"
                    and i["in"][0] in mms), None)
        if add:
            mm = mms[add["in"][0]]
            mm["in"].append(add["in"][1])
            mm["out"] = add["out"]
            ins.remove(add)
            break
    else:
        raise AssertionError("no bias_add after a matmul")
elif mutation == "in-place":
    g = first(p, "gelu")
    g["out"] = [g["in"][0]]
elif mutation == "denominator":
    loss_op(p)["attrs"]["denominator"] = 7
elif mutation == "eps-zero":
    p["optimizer"]["eps"] = 0.0
elif mutation in ("huge-blocks", "other-blocks"):
    # A split param buffer's blocks near 2^63 (their product with the shard
    # count overflowed int64), or 2: a valid layout, not its param's (the
    # loader replaced it silently).
    b = next(b for b in p["buffers"]
             if b["kind"] == "param" and any(b.get("sharding", [])))
    d = next(i for i, a in enumerate(b["sharding"]) if a)
    b["blocks"][d] = 2**63 - 1 if mutation == "huge-blocks" else 2
elif mutation == "pp-deadlock":
    # The last stage never sends its last gradient: stage 0 waits forever.
    sched = p["stages"][-1]["schedule"]
    sched.pop(max(i for i, a in enumerate(sched) if "send" in a))
elif mutation == "pp-order":
    # Stage 0 runs its backwards in the other order: the gradients it
    # receives pair with the wrong micro-batches.
    sched = p["stages"][0]["schedule"]
    backs = [i for i, a in enumerate(sched)
             if a.get("run") == "backward" or "recv" in a]
    last = max(a["microbatch"] for a in sched if "microbatch" in a)
    for i in backs:
        sched[i]["microbatch"] = last - sched[i]["microbatch"]
elif mutation == "pp-shape":
    # Stage 1 receives its first activation into a buffer of another shape.
    sched = p["stages"][1]["schedule"]
    recv = next(a for a in sched if "recv" in a)
    want = p["buffers"][recv["recv"]]["shape"]
    recv["recv"] = next(i for i, b in enumerate(p["buffers"])
                        if b.get("stage") == 1 and b["kind"] == "arena"
                        and b["shape"] != want)
elif mutation == "pp-foreign":
    # An instruction of stage 1 reads a buffer of stage 0 of its shape.
    inst = next(i for f in p["stages"][1]["fragments"]
                for i in f["instructions"]
                if i["in"] and p["buffers"][i["in"][0]]["kind"] == "arena")
    shape = p["buffers"][inst["in"][0]]["shape"]
    inst["in"][0] = next(i for i, b in enumerate(p["buffers"])
                         if b.get("stage", 0) == 0 and b["kind"] == "arena"
                         and b["shape"] == shape)
elif mutation == "pp-sum-unzeroed":
    # The last stage's step sum (a tied head's gradient) is never zeroed:
    # its first accumulate would read what the last step left.
    acc = next(i for f in p["stages"][-1]["fragments"]
               for i in f["instructions"]
               if i["op"] == "accumulate"
               and p["buffers"][i["out"][0]]["kind"] == "arena")
    for f in p["stages"][-1]["fragments"]:
        f["instructions"] = [i for i in f["instructions"]
                             if not (i["op"] == "fill"
                                     and i["out"] == acc["out"])]
elif mutation == "pp-sum-late":
    # The last stage sends its step sum after its optimizer, which waits
    # for the updated replica that stage 0 sends only after the sum.
    sched = p["stages"][-1]["schedule"]
    sums = [a for a in sched if "send" in a and "microbatch" not in a]
    p["stages"][-1]["schedule"] = [a for a in sched if a not in sums] + sums
elif mutation == "pp-slots":
    p["stages"][0]["slots"] = 1
elif mutation == "pp-arena":  # stage 0's arena too small for its buffers
    p["stages"][0]["arena_bytes"] = 64
    p["stages"][0].pop("slot_bytes", None)
elif mutation in ("pp-slot-across", "pp-slot-shared", "pp-shared-kept"):
    st = p["stages"][0]
    mine = [b for b in p["buffers"]
            if b["kind"] == "arena" and b.get("stage", 0) == 0]
    if mutation == "pp-slot-across":  # the per-slot part ends inside a buffer
        big = next(b for b in mine if b["offset"] + 64 < st["slot_bytes"]
                   and buffer_bytes(b) > 64)
        st["slot_bytes"] = big["offset"] + 64
    elif mutation == "pp-slot-shared":  # every buffer in the shared part
        st["slot_bytes"] = 0
    else:  # a forward's value its backward reads, moved to the shared part
        runs = {}
        for f in st["fragments"]:
            for i in f["instructions"]:
                for b in i["in"] + i["out"]:
                    runs.setdefault(b, set()).add(f["name"])
        sent = {a.get("send", a.get("recv")) for a in st["schedule"]}
        kept = next(k for k, b in enumerate(p["buffers"])
                    if b in mine and runs.get(k) == {"forward", "backward"}
                    and k not in sent)
        p["buffers"][kept]["offset"] = st["arena_bytes"]
        st["arena_bytes"] += -(-buffer_bytes(p["buffers"][kept]) // 64) * 64
        p["arena_bytes"] = max(p["arena_bytes"], st["arena_bytes"])
elif mutation == "pp-arena-big":  # a stage's arena past the program's
    p["stages"][0]["arena_bytes"] = p["arena_bytes"] + 64
elif mutation == "fo-v6":  # outputs in a file of the version before them
    version = 6
elif mutation == "fo-loss":  # a loss besides the outputs
    p["loss"] = p["outputs"][0]["buffer"]
elif mutation == "fo-targets":  # a targets input it would never fill
    p["buffers"].append(dict(p["buffers"][0], name="targets"))
elif mutation == "fo-grad":  # a gradient buffer: something to train
    p["buffers"].append({"kind": "grad", "param": 0, "shape": p["params"][0]["shape"],
                         "dtype": p["dtype"]})
elif mutation == "fo-shape":  # the output names the final norm's [B, S, D]
    p["outputs"][0]["buffer"] -= 1
elif mutation == "fo-unwritten":  # the output names a buffer nothing writes
    p["buffers"].append(dict(p["buffers"][p["outputs"][0]["buffer"]], offset=0))
    p["outputs"][0]["buffer"] = len(p["buffers"]) - 1
elif mutation == "fo-fragment":  # the last forward instruction moved on
    frags = p["stages"][0]["fragments"]
    frags[1]["instructions"].insert(0, frags[0]["instructions"].pop())
elif mutation == "fo-pipeline":  # its mesh axis named the pipeline's
    p["mesh"]["pipeline"] = p["mesh"]["axes"][0]
elif mutation == "fo-batch":  # tokens' blocks tiling more rows than the batch
    p["batch"] //= 2
elif mutation == "fo-adamw":  # the optimizer of a training program
    p["optimizer"]["kind"] = "adamw"
elif mutation == "t-v7":  # tensor inputs in a file of the version before
    version = 7
    for o in p["outputs"]:
        o["name"] = "hidden"
    p["outputs"] = p["outputs"][:1]
elif mutation == "t-dtype":  # an f64 input in an f32 program
    p["buffers"][0]["dtype"] = "f64"
elif mutation == "t-sharded":  # a tensor input split over a mesh axis
    p["mesh"] = {"axes": ["dp"], "shape": [2], "groups": []}
    b = p["buffers"][0]
    b["sharding"] = [["dp"]] + [[]] * (len(b["shape"]) - 1)
    b["global_shape"] = [2 * b["shape"][0]] + b["shape"][1:]
elif mutation == "t-batch":  # token sizes in a program that reads no tokens
    p["batch"] = 2
elif mutation == "t-dup-output":  # two outputs of one name
    p["outputs"][1]["name"] = p["outputs"][0]["name"]
elif mutation == "t-dup-input":  # two inputs of one name
    p["buffers"][1]["name"] = p["buffers"][0]["name"]
elif mutation == "t-train":  # a training program reading a tensor input
    del p["outputs"]
    p["optimizer"] = {"kind": "adamw", "lr": 0.001, "beta1": 0.9, "beta2": 0.95,
                      "eps": 1e-8, "weight_decay": 0.1, "schedule": "constant",
                      "warmup_steps": 0, "total_steps": 0, "min_lr": 0.0}
    p["loss"] = 2
    p["batch"], p["seq"], p["vocab"] = 3, 4, 16
elif mutation == "m-unmasked":  # a next-token gradient in a masked-LM program
    del loss_grad_op(p)["attrs"]["masked"]
elif mutation == "m-no-recipe":  # masked cross-entropies, no recipe: given targets
    del p["masked_lm"]
elif mutation == "m-loss":  # a recipe, and no cross-entropy computes the loss
    ce = loss_op(p)
    ce["op"], ce["in"], ce["attrs"] = "fill", [], {"value": 0.0}
elif mutation == "m-token":  # a mask id outside the vocabulary
    p["masked_lm"]["mask_token"] = p["vocab"]
elif mutation == "m-prob":
    p["masked_lm"]["mask_prob"] = 0.0
elif mutation == "m-v8":  # a version-8 runtime would train next-token
    version = 8
elif mutation == "m-attr":  # masked on an op that is no cross-entropy
    first(p, "matmul")["attrs"]["masked"] = True
elif mutation == "s-v9":  # a version-9 runtime knows no select
    version = 9
elif mutation.startswith("c-"):
    c = next(b for b in p["buffers"] if b["kind"] == "constant" and len(b["shape"]) == 2)
    cid = p["buffers"].index(c)
    if mutation == "c-write":  # the select writing a constant of its shape
        sel = first(p, "select")
        out = p["buffers"][sel["out"][0]]
        c["shape"] = out["shape"]
        n = 1
        for d in out["shape"]:
            n *= d
        c["data"] = base64.b64encode(bytes(4 * n)).decode()
        sel["out"] = [cid]
    elif mutation == "c-base64":
        c["data"] = c["data"][:-4] + "!!!!"
    elif mutation == "c-size":  # one element short
        c["shape"] = [c["shape"][0], c["shape"][1] + 1]
    elif mutation == "c-dtype":
        c["dtype"] = "i32"
    elif mutation == "c-layout":
        c["global_shape"] = [2 * c["shape"][0], c["shape"][1]]
        c["sharding"] = [["tp"], []]
    elif mutation == "c-v9":  # a version-9 runtime knows no constants
        version = 9
    else:
        sys.exit(f"unknown mutation {mutation}")
elif mutation.startswith("k-"):
    labels = next(b for b in p["buffers"] if b["kind"] == "input" and b["name"] == "targets")
    if mutation == "k-v10":  # a version-10 runtime knows no classes
        version = 10
    elif mutation == "k-v10-labels":  # ... and reads [batch] targets as [batch, seq]
        del p["classes"]
        version = 10
    elif mutation == "k-classes":
        p["classes"] = 0
    elif mutation == "k-unmasked":  # labels, but a next-token loss
        del p["classes"]
        for i in instructions(p):
            i.get("attrs", {}).pop("masked", None)
    elif mutation == "k-denominator":  # the tokens' count, not the samples'
        loss_op(p)["attrs"]["denominator"] = p["batch"] * p["seq"]
    elif mutation == "k-rows":  # fewer labels than samples
        labels["shape"] = [labels["shape"][0] - 1]
    elif mutation == "k-sharding":  # a seq dim's split on [batch] labels
        labels["sharding"] = [[], ["tp"]]
    else:
        sys.exit(f"unknown mutation {mutation}")
elif mutation.startswith("r-"):
    y = next(b for b in p["buffers"] if b["kind"] == "input" and b["name"] == "targets")
    if mutation == "r-v10":  # a version-10 runtime knows no float targets
        version = 10
    elif mutation == "r-int":  # ids where the loss compares floats
        y["dtype"] = "i32"
    elif mutation == "r-denominator":  # the samples, not their elements
        first(p, "mse_loss")["attrs"]["denominator"] = 1
    else:
        sys.exit(f"unknown mutation {mutation}")
elif mutation != "deep":
    sys.exit(f"unknown mutation {mutation}")
payload = json.dumps(p).encode()
if mutation == "deep":  # 100,000 nested arrays (too deep for json.dumps)
    payload = b'{"model": ' + b"[" * 100000 + b"]" * 100000 + b"}"
with open(dst, "wb") as f:
    f.write(b"WEFTPROG" + struct.pack("<I", version) + struct.pack("<Q", len(payload)) +
            struct.pack("<Q", fnv1a64(payload)) + payload)
