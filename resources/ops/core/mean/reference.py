"""Reference for core/reduce/mean@1: y[0] = sum_i x[i] / n."""
import numpy as np


def forward(x):
    return np.array([np.sum(x) / x.shape[0]])


def vjp(x, dy):
    dy = np.asarray(dy).reshape(-1)
    return np.full(x.shape, dy[0] / x.shape[0], dtype=np.result_type(dy.dtype, np.float32))
