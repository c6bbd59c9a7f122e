"""Reference for core/nn/relu_f32@1 (docs/bf16.md, "At f32"): y = x where x > 0, else +0.0; a NaN
stays NaN. The operands arrive as f32 values widened exactly to f64; the result is returned
unrounded, and it is an f32 already, so the engine's one rounding leaves it as it is."""
import numpy as np


def forward(x):
    x = np.asarray(x, dtype=np.float64)
    return np.where(np.isnan(x), x, np.where(x > 0, x, 0.0))
