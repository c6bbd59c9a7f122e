"""z = a * x + y, computed in f32 as the kernel does (two correctly rounded operations)."""
import numpy as np


def forward(x, y, *, a):
    x32, y32 = np.float32(1) * x.astype(np.float32), y.astype(np.float32)
    return (np.float32(a) * x32 + y32).astype(np.float64)
