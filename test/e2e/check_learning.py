#!/usr/bin/env python3
"""Asserts that a training run learned: the mean loss of its last steps is at
least MARGIN nats below the byte-unigram entropy of the corpus it trained on.

usage: check_learning.py CORPUS.txt METRICS.jsonl MARGIN [LAST]
"""
import collections
import json
import math
import sys


def unigram_entropy(path):
    data = open(path, "rb").read()
    counts = collections.Counter(data)
    n = len(data)
    return -sum(c / n * math.log(c / n) for c in counts.values())


def main():
    corpus, metrics, margin = sys.argv[1], sys.argv[2], float(sys.argv[3])
    last = int(sys.argv[4]) if len(sys.argv) > 4 else 50
    losses = [json.loads(line)["loss"] for line in open(metrics)]
    if len(losses) < last:
        sys.exit(f"FAIL: only {len(losses)} steps in {metrics}, need {last}")
    h = unigram_entropy(corpus)
    first = sum(losses[:10]) / 10
    final = sum(losses[-last:]) / last
    print(f"unigram entropy {h:.4f} nats | first-10 mean {first:.4f} | "
          f"last-{last} mean {final:.4f} | threshold {h - margin:.4f}")
    if not final < h - margin:
        sys.exit(f"FAIL: last-{last} mean loss {final:.4f} is not below "
                 f"unigram entropy {h:.4f} - {margin} = {h - margin:.4f}")
    print("PASS: learned below the unigram entropy")


if __name__ == "__main__":
    main()
