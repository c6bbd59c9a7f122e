"""y[i] = sum_j w[j] * x[i + j] (f64)."""
import numpy as np


def forward(x, w):
    k = w.shape[0]
    m = x.shape[0] - k + 1
    y = np.zeros(m)
    for j in range(k):
        y += w[j] * x[j:j + m]
    return y
