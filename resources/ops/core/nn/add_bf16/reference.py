"""Reference for core/nn/add_bf16@1 (docs/bf16.md): the sum in f64 of the bf16 operands (the engine
rounds them going in; the sum of two bf16 is exact in f64), returned unrounded; the engine rounds
the result once, correctly from f64."""
import numpy as np


def forward(a, b2):
    return np.asarray(a, dtype=np.float64) + np.asarray(b2, dtype=np.float64)
