"""Sample calls of the shipped differentiable ops for the framework bridges' tests (test_api_torch.py,
test_api_jax.py): shapes and parameters each signature admits, and values a finite-difference check
can use (distinct, 0.37 apart: no tie or clip bound within the step of any element)."""
import numpy as np

N = 16
# op id -> ({input: shape}, params)
SAMPLES = {
    "core/math/add@1": ({"a": (N,), "b": (N,)}, {}),
    "core/math/multiply@1": ({"a": (N,), "b": (N,)}, {}),
    "core/signal/affine@1": ({"x": (N,)}, {"scale": 2.0, "offset": 0.5}),
    "core/signal/clip@1": ({"x": (N,)}, {"lo": -5.0, "hi": 5.0}),
    "core/signal/diff@1": ({"x": (N,)}, {}),
    "core/signal/fir@1": ({"x": (N,), "taps": (3,)}, {}),
    "core/reduce/mean@1": ({"x": (N,)}, {}),
    "core/reduce/sum@1": ({"x": (N,)}, {}),
    "core/reduce/mse@1": ({"a": (N,), "b": (N,)}, {}),
    "core/reduce/median_rows@1": ({"u": (4, 5)}, {}),
    "core/shape/unfold@1": ({"x": (N,)}, {"w": 3}),
    "user/demo/windowed_median@1": ({"x": (N,)}, {"w": 3}),
    "user/demo/windowed_median_fast@1": ({"x": (N,)}, {"w": 3}),
    "user/demo/windowed_median_composite@1": ({"x": (N,)}, {"w": 3}),
}
# a VJP doubled consistently in the reference and the backward kernel of core/reduce/mean@1:
# conformance (kernel against reference) passes, gradcheck does not
DOUBLED = {"reference.py": [("dy[0] / x.shape[0]", "2.0 * dy[0] / x.shape[0]")],
           "backward.wgsl": [("dx[j] = dy[0] / f32(p.n);", "dx[j] = 2.0 * dy[0] / f32(p.n);")]}


def sample(name: str, seed: int = 0) -> tuple[list[np.ndarray], dict]:
    """([input arrays in the signature's order], params) for op ``name``."""
    shapes, params = SAMPLES[name]
    rng = np.random.default_rng(seed)
    out = []
    for shape in shapes.values():
        n = int(np.prod(shape))
        out.append(((rng.permutation(n) - n / 2) * 0.37).astype(np.float32).reshape(shape))
    return out, dict(params)
