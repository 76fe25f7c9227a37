"""weft-run's masked-LM batches in numpy (docs/program-format.md,
"Masked-LM batches"): the reference the tests and fixture scripts compare
weft with. Step k's sample i is the token stream's positions
[(k*B + i)*S, +S) modulo its length (as next-token batches); position
(i, j) has index n = (k*B + i)*S + j, and its draw x = mix(mix(seed) ^ n)
(mix: SplitMix64's output function) hides it iff top53(x) * 2^-53 < p.
A hidden position's input is, by u = top53(mix(x)) * 2^-53, the mask token
(u < 0.8), the id mix(mix(x)) % vocab (u < 0.9) or its own token; its
target is its token. Every other target is -100.
"""
import numpy as np

M64 = (1 << 64) - 1


def mix(z):
    z = (z + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def unit(x):
    return (x >> 11) * 2.0 ** -53


def masked_batch(stream, step, batch, seq, mask_token, vocab, prob=0.15, seed=0):
    """(inputs, targets), int64 [batch, seq], of step `step` (0-based)."""
    stream = np.asarray(stream)
    n_tok = len(stream)
    inputs = np.zeros((batch, seq), dtype=np.int64)
    targets = np.full((batch, seq), -100, dtype=np.int64)
    s0 = mix(seed)
    for i in range(batch):
        start = (step * batch + i) * seq
        for j in range(seq):
            tok = int(stream[(start + j) % n_tok])
            inputs[i, j] = tok
            x = mix(s0 ^ ((start + j) & M64))
            if not unit(x) < prob:
                continue
            targets[i, j] = tok
            y = mix(x)
            u = unit(y)
            if u < 0.8:
                inputs[i, j] = mask_token
            elif u < 0.9:
                inputs[i, j] = mix(y) % vocab
    return inputs, targets


def masked_cross_entropy(logits, targets):
    """PyTorch's CrossEntropyLoss(ignore_index=-100) in float64: the mean
    over the counted targets."""
    z = logits.astype(np.float64).reshape(-1, logits.shape[-1])
    t = targets.reshape(-1)
    keep = t != -100
    z = z[keep] - z[keep].max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return float(-logp[np.arange(len(z)), t[keep]].mean())
