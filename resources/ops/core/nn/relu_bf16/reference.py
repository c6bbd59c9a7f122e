"""Reference for core/nn/relu_bf16@1 (docs/bf16.md): y = x where x > 0, else +0.0; a NaN stays NaN
(the engine makes it quiet when it rounds the result to bf16). The operands arrive as bf16 values
widened exactly to f64; the result is returned unrounded, and it is a bf16 already, so the engine's
one rounding leaves it as it is."""
import numpy as np


def forward(x):
    x = np.asarray(x, dtype=np.float64)
    return np.where(np.isnan(x), x, np.where(x > 0, x, 0.0))
