"""Reference: y[i] = x[i] * x[i]. The contract itself: the kernel is right as far as it matches this."""
import numpy as np


def forward(x):
    x = np.asarray(x)
    return x * x


def vjp(x, dy):
    """dx = 2 x dy"""
    x, dy = np.asarray(x), np.asarray(dy)
    return (2.0 * x * dy).astype(np.result_type(dy.dtype, np.float32))
