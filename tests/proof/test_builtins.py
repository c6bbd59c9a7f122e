"""Every builtin kernel against its reference on random inputs, through real wgpu."""
import numpy as np
import pytest
from conftest import BUILTINS
from proof_store import proven

from studio.engine.contract.package import load_package
from studio.engine.contract.tolerance import compare
from studio.engine.grad.run import run_op

NAMES = sorted(str(p.parent.relative_to(BUILTINS)) for p in BUILTINS.rglob("op.toml"))   # nn/softmax too

RANDOM_CASES = {
    "affine": lambda r: ({"x": r.normal(size=5000)}, {"scale": 1.7, "offset": -0.3}),
    "add": lambda r: ({"a": r.normal(size=4097), "b": r.normal(size=4097)}, {}),
    "multiply": lambda r: ({"a": r.normal(size=333), "b": r.normal(size=333)}, {}),
    "clip": lambda r: ({"x": r.normal(size=1000)}, {"lo": -0.5, "hi": 0.25}),
    "fir": lambda r: ({"x": r.normal(size=3000), "taps": r.normal(size=15)}, {}),
    "diff": lambda r: ({"x": r.normal(size=777)}, {}),
    "sum": lambda r: ({"x": r.normal(size=100_000)}, {}),
    "mean": lambda r: ({"x": r.uniform(-3, 3, size=65_537)}, {}),
    "mse": lambda r: ({"a": r.normal(size=9999), "b": r.normal(size=9999)}, {}),
    "spiky_signal": lambda r: ({}, {"n": 50_000, "seed": 11}),
    "unfold": lambda r: ({"x": r.normal(size=1001)}, {"w": 9}),
    "median_rows": lambda r: ({"u": r.normal(size=(500, 7))}, {}),
    # a CSR matrix (index inputs: docs/grammars.md, "Index domains"), 400 x 150 with about 6 entries a row
    "spmv": lambda r: ({"row_ptr": np.concatenate([[0], np.sort(r.integers(0, 2400, 399)), [2400]]).astype(np.uint32),
                        "col": r.integers(0, 150, 2400).astype(np.uint32), "val": r.normal(size=2400),
                        "x": r.normal(size=150)}, {}),
    # row-wise exp-and-reduce (docs/tolerance.md): wide rows, spreads that send exp far below 0
    "nn/softmax": lambda r: ({"x": r.normal(scale=20, size=(300, 37))}, {}),
    "nn/logsumexp": lambda r: ({"x": r.normal(scale=20, size=(300, 256))}, {}),
    "nn/layernorm": lambda r: ({"x": r.normal(loc=3, scale=5, size=(300, 255))}, {}),
    # the bf16 node kinds (docs/bf16.md)
    "conv1d_bf16": lambda r: ({"x": r.normal(size=(6, 3, 50)), "w": r.normal(size=(4, 3, 5))}, {}),
    "conv1d_bf16_strided": lambda r: ({"x": r.normal(size=(6, 3, 50)), "w": r.normal(size=(4, 3, 5))}, {"s": 2}),
    "conv1d_bf16_input_vjp": lambda r: ({"dy": r.normal(size=(6, 4, 46)), "w": r.normal(size=(4, 3, 5))}, {}),
    "conv1d_bf16_input_vjp_strided": lambda r: ({"dy": r.normal(size=(6, 4, 23)), "w": r.normal(size=(4, 3, 5))},
                                                {"s": 2, "n": 50}),
    "conv1d_bf16_weight_grad": lambda r: ({"x": r.normal(size=(6, 3, 50)), "dy": r.normal(size=(6, 4, 46))}, {"k": 5}),
    "conv1d_bf16_weight_grad_strided": lambda r: ({"x": r.normal(size=(6, 3, 50)), "dy": r.normal(size=(6, 4, 23))},
                                                  {"k": 5, "s": 2}),
    # the 2-D bf16 kinds (docs/bf16.md): a 3x3 conv with padding 1 and the 7x7 stride-2 stem with padding 3
    "conv2d_bf16": lambda r: ({"x": r.normal(size=(6, 3, 12, 12)), "f": r.normal(size=(4, 3, 3, 3))}, {"p": 1}),
    "conv2d_bf16_strided": lambda r: ({"x": r.normal(size=(6, 3, 12, 12)), "f": r.normal(size=(4, 3, 7, 7))},
                                      {"s": 2, "p": 3}),
    "conv2d_bf16_input_vjp": lambda r: ({"dy": r.normal(size=(6, 4, 12, 12)), "f": r.normal(size=(4, 3, 3, 3))},
                                        {"p": 1, "n": 12}),
    "conv2d_bf16_input_vjp_strided": lambda r: ({"dy": r.normal(size=(6, 4, 6, 6)), "f": r.normal(size=(4, 3, 7, 7))},
                                                {"s": 2, "p": 3, "n": 12}),
    "conv2d_bf16_weight_grad": lambda r: ({"x": r.normal(size=(6, 3, 12, 12)), "dy": r.normal(size=(6, 4, 12, 12))},
                                          {"k": 3, "p": 1}),
    "conv2d_bf16_weight_grad_strided": lambda r: ({"x": r.normal(size=(6, 3, 12, 12)), "dy": r.normal(size=(6, 4, 6, 6))},
                                                  {"k": 7, "s": 2, "p": 3}),
    # the small bf16 ResNet's other nodes (tests/device/test_nn_resnet_ops.py): the activation, the residual sum, the pool,
    # the classifier head and its loss, with their gradient ops
    "nn/relu_bf16": lambda r: ({"x": r.normal(size=(6, 3, 12, 12))}, {}),
    "nn/relu_bf16_vjp": lambda r: ({"x": r.normal(size=(6, 3, 12, 12)), "dy": r.normal(size=(6, 3, 12, 12))}, {}),
    "nn/add_bf16": lambda r: ({"a": r.normal(size=(6, 3, 12, 12)), "b2": r.normal(size=(6, 3, 12, 12))}, {}),
    "nn/global_avg_pool_bf16": lambda r: ({"x": r.normal(size=(6, 3, 12, 12))}, {}),
    "nn/global_avg_pool_bf16_vjp": lambda r: ({"dy": r.normal(size=(6, 3))}, {"n": 12}),
    # their f32 twins (docs/bf16.md, "At f32"): one op per 2-D kind, the stride a parameter; the small ResNet's domain
    "conv2d_f32": lambda r: ({"x": r.normal(size=(6, 3, 8, 8)), "f": r.normal(size=(4, 3, 3, 3))}, {"s": 2, "p": 1}),
    "conv2d_f32_input_vjp": lambda r: ({"dy": r.normal(size=(6, 4, 4, 4)), "f": r.normal(size=(4, 3, 3, 3))},
                                       {"s": 2, "p": 1, "n": 8}),
    "conv2d_f32_weight_grad": lambda r: ({"x": r.normal(size=(6, 3, 8, 8)), "dy": r.normal(size=(6, 4, 8, 8))},
                                         {"k": 3, "s": 1, "p": 1}),
    "nn/relu_f32": lambda r: ({"x": r.normal(size=(6, 3, 8, 8))}, {}),
    "nn/relu_f32_vjp": lambda r: ({"x": r.normal(size=(6, 3, 8, 8)), "dy": r.normal(size=(6, 3, 8, 8))}, {}),
    "nn/add_f32": lambda r: ({"a": r.normal(size=(6, 3, 8, 8)), "b2": r.normal(size=(6, 3, 8, 8))}, {}),
    "nn/global_avg_pool_f32": lambda r: ({"x": r.normal(size=(6, 3, 8, 8))}, {}),
    "nn/global_avg_pool_f32_vjp": lambda r: ({"dy": r.normal(size=(6, 3))}, {"n": 7}),
    "nn/linear": lambda r: ({"x": r.normal(size=(6, 16)), "w": r.normal(size=(10, 16)), "bias": r.normal(size=10)}, {}),
    "nn/linear_input_vjp": lambda r: ({"dy": r.normal(size=(6, 10)), "w": r.normal(size=(10, 16))}, {}),
    "nn/linear_weight_grad": lambda r: ({"x": r.normal(size=(64, 16)), "dy": r.normal(size=(64, 10))}, {}),
    "nn/softmax_xent": lambda r: ({"z": r.normal(scale=5, size=(100, 10)),
                                   "t": np.eye(10)[r.integers(0, 10, 100)]}, {}),
}


def test_every_builtin_has_a_random_case():
    assert set(NAMES) <= set(RANDOM_CASES)


@pytest.mark.parametrize("name", NAMES)
def test_kernel_matches_reference_on_random_inputs(ctx, name, device):
    pkg = load_package(BUILTINS / name)
    inputs, params = RANDOM_CASES[name](np.random.default_rng(42))
    inputs = {k: v.astype(np.float32) if v.dtype.kind == "f" else v for k, v in inputs.items()}
    got = run_op(ctx, pkg, inputs, params)
    want = ctx.references.forward(pkg, inputs, params)
    from studio.engine.proof.conformance import _magnitude
    from studio.engine.proof.corpus import CorpusCase
    mags = _magnitude(ctx.references, pkg, CorpusCase(0, "random", "normal", {}, params, inputs))
    terms = max([v.size for v in inputs.values()] + [1])
    if pkg.contract.tolerance.builtins and pkg.contract.tolerance.kind == "bound":    # judged from terms()
        from studio.engine.proof.bounds import forward_bounds
        bounds = forward_bounds(ctx.references, pkg, inputs, params, want)[0]
    for out, w in want.items():
        assert got[out].shape == w.shape
        if pkg.contract.tolerance.builtins and pkg.contract.tolerance.kind == "bound":
            b = bounds[out]
            assert compare(pkg.contract.tolerance, w, got[out], magnitude=b.magnitude, terms=b.terms,
                           allowance=b.allowance) is None
            continue
        assert compare(pkg.contract.tolerance, w, got[out], magnitude=mags.get(out), terms=terms) is None


# Every builtin passes its own whole conformance, each proven once per run: the top-level builtins where
# the public bar proves them (tests/trust/test_publish.py::test_every_builtin_clears_the_whole_public_bar_once_
# proven_here), the ones in subfolders (core/nn/*, which that bar test does not list) here, through the
# run's proof store (proof_store.py: a test that asked first, such as tests/device/test_nn_resnet_ops.py, shares its proof).
@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in NAMES if "/" in n])
def test_every_builtin_passes_its_own_conformance(ctx, name, device, proof_store):
    entry = proven(proof_store, ctx, load_package(BUILTINS / name))
    assert entry["verdict"] == "pass", "\n".join(entry["lines"])


def test_every_builtin_is_proven_whole_once_in_the_suite():
    """The two lists together are every builtin, and no builtin is in both (see the comment above)."""
    from trust.test_publish import NAMES as PROVEN_BY_THE_BAR      # tests/ is on the path (pyproject.toml)
    here = [n for n in NAMES if "/" in n]
    assert sorted(PROVEN_BY_THE_BAR + here) == NAMES and not set(PROVEN_BY_THE_BAR) & set(here)
