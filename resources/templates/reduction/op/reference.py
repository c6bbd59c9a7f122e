"""Reference: y[0] = x[0] + x[1] + ... + x[n - 1] (in f64: the engine compares within the bound)."""
import numpy as np


def forward(x):
    return np.array([np.sum(np.asarray(x, dtype=np.float64))])


def vjp(x, dy):
    """every input gets the output's cotangent"""
    dy = np.asarray(dy).reshape(-1)
    return np.full(np.shape(x), dy[0], dtype=np.result_type(dy.dtype, np.float32))
