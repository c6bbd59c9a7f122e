"""Reference for core/nn/conv2d_bf16_weight_grad@1 (docs/bf16.md): the sum in f64 of the bf16 operands
(the engine rounds them going in), returned unrounded; the engine rounds the result once, correctly from f64. NCHW images,
square filters f[o, c, k, k], stride s, zero padding p on every side."""
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



CHUNK = 256    # the kernel's named order, "chunked-256" (forward.wgsl, docs/bf16.md)


def chunked_f32(x, dy, k, s, p):
    """The device's f32 sum in its named order, modelled in numpy f32 (not the reference: the
    reference above is the exact sum). Per output, the terms dy[b, o, i1, i2] * xp[b, c, s*i1 + j1,
    s*i2 + j2] in the order (b, i1, i2), row-major (a padded position's term is +0), are cut into
    chunks of CHUNK consecutive terms; each chunk is summed from +0 in order, in f32; the chunks'
    sums are added from +0 in chunk order, in f32. Returned unrounded (f32); the kernel rounds it
    once to bf16. Products of two bf16 are exact in f32 (while they neither overflow nor underflow)."""
    x = np.asarray(x, dtype=np.float32)
    dy = np.asarray(dy, dtype=np.float32)
    xp = _padded(x, p)
    b, o, m1, m2 = dy.shape
    c = x.shape[1]
    t = b * m1 * m2
    q = -(-t // CHUNK)
    out = np.zeros((o, c, k, k), dtype=np.float32)
    for j1 in range(k):
        for j2 in range(k):
            win = xp[:, :, j1:j1 + s * (m1 - 1) + 1:s, j2:j2 + s * (m2 - 1) + 1:s]          # [b, c, m1, m2]
            terms = (dy.transpose(1, 0, 2, 3).reshape(o, 1, t) * win.transpose(1, 0, 2, 3).reshape(1, c, t))
            terms = np.concatenate([terms, np.zeros((o, c, q * CHUNK - t), np.float32)], axis=2)
            chunks = np.add.accumulate(terms.reshape(o, c, q, CHUNK), axis=3, dtype=np.float32)[..., -1]
            out[:, :, j1, j2] = np.add.accumulate(chunks, axis=2, dtype=np.float32)[..., -1]
    return out


def forward(x, dy, k, p):
    return _weight_grad(x, dy, int(k), 1, int(p))
