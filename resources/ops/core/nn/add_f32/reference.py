"""Reference for core/nn/add_f32@1 (docs/bf16.md, "At f32"): the sum in f64 of the f32 operands (the
sum of two f32 of magnitude at most 1e15 is exact in f64), returned unrounded; the engine rounds the
result once, correctly from f64, to f32."""
import numpy as np


def forward(a, b2):
    return np.asarray(a, dtype=np.float64) + np.asarray(b2, dtype=np.float64)
