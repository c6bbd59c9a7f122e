"""Reference for core/signal/clip@1: y = x clamped to [lo, hi].

Selection, not arithmetic: x is replaced only when it is strictly below lo or
strictly above hi, so values that compare equal to a bound (including -0.0
against a +0.0 bound) are kept bit for bit, exactly as the kernel does.
"""
import numpy as np


def forward(x, *, lo, hi):
    x = np.asarray(x)
    lo = x.dtype.type(lo)
    hi = x.dtype.type(hi)
    y = np.where(x < lo, lo, x)
    return np.where(y > hi, hi, y).astype(x.dtype, copy=False)


def vjp(x, dy, *, lo, hi):
    # subgradient convention: the cotangent passes through on the closed interval [lo, hi]
    x = np.asarray(x)
    inside = (x >= x.dtype.type(lo)) & (x <= x.dtype.type(hi))
    return np.where(inside, dy, np.zeros_like(dy))
