#!/usr/bin/python3
"""weft against Hugging Face transformers' own model code, config by config.

For every case (a tiny-dimension config.json: one per published config in
test/configs/, and one per family option of issue 8), it runs

  weft-compile W/config.json --batch 2 --seq 16 --dtype f64 -o W/prog.weft
  weft-run W/prog.weft --steps 0 --data DATA --seed 1234 --save W/init
  weft-run W/prog.weft --steps 1 --data DATA --seed 1234 --save-grads W/g1 --metrics W/m1.jsonl
  weft-run W/prog.weft --steps 1 --data DATA --load W/rand --save-grads W/g1r --metrics W/m1r.jsonl

and builds the same config with transformers (GPT2LMHeadModel,
LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM; eager attention,
float64, train mode), loads the same weights by name and runs the same batch.
Two weight sets: weft's own initial weights ("init"), and "rand": every
tensor drawn non-trivially (biases non-zero, norm scales != 1, the formula of
rand_weights below) and given to weft with --load, so that a bias or scale
that weft ignores cannot hide behind weft's zero/one init.

Compared (max|weft - hf| / max|hf| per tensor, relative for the loss):
  names  weft's parameters (names, shapes) = transformers' named_parameters()
  init   weft's declared init (kind; normal std within 25% of the sample std)
         = what transformers' _init_weights gives the same config
  loss   the step-1 loss of weft's metrics      <= 1e-8 (9 printed digits)
  grad   every gradient of step 1               <= 1e-9
  lr     weft-run's metrics "lr" (12 steps) against transformers'
         get_cosine_with_min_lr_schedule_with_warmup / get_cosine_schedule_with_warmup /
         get_constant_schedule: step t (1-based) uses lr * lambda(t - 1);
         past --total-steps weft holds min_lr (transformers' cosine would rise again)
  train  gpt2 and llama, 11 steps over that cosine schedule from the "rand"
         weights against torch.optim.AdamW + transformers' scheduler (weight
         decay where transformers' Trainer puts it): every loss <= 1e-8,
         every parameter after the last step <= 1e-9

float64 in transformers: 4.49 computes RMSNorm, the attention softmax and
the RoPE tables in float32 even in a float64 model (`.to(torch.float32)`,
`softmax(dtype=torch.float32)`, `inv_freq.float()`), ~1e-7 of noise.  The
gate runs the same transformers code with float32 promoted to float64 (the
modeling modules see a `torch` whose float32 is float64, Tensor.float() is
.double(), default dtype float64; every parameter and buffer is checked to be
float64).  The table also shows the distance to unpatched transformers
("stock"), which must stay at float32 noise (<= 1e-4): that bounds what the
promotion changed.

transformers 4.49 reads the 4.x spelling; a case written in the 5.x spelling
(rope_parameters) is given to weft verbatim and to transformers translated
(rope_theta / rope_scaling).  For Qwen2, 4.49 masks with sliding_window even
when use_sliding_window is false (fixed later); the oracle passes
sliding_window=None then, as later transformers do.

A config with dropout trains with weft's own masks (program/Dropout.h), which
transformers cannot draw: its parameter names and shapes are compared, and
its model without dropout (the published configs' +no-dropout twins, the
families' base cases) is compared in full.

Outcomes per case: MATCH; REFUSED (weft-compile exits non-zero with a
message: fine, the feature is not implemented); MISMATCH (weft accepted and
trains something else, or cannot load transformers' weights); UNCHECKED
(weft accepted, but this transformers cannot build the case).

Modes:
  (default)               live when transformers imports (else: re-run under
                          build/hf-venv/bin/python, creating it with
                          test/reference/hf_venv.sh unless --no-install;
                          else check the committed fixtures; exit 3 if none)
  --write-fixtures [DIR]  store transformers' float64 results for the "rand"
                          weights (loss, gradients rounded to float32; cases
                          too big for that keep their parameter list only),
                          the lr schedules and the training losses under DIR
                          (default test/reference/hf_fixtures); needs
                          transformers, and weft-compile for weft's AdamW defaults
  --check-fixtures [DIR]  run weft and compare with DIR, numpy only
                          (gradient tolerance 1e-6: the fixtures are float32;
                          training: losses only)
  --case PATTERN          only matching cases; --list prints them with their config

Exit status: 0 every accepted case matches, 1 a mismatch, 2 a tool error,
3 skipped (no transformers and no fixtures).
"""
import sys as _sys
_sys.dont_write_bytecode = True  # keep test/reference free of __pycache__
import argparse
import contextlib
import copy
import fnmatch
import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import numpy as np  # noqa: E402
import wref_np as W  # noqa: E402

TRANSFORMERS_PIN = "4.49.0"
BATCH, SEQ, SEED = 2, 16, 1234
TOL = {"loss": 1e-8, "grad": 1e-9, "grad-fixture": 1e-6, "lr": 1e-8, "stock": 1e-4}
FIXDIR = os.path.join(HERE, "hf_fixtures")
CONFIGS = os.path.join(REPO, "test", "configs")
VENV_PY = os.path.join(REPO, "build", "hf-venv", "bin", "python")
ENV = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")


class ToolError(Exception):
    pass


# ------------------------------------------------------------------ cases

LLAMA = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "vocab_size": 256, "hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 2,
    "num_attention_heads": 2, "num_key_value_heads": 1, "max_position_embeddings": 64,
    "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "hidden_act": "silu", "tie_word_embeddings": False,
}
GPT2 = {
    "architectures": ["GPT2LMHeadModel"], "model_type": "gpt2",
    "vocab_size": 256, "n_embd": 16, "n_head": 2, "n_layer": 2, "n_positions": 32,
    "layer_norm_epsilon": 1e-05, "activation_function": "gelu_new",
    "attn_pdrop": 0.0, "embd_pdrop": 0.0, "resid_pdrop": 0.0,
}
MISTRAL = dict(LLAMA, architectures=["MistralForCausalLM"], model_type="mistral", sliding_window=4096)
QWEN2 = dict(LLAMA, architectures=["Qwen2ForCausalLM"], model_type="qwen2", rms_norm_eps=1e-06,
             rope_theta=1000000.0, use_sliding_window=False, sliding_window=4096, max_window_layers=2)
# transformers.activations.ACT2FN (4.49) less prelu (a module with a weight)
ACTIVATIONS = ["gelu", "gelu_10", "gelu_accurate", "gelu_fast", "gelu_new", "gelu_python", "gelu_pytorch_tanh",
               "laplace", "leaky_relu", "linear", "mish", "quick_gelu", "relu", "relu2", "relu6", "sigmoid",
               "silu", "swish", "tanh"]


def edit(base, drop=(), **kw):
    c = copy.deepcopy(base)
    for k in drop:
        c.pop(k, None)
    c.update(kw)
    return c


def option_cases():
    L, G = LLAMA, GPT2
    out = [
        ("llama", L),
        ("llama.mha", edit(L, num_key_value_heads=2)),
        ("llama.kv_heads_null", edit(L, num_key_value_heads=None)),
        ("llama.tied", edit(L, tie_word_embeddings=True)),
        ("llama.rms_norm_eps", edit(L, rms_norm_eps=1e-06)),
        ("llama.rope_theta", edit(L, rope_theta=500000.0)),
        ("llama.rope_theta_absent", edit(L, drop=["rope_theta"])),
        ("llama.rope_parameters", edit(L, drop=["rope_theta"],
                                       rope_parameters={"rope_type": "default", "rope_theta": 500000.0})),
        ("llama.rope_scaling_null", edit(L, rope_scaling=None)),
        ("llama.rope_linear", edit(L, rope_scaling={"rope_type": "linear", "factor": 4.0})),
        ("llama.rope_linear_type_key", edit(L, rope_scaling={"type": "linear", "factor": 2.0})),
        ("llama.rope_linear_v5", edit(L, drop=["rope_theta"], rope_parameters={
            "rope_type": "linear", "factor": 4.0, "rope_theta": 10000.0})),
        # dynamic NTK applies at the compiled seq (16) once it exceeds max_position_embeddings
        ("llama.rope_dynamic", edit(L, max_position_embeddings=8,
                                    rope_scaling={"rope_type": "dynamic", "factor": 2.0})),
        ("llama.rope_dynamic_within", edit(L, rope_scaling={"rope_type": "dynamic", "factor": 2.0})),
        # head_dim 8: with theta 5e5 and 8192 original positions the 4 frequencies fall in all three
        # llama3 bands (kept, smoothed, divided by factor); the second case does the same at theta 1e4
        ("llama.rope_llama3", edit(L, rope_theta=500000.0, max_position_embeddings=131072, rope_scaling={
            "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192})),
        ("llama.rope_llama3_short", edit(L, max_position_embeddings=512, rope_scaling={
            "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
            "original_max_position_embeddings": 64})),
        ("llama.rope_llama3_v5", edit(L, drop=["rope_theta"], max_position_embeddings=131072, rope_parameters={
            "rope_type": "llama3", "rope_theta": 500000.0, "factor": 32.0, "low_freq_factor": 1.0,
            "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})),
        # yarn without original_max_position_embeddings: transformers 4.49 and 5.x agree on it
        ("llama.rope_yarn", edit(L, rope_scaling={"rope_type": "yarn", "factor": 4.0})),
        ("llama.rope_yarn_betas", edit(L, rope_scaling={"rope_type": "yarn", "factor": 8.0, "beta_fast": 16.0,
                                                         "beta_slow": 2.0, "attention_factor": 1.25})),
        ("llama.attention_bias", edit(L, attention_bias=True)),
        ("llama.mlp_bias", edit(L, mlp_bias=True)),
        ("llama.head_dim", edit(L, head_dim=12)),
        ("llama.head_dim_equal", edit(L, head_dim=8)),
        ("llama.pretraining_tp", edit(L, pretraining_tp=2)),
        ("llama.attention_dropout", edit(L, attention_dropout=0.1)),
        ("gpt2", G),
        ("gpt2.tied_explicit", edit(G, tie_word_embeddings=True)),
        ("gpt2.untied", edit(G, tie_word_embeddings=False)),
        ("gpt2.n_inner", edit(G, n_inner=24)),
        ("gpt2.n_inner_null", edit(G, n_inner=None)),
        ("gpt2.scale_attn_weights_false", edit(G, scale_attn_weights=False)),
        ("gpt2.scale_attn_by_inverse_layer_idx", edit(G, scale_attn_by_inverse_layer_idx=True)),
        ("gpt2.reorder_and_upcast_attn", edit(G, reorder_and_upcast_attn=True)),
        ("gpt2.layer_norm_epsilon", edit(G, layer_norm_epsilon=1e-06)),
        ("gpt2.attn_pdrop", edit(G, attn_pdrop=0.1)),
        ("mistral", MISTRAL),
        ("mistral.sliding_window", edit(MISTRAL, sliding_window=4)),
        ("mistral.sliding_window_null", edit(MISTRAL, sliding_window=None)),
        ("mistral.tied", edit(MISTRAL, tie_word_embeddings=True)),
        ("mistral.sliding_window_seq", edit(MISTRAL, sliding_window=SEQ)),
        ("mistral.sliding_window_seq_minus_1", edit(MISTRAL, sliding_window=SEQ - 1)),
        ("qwen2", QWEN2),
        ("qwen2.tied", edit(QWEN2, tie_word_embeddings=True)),
        ("qwen2.mha", edit(QWEN2, num_key_value_heads=2)),
        # every layer sliding: transformers 4.49 and 5.x agree (4.49 masks all layers alike)
        ("qwen2.sliding_all_layers", edit(QWEN2, use_sliding_window=True, sliding_window=4, max_window_layers=0)),
        ("qwen2.sliding_all_layers_seq", edit(QWEN2, use_sliding_window=True, sliding_window=SEQ, max_window_layers=0)),
        ("qwen2.sliding_all_layers_seq_minus_1", edit(QWEN2, use_sliding_window=True, sliding_window=SEQ - 1,
                                                      max_window_layers=0)),
        # keys left out: transformers' defaults apply (they differ per family)
        ("llama.defaults.num_key_value_heads", edit(L, drop=["num_key_value_heads"])),
        ("llama.defaults.rms_norm_eps", edit(L, drop=["rms_norm_eps"])),  # 1e-6
        ("llama.defaults.tie_word_embeddings", edit(L, drop=["tie_word_embeddings"])),  # false
        ("llama.defaults.hidden_act", edit(L, drop=["hidden_act"])),  # silu
        ("llama.head_dim_null", edit(L, head_dim=None)),
        ("llama.rope_scaling_default", edit(L, rope_scaling={"rope_type": "default"})),
        ("mistral.defaults.num_key_value_heads", edit(MISTRAL, drop=["num_key_value_heads"], hidden_size=32,
                                                      num_attention_heads=16)),  # 8, not num_attention_heads
        ("mistral.defaults.rms_norm_eps", edit(MISTRAL, drop=["rms_norm_eps"])),  # 1e-6
        ("mistral.defaults.sliding_window", edit(MISTRAL, drop=["sliding_window"])),  # 4096
        ("mistral.defaults.rope_theta", edit(MISTRAL, drop=["rope_theta"])),  # 10000
        ("qwen2.defaults.rope_theta", edit(QWEN2, drop=["rope_theta"])),  # 10000
        ("qwen2.defaults.tie_word_embeddings", edit(QWEN2, drop=["tie_word_embeddings"])),  # false
        ("gpt2.defaults.activation_function", edit(G, drop=["activation_function"])),  # gelu_new
        ("gpt2.defaults.layer_norm_epsilon", edit(G, drop=["layer_norm_epsilon"])),  # 1e-5
        ("gpt2.defaults.n_positions", edit(G, drop=["n_positions"])),  # 1024
        ("gpt2.defaults.dropout", edit(G, drop=["attn_pdrop", "embd_pdrop", "resid_pdrop"])),  # 0.1
        ("gpt2.initializer_range", edit(G, initializer_range=0.05)),
        ("llama.initializer_range", edit(L, initializer_range=0.05)),
        # keys one family has and another ignores (transformers 4.49: Mistral has no biases and no
        # attention_bias/mlp_bias keys; Qwen2 always has q/k/v biases)
        ("mistral.attention_bias", edit(MISTRAL, attention_bias=True)),
        ("mistral.mlp_bias", edit(MISTRAL, mlp_bias=True)),
        ("mistral.head_dim", edit(MISTRAL, head_dim=12)),
        ("qwen2.attention_bias_false", edit(QWEN2, attention_bias=False)),
        ("qwen2.head_dim", edit(QWEN2, head_dim=12)),
        ("llama.rope_theta_int", edit(L, rope_theta=100000)),
        ("llama.seq_beyond_max_position_embeddings", edit(L, max_position_embeddings=8)),
        ("gpt2.seq_beyond_n_positions", edit(G, n_positions=8)),
    ]
    # Qwen2Config's default num_key_value_heads is 32: telling it from num_attention_heads needs 64
    # heads; too big for gradient fixtures, so the fixtures keep its parameter list only
    big = [("qwen2.defaults.num_key_value_heads", edit(QWEN2, drop=["num_key_value_heads"], hidden_size=128,
                                                        num_attention_heads=64, num_hidden_layers=1,
                                                        tie_word_embeddings=True))]
    for a in ACTIVATIONS:
        out.append((f"llama.act.{a}", edit(L, hidden_act=a)))
        out.append((f"gpt2.act.{a}", edit(G, activation_function=a)))
    return [{"name": n, "config": c} for n, c in out] + [{"name": n, "config": c, "names_only": True} for n, c in big]


def shrink(cfg):
    """A published config with its sizes made tiny, every other key kept."""
    c = copy.deepcopy(cfg)
    if c.get("model_type") == "gpt2":
        c.update(vocab_size=256, n_embd=16, n_head=2, n_layer=2, n_positions=32)
        if "n_ctx" in c:
            c["n_ctx"] = 32
        if c.get("n_inner") is not None:
            c["n_inner"] = 64
        return c
    heads = c["num_attention_heads"]
    kv = c.get("num_key_value_heads") or heads
    layers = c["num_hidden_layers"]
    c.update(vocab_size=256, hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2)
    if c.get("num_key_value_heads") is not None:
        c["num_key_value_heads"] = 2 if kv == heads else 1
    if c.get("head_dim") is not None:
        c["head_dim"] = 8
    if "layer_types" in c:
        c["layer_types"] = c["layer_types"][:2]
    if "max_window_layers" in c:
        c["max_window_layers"] = 2 if c["max_window_layers"] >= layers else min(c["max_window_layers"], 1)
    return c


DROPOUT_KEYS = ("attn_pdrop", "embd_pdrop", "resid_pdrop", "attention_dropout")
DROPOUT_NOTE = ("parameter names and shapes only: weft draws its own dropout masks "
                "(program/Dropout.h), so the loss and gradients are compared without "
                "dropout (the +no-dropout twin, or the family's base case)")


def has_dropout(cfg):
    """Whether the config trains with dropout (transformers' defaults count)."""
    if cfg.get("model_type") == "gpt2":
        return any(cfg.get(k, 0.1) for k in DROPOUT_KEYS[:3])
    return bool(cfg.get("attention_dropout", 0.0))


def published_cases():
    out = []
    for path in sorted(glob.glob(os.path.join(CONFIGS, "*.json"))):
        stem = os.path.basename(path)[:-len(".json")]
        with open(path) as f:
            cfg = json.load(f)
        tiny = shrink(cfg)
        out.append({"name": "pub:" + stem, "config": tiny})
        drops = [k for k in DROPOUT_KEYS
                 if isinstance(tiny.get(k), (int, float)) and tiny[k] > 0]
        if drops:
            out.append({"name": "pub:" + stem + "+no-dropout", "config": edit(tiny, **{k: 0.0 for k in drops})})
    return out


def all_cases():
    return published_cases() + option_cases()


def hf_config_of(cfg):
    """What transformers 4.49 is given for a case: the 5.x spelling translated."""
    c = copy.deepcopy(cfg)
    rp = c.pop("rope_parameters", None)
    if rp is not None:
        rp = dict(rp)
        if "rope_theta" in rp:
            c["rope_theta"] = rp.pop("rope_theta")
        if rp.get("rope_type", rp.get("type", "default")) != "default":
            c["rope_scaling"] = rp
        elif set(rp) - {"rope_type", "type"}:
            raise Unsupported(f"rope_parameters keys {sorted(set(rp) - {'rope_type', 'type'})} with rope_type default")
    lt = c.pop("layer_types", None)
    if lt is not None:
        L = c.get("num_hidden_layers")
        want = ["sliding_attention" if c.get("use_sliding_window") and i >= c.get("max_window_layers", 0)
                else "full_attention" for i in range(L or 0)]
        if c.get("model_type") != "qwen2" or lt != want:
            raise Unsupported(f"layer_types {lt} (transformers {TRANSFORMERS_PIN} has no per-layer attention types)")
    if c.get("model_type") == "qwen2" and not c.get("use_sliding_window", False):
        c["sliding_window"] = None
    return c


class Unsupported(Exception):
    """transformers (this version) cannot build the case."""


# ------------------------------------------------------------------ weights

def rand_weights(params, seed=SEED):
    """{name: float64 array}: non-trivial values for every tensor, rounded to
    float32 (so float32 fixtures hold them exactly); from wref_np.doc_init
    (numpy, deterministic by name)."""
    out = {}
    for name, shape in params:
        shape = tuple(shape)
        if name.endswith(".bias"):
            v = W.doc_init(name, shape, {"kind": "normal", "std": 0.1}, seed, np.float64)
        elif len(shape) == 1:  # norm scales
            v = 1.0 + W.doc_init(name, shape, {"kind": "normal", "std": 0.1}, seed, np.float64)
        else:
            v = W.doc_init(name, shape, {"kind": "normal", "std": 0.3}, seed, np.float64)
        out[name] = v.astype(np.float32).astype(np.float64)
    return out


# ------------------------------------------------------------------ weft side

def find_tool(name, dirs):
    for d in dirs:
        if d and os.path.isfile(os.path.join(d, name)) and os.access(os.path.join(d, name), os.X_OK):
            return os.path.join(d, name)
    raise ToolError(f"{name} not found in: " + ", ".join(d for d in dirs if d))


def run(cmd, log):
    log.write("$ " + " ".join(cmd) + "\n")
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ENV)
    log.write(r.stdout + f"(exit {r.returncode})\n")
    log.flush()
    return r.returncode, r.stdout


def first_error(out):
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    errs = [ln for ln in lines if "error" in ln.lower()]
    return (errs or lines or ["(no message)"])[0]


def load_tokens(path):
    """A token file as weft-run reads it: raw uint16 (nanoGPT), or llm.c's 256-int32 header
    (magic 20240520; version 1 uint16, version 2 uint32 ids)."""
    head = np.fromfile(path, dtype="<i4", count=256)
    if head.size == 256 and head[0] == 20240520:
        dt = {1: "<u2", 2: "<u4"}.get(int(head[1]))
        if dt is None:
            raise ToolError(f"{path}: llm.c token file version {head[1]}")
        toks = np.fromfile(path, dtype=dt, offset=256 * 4)[:int(head[2])]
        if toks.size == 0:
            raise ToolError(f"{path}: empty token file")
        return toks
    return W.load_tokens(path)


def default_data(workdir, run_tool_dir, log):
    corpus = os.path.join(REPO, "build", "data", "corpus.bin")
    if os.path.exists(corpus):
        return corpus
    tok = os.path.join(run_tool_dir, "weft-tokenize")
    txt = os.path.join(REPO, "data", "corpus.txt")
    out = os.path.join(workdir, "corpus.bin")
    if os.access(tok, os.X_OK) and os.path.exists(txt):
        rc, o = run([tok, txt, "-o", out], log)
        if rc == 0:
            return out
    return W.make_default_data(out, REPO)


class Weft:
    def __init__(self, comp, run_tool, data, log):
        self.comp, self.run_tool, self.data, self.log = comp, run_tool, data, log

    def compile(self, cfg, wd, extra=()):
        os.makedirs(wd, exist_ok=True)
        cpath = os.path.join(wd, "config.json")
        with open(cpath, "w") as f:
            json.dump(cfg, f, indent=1)
        prog = os.path.join(wd, "prog.weft")
        if os.path.exists(prog):
            os.remove(prog)
        rc, out = run([self.comp, cpath, "--batch", str(BATCH), "--seq", str(SEQ), "--dtype", "f64",
                       *extra, "-o", prog, "--quiet"], self.log)
        if rc != 0:
            return None, f"exit {rc}: {first_error(out)}"
        if not os.path.exists(prog):
            raise ToolError(f"weft-compile exited 0 without writing {prog}")
        return prog, None

    def train(self, prog, wd, tag, steps=1, load=None, save_init=False):
        """Returns (result dict, None) or (None, error message)."""
        common = ["--data", self.data, "--seed", str(SEED), "--quiet", "--threads", "1"]
        res = {}
        if save_init:
            d = os.path.join(wd, "init")
            shutil.rmtree(d, ignore_errors=True)
            rc, out = run([self.run_tool, prog, "--steps", "0", "--save", d] + common, self.log)
            if rc != 0:
                return None, f"weft-run --steps 0 --save: exit {rc}: {first_error(out)}"
            res["init"], _ = W.read_safetensors(os.path.join(d, "model.safetensors"))
        g = os.path.join(wd, "g_" + tag)
        m = os.path.join(wd, "m_" + tag + ".jsonl")
        shutil.rmtree(g, ignore_errors=True)
        if os.path.exists(m):
            os.remove(m)
        cmd = [self.run_tool, prog, "--steps", str(steps), "--save-grads", g, "--metrics", m] + common
        if load:
            cmd += ["--load", load]
        rc, out = run(cmd, self.log)
        if rc != 0:
            return None, f"weft-run{' --load' if load else ''}: exit {rc}: {first_error(out)}"
        res["grads"], _ = W.read_safetensors(os.path.join(g, "grads.safetensors"))
        met = W.read_metrics(m)
        if sorted(met) != list(range(1, steps + 1)):
            raise ToolError(f"{m}: steps {sorted(met)}")
        res["loss"] = float(met[1]["loss"])
        res["lrs"] = [float(met[k]["lr"]) for k in range(1, steps + 1)]
        return res, None


# ------------------------------------------------------------------ transformers side

SHIM_MODULES = ["transformers.models.llama.modeling_llama", "transformers.models.mistral.modeling_mistral",
                "transformers.models.qwen2.modeling_qwen2", "transformers.models.gpt2.modeling_gpt2",
                "transformers.modeling_rope_utils", "transformers.activations", "transformers.loss.loss_utils"]


class _F64Torch(types.ModuleType):
    """`torch` as transformers' modeling modules see it under the float64
    promotion: float32 is float64, everything else is torch."""

    def __init__(self, real):
        super().__init__("torch")
        self.__dict__["_real"] = real

    def __getattr__(self, name):
        if name in ("float32", "float"):  # torch.float: 5.x's rotary tables
            return self._real.float64
        return getattr(self._real, name)


@contextlib.contextmanager
def precision(f64):
    import importlib
    import torch
    if not f64:
        yield
        return
    mods = [importlib.import_module(m) for m in SHIM_MODULES]
    swapped = [m for m in mods if getattr(m, "torch", None) is torch]
    had_float = "float" in torch.Tensor.__dict__
    old_float = torch.Tensor.__dict__.get("float")
    old_default = torch.get_default_dtype()
    proxy = _F64Torch(torch)
    try:
        for m in swapped:
            m.torch = proxy
        torch.Tensor.float = lambda self, *a, **k: self.to(torch.float64)
        torch.set_default_dtype(torch.float64)
        yield
    finally:
        for m in swapped:
            m.torch = torch
        if had_float:
            torch.Tensor.float = old_float
        else:
            del torch.Tensor.float
        torch.set_default_dtype(old_default)


def hf_model(hf_cfg, f64):
    import torch
    import transformers
    from transformers import AutoConfig
    arch = (hf_cfg.get("architectures") or [None])[0]
    cls = getattr(transformers, arch, None) if arch else None
    if cls is None:
        raise Unsupported(f"transformers {transformers.__version__} has no class {arch}")
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(hf_cfg, f)
        try:
            config = AutoConfig.from_pretrained(d)
        except Exception as e:  # noqa: BLE001
            raise Unsupported(f"transformers {transformers.__version__} rejects the config: "
                              f"{type(e).__name__}: {str(e)[:300]}")
    try:
        with precision(f64):
            model = cls._from_config(config, attn_implementation="eager", torch_dtype=torch.float64)
    except Exception as e:  # noqa: BLE001
        raise Unsupported(f"transformers {transformers.__version__} cannot build it: "
                          f"{type(e).__name__}: {str(e)[:300]}")
    if f64:
        bad = [n for n, t in list(model.named_parameters()) + list(model.named_buffers())
               if t.is_floating_point() and t.dtype != torch.float64]
        if bad:
            raise ToolError(f"float64 promotion left {bad} in another dtype")
    return model


def hf_params(model):
    """[(name, shape)] of named_parameters (a tied LM head appears once, under the embedding's name)."""
    return [(n, list(p.shape)) for n, p in model.named_parameters()]


def load_weights(model, weights):
    import torch
    sd = {n: torch.from_numpy(np.ascontiguousarray(v, np.float64)) for n, v in weights.items()}
    names = {n for n, _ in model.named_parameters()}
    if set(sd) != names:
        raise ToolError(f"weights {sorted(set(sd) ^ names)} differ from the model's parameters")
    missing, unexpected = model.load_state_dict(sd, strict=False)
    tied = {n for n in missing if n not in names}  # a tied duplicate (lm_head.weight)
    if unexpected or set(missing) - tied:
        raise ToolError(f"load_state_dict: missing {missing}, unexpected {unexpected}")


def hf_loss(model, x, y):
    import torch
    import torch.nn.functional as F
    logits = model(input_ids=torch.from_numpy(x), use_cache=False).logits
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), torch.from_numpy(y).reshape(-1))


def hf_step(model, weights, x, y, f64):
    load_weights(model, weights)
    with precision(f64):
        model.train()
        model.zero_grad(set_to_none=True)
        try:
            loss = hf_loss(model, x, y)
        except Exception as e:  # noqa: BLE001
            raise Unsupported(f"transformers' forward fails: {type(e).__name__}: {str(e)[:300]}")
        loss.backward()
    grads = {}
    for n, p in model.named_parameters():
        grads[n] = (p.grad.detach().numpy().copy() if p.grad is not None else np.zeros(tuple(p.shape)))
    return float(loss.item()), grads


def init_stats(model):
    """{name: (kind, std, n)} of the values transformers' own _init_weights gave each parameter."""
    out = {}
    for n, p in model.named_parameters():
        v = p.detach().numpy()
        if not v.any():
            out[n] = ("zeros", 0.0, v.size)
        elif (v == 1).all():
            out[n] = ("ones", 0.0, v.size)
        else:
            out[n] = ("normal", float(np.sqrt(np.mean(np.square(v, dtype=np.float64)))), v.size)
    return out


def check_init_spec(res, program, hf_init):
    """weft's declared init (docs/program-format.md) against transformers' initialisation of the same
    config: same kind; for normal, the declared std within 25% of transformers' sample std (tensors of
    128+ elements: 4+ standard errors)."""
    for q in program["params"]:
        h = hf_init.get(q["name"])
        if h is None:
            continue
        kind, std, n = h
        spec = q["init"]
        if spec["kind"] != kind:
            res.fails.append(f"init {q['name']}: weft {spec}, transformers initialises it as {kind}"
                             + (f" (std {std:.3g})" if kind == "normal" else ""))
        elif kind == "normal" and n >= 128:
            res.add("init", q["name"], abs(float(spec["std"]) / std - 1.0), 0.25,
                    f" (weft std {spec['std']}, transformers' sample std {std:.4g} over {n})")


def hf_reference(case, weights_of, x, y, with_stock=True):
    """Returns dict(params, weights, loss, grads[, stock_loss, stock_grads]).
    weights_of(params) -> {name: float64 array}."""
    import torch
    torch.manual_seed(0)
    hf_cfg = hf_config_of(case["config"])
    model = hf_model(hf_cfg, True)
    params = hf_params(model)
    out = {"params": params, "hf_config": hf_cfg, "hf_init": init_stats(model)}
    weights = out["weights"] = weights_of(params)
    out["loss"], out["grads"] = hf_step(model, weights, x, y, True)
    if with_stock:
        stock = hf_model(hf_cfg, False)
        out["stock_loss"], out["stock_grads"] = hf_step(stock, weights, x, y, False)
    return out


# ------------------------------------------------------------------ lr schedules

SCHEDULES = [
    {"name": "cosine+min_lr", "steps": 12,
     "args": {"lr": 1e-3, "schedule": "cosine", "warmup_steps": 3, "total_steps": 10, "min_lr": 1e-4}},
    {"name": "cosine", "steps": 12,
     "args": {"lr": 1e-3, "schedule": "cosine", "warmup_steps": 3, "total_steps": 10, "min_lr": 0.0}},
    {"name": "cosine, no warmup", "steps": 7,
     "args": {"lr": 6e-4, "schedule": "cosine", "warmup_steps": 0, "total_steps": 5, "min_lr": 6e-5}},
    {"name": "constant", "steps": 4, "args": {"lr": 1e-3, "schedule": "constant"}},
]


def schedule_flags(a):
    f = ["--lr", repr(a["lr"]), "--schedule", a["schedule"]]
    if a["schedule"] == "cosine":
        f += ["--warmup-steps", str(a["warmup_steps"]), "--total-steps", str(a["total_steps"]),
              "--min-lr", repr(a["min_lr"])]
    return f


def torch2_names():
    import torch.optim.lr_scheduler as torch_sched
    if not hasattr(torch_sched, "LRScheduler"):
        # transformers.optimization and trainer_pt_utils import torch 2's name for the scheduler
        # base class; torch 1.13 calls the same class _LRScheduler
        torch_sched.LRScheduler = torch_sched._LRScheduler


def hf_scheduler(opt, a):
    """transformers' scheduler for weft's schedule flags; (scheduler, its name)."""
    torch2_names()
    from transformers.optimization import (get_constant_schedule, get_cosine_schedule_with_warmup,
                                           get_cosine_with_min_lr_schedule_with_warmup)
    if a["schedule"] == "constant":
        return get_constant_schedule(opt), "get_constant_schedule"
    if a["min_lr"] > 0:
        return (get_cosine_with_min_lr_schedule_with_warmup(opt, a["warmup_steps"], a["total_steps"],
                                                            min_lr=a["min_lr"]),
                "get_cosine_with_min_lr_schedule_with_warmup")
    return get_cosine_schedule_with_warmup(opt, a["warmup_steps"], a["total_steps"]), "get_cosine_schedule_with_warmup"


def hf_lrs(sch):
    """The lr transformers' scheduler gives each optimizer step (1-based t uses lambda(t-1)),
    then weft's convention past total_steps: min_lr."""
    import torch
    a = sch["args"]
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=a["lr"])
    s, used = hf_scheduler(opt, a)
    hf, want = [], []
    for t in range(1, sch["steps"] + 1):
        lr = opt.param_groups[0]["lr"]
        hf.append(lr)
        want.append(a["min_lr"] if a["schedule"] == "cosine" and t - 1 > a["total_steps"] else lr)
        opt.step()
        s.step()
    return {"lrs": want, "transformers_lrs": hf, "scheduler": used}


# Training over the schedule: weft-run --steps 12 against torch.optim.AdamW driven by
# transformers' scheduler on transformers' model (float64), from the "rand" weights.
# Weight decay goes where transformers' Trainer puts it (Trainer.get_decay_parameter_names:
# not biases, not LayerNorm/RMSNorm weights, in 4.49 and 5.25); for GPT-2 and Llama that is
# every tensor of rank >= 2.
TRAIN = {"cases": ["llama", "gpt2"], "steps": 11,  # t - 1 = 0 .. total_steps: pure transformers
         "args": {"lr": 3e-3, "schedule": "cosine", "warmup_steps": 3, "total_steps": 10, "min_lr": 3e-4},
         "weight_decay": 0.1}


def train_flags():
    return schedule_flags(TRAIN["args"]) + ["--weight-decay", repr(TRAIN["weight_decay"])]


def hf_train(case, optimizer, tokens):
    """optimizer: the program's optimizer section (lr, beta1, beta2, eps, weight_decay).
    Returns dict(losses, params, decay)."""
    import torch
    torch2_names()
    from transformers import Trainer
    model = hf_model(hf_config_of(case["config"]), True)
    weights = rand_weights(hf_params(model))
    load_weights(model, weights)
    # The Trainer's own rule (4.49: LayerNorm and RMSNorm modules, names with
    # bias, layernorm, rmsnorm; 5.x adds a norm in the name): it reads no
    # Trainer state.
    decay = set(Trainer.get_decay_parameter_names(None, model))
    named = list(model.named_parameters())
    groups = [{"params": [p for n, p in named if n in decay], "weight_decay": float(optimizer["weight_decay"])},
              {"params": [p for n, p in named if n not in decay], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=float(optimizer["lr"]), betas=(float(optimizer["beta1"]),
                            float(optimizer["beta2"])), eps=float(optimizer["eps"]), foreach=False)
    sched, _ = hf_scheduler(opt, TRAIN["args"])
    losses = []
    with precision(True):
        model.train()
        for k in range(TRAIN["steps"]):
            x, y = W.batch(tokens, k, BATCH, SEQ)
            opt.zero_grad(set_to_none=True)
            loss = hf_loss(model, x, y)
            loss.backward()
            losses.append(float(loss.item()))
            opt.step()
            sched.step()
    return {"losses": losses, "params": {n: p.detach().numpy().copy() for n, p in named},
            "decay": sorted(n for n, _ in named if n in decay)}


def check_training(args, weft, log, tokens, fixture):
    """fixture: {case: {"losses": [...], "decay": [...]}} or None (live)."""
    out = []
    for name in TRAIN["cases"]:
        case = next(c for c in all_cases() if c["name"] == name)
        res = Result(f"train: {name}, {TRAIN['steps']} steps")
        out.append(res)
        wd = os.path.join(args.workdir, "train", safe_name(name))
        prog, err = weft.compile(case["config"], wd, train_flags())
        if prog is None:
            res.status, res.msg = "REFUSED", err
            continue
        program = W.read_program(prog)
        params = [(q["name"], q["shape"]) for q in program["params"]]
        rdir = os.path.join(wd, "rand")
        os.makedirs(rdir, exist_ok=True)
        W.write_safetensors(os.path.join(rdir, "model.safetensors"), rand_weights(params))
        after = os.path.join(wd, "after")
        shutil.rmtree(after, ignore_errors=True)
        m = os.path.join(wd, "m_train.jsonl")
        rc, o = run([weft.run_tool, prog, "--steps", str(TRAIN["steps"]), "--data", weft.data, "--load", rdir,
                     "--save", after, "--metrics", m, "--quiet", "--threads", "1"], log)
        if rc != 0:
            res.status, res.msg = "MISMATCH", f"weft-run: exit {rc}: {first_error(o)}"
            res.fails.append(res.msg)
            continue
        met = W.read_metrics(m)
        losses = [float(met[k]["loss"]) for k in range(1, TRAIN["steps"] + 1)]
        if fixture is not None:
            ref = fixture.get(name)
            if ref is None or ref["train"] != TRAIN or ref["optimizer"] != program["optimizer"]:
                res.status = "MISMATCH"
                res.fails.append("training fixture is " + ("missing" if ref is None else
                                 "stale (other schedule or optimizer defaults)") + ": rerun --write-fixtures")
                continue
        else:
            ref = hf_train(case, program["optimizer"], tokens)
        decay = sorted(q["name"] for q in program["params"] if q["weight_decay"])
        if decay != ref["decay"]:
            res.fails.append(f"weight decay: weft decays {sorted(set(decay) ^ set(ref['decay']))} differently "
                             f"from transformers' Trainer")
        for k, (a, b) in enumerate(zip(losses, ref["losses"]), 1):
            res.add("loss", f"step {k}", W.rel(a, b), TOL["loss"], f" (weft {a:.9g}, transformers {b:.9g})")
        if "params" in ref:
            got, _ = W.read_safetensors(os.path.join(after, "model.safetensors"))
            for n in sorted(ref["params"]):
                if n not in got:
                    res.fails.append(f"param {n}: not in weft's checkpoint")
                    continue
                res.add("param", n, W.max_rel(got[n], ref["params"][n]), TOL["grad"])
        res.status = "MISMATCH" if res.fails else "MATCH"
        w = res.worst("param")
        res.msg = f"worst param {w[1]} {w[2]:.1e}" if w else "losses only (fixture)"
    return out


# ------------------------------------------------------------------ comparison

class Result:
    def __init__(self, name):
        self.name, self.status, self.rows, self.msg, self.fails = name, None, [], "", []

    def add(self, what, tensor, err, tol, extra=""):
        ok = err <= tol
        self.rows.append((what, tensor, err, tol, ok, extra))
        if not ok:
            self.fails.append(f"{what} {tensor}: {err:.3e} > {tol:.0e}{extra}")

    def worst(self, what):
        rows = [r for r in self.rows if r[0] == what]
        return max(rows, key=lambda r: r[2]) if rows else None


def compare_run(res, tag, weft_run, ref, grad_tol):
    """weft_run: Weft.train result; ref: dict(loss, grads[, stock_*])."""
    res.add("loss", tag, W.rel(weft_run["loss"], ref["loss"]), TOL["loss"],
            f" (weft {weft_run['loss']:.9g}, transformers {ref['loss']:.9g})")
    for n in sorted(ref["grads"]):
        if n not in weft_run["grads"]:
            res.fails.append(f"grad {tag} {n}: not in weft's grads.safetensors")
            continue
        res.add("grad", f"{tag} {n}", W.max_rel(weft_run["grads"][n], ref["grads"][n]), grad_tol)
    extra = sorted(set(weft_run["grads"]) - set(ref["grads"]))
    if extra:
        res.fails.append(f"grad {tag}: weft has gradients for {extra}, transformers has no such parameters")
    if "stock_grads" in ref:
        # distance of weft from unpatched transformers (float32 internals): informational, bounded
        e = max([W.rel(weft_run["loss"], ref["stock_loss"])] +
                [W.max_rel(weft_run["grads"][n], ref["stock_grads"][n]) for n in ref["stock_grads"]
                 if n in weft_run["grads"]])
        res.add("stock", tag, e, TOL["stock"])


def check_names(res, weft_params, hf_params_list):
    """weft_params, hf_params_list: [(name, shape)]."""
    wp = {n: list(s) for n, s in weft_params}
    hp = {n: list(s) for n, s in hf_params_list}
    miss = sorted(set(hp) - set(wp))
    extra = sorted(set(wp) - set(hp))
    shapes = sorted(n for n in set(wp) & set(hp) if wp[n] != hp[n])
    if miss:
        res.fails.append(f"names: weft's program lacks {miss} (transformers' model has them)")
    if extra:
        res.fails.append(f"names: weft's program has {extra} (transformers' model does not)")
    for n in shapes:
        res.fails.append(f"names: {n} is {wp[n]} in weft, {hp[n]} in transformers")
    return not (miss or extra or shapes)


def program_params(prog_path):
    p = W.read_program(prog_path)
    return [(q["name"], q["shape"]) for q in p["params"]]


def safe_name(name):
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)


# ------------------------------------------------------------------ modes

def tools(args):
    comp = find_tool("weft-compile", [args.bin, os.path.join(REPO, "build", "bin")])
    run_tool = find_tool("weft-run", [args.run_bin, args.bin, os.path.join(REPO, "build-rt", "bin"),
                                      os.path.join(REPO, "build", "bin")])
    return comp, run_tool


def select(cases, pats):
    if not pats:
        return cases
    return [c for c in cases if any(fnmatch.fnmatch(c["name"], p) or p in c["name"] for p in pats)]


def quiet_transformers():
    import transformers
    transformers.logging.set_verbosity_error()  # e.g. 4.49's spurious "sliding window not implemented for eager"


def live(args, log):
    import torch
    import transformers
    torch.set_num_threads(1)
    quiet_transformers()
    comp, run_tool = tools(args)
    data = args.data or default_data(args.workdir, os.path.dirname(run_tool), log)
    tokens = load_tokens(data)
    x, y = W.batch(tokens, 0, BATCH, SEQ)
    print(f"transformers {transformers.__version__} (torch {torch.__version__}) vs\n"
          f"weft-compile {comp}\nweft-run     {run_tool}\ndata         {data}\nworkdir      {args.workdir}")
    weft = Weft(comp, run_tool, data, log)
    results = []
    for case in select(all_cases(), args.case):
        res = Result(case["name"])
        results.append(res)
        wd = os.path.join(args.workdir, safe_name(case["name"]))
        prog, err = weft.compile(case["config"], wd)
        if prog is None:
            res.status, res.msg = "REFUSED", err
            continue
        try:
            ref_init = None
            init_run, err = weft.train(prog, wd, "init", save_init=True)
            if init_run is None:
                res.status, res.msg = "MISMATCH", err
                continue
            wparams = program_params(prog)
            init_w = {n: init_run["init"][n].astype(np.float64) for n, _ in wparams if n in init_run["init"]}
            # (a weft tensor of another name or shape becomes zeros here; check_names reports it)
            ref_init = hf_reference(case, lambda params: {
                n: init_w[n] if n in init_w and list(init_w[n].shape) == list(s) else np.zeros(s)
                for n, s in params}, x, y)
        except Unsupported as e:
            res.status, res.msg = "UNCHECKED", str(e)
            continue
        if not check_names(res, wparams, ref_init["params"]):
            res.status = "MISMATCH"
            continue
        if has_dropout(case["config"]):
            res.status, res.msg = "MATCH", DROPOUT_NOTE
            continue
        check_init_spec(res, W.read_program(prog), ref_init["hf_init"])
        compare_run(res, "init", init_run, ref_init, TOL["grad"])
        ref_rand = hf_reference(case, rand_weights, x, y)
        rdir = os.path.join(wd, "rand")
        os.makedirs(rdir, exist_ok=True)
        W.write_safetensors(os.path.join(rdir, "model.safetensors"), ref_rand["weights"])
        rand_run, err = weft.train(prog, wd, "rand", load=rdir)
        if rand_run is None:
            res.fails.append(f"rand: {err}")
        else:
            compare_run(res, "rand", rand_run, ref_rand, TOL["grad"])
        res.status = "MISMATCH" if res.fails else "MATCH"
    sched = check_schedules(args, weft, log, None) + check_training(args, weft, log, tokens, None)
    return results, sched


def check_schedules(args, weft, log, fixture):
    """fixture: {name: {"lrs": [...]}} or None (live: transformers)."""
    out = []
    for sch in SCHEDULES:
        res = Result("lr: " + sch["name"])
        out.append(res)
        wd = os.path.join(args.workdir, "schedule", safe_name(sch["name"]))
        prog, err = weft.compile(LLAMA, wd, schedule_flags(sch["args"]))
        if prog is None:
            res.status, res.msg = "REFUSED", err
            continue
        r, err = weft.train(prog, wd, "sched", steps=sch["steps"])
        if r is None:
            res.status, res.msg = "MISMATCH", err
            continue
        ref = fixture[sch["name"]] if fixture is not None else hf_lrs(sch)
        res.msg = ref.get("scheduler", "")
        for t, (a, b) in enumerate(zip(r["lrs"], ref["lrs"]), 1):
            err_t = W.rel(a, b) if b != 0 else abs(a)
            extra = f" (weft {a:.9g}, expected {b:.9g}"
            if "transformers_lrs" in ref and ref["transformers_lrs"][t - 1] != b:
                extra += f"; transformers' scheduler itself {ref['transformers_lrs'][t - 1]:.9g}"
            res.add("lr", f"step {t}", err_t, TOL["lr"], extra + ")")
        res.status = "MISMATCH" if res.fails else "MATCH"
    return out


def write_fixtures(args, log, fixdir):
    import torch
    import transformers
    torch.set_num_threads(1)
    quiet_transformers()
    os.makedirs(os.path.join(fixdir, "grads"), exist_ok=True)
    data = args.data or default_data(args.workdir, os.path.join(REPO, "build", "bin"), log)
    tokens = load_tokens(data)[:4096].astype("<u2")
    tokens.tofile(os.path.join(fixdir, "data.bin"))
    x, y = W.batch(tokens, 0, BATCH, SEQ)
    cases, used = {}, set()
    for case in all_cases():
        entry = {"config": case["config"]}
        try:
            ref = hf_reference(case, rand_weights, x, y, with_stock=True)
        except Unsupported as e:
            entry["unsupported"] = str(e)
            cases[case["name"]] = entry
            print(f"{case['name']}: transformers cannot build it: {e}")
            continue
        if case.get("names_only"):
            entry.update(params=ref["params"], hf_config=ref["hf_config"], loss=ref["loss"], names_only=True)
            cases[case["name"]] = entry
            continue
        g32 = {n: v.astype(np.float32) for n, v in ref["grads"].items()}
        blob = b"".join(n.encode() + g32[n].tobytes() for n in sorted(g32))
        sha = hashlib.sha256(blob).hexdigest()[:16]
        path = os.path.join(fixdir, "grads", sha + ".safetensors")
        if sha not in used and not os.path.exists(path):
            W.write_safetensors(path, g32, {"what": "transformers float64 gradients of step 1, rounded to float32"})
        used.add(sha)
        stock = max([W.rel(ref["stock_loss"], ref["loss"])] +
                    [W.max_rel(ref["stock_grads"][n], ref["grads"][n]) for n in ref["grads"]])
        entry.update(params=ref["params"], hf_config=ref["hf_config"], loss=ref["loss"], grads=sha,
                     stock_vs_f64=stock)
        cases[case["name"]] = entry
    for f in glob.glob(os.path.join(fixdir, "grads", "*.safetensors")):
        if os.path.basename(f)[:-len(".safetensors")] not in used:
            os.remove(f)
    sched = {s["name"]: dict(hf_lrs(s), args=s["args"], steps=s["steps"]) for s in SCHEDULES}
    training = {}
    comp = find_tool("weft-compile", [args.bin, os.path.join(REPO, "build", "bin")])
    for name in TRAIN["cases"]:
        # the optimizer's defaults (betas, eps) are weft's: read them from a compiled program
        case = next(c for c in all_cases() if c["name"] == name)
        prog, err = Weft(comp, None, None, log).compile(case["config"], os.path.join(args.workdir, "train", name),
                                                         train_flags())
        if prog is None:
            print(f"training fixture {name}: weft-compile refused it ({err}); none written")
            continue
        r = hf_train(case, W.read_program(prog)["optimizer"], tokens)
        training[name] = {"losses": r["losses"], "decay": r["decay"], "train": TRAIN,
                          "optimizer": W.read_program(prog)["optimizer"]}
    meta = {
        "made_by": f"test/reference/hf_reference.py --write-fixtures (transformers {transformers.__version__}, "
                   f"torch {torch.__version__})",
        "batch": BATCH, "seq": SEQ, "seed": SEED, "data": "data.bin",
        "data_sha256": hashlib.sha256(tokens.tobytes()).hexdigest(),
        "weights": "rand_weights(): doc_init(name, std 0.3; biases std 0.1; 1-D scales 1 + std 0.1), "
                   "rounded to float32",
        "cases": cases, "schedules": sched, "training": training,
    }
    with open(os.path.join(fixdir, "reference.json"), "w") as f:
        f.write(dump_fixture_json(meta))
    n_ok = sum(1 for c in cases.values() if "params" in c)
    print(f"fixtures: {n_ok} cases ({len(used)} distinct gradient sets), "
          f"{len(cases) - n_ok} transformers cannot build, {len(sched)} schedules -> {fixdir}")


def dump_fixture_json(meta):
    """JSON with one line per case and per schedule (diffable, compact)."""
    head = {k: v for k, v in meta.items() if k not in ("cases", "schedules", "training")}
    lines = ["{"]
    for k in sorted(head):
        lines.append(f" {json.dumps(k)}: {json.dumps(head[k], sort_keys=True)},")
    for part in ("cases", "schedules", "training"):
        lines.append(f" {json.dumps(part)}: {{")
        items = sorted(meta[part].items())
        for i, (k, v) in enumerate(items):
            lines.append(f"  {json.dumps(k)}: {json.dumps(v, sort_keys=True)}" + ("," if i + 1 < len(items) else ""))
        lines.append(" }" + ("," if part != "training" else ""))
    lines.append("}")
    return "\n".join(lines) + "\n"


def check_fixtures(args, log, fixdir):
    comp, run_tool = tools(args)
    with open(os.path.join(fixdir, "reference.json")) as f:
        meta = json.load(f)
    data = os.path.join(fixdir, "data.bin")
    with open(data, "rb") as f:
        if hashlib.sha256(f.read()).hexdigest() != meta["data_sha256"]:
            raise ToolError(f"{data} does not match the fixtures' data_sha256")
    if (meta["batch"], meta["seq"], meta["seed"]) != (BATCH, SEQ, SEED):
        raise ToolError("fixtures were made for another batch/seq/seed: rerun --write-fixtures")
    print(f"fixtures     {fixdir} ({meta['made_by']})\nweft-compile {comp}\nweft-run     {run_tool}\n"
          f"workdir      {args.workdir}")
    weft = Weft(comp, run_tool, data, log)
    results = []
    for case in select(all_cases(), args.case):
        res = Result(case["name"])
        results.append(res)
        fx = meta["cases"].get(case["name"])
        if fx is None or fx["config"] != case["config"]:
            res.status = "MISMATCH"
            res.fails.append("fixture is " + ("missing" if fx is None else "stale (another config)") +
                             ": rerun --write-fixtures")
            continue
        wd = os.path.join(args.workdir, safe_name(case["name"]))
        prog, err = weft.compile(case["config"], wd)
        if prog is None:
            res.status, res.msg = "REFUSED", err
            continue
        if "unsupported" in fx:
            res.status, res.msg = "UNCHECKED", fx["unsupported"]
            continue
        if not check_names(res, program_params(prog), fx["params"]):
            res.status = "MISMATCH"
            continue
        if fx.get("names_only"):
            res.status, res.msg = "MATCH", "parameter names and shapes only (no gradient fixture for this size)"
            continue
        if has_dropout(case["config"]):
            res.status, res.msg = "MATCH", DROPOUT_NOTE
            continue
        weights = rand_weights(fx["params"], meta["seed"])
        rdir = os.path.join(wd, "rand")
        os.makedirs(rdir, exist_ok=True)
        W.write_safetensors(os.path.join(rdir, "model.safetensors"), weights)
        r, err = weft.train(prog, wd, "rand", load=rdir)
        if r is None:
            res.status, res.msg = "MISMATCH", err
            res.fails.append(err)
            continue
        grads, _ = W.read_safetensors(os.path.join(fixdir, "grads", fx["grads"] + ".safetensors"))
        compare_run(res, "rand", r, {"loss": fx["loss"], "grads": grads}, TOL["grad-fixture"])
        res.status = "MISMATCH" if res.fails else "MATCH"
    sched = (check_schedules(args, weft, log, meta["schedules"]) +
             check_training(args, weft, log, load_tokens(data), meta["training"]))
    return results, sched


def report(results, sched, elapsed):
    print(f"\n{'case':<44} {'outcome':<9} {'loss err':>9} {'grad err':>9} {'stock':>8}  detail")
    counts = {}
    for r in results + sched:
        counts[r.status] = counts.get(r.status, 0) + 1
        lw, gw, sw = r.worst("loss"), r.worst("grad"), r.worst("stock")
        lw = r.worst("lr") if lw is None else lw
        f = lambda w: f"{w[2]:9.1e}" if w else " " * 9  # noqa: E731
        detail = r.msg
        if r.status == "MATCH" and gw:
            detail = f"worst grad {gw[1]}"
        if r.fails:
            detail = r.fails[0] + (f" (+{len(r.fails) - 1} more)" if len(r.fails) > 1 else "")
        print(f"{r.name:<44} {r.status:<9} {f(lw)} {f(gw)} {f(sw)[1:]}  {detail}")
    bad = [r for r in results + sched if r.status == "MISMATCH"]
    if bad:
        print("\nMISMATCH details:")
        for r in bad:
            for line in r.fails[:12] or [r.msg]:
                print(f"  {r.name}: {line}")
            if len(r.fails) > 12:
                print(f"  {r.name}: ... {len(r.fails) - 12} more")
    unchecked = [r for r in results if r.status == "UNCHECKED"]
    print("\n" + ", ".join(f"{counts[k]} {k.lower()}" for k in ("MATCH", "REFUSED", "MISMATCH", "UNCHECKED")
                           if k in counts) +
          f" ({len(results)} configs, {len(sched)} schedule and training checks, {elapsed:.0f} s)")
    if unchecked:
        print("unchecked (weft accepted, this transformers cannot build them): " +
              ", ".join(r.name for r in unchecked))
    n_pass = sum(1 for r in results + sched if r.status in ("MATCH", "REFUSED"))
    print(f"hf_reference: {n_pass} passed, {len(bad)} failed, {len(unchecked)} skipped")
    return bad


def transformers_ok():
    try:
        import transformers  # noqa: F401
        from transformers import GPT2LMHeadModel  # noqa: F401
        return True, ""
    except Exception as e:  # noqa: BLE001
        return False, f"{type(e).__name__}: {e}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(REPO, "build", "bin"),
                    help="directory of weft-compile (and weft-run)")
    ap.add_argument("--run-bin", default=None, help="directory of weft-run when it is elsewhere")
    ap.add_argument("--data", default=None, help="uint16 token file (default: build/data/corpus.bin, else "
                    "data/corpus.txt through weft-tokenize)")
    ap.add_argument("--workdir", default=None, help="scratch directory (default: a new temporary one, removed "
                    "when everything matched)")
    ap.add_argument("--case", action="append", help="only cases whose name matches (glob or substring; repeatable)")
    ap.add_argument("--list", action="store_true", help="print the cases and their config.json, then exit")
    ap.add_argument("--no-install", action="store_true",
                    help="do not create build/hf-venv when transformers is missing")
    ap.add_argument("--no-reexec", action="store_true", help=argparse.SUPPRESS)
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--write-fixtures", nargs="?", const=FIXDIR, metavar="DIR")
    g.add_argument("--check-fixtures", nargs="?", const=FIXDIR, metavar="DIR")
    args = ap.parse_args(argv)
    if args.list:
        for c in select(all_cases(), args.case):
            print(f"{c['name']}: {json.dumps(c['config'], sort_keys=True)}")
        return 0
    mode = "fixtures" if args.check_fixtures else ("write" if args.write_fixtures else "live")
    if mode != "fixtures":
        ok, why = transformers_ok()
        if not ok and not args.no_reexec:
            if not os.path.exists(VENV_PY) and not args.no_install:
                subprocess.run([os.path.join(HERE, "hf_venv.sh")], check=False)
            venv_dir = os.path.dirname(os.path.dirname(VENV_PY))
            if os.path.exists(VENV_PY) and os.path.realpath(sys.prefix) != os.path.realpath(venv_dir):
                sys.stdout.flush()
                os.execv(VENV_PY, [VENV_PY, os.path.abspath(__file__)] + (sys.argv[1:] if argv is None else argv)
                         + ["--no-reexec"])
        if not ok:
            if mode == "write":
                print(f"ERROR: --write-fixtures needs transformers ({why})")
                return 2
            if not os.path.exists(os.path.join(FIXDIR, "reference.json")):
                print(f"SKIP: transformers not importable ({why}) and no fixtures in {FIXDIR}")
                return 3
            print(f"SKIP: transformers not importable ({why}); checking the committed fixtures instead")
            mode, args.check_fixtures = "fixtures", FIXDIR
    made_workdir = args.workdir is None
    args.workdir = os.path.abspath(args.workdir or tempfile.mkdtemp(prefix="weft-hf-"))
    os.makedirs(args.workdir, exist_ok=True)
    log_path = os.path.join(args.workdir, "commands.log")
    t0 = time.time()
    try:
        with open(log_path, "w") as log:
            if mode == "write":
                write_fixtures(args, log, os.path.abspath(args.write_fixtures))
                return 0
            if mode == "fixtures":
                results, sched = check_fixtures(args, log, os.path.abspath(args.check_fixtures))
            else:
                results, sched = live(args, log)
    except ToolError as e:
        print(f"ERROR: {e}\n(commands and their output: {log_path})")
        return 2
    bad = report(results, sched, time.time() - t0)
    if bad:
        print(f"FAIL (commands and their output: {log_path})")
        return 1
    if made_workdir:
        shutil.rmtree(args.workdir, ignore_errors=True)
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
