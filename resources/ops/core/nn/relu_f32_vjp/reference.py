"""Reference for core/nn/relu_f32_vjp@1 (docs/bf16.md, "At f32"): dx = dy where x > 0, else +0.0
(x = -0, +0 or NaN gives +0). The operands arrive as f32 values widened exactly to f64; the result
is returned unrounded, and it is an f32 already, so the engine's one rounding leaves it as it is."""
import numpy as np


def forward(x, dy):
    x = np.asarray(x, dtype=np.float64)
    dy = np.asarray(dy, dtype=np.float64)
    return np.where(x > 0, dy, 0.0)
