"""Reference for core/nn/conv2d_f32_input_vjp@1 (docs/bf16.md, "At f32"): the sum in f64 of the f32
operands, returned unrounded; the engine rounds the result once, correctly from f64, to f32. NCHW
images, square filters f[o, c, k, k], stride s, zero padding p on every side. The same functions as
the bf16 twins' references (only the operands' format differs)."""
import numpy as np


def _padded(x, p):
    return np.pad(x, ((0, 0), (0, 0), (p, p), (p, p))) if p else x


def _conv(x, f, s, p):
    """y[b, o, i1, i2] = sum_c,j1,j2 f[o, c, j1, j2] * xp[b, c, s*i1 + j1, s*i2 + j2], xp = x padded with p zeros."""
    xp = _padded(x, p)
    k = f.shape[2]
    m1 = (xp.shape[2] - k) // s + 1
    m2 = (xp.shape[3] - k) // s + 1
    y = np.zeros((x.shape[0], f.shape[0], m1, m2), dtype=x.dtype)
    for j1 in range(k):
        for j2 in range(k):
            win = xp[:, :, j1:j1 + s * (m1 - 1) + 1:s, j2:j2 + s * (m2 - 1) + 1:s]
            y += np.einsum("bcij,oc->boij", win, f[:, :, j1, j2])
    return y


def _input_vjp(dy, f, s, p, h, w):
    """dx = the adjoint in x of _conv: each dy[b, o, i1, i2] * f[o, c, j1, j2] lands on the padded input at
    (s*i1 + j1, s*i2 + j2); the padding's share is dropped."""
    b, _, m1, m2 = dy.shape
    _, c, k, _ = f.shape
    dxp = np.zeros((b, c, h + 2 * p, w + 2 * p), dtype=dy.dtype)
    for j1 in range(k):
        for j2 in range(k):
            win = dxp[:, :, j1:j1 + s * (m1 - 1) + 1:s, j2:j2 + s * (m2 - 1) + 1:s]     # a view: += lands in dxp
            win += np.einsum("boij,oc->bcij", dy, f[:, :, j1, j2])
    return dxp[:, :, p:p + h, p:p + w]


def _weight_grad(x, dy, k, s, p):
    """df[o, c, j1, j2] = sum_b,i1,i2 dy[b, o, i1, i2] * xp[b, c, s*i1 + j1, s*i2 + j2]: the adjoint in f of
    _conv, one sum over the whole batch (the engine rounds it once)."""
    xp = _padded(x, p)
    o, m1, m2 = dy.shape[1], dy.shape[2], dy.shape[3]
    df = np.zeros((o, x.shape[1], k, k), dtype=x.dtype)
    for j1 in range(k):
        for j2 in range(k):
            win = xp[:, :, j1:j1 + s * (m1 - 1) + 1:s, j2:j2 + s * (m2 - 1) + 1:s]
            df[:, :, j1, j2] = np.einsum("boij,bcij->oc", dy, win)
    return df


def forward(dy, f, s, p, n):
    return _input_vjp(dy, f, int(s), int(p), int(n), int(n))
