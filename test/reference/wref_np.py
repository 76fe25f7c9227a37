"""numpy-only helpers for the weft reference check (no torch import here).

safetensors read/write, the token data loader, the deterministic parameter
initialisation of docs/program-format.md, the program-file reader and the
error measures.  Everything in this module runs where torch is absent, so the
committed fixtures can be checked in CI without torch.
"""
import json
import math
import os
import struct

import numpy as np

# ---------------------------------------------------------------- safetensors

_ST_DTYPES = {
    "F64": np.dtype("<f8"), "F32": np.dtype("<f4"), "F16": np.dtype("<f2"),
    "I64": np.dtype("<i8"), "I32": np.dtype("<i4"), "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"), "U8": np.dtype("u1"), "U16": np.dtype("<u2"),
    "BOOL": np.dtype("?"),
}
_ST_NAMES = {v: k for k, v in _ST_DTYPES.items()}


def read_safetensors(path):
    """Returns ({name: np.ndarray}, metadata dict). BF16 is widened to F32."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ValueError(f"{path}: truncated safetensors file ({len(blob)} bytes)")
    (n,) = struct.unpack("<Q", blob[:8])
    if 8 + n > len(blob):
        raise ValueError(f"{path}: header length {n} exceeds file size {len(blob)}")
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    data = memoryview(blob)[8 + n:]
    meta = header.pop("__metadata__", {}) or {}
    out = {}
    for name, info in header.items():
        b, e = info["data_offsets"]
        shape = tuple(info["shape"])
        dt = info["dtype"]
        raw = bytes(data[b:e])
        if dt == "BF16":
            u = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            arr = u.view(np.float32)
        else:
            if dt not in _ST_DTYPES:
                raise ValueError(f"{path}: tensor {name}: unsupported dtype {dt}")
            arr = np.frombuffer(raw, dtype=_ST_DTYPES[dt])
        expect = int(np.prod(shape, dtype=np.int64))
        if arr.size != expect:
            raise ValueError(f"{path}: tensor {name}: {arr.size} elements, shape {list(shape)} needs {expect}")
        out[name] = arr.reshape(shape).copy()
    return out, meta


def write_safetensors(path, tensors, metadata=None):
    """tensors: {name: np.ndarray}; written in name order, 8-byte aligned header."""
    header = {}
    chunks = []
    off = 0
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        dt = a.dtype.newbyteorder("<") if a.dtype.byteorder == ">" else a.dtype
        a = a.astype(dt, copy=False)
        key = _ST_NAMES.get(np.dtype(a.dtype.str.replace("=", "<")))
        if key is None:
            key = _ST_NAMES[np.dtype(a.dtype)]
        raw = a.tobytes()
        header[name] = {"dtype": key, "shape": list(a.shape), "data_offsets": [off, off + len(raw)]}
        chunks.append(raw)
        off += len(raw)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    hb = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hb += b" " * ((8 - len(hb) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for c in chunks:
            f.write(c)
    os.replace(tmp, path)


# ---------------------------------------------------------------- data

def load_tokens(path):
    toks = np.fromfile(path, dtype="<u2")
    if toks.size == 0:
        raise ValueError(f"{path}: empty token file")
    return toks


def batch(tokens, step, B, S):
    """(inputs [B,S], targets [B,S]) int64 for 0-based step, per the doc."""
    n = tokens.size
    if n < S + 1:
        raise ValueError(f"token file has {n} tokens, fewer than seq+1 = {S + 1}")
    rows = []
    for i in range(B):
        start = (step * B + i) * S
        idx = (start + np.arange(S + 1, dtype=np.int64)) % n
        rows.append(tokens[idx].astype(np.int64))
    w = np.stack(rows)
    return w[:, :S], w[:, 1:]


def make_default_data(path, repo_root):
    """build/data/corpus.bin if it exists, else GPL-3's bytes as uint16 tokens."""
    corpus = os.path.join(repo_root, "build", "data", "corpus.bin")
    if os.path.exists(corpus):
        return corpus
    src = "/usr/share/common-licenses/GPL-3"
    with open(src, "rb") as f:
        raw = np.frombuffer(f.read(), dtype=np.uint8)
    raw.astype("<u2").tofile(path)
    return path


# ---------------------------------------------------------------- init (doc)

_M64 = (1 << 64) - 1


def fnv1a64(s):
    h = 0xCBF29CE484222325
    for byte in s.encode("utf-8"):
        h ^= byte
        h = (h * 0x100000001B3) & _M64
    return h


def _splitmix64_int(x):
    x = (x + 0x9E3779B97F4A7C15) & _M64
    z = x
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


def _splitmix64_np(x):
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        z = x
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def doc_init(name, shape, init, seed, dtype=np.float32):
    """One parameter's initial value, computed from the formula in the doc."""
    n = int(np.prod(shape, dtype=np.int64))
    kind = init["kind"]
    if kind == "zeros":
        return np.zeros(shape, dtype)
    if kind == "ones":
        return np.ones(shape, dtype)
    if kind != "normal":
        raise ValueError(f"{name}: unknown init kind {kind}")
    key = fnv1a64(name) ^ _splitmix64_int(seed)
    i = np.arange(n, dtype=np.uint64)
    with np.errstate(over="ignore"):
        base = np.uint64(key) + np.uint64(2) * i
        r1 = _splitmix64_np(base)
        r2 = _splitmix64_np(base + np.uint64(1))
    u1 = ((r1 >> np.uint64(11)).astype(np.float64) + 0.5) * 2.0 ** -53
    u2 = ((r2 >> np.uint64(11)).astype(np.float64) + 0.5) * 2.0 ** -53
    normal = np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * math.pi * u2)
    return (float(init["std"]) * normal).astype(dtype).reshape(shape)


# ---------------------------------------------------------------- program file

def read_program(path):
    with open(path, "rb") as f:
        blob = f.read()
    if blob[:8] != b"WEFTPROG":
        raise ValueError(f"{path}: not a weft program")
    (n,) = struct.unpack("<Q", blob[12:20])
    return json.loads(blob[28:28 + n].decode("utf-8"))


def read_metrics(path):
    """{step (1-based): record} from a weft-run --metrics JSON-lines file."""
    out = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                r = json.loads(line)
                out[int(r["step"])] = r
    return out


# ---------------------------------------------------------------- errors

def max_rel(a, b):
    """max|a-b| / max|b| (b is the reference); 0 when both are all zero."""
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    if a.shape != b.shape:
        return float("inf")
    d = float(np.max(np.abs(a - b))) if a.size else 0.0
    m = float(np.max(np.abs(b))) if b.size else 0.0
    if m == 0.0:
        return 0.0 if d == 0.0 else float("inf")
    return d / m


def rel(a, b):
    return abs(float(a) - float(b)) / max(abs(float(b)), 1e-30)
