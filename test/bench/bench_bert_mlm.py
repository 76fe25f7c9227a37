#!/usr/bin/python3
"""Masked-LM training of a BERT encoder (a benchmark, not a test): weft
against PyTorch on the same model, the same batches and the same loss.

  model:  Hugging Face BertForMaskedLM (hidden D, L layers, H heads, MLP
          4D, vocab V, learned positions, decoder tied to the word
          embeddings), seed 0, exported by torch.onnx.export (dynamo,
          optimize=False, sdpa attention) into a scratch dir
  data:   random token ids, masked by weft's recipe (test/e2e/
          masked_lm_batch.py: 15% hidden, 80/10/10), one batch per step,
          written as .npy samples
  weft:   weft-compile model.onnx --loss cross-entropy; weft-run --load
          model.onnx --tokens --targets --steps N --threads T -> mean
          step_time_s over steps 2..N; step 1's loss
  torch:  the same module, fp32, model(input_ids, labels=...).loss +
          backward + torch.optim.AdamW(lr 1e-3, betas (0.9, 0.95), eps
          1e-8, weight_decay 0.1), eager and torch.compile, 2 warm-up
          steps then N-1 timed, torch.set_num_threads(T)

Run with the bench venv's python (test/bench/bench-venv.sh, plus `pip
install onnx onnxscript`):

  ~/.cache/weft/bench-venv/bin/python test/bench/bench_bert_mlm.py [--threads 2]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "test", "e2e"))


def parse():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--bin", default=os.path.join(REPO, "build", "bin"))
    ap.add_argument("--d", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    return ap.parse_args()


args = parse()
if os.environ.get("WEFT_BENCH_CHILD") != "1":
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads),
               OPENBLAS_NUM_THREADS=str(args.threads), WEFT_BENCH_CHILD="1")
    os.execve(sys.executable, [sys.executable] + sys.argv, env)

import numpy as np  # noqa: E402
import torch  # noqa: E402
from transformers import BertConfig, BertForMaskedLM  # noqa: E402

from masked_lm_batch import masked_batch  # noqa: E402

MASK = 4


def make_model():
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=args.vocab, hidden_size=args.d, num_hidden_layers=args.layers,
                     num_attention_heads=args.heads, intermediate_size=4 * args.d,
                     max_position_embeddings=max(512, args.seq), type_vocab_size=2,
                     hidden_act="gelu", hidden_dropout_prob=0.0,
                     attention_probs_dropout_prob=0.0)
    model = BertForMaskedLM._from_config(cfg, attn_implementation="sdpa")
    with torch.no_grad():  # distinct norm weights: optimize=False keeps them apart anyway
        for p in model.parameters():
            if p.dim() == 1:
                p.add_(0.01 * torch.randn_like(p))
    return model


def weft(work, onnx, tok, tgt):
    prog = os.path.join(work, "m.weft")
    subprocess.run([f"{args.bin}/weft-compile", onnx, "-o", prog, "--quiet", "--loss",
                    "cross-entropy"], check=True)
    metrics, trace = os.path.join(work, "m.jsonl"), os.path.join(work, "t.json")
    subprocess.run([f"{args.bin}/weft-run", prog, "--load", onnx, "--tokens", tok,
                    "--targets", tgt, "--steps", str(args.steps), "--threads",
                    str(args.threads), "--metrics", metrics, "--quiet"], check=True,
                   stdout=subprocess.DEVNULL)
    rows = [json.loads(line) for line in open(metrics)]
    # A second run, traced: the time per instruction kind (tracing adds
    # its own cost, so the step time above comes from the untraced run).
    subprocess.run([f"{args.bin}/weft-run", prog, "--load", onnx, "--tokens", tok,
                    "--targets", tgt, "--steps", str(args.steps), "--threads",
                    str(args.threads), "--trace", trace, "--quiet"], check=True,
                   stdout=subprocess.DEVNULL)
    spans = json.load(open(trace))
    by_op = {}
    for e in spans["traceEvents"] if isinstance(spans, dict) else spans:
        if e.get("ph") == "X" and e.get("cat") == "compute":
            op = e["name"].split(" ")[0]
            by_op[op] = by_op.get(op, 0.0) + e["dur"] * 1e-6 / args.steps
    return statistics.mean(r["step_time_s"] for r in rows[1:]), rows[0]["loss"], by_op


def torch_run(model, x, y, compiled):
    torch.set_num_threads(args.threads)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), eps=1e-8,
                            weight_decay=0.1)

    def step(i):
        loss = model(input_ids=x[i], labels=y[i]).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        return float(loss)

    fn = torch.compile(step) if compiled else step
    times, first = [], None
    for i in range(args.steps + 1):
        t0 = time.perf_counter()
        loss = fn(i % len(x))
        if first is None:
            first = loss
        if i >= 2:
            times.append(time.perf_counter() - t0)
    return statistics.mean(times), first


def main():
    rng = np.random.default_rng(0)
    stream = rng.integers(0, args.vocab, args.batch * args.seq * (args.steps + 2) + 1)
    rows = [masked_batch(stream, k, args.batch, args.seq, MASK, args.vocab)
            for k in range(args.steps + 1)]
    x = torch.tensor(np.stack([r[0] for r in rows]))
    y = torch.tensor(np.stack([r[1] for r in rows]))
    model = make_model()
    with tempfile.TemporaryDirectory() as work:
        onnx_path = os.path.join(work, "bert.onnx")
        model.eval()
        torch.onnx.export(model, (x[0],), onnx_path, dynamo=True, optimize=False,
                          do_constant_folding=False, input_names=["input_ids"])
        tok, tgt = os.path.join(work, "tok.npy"), os.path.join(work, "tgt.npy")
        np.save(tok, x.reshape(-1, args.seq).numpy())
        np.save(tgt, y.reshape(-1, args.seq).numpy().astype(np.int32))
        w, w_loss, by_op = weft(work, onnx_path, tok, tgt)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    e, e_loss = torch_run(model, x, y, False)
    results = {"weft": w, "eager": e}
    if not args.no_compile:
        model.load_state_dict(state)
        results["compile"], _ = torch_run(model, x, y, True)
    toks = args.batch * args.seq
    params = sum(p.numel() for p in model.parameters())
    print(f"model: BertForMaskedLM d {args.d}, {args.layers} layers, {args.heads} heads, "
          f"vocab {args.vocab} ({params / 1e6:.1f}M parameters), batch {args.batch} x seq "
          f"{args.seq}, {args.threads} threads")
    print(f"step-1 loss: weft {w_loss:.6f}, PyTorch {e_loss:.6f} "
          f"(relative {abs(w_loss - e_loss) / e_loss:.1e})")
    for name, t in results.items():
        print(f"{name:8s} {t * 1e3:8.1f} ms/step  {toks / t:8.0f} tok/s  "
              f"({t / w:.2f}x weft's time)")
    print("weft's traced compute per step, by instruction kind (top 8):")
    for op, v in sorted(by_op.items(), key=lambda kv: -kv[1])[:8]:
        print(f"  {op:20s} {v * 1e3:7.1f} ms")
    print(json.dumps({k + "_step_s": v for k, v in results.items()}))


main()
