"""Reference: y[i] = max(x[i], ..., x[i + w - 1]), the first of equal maxima (as the kernel's strict '>')."""
import numpy as np
from numpy.lib.stride_tricks import sliding_window_view


def argmax(x, *, w):
    """Per output, the index in x of the element the forward selected (the first maximum of its
    window): the backward routes each output's cotangent there (`route(dy, to = argmax)`)."""
    windows = sliding_window_view(np.asarray(x), int(w))
    return np.arange(windows.shape[0], dtype=np.int64) + np.argmax(windows, axis=-1)


def forward(x, *, w):
    x = np.asarray(x)
    return x[argmax(x, w=w)]


def kinks(x, *, w, h):
    """True where moving every input by at most h can change which element is the maximum."""
    windows = np.sort(sliding_window_view(np.asarray(x, dtype=np.float64), int(w)), axis=-1)
    if int(w) < 2:
        return np.zeros(windows.shape[0], dtype=bool)
    return windows[:, -1] - windows[:, -2] <= 2 * h
