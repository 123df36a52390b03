"""A NumPy reference of op=Adasum for the check modules of every
framework, and the operands they feed it."""

import numpy as np


def combined(a, b):
    """adasum(a, b) in float64: the rule the engine implements."""
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    dot, aa, bb = a @ b, a @ a, b @ b
    ca = 1.0 if aa < 1e-8 else 1.0 - dot / (2 * aa)
    cb = 1.0 if bb < 1e-8 else 1.0 - dot / (2 * bb)
    return ca * a + cb * b


def reference(vectors):
    """The binary tree over ranks in order: {0,1}, {2,3}, then pairs of
    pairs."""
    level = list(vectors)
    while len(level) > 1:
        level = [combined(level[i], level[i + 1])
                 for i in range(0, len(level), 2)]
    return level[0]


def operand(rank, shape, salt=0):
    count = int(np.prod(shape))
    k = np.arange(count, dtype=np.float64)
    return (np.sin(1.0 + 0.7 * rank + 1.3 * salt + 0.31 * k) *
            (1 + rank)).reshape(shape)
