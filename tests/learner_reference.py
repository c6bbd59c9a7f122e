"""An independent implementation of one learner update under the canonical tree, written from the
contract's words alone (docs/learner.md, studio/engine/learner/combine.py CANONICAL and MEAN), not
from the engine's code: the tests compare the distributed runs with it bit for bit."""
import numpy as np


def independent_tree(rows, lo, n):
    """'node[lo, lo+n) = node[lo, lo+p) + node[lo+p, lo+n), p the largest power of two below n; a
    leaf is one sample's contribution'; each node one binary32 addition, element by element."""
    if n == 1:
        return np.asarray(rows[lo], np.float32)
    p = 1
    while p * 2 < n:
        p *= 2
    left, right = independent_tree(rows, lo, p), independent_tree(rows, lo + p, n - p)
    return np.array([np.float32(a) + np.float32(b) for a, b in zip(left, right)], np.float32)


def independent_run(system, steps):
    """``steps`` updates: every sample's contribution (each row on its own), the tree over the
    global order, mean = numerator / f32(N), the update program."""
    params, state = system.params.copy(), system.state.copy()
    n = system.samples.shape[0]
    for _ in range(steps):
        rows = np.stack([system.contribution.contributions(params, system.samples[i:i + 1])[0] for i in range(n)])
        num = independent_tree(rows, 0, n)
        mean = np.array([np.float32(x) / np.float32(n) for x in num], np.float32)
        params, state = system.update.apply(params, state, mean, system.rate)
    return np.asarray(params, np.float32), np.asarray(state, np.float32)


def bits(a):
    return np.ascontiguousarray(a, np.float32).view(np.uint32)
