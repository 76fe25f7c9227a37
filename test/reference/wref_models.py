"""GPT-2 and Llama in plain PyTorch (1.13), Hugging Face semantics, HF names.

The models are functional: `loss(params, inputs, targets)` where params is a
{HF name: tensor} dict, so a checkpoint loads by name and torch.optim.AdamW
runs over the very same tensors.  Written from the Hugging Face definitions
(GPT2LMHeadModel, LlamaForCausalLM), not from weft.
"""
import math
import re

import torch
import torch.nn.functional as F

# Shapes that a weights file cannot tell (head counts, eps, theta) by preset.
PRESETS = {
    "gpt-tiny": dict(family="gpt", n_layer=2, n_embd=64, n_head=4, vocab=256, n_positions=128, eps=1e-5),
    "gpt2": dict(family="gpt", n_layer=12, n_embd=768, n_head=12, vocab=50257, n_positions=1024, eps=1e-5),
    "llama-tiny": dict(family="llama", n_layer=2, hidden=64, n_head=4, n_kv_head=2, intermediate=192,
                       vocab=256, max_positions=128, rope_theta=10000.0, eps=1e-5),
}


def family_of(model_name):
    if model_name in PRESETS:
        return PRESETS[model_name]["family"]
    low = model_name.lower()
    if "llama" in low:
        return "llama"
    if "gpt" in low:
        return "gpt"
    raise ValueError(f"unknown model family for {model_name!r}")


def n_layers(names, prefix):
    pat = re.compile(re.escape(prefix) + r"(\d+)\.")
    idx = {int(m.group(1)) for n in names for m in [pat.match(n)] if m}
    return max(idx) + 1 if idx else 0


# ------------------------------------------------------------------ GPT-2

def gpt_param_shapes(cfg):
    V, P, D, L = cfg["vocab"], cfg["n_positions"], cfg["n_embd"], cfg["n_layer"]
    s = {"transformer.wte.weight": (V, D), "transformer.wpe.weight": (P, D)}
    for i in range(L):
        h = f"transformer.h.{i}."
        s.update({
            h + "ln_1.weight": (D,), h + "ln_1.bias": (D,),
            h + "attn.c_attn.weight": (D, 3 * D), h + "attn.c_attn.bias": (3 * D,),
            h + "attn.c_proj.weight": (D, D), h + "attn.c_proj.bias": (D,),
            h + "ln_2.weight": (D,), h + "ln_2.bias": (D,),
            h + "mlp.c_fc.weight": (D, 4 * D), h + "mlp.c_fc.bias": (4 * D,),
            h + "mlp.c_proj.weight": (4 * D, D), h + "mlp.c_proj.bias": (D,),
        })
    s["transformer.ln_f.weight"] = (D,)
    s["transformer.ln_f.bias"] = (D,)
    return s


def gelu_new(x):
    # transformers.activations.NewGELUActivation
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def causal_attention(q, k, v):
    """q [B,H,S,hd], k/v [B,H,S,hd] (kv heads already repeated)."""
    S, hd = q.shape[-2], q.shape[-1]
    w = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(hd)
    mask = torch.ones(S, S, dtype=torch.bool, device=q.device).tril()
    w = w.masked_fill(~mask, torch.finfo(w.dtype).min)
    w = torch.softmax(w, dim=-1)
    return torch.matmul(w, v)


def gpt_logits(p, idx, cfg):
    B, S = idx.shape
    D, H = p["transformer.wte.weight"].shape[1], cfg["n_head"]
    hd = D // H
    L = n_layers(p.keys(), "transformer.h.")
    eps = cfg.get("eps", 1e-5)
    pos = torch.arange(S, device=idx.device)
    x = p["transformer.wte.weight"][idx] + p["transformer.wpe.weight"][pos]
    for i in range(L):
        h = f"transformer.h.{i}."
        a = F.layer_norm(x, (D,), p[h + "ln_1.weight"], p[h + "ln_1.bias"], eps)
        qkv = a @ p[h + "attn.c_attn.weight"] + p[h + "attn.c_attn.bias"]  # Conv1D
        q, k, v = qkv.split(D, dim=2)
        q, k, v = (t.view(B, S, H, hd).transpose(1, 2) for t in (q, k, v))
        y = causal_attention(q, k, v).transpose(1, 2).contiguous().view(B, S, D)
        x = x + (y @ p[h + "attn.c_proj.weight"] + p[h + "attn.c_proj.bias"])
        m = F.layer_norm(x, (D,), p[h + "ln_2.weight"], p[h + "ln_2.bias"], eps)
        m = gelu_new(m @ p[h + "mlp.c_fc.weight"] + p[h + "mlp.c_fc.bias"])
        x = x + (m @ p[h + "mlp.c_proj.weight"] + p[h + "mlp.c_proj.bias"])
    x = F.layer_norm(x, (D,), p["transformer.ln_f.weight"], p["transformer.ln_f.bias"], eps)
    return x @ p["transformer.wte.weight"].t()  # tied LM head


# ------------------------------------------------------------------ Llama

def llama_param_shapes(cfg):
    V, D, L, I = cfg["vocab"], cfg["hidden"], cfg["n_layer"], cfg["intermediate"]
    H, Hkv = cfg["n_head"], cfg["n_kv_head"]
    hd = D // H
    s = {"model.embed_tokens.weight": (V, D)}
    for i in range(L):
        h = f"model.layers.{i}."
        s.update({
            h + "input_layernorm.weight": (D,),
            h + "self_attn.q_proj.weight": (H * hd, D), h + "self_attn.k_proj.weight": (Hkv * hd, D),
            h + "self_attn.v_proj.weight": (Hkv * hd, D), h + "self_attn.o_proj.weight": (D, H * hd),
            h + "post_attention_layernorm.weight": (D,),
            h + "mlp.gate_proj.weight": (I, D), h + "mlp.up_proj.weight": (I, D),
            h + "mlp.down_proj.weight": (D, I),
        })
    s["model.norm.weight"] = (D,)
    s["lm_head.weight"] = (V, D)
    return s


def rms_norm(x, w, eps):
    # LlamaRMSNorm
    var = x.pow(2).mean(-1, keepdim=True)
    return w * (x * torch.rsqrt(var + eps))


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def rope_cos_sin(S, hd, theta, dtype, device=None):
    # LlamaRotaryEmbedding (default rope): inv_freq in float32 as HF computes it,
    # in float64 for a float64 model.
    cdt = torch.float64 if dtype == torch.float64 else torch.float32
    inv_freq = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.int64, device=device).to(cdt) / hd))
    pos = torch.arange(S, device=device).to(cdt)
    freqs = torch.outer(pos, inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def repeat_kv(x, n_rep):
    # [B,Hkv,S,hd] -> [B,Hkv*n_rep,S,hd]; head h reads kv head h // n_rep
    if n_rep == 1:
        return x
    B, Hkv, S, hd = x.shape
    return x[:, :, None, :, :].expand(B, Hkv, n_rep, S, hd).reshape(B, Hkv * n_rep, S, hd)


def llama_logits(p, idx, cfg):
    B, S = idx.shape
    D = p["model.embed_tokens.weight"].shape[1]
    H = cfg["n_head"]
    hd = D // H
    Hkv = p["model.layers.0.self_attn.k_proj.weight"].shape[0] // hd
    L = n_layers(p.keys(), "model.layers.")
    eps, theta = cfg.get("eps", 1e-5), cfg.get("rope_theta", 10000.0)
    x = p["model.embed_tokens.weight"][idx]
    cos, sin = rope_cos_sin(S, hd, theta, x.dtype, x.device)
    for i in range(L):
        h = f"model.layers.{i}."
        a = rms_norm(x, p[h + "input_layernorm.weight"], eps)
        q = (a @ p[h + "self_attn.q_proj.weight"].t()).view(B, S, H, hd).transpose(1, 2)
        k = (a @ p[h + "self_attn.k_proj.weight"].t()).view(B, S, Hkv, hd).transpose(1, 2)
        v = (a @ p[h + "self_attn.v_proj.weight"].t()).view(B, S, Hkv, hd).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k, v = repeat_kv(k, H // Hkv), repeat_kv(v, H // Hkv)
        y = causal_attention(q, k, v).transpose(1, 2).contiguous().view(B, S, H * hd)
        x = x + y @ p[h + "self_attn.o_proj.weight"].t()
        m = rms_norm(x, p[h + "post_attention_layernorm.weight"], eps)
        g = m @ p[h + "mlp.gate_proj.weight"].t()
        u = m @ p[h + "mlp.up_proj.weight"].t()
        x = x + (F.silu(g) * u) @ p[h + "mlp.down_proj.weight"].t()
    x = rms_norm(x, p["model.norm.weight"], eps)
    return x @ p["lm_head.weight"].t()


# ------------------------------------------------------------------ common

def logits_fn(family):
    return {"gpt": gpt_logits, "llama": llama_logits}[family]


def loss_fn(family, p, inputs, targets, cfg):
    logits = logits_fn(family)(p, inputs, cfg)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def make_adamw(params, lr, betas, eps, weight_decay):
    """nanoGPT grouping: decay tensors of rank >= 2, no decay otherwise."""
    decay = [t for t in params.values() if t.dim() >= 2]
    nodecay = [t for t in params.values() if t.dim() < 2]
    groups = [{"params": decay, "weight_decay": weight_decay},
              {"params": nodecay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps, foreach=False)
