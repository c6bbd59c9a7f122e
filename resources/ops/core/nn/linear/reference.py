"""Reference for core/nn/linear@1: y[b, o] = sum_j x[b, j] * w[o, j] + bias[o], in f64; the engine
rounds the result once to f32.

``terms`` gives, per output, the number of terms that reach it (k of gamma_k): the d products and
the bias (docs/tolerance.md, "The bound, per output"); the magnitude is the forward on |inputs|,
sum_j |x w| + |bias|."""
import numpy as np


def forward(x, w, bias):
    x = np.asarray(x, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    return x @ w.T + np.asarray(bias, dtype=np.float64)[None, :]


def terms(x, w, bias):
    return np.full((np.shape(x)[0], np.shape(w)[0]), np.shape(x)[1] + 1.0)
