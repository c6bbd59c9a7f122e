"""bf16 on the device (docs/bf16.md): the WGSL rounding helper against the numpy one on the real
adapter, the storage (high half of a word) both ways, the six ops' kernels carrying the helper,
and the negative controls: a kernel that stores an unrounded f32, one that rounds every partial
sum, and a reference whose output is rounded through f32."""
import numpy as np
import pytest
from conftest import BUILTINS, REPO, copy_package

from studio.engine import bfloat16 as bf
from studio.engine.contract.bindings import parse_bindings
from studio.engine.contract.expr import parse_expr
from studio.engine.contract.package import load_package
from studio.engine.device.execution import KernelProgram, dispatch
from studio.engine.errors import StudioError
from studio.engine.grad.run import run_op
from studio.engine.precision import from_device, round_to, to_device, to_reference
from studio.engine.proof.conformance import conform

SNIPPET = (REPO / "shaders" / "bf16.wgsl").read_text()
BF16_OPS = ["conv1d_bf16", "conv1d_bf16_strided", "conv1d_bf16_input_vjp", "conv1d_bf16_input_vjp_strided",
            "conv1d_bf16_weight_grad", "conv1d_bf16_weight_grad_strided"]

ROUND_KERNEL = SNIPPET + """
@group(0) @binding(0) var<storage, read> bits: array<u32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
struct P { n: u32, }
@group(0) @binding(2) var<uniform> p: P;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i >= p.n) { return; }
    y[i] = bf16_round(bitcast<f32>(bits[i]));
}
"""
ROUND_BINDINGS = """
@group(0) @binding(0) bits : storage read       u32[n]
@group(0) @binding(1) y    : storage read_write bf16[n]
@group(0) @binding(2) p    : uniform { n: u32 = n }
"""


def device_round(device, bits: np.ndarray) -> np.ndarray:
    prog = KernelProgram("test/bf16_round", ROUND_KERNEL, "bf16_round.wgsl", "main", 64, parse_expr("n"),
                         parse_bindings(ROUND_BINDINGS))
    n = bits.size
    (res,) = dispatch(prog, [({"n": n}, {"y": (n,)}, {"bits": bits})], device=device)
    return np.ascontiguousarray(res.outputs["y"]).view(np.uint16)


def test_wgsl_rounding_matches_the_numpy_bit_operations_on_the_device(device):
    """Every bf16 high half with the low halves that decide a rounding (0, just below, at and above
    the tie, all ones), and a million random patterns. NaNs: NaN and quiet on both sides."""
    hi = np.arange(1 << 16, dtype=np.uint32) << np.uint32(16)
    lows = np.array([0x0000, 0x0001, 0x7FFF, 0x8000, 0x8001, 0xFFFF], np.uint32)
    bits = np.concatenate([(hi[:, None] | lows[None, :]).reshape(-1),
                           np.random.default_rng(3).integers(0, 1 << 32, size=1 << 20, dtype=np.uint64).astype(np.uint32)])
    got = device_round(device, bits)
    want = bf.from_f32_bits(bits)
    nan = (bits & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    ok = ~nan & (got == want)
    finite_bad = np.flatnonzero(~nan & ~ok)
    assert finite_bad.size == 0, [f"0x{int(bits[i]):08x}: device 0x{int(got[i]):04x}, numpy 0x{int(want[i]):04x}"
                                  for i in finite_bad[:5]]
    assert np.all((got[nan] & 0x7F80) == 0x7F80), "a NaN came back as a number"
    assert np.all(got[nan] & 0x0040), "a NaN came back signalling"


@pytest.mark.parametrize("name", BF16_OPS)
def test_each_bf16_kernel_carries_the_engine_helper_verbatim(name):
    assert SNIPPET in (BUILTINS / name / "forward.wgsl").read_text()


def test_storage_is_the_high_half_of_a_word_both_ways():
    x = np.array([1 + 2.0 ** -8 + 2.0 ** -40, -0.0, np.inf, 3.0])
    words = to_device(x, "bf16")
    assert words.dtype == np.uint32 and words.tolist() == [0x3F810000, 0x80000000, 0x7F800000, 0x40400000]
    values, bad = from_device(words, "bf16")
    assert values.astype(np.float64).tolist()[:2] == [1.0078125, -0.0] and bad.size == 0
    _, bad = from_device(np.array([0x3F810000, 0x3F812345, 0x7FBADBAD], np.uint32), "bf16")
    assert bad.tolist() == [1]          # the poison word is the guard's to name, not malformed


def test_the_reference_path_rounds_once_from_f64():
    assert float(round_to(np.array([1 + 2.0 ** -8 + 2.0 ** -40]), "bf16").astype(np.float64)[0]) == 1.0078125
    a = to_reference(np.array([1 + 2.0 ** -8 + 2.0 ** -40]), "bf16", "f64")
    assert a.dtype == np.float64 and a[0] == 1.0078125
    assert to_reference(np.array([1.5]), "bf16", "f32").dtype == np.float32   # the host has numpy only


def test_a_kernel_that_stores_an_unrounded_f32_is_refused(ctx, tmp_path, device):
    root = copy_package(BUILTINS / "conv1d_bf16", tmp_path / "raw", {"forward.wgsl": [("y[i] = bf16_round(acc);", "y[i] = acc;")]})
    rng = np.random.default_rng(0)
    inputs = {"x": rng.normal(size=(2, 3, 9)).astype(np.float32), "w": rng.normal(size=(4, 3, 3)).astype(np.float32)}
    with pytest.raises(StudioError) as e:
        run_op(ctx, load_package(root), inputs, {})
    assert "is no bf16" in e.value.message and "bf16_round" in e.value.hint


@pytest.mark.slow
def test_a_kernel_that_rounds_every_partial_sum_fails_conformance(ctx, tmp_path, device):
    """bf16 accumulation is not the denotation (one rounding on the way out): conformance sees it."""
    root = copy_package(BUILTINS / "conv1d_bf16_weight_grad", tmp_path / "acc16", {"forward.wgsl": [
        ("acc = acc + dy[", "acc = bf16_round(acc + dy["), ("p.s * t + j];\n        }", "p.s * t + j]);\n        }")]})
    rep = conform(ctx, load_package(root), stop_after=1)
    assert not rep.ok and rep.failures[0].kind == "mismatch"


def test_the_device_and_the_reference_agree_on_a_random_case(ctx, device):
    pkg = load_package(BUILTINS / "conv1d_bf16_strided")
    rng = np.random.default_rng(1)
    inputs = {"x": rng.normal(size=(5, 3, 40)), "w": rng.normal(size=(2, 3, 4))}
    got = run_op(ctx, pkg, inputs, {"s": 3})["y"]
    want = ctx.references.forward(pkg, inputs, {"s": 3})["y"]
    assert got.dtype.name == "bfloat16" and got.shape == (5, 2, 13)
    ulps = np.abs(got.astype(np.float64) - want.astype(np.float64)) / bf.ulp(want.astype(np.float64))
    assert ulps.max() <= 1 and np.mean(ulps == 0) > 0.9


@pytest.mark.slow
def test_an_unwritten_bf16_element_is_named_by_the_poison(ctx, tmp_path, device):
    """The poison word (a NaN whose low half is not zero) is not taken for a malformed bf16: the
    guard names the element as never written."""
    root = copy_package(BUILTINS / "conv1d_bf16", tmp_path / "skip", {"forward.wgsl": [
        ("if (i >= p.b * p.o * p.m) { return; }", "if (i >= p.b * p.o * p.m || i == 1u) { return; }")]})
    rep = conform(ctx, load_package(root), stop_after=1)
    assert not rep.ok and rep.failures[0].kind == "unwritten" and "first at index 1" in rep.failures[0].detail
