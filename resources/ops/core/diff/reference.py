"""Reference for core/signal/diff@1: y[i] = x[i + 1] - x[i]."""
import numpy as np


def forward(x):
    return x[1:] - x[:-1]


def vjp(x, dy):
    dy = np.asarray(dy)
    dx = np.zeros(x.shape, dtype=np.result_type(dy.dtype, np.float32))
    dx[1:] += dy
    dx[:-1] -= dy
    return dx
