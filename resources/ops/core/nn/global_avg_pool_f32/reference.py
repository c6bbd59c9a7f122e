"""Reference for core/nn/global_avg_pool_f32@1 (docs/bf16.md, "At f32"): the mean of each n x n image,
summed in f64 from the f32 operands and divided by n * n; the engine rounds the result once to f32.

``terms`` gives the bound's inputs per output (docs/tolerance.md, "The bound, per output"): the
kernel's f32 sum of n * n pixels in order (n * n - 1 roundings, relative to sum|x|, i.e. to mean|x|
after the division) and WGSL's division (2.5 ulp = 5 u, of which the bound's own last-operation
u|y| covers one, so 4 more): k = n * n + 3 relative to mean|x|."""
import numpy as np


def forward(x):
    x = np.asarray(x, dtype=np.float64)
    n = x.shape[2]
    return x.sum(axis=(2, 3)) / (n * n)


def terms(x):
    x = np.asarray(x, dtype=np.float64)
    n = x.shape[2]
    mag = np.abs(x).sum(axis=(2, 3)) / (n * n)
    return {"terms": np.full(mag.shape, n * n + 3.0), "magnitude": mag}
