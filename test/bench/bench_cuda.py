#!/usr/bin/env python3
"""weft on one GPU beside cuBLAS and PyTorch, bf16 (scripts/gpu-check.sh).

For GPT-2 124M (batch 16 x seq 1024) and Llama 3.2 1B (batch 8 x seq 2048),
each a training step with AdamW on f32 master weights and bf16 compute:
  - weft-run --device cuda on the programs gpu-check.sh --prepare compiled;
  - PyTorch on the same machine, the same model written plainly (no Hugging
    Face), autocast bf16 over f32 weights, fused AdamW: eager with SDPA
    (flash) attention, and torch.compile;
  - cuBLAS's own bf16 GEMM throughput (torch.matmul at 8192^3 and at the
    models' largest GEMM), the practical ceiling.
Tokens/s is the median over steps after warm-up; MFU is model FLOPs
(6 N per token for the parameters plus 12 L d s per token for attention
scores, no recompute: Narayanan et al. 2021) over the GPU's dense bf16
peak (989 TFLOP/s for H100/H200 SXM, 312 for A100).
Writes OUT/benchmark.md.
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

MODELS = {
    "gpt2": dict(kind="gpt2", layers=12, d=768, heads=12, kv=12, ffn=3072,
                 vocab=50257, batch=16, seq=1024, program="bench-gpt2.weft"),
    "llama-1b": dict(kind="llama", layers=16, d=2048, heads=32, kv=8,
                     ffn=8192, vocab=128256, batch=8, seq=2048,
                     program="bench-llama-1b.weft"),
}


def peak_flops():
    try:
        name = subprocess.run(["nvidia-smi", "--query-gpu=name",
                               "--format=csv,noheader"], capture_output=True,
                              text=True).stdout.strip()
    except OSError:
        name = ""
    for key, peak in (("H200", 989e12), ("H100", 989e12), ("A100", 312e12)):
        if key in name:
            return name, peak
    return name or "unknown GPU", None


def params(m):
    d, L, v = m["d"], m["layers"], m["vocab"]
    if m["kind"] == "gpt2":  # QKV, out, MLP with biases, two layer norms
        f = m["ffn"]
        return v * d + m["seq"] * d + L * (4 * d * d + 2 * d * f + 9 * d + f) + 2 * d
    hd = d // m["heads"]
    q, kv = d, m["kv"] * hd
    return v * d + L * (2 * d + d * q + 2 * d * kv + q * d + 3 * d * m["ffn"]) + d


def flops_per_token(m):
    return 6 * params(m) + 12 * m["layers"] * m["d"] * m["seq"]


def weft(args, name, m):
    prog = os.path.join(args.programs, m["program"])
    metrics = os.path.join(args.out, f"weft-{name}.jsonl")
    r = subprocess.run([os.path.join(args.bin, "weft-run"), prog, "--device",
                        "cuda", "--steps", "12", "--data", args.data,
                        "--quiet", "--metrics", metrics],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return None, r.stderr.strip().splitlines()[-1:]
    rows = [json.loads(l) for l in open(metrics) if l.strip()]
    step = statistics.median(x["step_time_s"] for x in rows[3:])
    return m["batch"] * m["seq"] / step, rows[-1].get("peak_bytes")


def torch_model(torch, m):
    nn, F = torch.nn, torch.nn.functional
    d, H, KV = m["d"], m["heads"], m["kv"]
    hd = d // H

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            gpt = m["kind"] == "gpt2"
            Norm = nn.LayerNorm if gpt else nn.RMSNorm
            self.n1, self.n2 = Norm(d), Norm(d)
            self.qkv = nn.Linear(d, d + 2 * KV * hd, bias=gpt)
            self.o = nn.Linear(d, d, bias=gpt)
            if gpt:
                self.up, self.down = nn.Linear(d, m["ffn"]), nn.Linear(m["ffn"], d)
            else:
                self.gate_up = nn.Linear(d, 2 * m["ffn"], bias=False)
                self.down = nn.Linear(m["ffn"], d, bias=False)
            self.gpt = gpt

        def rope(self, x, cos, sin):
            x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
            return x * cos + torch.cat((-x2, x1), -1) * sin

        def forward(self, x, cos, sin):
            B, S, _ = x.shape
            q, k, v = self.qkv(self.n1(x)).split([d, KV * hd, KV * hd], -1)
            q = q.view(B, S, H, hd).transpose(1, 2)
            k = k.view(B, S, KV, hd).transpose(1, 2)
            v = v.view(B, S, KV, hd).transpose(1, 2)
            if not self.gpt:
                q, k = self.rope(q, cos, sin), self.rope(k, cos, sin)
                k = k.repeat_interleave(H // KV, 1)
                v = v.repeat_interleave(H // KV, 1)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.o(a.transpose(1, 2).reshape(B, S, d))
            h = self.n2(x)
            if self.gpt:
                return x + self.down(F.gelu(self.up(h), approximate="tanh"))
            g, u = self.gate_up(h).chunk(2, -1)
            return x + self.down(F.silu(g) * u)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(m["vocab"], d)
            self.pos = nn.Embedding(m["seq"], d) if m["kind"] == "gpt2" else None
            self.blocks = nn.ModuleList(Block() for _ in range(m["layers"]))
            self.norm = nn.LayerNorm(d) if m["kind"] == "gpt2" else nn.RMSNorm(d)
            inv = 1.0 / (500000.0 ** (torch.arange(0, hd, 2).float() / hd))
            ang = torch.outer(torch.arange(m["seq"]).float(), inv)
            ang = torch.cat((ang, ang), -1)
            self.register_buffer("cos", ang.cos(), persistent=False)
            self.register_buffer("sin", ang.sin(), persistent=False)

        def forward(self, ids, targets):
            x = self.emb(ids)
            if self.pos is not None:
                x = x + self.pos.weight[: ids.shape[1]]
            for b in self.blocks:
                x = b(x, self.cos, self.sin)
            logits = self.norm(x) @ self.emb.weight.t()  # tied head
            return F.cross_entropy(logits.float().view(-1, logits.shape[-1]),
                                   targets.view(-1))

    return Model()


def torch_run(torch, m, compiled):
    torch.manual_seed(0)
    model = torch_model(torch, m).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    step_fn = torch.compile(model) if compiled else model
    ids = torch.randint(0, 256, (m["batch"], m["seq"]), device="cuda")
    targets = torch.roll(ids, -1, 1)
    times = []
    for i in range(10):
        torch.cuda.synchronize()
        t = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = step_fn(ids, targets)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
    del model, opt
    torch.cuda.empty_cache()
    return m["batch"] * m["seq"] / statistics.median(times[3:])


def gemm_rate(torch, n, k, mm):
    a = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, mm, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    t = time.perf_counter()
    reps = 20
    for _ in range(reps):
        a @ b
    torch.cuda.synchronize()
    return 2 * n * k * mm * reps / (time.perf_counter() - t)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--programs", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    gpu, peak = peak_flops()
    lines = [f"GPU: {gpu}; dense bf16 peak {peak / 1e12:.0f} TFLOP/s" if peak
             else f"GPU: {gpu}; peak unknown (MFU not computed)", ""]
    try:
        import torch
        have_torch = torch.cuda.is_available()
        lines.append(f"PyTorch {torch.__version__}")
    except ImportError:
        have_torch = False
        lines.append("PyTorch: not installed (its columns are empty)")
    if have_torch:
        r = gemm_rate(torch, 8192, 8192, 8192)
        lines.append(f"cuBLAS bf16 GEMM (torch.matmul) 8192^3: {r / 1e12:.0f} TFLOP/s"
                     + (f" ({100 * r / peak:.0f}% of peak)" if peak else ""))
    lines += ["", "| model | tokens/step | weft tok/s | weft MFU | torch eager tok/s "
              "| torch.compile tok/s | weft / eager |", "|---|---|---|---|---|---|---|"]
    for name, m in MODELS.items():
        tps, extra = weft(args, name, m)
        mfu = tps * flops_per_token(m) / peak if tps and peak else None
        eager = comp = None
        if have_torch:
            try:
                eager = torch_run(torch, m, False)
                comp = torch_run(torch, m, True)
            except Exception as e:  # an OOM or a compile failure: say so
                lines.append(f"torch {name}: {type(e).__name__}: {str(e)[:200]}")
        fmt = lambda x: f"{x:,.0f}" if x else "-"
        lines.append(f"| {name} | {m['batch'] * m['seq']} | {fmt(tps)} | "
                     f"{f'{100 * mfu:.1f}%' if mfu else '-'} | {fmt(eager)} | "
                     f"{fmt(comp)} | {f'{tps / eager:.2f}' if tps and eager else '-'} |")
        if tps is None:
            lines.append(f"weft {name} failed: {extra}")
    text = "\n".join(lines)
    print(text)
    with open(os.path.join(args.out, "benchmark.md"), "w") as f:
        f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
