#!/usr/bin/python3
"""Which GEMM library weft should use on this CPU (issue 14, item 1).

Times single-precision GEMM on the shapes weft's CPU backend runs for GPT-2
and Llama training (forward, input gradient and weight gradient of the
projections, and GPT-2's LM head), with the same threads, through each
candidate Debian ships, each in a child process of its own (no two thread
pools in one process), interleaved over a few rounds, best round kept:

  openblas      libopenblas.so.0 (what weft links), kernels as it detects them
  blis-openmp   libblis.so.4 from Debian's blis-openmp
  blis-pthread  libblis.so.4 from Debian's blis-pthread (when installed)
  onednn        libdnnl.so.2, dnnl_sgemm

(libxsmm, also in Debian, ships only static libraries, and targets small
matrices; these are not small.) Prints GFLOP/s per shape and library, each
library's geometric mean relative to the best per shape, and the winner.
Needs the libraries (apt-get install libblis-dev libdnnl-dev): a benchmark,
not part of `make test`.

  test/bench/bench_blas_choice.py [--threads 2] [--rounds 3]
"""
import argparse
import ctypes
import json
import math
import os
import subprocess
import sys
import time

LIB = "/usr/lib/x86_64-linux-gnu"
CANDIDATES = {
    "openblas": f"{LIB}/libopenblas.so.0",
    "blis-openmp": f"{LIB}/blis-openmp/libblis.so.4",
    "blis-pthread": f"{LIB}/blis-pthread/libblis.so.4",
    "onednn": f"{LIB}/libdnnl.so.2",
}

# (name, M, N, K, transpose_a, transpose_b): C[M,N] = op(A) op(B), row-major,
# as weft's matmul calls it for 4 x 256 = 1024 tokens (GPT-2 124M) and
# 2 x 512 (Llama 3.2 1B); weights [in, out] as Hugging Face's Conv1D (GPT-2)
# or [out, in] (Llama: transpose_b).
SHAPES = [
    ("gpt2 c_attn fwd", 1024, 2304, 768, False, False),
    ("gpt2 c_attn dX", 1024, 768, 2304, False, True),
    ("gpt2 c_attn dW", 768, 2304, 1024, True, False),
    ("gpt2 mlp.c_fc fwd", 1024, 3072, 768, False, False),
    ("gpt2 mlp.c_proj fwd", 1024, 768, 3072, False, False),
    ("gpt2 lm_head fwd", 1024, 50257, 768, False, True),
    ("llama-1b gate_proj fwd", 1024, 8192, 2048, False, True),
    ("llama-1b down_proj fwd", 1024, 2048, 8192, False, True),
    ("llama-1b down_proj dW", 2048, 8192, 1024, True, False),
]


def child(name, path, reps):
    import numpy as np
    lib = ctypes.CDLL(path)
    f, i64 = ctypes.c_float, ctypes.c_int64
    results = []
    for shape, m, n, k, ta, tb in SHAPES:
        a = np.random.default_rng(0).standard_normal(
            (k, m) if ta else (m, k), dtype=np.float32)
        b = np.random.default_rng(1).standard_normal(
            (n, k) if tb else (k, n), dtype=np.float32)
        c = np.zeros((m, n), dtype=np.float32)
        pa, pb, pc = (x.ctypes.data_as(ctypes.c_void_p) for x in (a, b, c))
        lda, ldb = a.shape[1], b.shape[1]
        if name == "onednn":
            fn = lib.dnnl_sgemm
            fn.argtypes = [ctypes.c_char, ctypes.c_char, i64, i64, i64, f,
                           ctypes.c_void_p, i64, ctypes.c_void_p, i64, f,
                           ctypes.c_void_p, i64]

            def call():
                st = fn(b"T" if ta else b"N", b"T" if tb else b"N", m, n, k,
                        1.0, pa, lda, pb, ldb, 0.0, pc, n)
                if st != 0:
                    raise SystemExit(f"dnnl_sgemm failed: status {st}")
        else:
            fn = lib.cblas_sgemm
            ci = ctypes.c_int
            fn.argtypes = [ci, ci, ci, ci, ci, ci, f, ctypes.c_void_p, ci,
                           ctypes.c_void_p, ci, f, ctypes.c_void_p, ci]

            def call():
                fn(101, 112 if ta else 111, 112 if tb else 111, m, n, k, 1.0,
                   pa, lda, pb, ldb, 0.0, pc, n)
        call()  # warm-up: pages, packing buffers, thread pool
        best = math.inf
        for _ in range(reps):
            t0 = time.perf_counter()
            call()
            best = min(best, time.perf_counter() - t0)
        ref = (a.T if ta else a) @ (b.T if tb else b)
        err = float(np.max(np.abs(c - ref)) / np.max(np.abs(ref)))
        if err > 1e-4:
            raise SystemExit(f"{name} {shape}: wrong result, max rel {err:.1e}")
        results.append({"shape": shape, "gflops": 2.0 * m * n * k / best / 1e9})
    print(json.dumps(results))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args.child[0], args.child[1], args.reps)
    libs = {n: p for n, p in CANDIDATES.items() if os.path.exists(p)}
    missing = sorted(set(CANDIDATES) - set(libs))
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "BLIS_NUM_THREADS"):
        env[var] = str(args.threads)
    env.pop("OPENBLAS_CORETYPE", None)  # as a new user runs it
    best = {n: {} for n in libs}
    for _ in range(args.rounds):
        for name, path in libs.items():
            out = subprocess.run(
                [sys.executable, __file__, "--child", name, path, "--reps",
                 str(args.reps)], env=env, capture_output=True, text=True)
            if out.returncode != 0:
                sys.exit(f"{name}: {out.stderr.strip() or out.stdout.strip()}")
            for r in json.loads(out.stdout):
                best[name][r["shape"]] = max(best[name].get(r["shape"], 0),
                                             r["gflops"])
    names = list(libs)
    print(f"sgemm GFLOP/s, {args.threads} threads, best of {args.rounds} "
          f"rounds x {args.reps} reps" +
          (f" (not installed: {', '.join(missing)})" if missing else ""))
    print(f"{'shape':26s}" + "".join(f"{n:>14s}" for n in names))
    for shape, *_ in SHAPES:
        print(f"{shape:26s}" +
              "".join(f"{best[n][shape]:14.1f}" for n in names))
    top = {s: max(best[n][s] for n in names) for s, *_ in SHAPES}
    geo = {n: math.exp(sum(math.log(best[n][s] / top[s]) for s, *_ in SHAPES)
                       / len(SHAPES)) for n in names}
    print(f"{'geomean of best':26s}" + "".join(f"{geo[n]:14.2f}" for n in names))
    winner = max(names, key=lambda n: geo[n])
    print(json.dumps({"winner": winner, "geomean_of_best": geo}))


if __name__ == "__main__":
    main()
