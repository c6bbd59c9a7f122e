"""Reference for core/nn/conv1d_bf16_weight_grad_strided@1 (docs/bf16.md): the sum in f64 of the bf16 operands (the engine rounds
them going in), returned unrounded; the engine rounds the result once, correctly from f64."""
import numpy as np


def _weight_grad(x, dy, k, s):
    """dw[o, c, j] = sum_b,i dy[b, o, i] * x[b, c, s*i + j]: the adjoint in w of the convolution
    y[b, o, i] = sum_c,j w[o, c, j] x[b, c, s*i + j], one sum over
    the whole batch (the engine rounds it once)."""
    c = x.shape[1]
    o, m = dy.shape[1], dy.shape[2]
    dw = np.zeros((o, c, k), dtype=x.dtype)
    for j in range(k):
        dw[:, :, j] = np.einsum("bom,bcm->oc", dy, x[:, :, j:j + s * (m - 1) + 1:s])
    return dw


def forward(x, dy, k, s):
    return _weight_grad(x, dy, int(k), int(s))
