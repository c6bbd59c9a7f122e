"""Reference for core/nn/linear_weight_grad@1: dw[o, j] = sum_b dy[b, o] * x[b, j] and
db[o] = sum_b dy[b, o], in f64; the engine rounds each result once to f32.

``terms`` gives, per output, the number of terms that reach it (k of gamma_k): the batch's b terms
(docs/tolerance.md, "The bound, per output"); the magnitude is the forward on |inputs|."""
import numpy as np


def forward(x, dy):
    x = np.asarray(x, dtype=np.float64)
    dy = np.asarray(dy, dtype=np.float64)
    return {"dw": dy.T @ x, "db": dy.sum(axis=0)}


def terms(x, dy):
    b, d = np.shape(x)
    o = np.shape(dy)[1]
    return {"dw": np.full((o, d), float(b)), "db": np.full((o,), float(b))}
