"""Reference for user/test/soft_threshold@1: y = sign(x) * max(|x| - t, 0).

Computed in the dtype of x (f32 on the conformance path, where each output is one correctly
rounded x - t or x + t, or +0.0: the kernel's own operations; f64 for gradcheck). Kinks at
x = -t and x = t; the VJP's convention puts |x| == t in the dead zone (gradient 0).
"""
import numpy as np


def forward(x, *, t):
    """shrink toward zero by t"""
    x = np.asarray(x)
    tt = x.dtype.type(t)
    return np.where(x > tt, x - tt, np.where(x < -tt, x + tt, x.dtype.type(0)))


def vjp(x, dy, *, t):
    """cotangent passed where |x| > t, zero in the dead zone"""
    # an equivalent rewrite: the two live sides written out, the cotangent times a 0/1 mask
    x = np.asarray(x, dtype=np.float64)
    live = (x > t) | (x < -t)
    return np.asarray(dy, dtype=np.float64) * live.astype(np.float64)
