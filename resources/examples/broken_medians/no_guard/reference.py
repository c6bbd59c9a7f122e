"""Reference for user/demo/windowed_median@1: for each output index, gather the
w values, sort, take the middle.

Ties, for bitwise exactness: the only values that compare equal yet differ in
bits are -0.0 and +0.0 (x is finite, so no NaN). The kernel's insertion sort
moves an element left only past strictly greater values, so it is a *stable*
sort: equal values keep their input order. Any stable sort of the same window
yields the same permutation, so the reference sorts with numpy's stable sort
(kind="stable") and takes the middle; `argmedian` returns the window offset of
that same element, which is where the backward routes the cotangent.
"""
import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

_CHUNK = 1 << 15  # windows per block: keeps memory flat (no full n x w sort at once)


def forward(x, *, w):
    w = int(w)
    windows = sliding_window_view(np.asarray(x), w)
    y = np.empty(windows.shape[0], dtype=windows.dtype)
    for s in range(0, windows.shape[0], _CHUNK):
        y[s:s + _CHUNK] = np.sort(windows[s:s + _CHUNK], axis=-1, kind="stable")[:, w // 2]
    return y


def argmedian(x, *, w):
    """Offset in [0, w) of the selected element of each window (int64, length n - w + 1)."""
    w = int(w)
    windows = sliding_window_view(np.asarray(x), w)
    k = np.empty(windows.shape[0], dtype=np.int64)
    for s in range(0, windows.shape[0], _CHUNK):
        k[s:s + _CHUNK] = np.argsort(windows[s:s + _CHUNK], axis=-1, kind="stable")[:, w // 2]
    return k


def vjp(x, dy, *, w):
    """Route dy[i] to x[i + argmedian_i]; zero elsewhere (max-pooling's relative)."""
    dy = np.asarray(dy)
    k = argmedian(x, w=w)
    dx = np.zeros(np.shape(x), dtype=np.result_type(dy.dtype, np.float32))
    np.add.at(dx, np.arange(k.shape[0]) + k, dy)
    return dx
