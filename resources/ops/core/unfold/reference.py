"""Reference for core/shape/unfold@1: u[i, j] = x[i + j], the w-windows of x as rows.

The VJP adds each window's cotangent back onto the elements it copied:
dx[j] = sum over windows i containing j (in increasing i) of du[i, j - i]. The loop over
offsets runs from w - 1 down to 0, so every dx[j] receives its terms in increasing i, the
same order as the device kernel (backward.wgsl): f32 results agree bit for bit.
"""
import numpy as np
from numpy.lib.stride_tricks import sliding_window_view


def forward(x, *, w):
    """u[i, j] = x[i + j]: the windows as rows"""
    return sliding_window_view(np.asarray(x), int(w)).copy()


def vjp(x, du, *, w):
    """each window's cotangent added back onto the elements it copied"""
    w = int(w)
    du = np.asarray(du)
    m = du.shape[0]
    dx = np.zeros(np.shape(x), dtype=np.result_type(du.dtype, np.float32))
    for o in range(w - 1, -1, -1):
        dx[o:o + m] += du[:, o]
    return dx
