"""Reference for core/signal/affine@1: y = scale * x + offset.

The op's meaning is the f32 evaluation with two correctly rounded steps,
round(round(scale * x) + offset), which is what the kernel computes (it keeps
the compiler from fusing the two into an fma). Computed in the dtype of x:
float32 on the conformance path (numpy never fuses), so the rounding matches
bit for bit; float64 when a caller (gradcheck) passes f64, where it is the
smooth function scale * x + offset.
"""
import numpy as np


def forward(x, *, scale, offset):
    x = np.asarray(x)
    t = x.dtype.type
    with np.errstate(over="ignore", invalid="ignore"):   # inf/NaN propagate as on the device
        return x * t(scale) + t(offset)


def vjp(x, dy, *, scale, offset):
    # dy/dx = scale, elementwise
    return scale * np.asarray(dy)
