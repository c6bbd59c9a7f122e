"""Device VJPs: backward kernels declared in the package format, checked by the same loader and
layout checker, run by the same executor, each against its reference VJP through real wgpu."""
import numpy as np
import pytest
from conftest import BUILTINS, MEDIAN

from studio.engine.contract.package import load_package
from studio.engine.device.execution import Case, run_cases
from studio.engine.errors import StudioError
from studio.engine.grad.vjp import backward_program, device_vjp, reference_vjp
from studio.engine.proof.checker import check_package

R = np.random.default_rng
CASES = {   # (inputs, params, exact): exact = bit for bit equal to the reference VJP run in f32
    "affine": (lambda r: {"x": r.normal(size=5000)}, {"scale": 1.75, "offset": -0.3}, True),
    "add": (lambda r: {"a": r.normal(size=4097), "b": r.normal(size=4097)}, {}, True),
    "multiply": (lambda r: {"a": r.normal(size=333), "b": r.normal(size=333)}, {}, True),
    "clip": (lambda r: {"x": np.r_[r.normal(size=997), -0.5, 0.25, 0.0]}, {"lo": -0.5, "hi": 0.25}, True),
    "fir": (lambda r: {"x": r.normal(size=3000), "taps": r.normal(size=15)}, {}, False),
    "diff": (lambda r: {"x": r.normal(size=777)}, {}, True),
    "sum": (lambda r: {"x": r.normal(size=100_000)}, {}, True),
    "mean": (lambda r: {"x": r.normal(size=65_537)}, {}, False),
    "mse": (lambda r: {"a": r.normal(size=9999), "b": r.normal(size=9999)}, {}, False),
    "unfold": (lambda r: {"x": r.normal(size=1001)}, {"w": 9}, True),
    "median_rows": (lambda r: {"u": np.round(r.normal(size=(500, 7)), 1)}, {}, True),     # rounded: many ties
}


def _f32(d):
    return {k: np.asarray(v, np.float32) for k, v in d.items()}


@pytest.mark.parametrize("name", sorted(CASES))
def test_builtin_device_vjp_matches_the_reference_vjp(ctx, name, device):
    pkg = load_package(BUILTINS / name)
    assert pkg.contract.backward_kernel is not None and pkg.backward_source
    make, params, exact = CASES[name]
    rng = R(7)
    inputs = _f32(make(rng))
    env = pkg.contract.signature.resolve({k: v.shape for k, v in inputs.items()}, params)
    cts = {f"d{o}": rng.normal(size=s).astype(np.float32) for o, s in pkg.contract.signature.output_shapes(env).items()}
    got = device_vjp(ctx, pkg, inputs, params, cts)
    want = reference_vjp(ctx, pkg, inputs, params, cts)
    want32 = ctx.references.call_as_given(pkg, "vjp", inputs, params, **cts)
    want32 = want32 if isinstance(want32, dict) else {next(iter(want)): want32}
    assert set(got) == set(want)
    for k, w in want.items():
        g = got[k]
        assert g.shape == w.shape and g.dtype == np.float32
        if exact:   # the reference run in f32 does the same f32 operations in the same order
            assert np.array_equal(g.view(np.uint32), np.asarray(want32[k], np.float32).view(np.uint32)), f"{name}.d{k}"
        else:       # f32 accumulation against the f64 reference: relative to the terms' size
            scale = np.max(np.abs(w)) + np.max(np.abs(list(cts.values())[0]))
            np.testing.assert_allclose(g, w, rtol=0, atol=1e-5 * scale * max(1, np.log2(w.size)))


@pytest.mark.parametrize("n,w", [(7, 7), (100_003, 7), (4099, 31)])
def test_story_backward_kernel_is_bit_for_bit_the_reference_vjp(ctx, n, w, device):
    pkg = load_package(MEDIAN)
    assert pkg.contract.backward_kernel.file == "backward.wgsl"
    rng = R(n)
    x = rng.normal(size=n).astype(np.float32)
    x[rng.integers(0, n, size=n // 5)] = x[0]                  # ties, routed by the stable sort
    x[3::11] = -0.0
    dy = rng.normal(size=n - w + 1).astype(np.float32)
    got = device_vjp(ctx, pkg, {"x": x}, {"w": w}, {"dy": dy})["x"]
    want = reference_vjp(ctx, pkg, {"x": x}, {"w": w}, {"dy": dy.astype(np.float64)})["x"]
    # the reference sums in f64; every dx[j] is a sum of at most w values of dy, in increasing i
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    ref32 = np.asarray(ctx.references.call(pkg, "vjp", {"x": x}, {"w": w}, dy=dy), np.float32)
    assert np.array_equal(got.view(np.uint32), ref32.view(np.uint32))


def test_the_executor_runs_forward_and_backward_programs_alike(device):
    pkg = load_package(MEDIAN)
    prog = backward_program(pkg)
    assert (prog.entry, prog.workgroup_size, str(prog.invocations)) == ("main", 64, "n")
    assert [b.name for b in prog.bindings] == ["x", "dy", "dx", "p"]
    x = np.arange(9, dtype=np.float32)[::-1].copy()
    (res,) = run_cases(pkg, [Case({"x": x}, {"w": 3})], device=device)       # the old signature still works
    assert res.outputs["y"].tolist() == [7, 6, 5, 4, 3, 2, 1]


def test_checker_runs_the_backward_kernel_through_the_layout_checker(ctx, device):
    rep = check_package(ctx, load_package(MEDIAN))
    assert rep.ok, [e.format() for e in rep.errors]
    assert any(s.startswith("backward kernel compiles") for s in rep.passed)


def test_a_backward_binding_that_disagrees_with_the_vjp_is_reported(ctx, pkg_copy, device):
    root = pkg_copy(op__toml=[("@group(0) @binding(2) dx : storage read_write f32[n]",
                               "@group(0) @binding(2) dx : storage read       f32[n]")])
    rep = check_package(ctx, load_package(root))
    (err,) = rep.errors
    assert "dx is bound as 'storage read f32[n]' but the VJP's gradient needs 'storage read_write f32[n]'" in err.message
    assert err.file.endswith("op.toml") and err.line is not None


def test_a_backward_binding_that_disagrees_with_the_wgsl_is_judged_by_the_validator(ctx, pkg_copy, device):
    root = pkg_copy(backward__wgsl=[("@group(0) @binding(1) var<storage, read> dy",
                                     "@group(0) @binding(4) var<storage, read> dy")])
    rep = check_package(ctx, load_package(root))
    assert not rep.ok
    assert any("'dy'" in e.message and e.related for e in rep.errors), [e.format() for e in rep.errors]


def test_a_missing_gradient_binding_is_reported(ctx, pkg_copy):
    root = pkg_copy(op__toml=[("@group(0) @binding(2) dx : storage read_write f32[n]\n", "")])
    rep = check_package(ctx, load_package(root), compile_kernel=False)
    assert any("binds no 'dx'" in e.message for e in rep.errors)


@pytest.mark.parametrize("old,new,needle", [
    ("text = 'vjp x: reference(vjp) on device(\"backward.wgsl\")'", 'text = "vjp x: reference(vjp)"',
     "[backward] invocations is set but no vjp rule runs on the device"),
    ('invocations = "n"\n', "", "missing field 'backward.invocations'"),
    ("on device(\"backward.wgsl\")'", "on device(\"nothere.wgsl\")'", "backward.kernel names 'nothere.wgsl'"),
    ('gradient_tolerance = 1e-9', 'gradient_tolerance = -1', "must be a positive number"),
])
def test_backward_manifest_errors_name_the_field(pkg_copy, old, new, needle):
    with pytest.raises(StudioError) as e:
        load_package(pkg_copy(op__toml=[(old, new)]))
    assert needle in e.value.message and e.value.file.endswith("op.toml")
    assert e.value.field and e.value.field.startswith("backward")
