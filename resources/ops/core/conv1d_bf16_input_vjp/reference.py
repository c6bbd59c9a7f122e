"""Reference for core/nn/conv1d_bf16_input_vjp@1 (docs/bf16.md): the sum in f64 of the bf16 operands (the engine rounds
them going in), returned unrounded; the engine rounds the result once, correctly from f64."""
import numpy as np


def _input_vjp(dy, w, s, n):
    """dx[b, c, s*i + j] = sum_o,(i,j) w[o, c, j] * dy[b, o, i]: the adjoint in x of the
    convolution y[b, o, i] = sum_c,j w[o, c, j] x[b, c, s*i + j]."""
    b, _, m = dy.shape
    _, c, k = w.shape
    dx = np.zeros((b, c, n), dtype=dy.dtype)
    for j in range(k):
        dx[:, :, j:j + s * (m - 1) + 1:s] += np.einsum("bom,oc->bcm", dy, w[:, :, j])
    return dx


def forward(dy, w):
    return _input_vjp(dy, w, 1, dy.shape[2] + w.shape[2] - 1)
