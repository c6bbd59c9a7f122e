"""The six bf16 node kinds' references are what their names say (docs/bf16.md): the input VJP and the
weight gradient are the adjoints of the convolution in x and in w (plain and strided), and the
convolution is the direct sum written out in loops."""
import importlib.util

import numpy as np
import pytest
from conftest import BUILTINS


def ref(name):
    spec = importlib.util.spec_from_file_location(name, BUILTINS / name / "reference.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.forward


@pytest.mark.parametrize("s", [1, 2, 3])
def test_the_gradients_are_the_adjoints_of_the_convolution(s):
    rng = np.random.default_rng(s)
    x, w = rng.normal(size=(5, 3, 23)), rng.normal(size=(4, 3, 4))
    if s == 1:
        y = ref("conv1d_bf16")(x, w)
        dy = rng.normal(size=y.shape)
        dx = ref("conv1d_bf16_input_vjp")(dy, w)
        dw = ref("conv1d_bf16_weight_grad")(x, dy, 4)
    else:
        y = ref("conv1d_bf16_strided")(x, w, s)
        dy = rng.normal(size=y.shape)
        dx = ref("conv1d_bf16_input_vjp_strided")(dy, w, s, 23)
        dw = ref("conv1d_bf16_weight_grad_strided")(x, dy, 4, s)
    assert y.shape == (5, 4, (23 - 4) // s + 1) and dx.shape == x.shape and dw.shape == w.shape
    inner = float(np.sum(y * dy))
    assert np.isclose(inner, float(np.sum(x * dx)), rtol=1e-12)      # <conv(x, w), dy> = <x, dx>
    assert np.isclose(inner, float(np.sum(w * dw)), rtol=1e-12)      # ... = <w, dw>


def test_the_convolution_is_the_sum_in_loops():
    rng = np.random.default_rng(9)
    x, w, s = rng.normal(size=(2, 3, 11)), rng.normal(size=(2, 3, 3)), 2
    y = ref("conv1d_bf16_strided")(x, w, s)
    for b in range(2):
        for o in range(2):
            for i in range(y.shape[2]):
                want = sum(w[o, c, j] * x[b, c, s * i + j] for c in range(3) for j in range(3))
                assert np.isclose(y[b, o, i], want, rtol=1e-13)
