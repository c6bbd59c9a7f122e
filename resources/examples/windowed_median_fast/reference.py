"""Reference for user/demo/windowed_median_fast@1 (the same as user/demo/windowed_median@1): for each output index, gather the
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
    """gather -> sort -> middle"""
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
    """cotangent routed to the argmedian index

    dx[i + argmedian_i] += dy[i], zero elsewhere (max-pooling's relative)."""
    dy = np.asarray(dy)
    k = argmedian(x, w=w)
    dx = np.zeros(np.shape(x), dtype=np.result_type(dy.dtype, np.float32))
    np.add.at(dx, np.arange(k.shape[0]) + k, dy)
    return dx


def kinks(x, *, w, h):
    """Per output: True where moving every input by at most h can make another element the
    median (an order crossing at the middle rank: a gap next to the median of at most 2h)."""
    w = int(w)
    windows = sliding_window_view(np.asarray(x, dtype=np.float64), w)
    mid = w // 2
    near = np.zeros(windows.shape[0], dtype=bool)
    for s in range(0, windows.shape[0], _CHUNK):
        srt = np.sort(windows[s:s + _CHUNK], axis=-1)
        if mid > 0:
            near[s:s + _CHUNK] |= srt[:, mid] - srt[:, mid - 1] <= 2 * h
        if mid + 1 < w:
            near[s:s + _CHUNK] |= srt[:, mid + 1] - srt[:, mid] <= 2 * h
    return near
