"""Reference for core/reduce/mse@1: y[0] = sum_i (a[i] - b[i])^2 / n."""
import numpy as np


def forward(a, b):
    d = a - b
    return np.array([np.sum(d * d) / a.shape[0]])


def magnitude(a, b):
    """Sum of |terms| for the error bound: each term (a - b)^2 is at most (|a| + |b|)^2."""
    return np.array([np.sum((np.abs(a) + np.abs(b)) ** 2) / a.shape[0]])


def vjp(a, b, dy):
    dy = np.asarray(dy).reshape(-1)
    g = (2.0 / a.shape[0]) * dy[0] * (a - b)
    return {"a": g, "b": -g}
