"""Reference for core/nn/conv1d_bf16_strided@1 (docs/bf16.md): the sum in f64 of the bf16 operands (the engine rounds
them going in), returned unrounded; the engine rounds the result once, correctly from f64."""
import numpy as np


def _conv(x, w, s):
    """y[b, o, i] = sum_c,j w[o, c, j] * x[b, c, s*i + j], in the operands' own precision (f64)."""
    b, _, n = x.shape
    o, _, k = w.shape
    m = (n - k) // s + 1
    y = np.zeros((b, o, m), dtype=x.dtype)
    for j in range(k):
        y += np.einsum("bcm,oc->bom", x[:, :, j:j + s * (m - 1) + 1:s], w[:, :, j])
    return y


def forward(x, w, s):
    return _conv(x, w, int(s))
