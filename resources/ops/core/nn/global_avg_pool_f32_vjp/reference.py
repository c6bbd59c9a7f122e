"""Reference for core/nn/global_avg_pool_f32_vjp@1 (docs/bf16.md, "At f32"): dx[b, c, i, j] =
dy[b, c] / (n * n) in f64, returned unrounded; the engine rounds the result once, correctly from
f64, to f32.

``terms`` gives the bound's inputs per output (docs/tolerance.md, "The bound, per output"): the
kernel's one f32 division, which WGSL allows 2.5 ulp (5 u; the bound's own last-operation u|y|
covers one, so 4 more), relative to |dy| / (n * n)."""
import numpy as np


def forward(dy, n):
    dy = np.asarray(dy, dtype=np.float64)
    n = int(n)
    return np.broadcast_to((dy / (n * n))[:, :, None, None], dy.shape + (n, n)).copy()


def terms(dy, n):
    mag = np.abs(forward(dy, n))
    return {"terms": np.full(mag.shape, 4.0), "magnitude": mag}
