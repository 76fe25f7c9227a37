"""Rewrites a weft checkpoint's manifest.json to match its files as they now
are (sizes and content hashes, as runtime/DurableFile.cpp computes them), so
that a test that edits a checkpoint on purpose reaches the checks behind the
manifest's. usage: reseal_checkpoint.py DIR"""
import json
import os
import struct
import sys

M = (1 << 64) - 1
P1, P2 = 0x9e3779b185ebca87, 0xc2b2ae3d27d4eb4f


def rnd(h, w):
    h = (h + w * P2) & M
    h = ((h << 31) | (h >> 33)) & M
    return (h * P1) & M


def content_hash(b):
    lanes = [(P1 + P2) & M, P2, 0, (0 - P1) & M]
    n = len(b) // 32 * 32
    words = struct.unpack_from(f"<{n // 8}Q", b, 0)
    for i in range(0, len(words), 4):
        for k in range(4):
            lanes[k] = rnd(lanes[k], words[i + k])
    h = (len(b) * P1) & M
    for k in range(4):
        h = rnd(h ^ rnd(0, lanes[k]), k + 1)
    for c in b[n:]:
        h = rnd(h, c)
    h ^= h >> 33
    h = (h * P2) & M
    h ^= h >> 29
    return h


def digest(path):
    acc, size = 0, 0
    with open(path, "rb") as f:
        while True:
            chunk = f.read(4 << 20)
            if not chunk:
                break
            acc = content_hash(struct.pack("<QQ", acc, content_hash(chunk)))
            size += len(chunk)
    return size, acc


def main():
    d = sys.argv[1]
    path = os.path.join(d, "manifest.json")
    man = json.load(open(path))
    for name, entry in man["files"].items():
        entry["bytes"], h = digest(os.path.join(d, name))
        entry["hash"] = f"{h:016x}"
    json.dump(man, open(path, "w"), indent=1)


main()
