"""y[i] = sum_{j <= i} x[j] (f64)."""
import numpy as np


def forward(x):
    return np.cumsum(x)
