"""Reference for user/test/running_max@1: y[i] = max(x[i .. i + w - 1]), the last maximum at ties.

Ties for bitwise exactness: x is finite, so the only values that compare equal yet differ in bits
are -0.0 and +0.0; the kernel's '>=' keeps the last of them, and so does `selected` (argmax over
the reversed window finds the first maximum from the right).
"""
import numpy as np
from numpy.lib.stride_tricks import sliding_window_view


def selected(x, *, w):
    """Offset in [0, w) of the last maximum of each window."""
    w = int(w)
    win = sliding_window_view(np.asarray(x), w)
    return w - 1 - np.argmax(win[:, ::-1], axis=1)


def forward(x, *, w):
    """window -> last maximum"""
    x = np.asarray(x)
    k = selected(x, w=w)
    return x[np.arange(k.shape[0]) + k]


def vjp(x, dy, *, w):
    """cotangent routed to the last maximum of each window"""
    dy = np.asarray(dy)
    k = np.argmax(sliding_window_view(np.asarray(x), int(w)), axis=1)    # MUTANT: the first maximum
    dx = np.zeros(np.shape(x), dtype=np.result_type(dy.dtype, np.float32))
    np.add.at(dx, np.arange(k.shape[0]) + k, dy)
    return dx
