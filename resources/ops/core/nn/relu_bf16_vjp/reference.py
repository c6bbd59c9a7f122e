"""Reference for core/nn/relu_bf16_vjp@1 (docs/bf16.md): dx = dy where x > 0, else +0.0 (x = -0,
+0 or NaN gives +0). The operands arrive as bf16 values widened exactly to f64; the result is
returned unrounded, and it is a bf16 already (or a NaN, which the engine makes quiet), so the
engine's one rounding leaves it as it is."""
import numpy as np


def forward(x, dy):
    x = np.asarray(x, dtype=np.float64)
    dy = np.asarray(dy, dtype=np.float64)
    return np.where(x > 0, dy, 0.0)
