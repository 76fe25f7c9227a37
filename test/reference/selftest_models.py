#!/usr/bin/python3
"""Checks the torch reference models against themselves, without weft:

1. a second, deliberately naive implementation (per-sequence, per-head,
   per-query loops; manual layer/RMS norm; RoPE through complex numbers; GQA by
   explicit head index; manual log-sum-exp) must give the same loss in float64;
2. torch.autograd.gradcheck of the float64 loss on a tiny config;
3. the numpy safetensors writer/reader round-trips, and the doc init is
   reproducible and has the requested std.

Usage: /usr/bin/python3 test/reference/selftest_models.py   (exit 0 on pass)
"""
import sys as _sys
_sys.dont_write_bytecode = True  # keep test/reference free of __pycache__
import math
import os
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wref_models as M  # noqa: E402
import wref_np as W  # noqa: E402


def naive_ln(x, w, b, eps):
    mu = sum(x) / len(x)
    var = sum((xi - mu) ** 2 for xi in x) / len(x)
    return torch.stack([(x[j] - mu) / torch.sqrt(var + eps) * w[j] + b[j] for j in range(len(x))])


def naive_ce(logits_row, t):
    m = logits_row.max()
    return m + torch.log(torch.exp(logits_row - m).sum()) - logits_row[t]


def naive_attend(qs, ks, vs, hd):
    """qs/ks/vs: lists over positions of [hd] vectors for one head."""
    out = []
    for t in range(len(qs)):
        scores = torch.stack([(qs[t] * ks[j]).sum() / math.sqrt(hd) for j in range(t + 1)])
        e = torch.exp(scores - scores.max())
        pr = e / e.sum()
        out.append(sum(pr[j] * vs[j] for j in range(t + 1)))
    return out


def naive_gpt_loss(p, inputs, targets, cfg):
    B, S = inputs.shape
    D, H = p["transformer.wte.weight"].shape[1], cfg["n_head"]
    hd = D // H
    L = M.n_layers(p.keys(), "transformer.h.")
    total = 0.0
    for b in range(B):
        xs = [p["transformer.wte.weight"][inputs[b, s]] + p["transformer.wpe.weight"][s] for s in range(S)]
        for i in range(L):
            h = f"transformer.h.{i}."
            a = [naive_ln(x, p[h + "ln_1.weight"], p[h + "ln_1.bias"], 1e-5) for x in xs]
            W_, bb = p[h + "attn.c_attn.weight"], p[h + "attn.c_attn.bias"]
            q = [torch.mv(W_[:, 0:D].t(), r) + bb[0:D] for r in a]
            k = [torch.mv(W_[:, D:2 * D].t(), r) + bb[D:2 * D] for r in a]
            v = [torch.mv(W_[:, 2 * D:].t(), r) + bb[2 * D:] for r in a]
            heads = []
            for hh in range(H):
                sl = slice(hh * hd, (hh + 1) * hd)
                heads.append(naive_attend([r[sl] for r in q], [r[sl] for r in k], [r[sl] for r in v], hd))
            ys = [torch.cat([heads[hh][s] for hh in range(H)]) for s in range(S)]
            xs = [xs[s] + torch.mv(p[h + "attn.c_proj.weight"].t(), ys[s]) + p[h + "attn.c_proj.bias"] for s in range(S)]
            new = []
            for x in xs:
                m = naive_ln(x, p[h + "ln_2.weight"], p[h + "ln_2.bias"], 1e-5)
                u = torch.mv(p[h + "mlp.c_fc.weight"].t(), m) + p[h + "mlp.c_fc.bias"]
                g = 0.5 * u * (1 + torch.tanh(math.sqrt(2 / math.pi) * (u + 0.044715 * u * u * u)))
                new.append(x + torch.mv(p[h + "mlp.c_proj.weight"].t(), g) + p[h + "mlp.c_proj.bias"])
            xs = new
        for s in range(S):
            f = naive_ln(xs[s], p["transformer.ln_f.weight"], p["transformer.ln_f.bias"], 1e-5)
            total = total + naive_ce(torch.mv(p["transformer.wte.weight"], f), targets[b, s])
    return total / (B * S)


def naive_rms(x, w, eps):
    return x / torch.sqrt((x * x).sum() / len(x) + eps) * w


def naive_rope(vec, s, hd, theta):
    half = hd // 2
    c = torch.complex(vec[:half], vec[half:])
    ang = torch.tensor([s * theta ** (-2.0 * i / hd) for i in range(half)], dtype=torch.float64)
    r = c * torch.exp(1j * ang)
    return torch.cat([r.real, r.imag])


def naive_llama_loss(p, inputs, targets, cfg):
    B, S = inputs.shape
    D, H = p["model.embed_tokens.weight"].shape[1], cfg["n_head"]
    hd = D // H
    Hkv = p["model.layers.0.self_attn.k_proj.weight"].shape[0] // hd
    L = M.n_layers(p.keys(), "model.layers.")
    eps, theta = cfg["eps"], cfg["rope_theta"]
    total = 0.0
    for b in range(B):
        xs = [p["model.embed_tokens.weight"][inputs[b, s]] for s in range(S)]
        for i in range(L):
            h = f"model.layers.{i}."
            a = [naive_rms(x, p[h + "input_layernorm.weight"], eps) for x in xs]
            q = [torch.mv(p[h + "self_attn.q_proj.weight"], r) for r in a]
            k = [torch.mv(p[h + "self_attn.k_proj.weight"], r) for r in a]
            v = [torch.mv(p[h + "self_attn.v_proj.weight"], r) for r in a]
            heads = []
            for hh in range(H):
                kv = hh // (H // Hkv)
                qs = [naive_rope(q[s][hh * hd:(hh + 1) * hd], s, hd, theta) for s in range(S)]
                ks = [naive_rope(k[s][kv * hd:(kv + 1) * hd], s, hd, theta) for s in range(S)]
                vs = [v[s][kv * hd:(kv + 1) * hd] for s in range(S)]
                heads.append(naive_attend(qs, ks, vs, hd))
            ys = [torch.cat([heads[hh][s] for hh in range(H)]) for s in range(S)]
            xs = [xs[s] + torch.mv(p[h + "self_attn.o_proj.weight"], ys[s]) for s in range(S)]
            new = []
            for x in xs:
                m = naive_rms(x, p[h + "post_attention_layernorm.weight"], eps)
                g = torch.mv(p[h + "mlp.gate_proj.weight"], m)
                u = torch.mv(p[h + "mlp.up_proj.weight"], m)
                new.append(x + torch.mv(p[h + "mlp.down_proj.weight"], g / (1 + torch.exp(-g)) * u))
            xs = new
        for s in range(S):
            f = naive_rms(xs[s], p["model.norm.weight"], eps)
            total = total + naive_ce(torch.mv(p["lm_head.weight"], f), targets[b, s])
    return total / (B * S)


def rand_params(shapes, gen, scale=0.3):
    p = {}
    for n, s in shapes.items():
        if len(s) == 1 and ("ln" in n or "norm" in n) and n.endswith("weight"):
            p[n] = (1.0 + 0.1 * torch.randn(s, generator=gen, dtype=torch.float64))
        else:
            p[n] = scale * torch.randn(s, generator=gen, dtype=torch.float64)
    return p


def main():
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(1234)
    failures = []

    gcfg = dict(family="gpt", n_layer=2, n_embd=8, n_head=2, vocab=11, n_positions=7, eps=1e-5)
    lcfg = dict(family="llama", n_layer=2, hidden=8, n_head=4, n_kv_head=2, intermediate=12, vocab=11,
                rope_theta=10000.0, eps=1e-5)
    B, S = 2, 5
    inputs = torch.randint(0, 11, (B, S), generator=gen)
    targets = torch.randint(0, 11, (B, S), generator=gen)

    for fam, cfg, shapes, naive in (("gpt", gcfg, M.gpt_param_shapes(gcfg), naive_gpt_loss),
                                    ("llama", lcfg, M.llama_param_shapes(lcfg), naive_llama_loss)):
        p = rand_params(shapes, gen)
        a = M.loss_fn(fam, p, inputs, targets, cfg).item()
        b = naive(p, inputs, targets, cfg).item()
        r = abs(a - b) / abs(b)
        print(f"{fam}: loss {a:.15f} naive {b:.15f} rel {r:.2e}")
        if r > 1e-12:
            failures.append(f"{fam} loss vs naive rel {r:.2e}")
        # naive gradients vs model gradients, float64
        names = sorted(p)
        leaves = {n: p[n].clone().requires_grad_(True) for n in names}
        ga = torch.autograd.grad(M.loss_fn(fam, leaves, inputs, targets, cfg), [leaves[n] for n in names])
        leaves2 = {n: p[n].clone().requires_grad_(True) for n in names}
        gb = torch.autograd.grad(naive(leaves2, inputs, targets, cfg), [leaves2[n] for n in names])
        worst = max((W.max_rel(x.numpy(), y.numpy()), n) for n, x, y in zip(names, ga, gb))
        print(f"{fam}: grads vs naive worst max-rel {worst[0]:.2e} ({worst[1]})")
        if worst[0] > 1e-10:
            failures.append(f"{fam} grad {worst[1]} vs naive {worst[0]:.2e}")
        # gradcheck over all parameters at once
        flat_names = names

        def f(*ts, fam=fam, cfg=cfg):
            return M.loss_fn(fam, dict(zip(flat_names, ts)), inputs, targets, cfg)
        ok = torch.autograd.gradcheck(f, tuple(p[n].clone().requires_grad_(True) for n in names),
                                      eps=1e-6, atol=1e-7, rtol=1e-5, raise_exception=False)
        print(f"{fam}: gradcheck {'ok' if ok else 'FAILED'}")
        if not ok:
            failures.append(f"{fam} gradcheck")

    # safetensors round trip
    with tempfile.TemporaryDirectory() as d:
        t = {"a.weight": np.arange(12, dtype=np.float32).reshape(3, 4), "b": np.array([1.5], np.float64),
             "c": np.zeros((0,), np.float32)}
        W.write_safetensors(os.path.join(d, "x.safetensors"), t, {"k": "v"})
        back, meta = W.read_safetensors(os.path.join(d, "x.safetensors"))
        ok = meta == {"k": "v"} and all(np.array_equal(back[k], t[k]) and back[k].dtype == t[k].dtype for k in t)
        print(f"safetensors round trip {'ok' if ok else 'FAILED'}")
        if not ok:
            failures.append("safetensors round trip")

    # doc init: deterministic, std as requested, independent of the shape
    x = W.doc_init("transformer.wte.weight", (256, 64), {"kind": "normal", "std": 0.02}, 0, np.float64)
    y = W.doc_init("transformer.wte.weight", (256 * 64,), {"kind": "normal", "std": 0.02}, 0, np.float64)
    z = W.doc_init("transformer.wpe.weight", (256, 64), {"kind": "normal", "std": 0.02}, 0, np.float64)
    ok = np.array_equal(x.ravel(), y) and abs(x.std() / 0.02 - 1) < 0.02 and abs(x.mean()) < 0.001 \
        and not np.array_equal(x, z)
    print(f"doc init: std {x.std():.5f} mean {x.mean():.2e} {'ok' if ok else 'FAILED'}")
    if not ok:
        failures.append("doc init")

    if failures:
        print("FAIL: " + "; ".join(failures))
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
