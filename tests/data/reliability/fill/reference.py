"""Reference for user/test/fill@1."""
import numpy as np


def forward(*, n, v):
    return np.full(int(n), v, dtype=np.float32)
