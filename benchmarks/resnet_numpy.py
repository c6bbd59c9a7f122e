"""The small ResNet of resources/workflows/resnet_digits.toml in plain numpy, in one process: the
peer the data-parallel training step is measured against (bench_resnet.py), and an independent
oracle for the workflow's written-out gradients (tests/workflows/test_resnet_digits.py). Convolutions are
im2col + matmul (BLAS); ``dtype`` is f32 for the peer, f64 for the oracle. No rounding to bf16."""
from __future__ import annotations

import numpy as np

CONVS = {  # name: (stride, padding), as the workflow's steps
    "f_stem": (1, 1), "f_b1": (1, 1), "f_b2": (1, 1), "f_d1": (2, 1), "f_d2": (1, 1), "f_skip": (2, 0),
}


def _cols(x, k, s, p):
    """im2col: [b, c·k·k, m·m] windows of x padded by p, stride s."""
    b, c, n, _ = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p))) if p else x
    m = (n + 2 * p - k) // s + 1
    out = np.empty((b, c, k, k, m, m), x.dtype)
    for j1 in range(k):
        for j2 in range(k):
            out[:, :, j1, j2] = xp[:, :, j1:j1 + s * (m - 1) + 1:s, j2:j2 + s * (m - 1) + 1:s]
    return out.reshape(b, c * k * k, m * m), m


def conv(x, f, s, p):
    o, c, k, _ = f.shape
    cols, m = _cols(x, k, s, p)
    return (f.reshape(o, -1) @ cols).reshape(x.shape[0], o, m, m), cols


def conv_back(dy, f, cols, x_shape, s, p):
    """(dx, df) of conv: df = Σ_b dy·colsᵀ; dx scattered back from dcols (col2im)."""
    o, c, k, _ = f.shape
    b, _, m, _ = dy.shape
    d = dy.reshape(b, o, m * m)
    df = np.einsum("bom,bkm->ok", d, cols).reshape(f.shape)
    dcols = np.einsum("ok,bom->bkm", f.reshape(o, -1), d).reshape(b, c, k, k, m, m)
    n = x_shape[2]
    dxp = np.zeros((b, c, n + 2 * p, n + 2 * p), dy.dtype)
    for j1 in range(k):
        for j2 in range(k):
            dxp[:, :, j1:j1 + s * (m - 1) + 1:s, j2:j2 + s * (m - 1) + 1:s] += dcols[:, :, j1, j2]
    return dxp[:, :, p:p + n, p:p + n], df


def loss_and_grads(params: dict, x: np.ndarray, t: np.ndarray, dtype=np.float32):
    """The mean softmax cross-entropy over the batch and every parameter's gradient."""
    P = {k: np.asarray(v, dtype) for k, v in params.items()}
    x, t = np.asarray(x, dtype), np.asarray(t, dtype)
    cache = {}

    def cv(name, inp):
        s, p = CONVS[name]
        y, cols = conv(inp, P[name], s, p)
        cache[name] = (cols, inp.shape)
        return y

    stem = cv("f_stem", x)
    a1 = np.maximum(stem, 0)
    c1 = cv("f_b1", a1)
    r1 = np.maximum(c1, 0)
    s2 = cv("f_b2", r1) + a1
    a2 = np.maximum(s2, 0)
    c3 = cv("f_d1", a2)
    r3 = np.maximum(c3, 0)
    s3 = cv("f_d2", r3) + cv("f_skip", a2)
    a3 = np.maximum(s3, 0)
    pool = a3.mean(axis=(2, 3))
    z = pool @ P["w"].T + P["bias"]
    zs = z - z.max(axis=1, keepdims=True)
    e = np.exp(zs)
    sm = e / e.sum(axis=1, keepdims=True)
    b = x.shape[0]
    loss = float(-(t * (zs - np.log(e.sum(axis=1, keepdims=True)))).sum() / b)
    dz = (sm - t) / b

    g = {"w": dz.T @ pool, "bias": dz.sum(axis=0)}
    dpool = dz @ P["w"]
    da3 = np.broadcast_to(dpool[:, :, None, None] / (a3.shape[2] * a3.shape[3]), a3.shape)
    ds3 = da3 * (s3 > 0)

    def back(name, dy):
        s, p = CONVS[name]
        cols, shape = cache[name]
        dx, g[name] = conv_back(dy, P[name], cols, shape, s, p)
        return dx

    dr3 = back("f_d2", ds3)
    da2 = back("f_d1", dr3 * (c3 > 0)) + back("f_skip", ds3)
    ds2 = da2 * (s2 > 0)
    dr1 = back("f_b2", ds2)
    da1 = back("f_b1", dr1 * (c1 > 0)) + ds2
    back("f_stem", da1 * (stem > 0))
    return loss, g, z


def predict(params: dict, x: np.ndarray, dtype=np.float32) -> np.ndarray:
    return loss_and_grads(params, x, np.zeros((len(x), np.shape(params["w"])[0])), dtype)[2]
