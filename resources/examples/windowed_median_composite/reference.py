"""Reference for user/demo/windowed_median_composite@1: the same function as
user/demo/windowed_median@1 (gather the w values, stable sort, take the middle); only the way
the engine runs it and differentiates it differs (as its steps)."""
import numpy as np
from numpy.lib.stride_tricks import sliding_window_view


def forward(x, *, w):
    """unfold -> sort each row -> middle"""
    w = int(w)
    return np.sort(sliding_window_view(np.asarray(x), w), axis=-1, kind="stable")[:, w // 2]


def kinks(x, *, w, h):
    """Per output: True where moving every input by at most h can make another element the median."""
    w = int(w)
    s = np.sort(sliding_window_view(np.asarray(x, dtype=np.float64), w), axis=-1)
    mid = w // 2
    near = np.zeros(s.shape[0], dtype=bool)
    if mid > 0:
        near |= s[:, mid] - s[:, mid - 1] <= 2 * h
    if mid + 1 < w:
        near |= s[:, mid + 1] - s[:, mid] <= 2 * h
    return near
