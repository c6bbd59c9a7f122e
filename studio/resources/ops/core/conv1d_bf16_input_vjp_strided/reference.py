"""Reference for core/nn/conv1d_bf16_input_vjp_strided@1 (docs/bf16.md): the sum in f64 of the bf16 operands (the engine rounds
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


def _input_vjp(dy, w, s, n):
    """dx[b, c, s*i + j] = sum_o,(i,j) w[o, c, j] * dy[b, o, i]: the adjoint of _conv in x."""
    b, _, m = dy.shape
    _, c, k = w.shape
    dx = np.zeros((b, c, n), dtype=dy.dtype)
    for j in range(k):
        dx[:, :, j:j + s * (m - 1) + 1:s] += np.einsum("bom,oc->bcm", dy, w[:, :, j])
    return dx


def _weight_grad(x, dy, k, s):
    """dw[o, c, j] = sum_b,i dy[b, o, i] * x[b, c, s*i + j]: the adjoint of _conv in w, one sum over
    the whole batch (the engine rounds it once)."""
    c = x.shape[1]
    o, m = dy.shape[1], dy.shape[2]
    dw = np.zeros((o, c, k), dtype=x.dtype)
    for j in range(k):
        dw[:, :, j] = np.einsum("bom,bcm->oc", dy, x[:, :, j:j + s * (m - 1) + 1:s])
    return dw


def forward(dy, w, s, n):
    return _input_vjp(dy, w, int(s), int(n))
