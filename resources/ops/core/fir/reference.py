"""Reference for core/signal/fir@1: y[i] = sum_j taps[j] * x[i + j], j = 0..k-1."""
import numpy as np


def forward(x, taps):
    k = taps.shape[0]
    m = x.shape[0] - k + 1
    y = np.zeros(m, dtype=np.result_type(x.dtype, taps.dtype))
    for j in range(k):                       # same term order as the kernel
        y += taps[j] * x[j:j + m]
    return y


def vjp(x, taps, dy):
    dy = np.asarray(dy)
    k = taps.shape[0]
    m = dy.shape[0]
    # dx[m'] = sum_i dy[i] * taps[m' - i]   (full convolution, length n)
    dx = np.convolve(dy, taps, mode="full") if k else np.zeros(x.shape[0], dy.dtype)   # no taps: no gradient
    # dtaps[j] = sum_i dy[i] * x[i + j]     (length k)
    dtaps = np.array([np.dot(dy, x[j:j + m]) for j in range(k)])
    return {"x": dx, "taps": dtaps}
