"""The six 2-D bf16 convolution kinds (resources/ops/core/conv2d_bf16*; docs/bf16.md): their f64
references against the definition written as plain loops, their declared sharding kinds, the weight
gradients' named summation order ("chunked-256") bit for bit on the device past the old batch cap,
and a broken twin of each kernel family failing conformance. Each op's own conformance runs once per
run where every builtin's does (tests/trust/test_publish.py, the public bar)."""
import importlib.util
import itertools

import numpy as np
import pytest
from conftest import BUILTINS, copy_package

from studio.engine import bfloat16 as bf
from studio.engine.contract.package import load_package
from studio.engine.grad.run import run_op
from studio.engine.proof.conformance import conform
from studio.engine.sharding.kinds import EXACT, ROUNDED, classify

SIX = {"conv2d_bf16": EXACT, "conv2d_bf16_strided": EXACT, "conv2d_bf16_input_vjp": EXACT,
       "conv2d_bf16_input_vjp_strided": EXACT, "conv2d_bf16_weight_grad": ROUNDED,
       "conv2d_bf16_weight_grad_strided": ROUNDED}


def reference(name):
    spec = importlib.util.spec_from_file_location(f"ref_{name}", BUILTINS / name / "reference.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def bf16(rng, *shape, scale=1.0):
    """Random bf16 values (as f32) of the given shape."""
    return bf.to_f32(bf.from_f64(scale * rng.standard_normal(shape))).astype(np.float32)


def rnd(a):
    return bf.to_f32(bf.from_f64(np.asarray(a, dtype=np.float64))).reshape(np.shape(a))


def loops_conv(x, f, s, p):
    """The definition, one term at a time: y[b,o,i1,i2] = Σ f[o,c,j1,j2] x[b,c,s·i1+j1−p, s·i2+j2−p]
    over the positions inside the image."""
    b, c, n, _ = x.shape
    o, _, k, _ = f.shape
    m = (n + 2 * p - k) // s + 1
    y = np.zeros((b, o, m, m))
    for bi, oi, i1, i2, ci, j1, j2 in itertools.product(range(b), range(o), range(m), range(m), range(c), range(k),
                                                        range(k)):
        r1, r2 = s * i1 + j1 - p, s * i2 + j2 - p
        if 0 <= r1 < n and 0 <= r2 < n:
            y[bi, oi, i1, i2] += f[oi, ci, j1, j2] * x[bi, ci, r1, r2]
    return y


def loops_input_vjp(dy, f, s, p, n):
    b, o, m, _ = dy.shape
    _, c, k, _ = f.shape
    dx = np.zeros((b, c, n, n))
    for bi, oi, i1, i2, ci, j1, j2 in itertools.product(range(b), range(o), range(m), range(m), range(c), range(k),
                                                        range(k)):
        r1, r2 = s * i1 + j1 - p, s * i2 + j2 - p
        if 0 <= r1 < n and 0 <= r2 < n:
            dx[bi, ci, r1, r2] += f[oi, ci, j1, j2] * dy[bi, oi, i1, i2]
    return dx


def loops_weight_grad(x, dy, k, s, p):
    b, c, n, _ = x.shape
    o, m = dy.shape[1], dy.shape[2]
    df = np.zeros((o, c, k, k))
    for bi, oi, i1, i2, ci, j1, j2 in itertools.product(range(b), range(o), range(m), range(m), range(c), range(k),
                                                        range(k)):
        r1, r2 = s * i1 + j1 - p, s * i2 + j2 - p
        if 0 <= r1 < n and 0 <= r2 < n:
            df[oi, ci, j1, j2] += dy[bi, oi, i1, i2] * x[bi, ci, r1, r2]
    return df


# (k, s, p): the ResNet shapes (the 7×7/2 stem, 3×3 with padding 1, the 1×1/2 downsample) and others
GEOMETRIES = [(1, 1, 0), (1, 2, 0), (3, 1, 1), (3, 2, 1), (3, 1, 0), (7, 2, 3), (7, 1, 2), (5, 2, 2)]


@pytest.mark.parametrize("k, s, p", GEOMETRIES)
def test_the_references_are_the_definition_written_as_loops(k, s, p):
    """With small integers every f64 sum is exact, so the vectorised references must equal the loops
    exactly; the control: the vectorised code without the padding or the stride differs."""
    rng = np.random.default_rng(k * 100 + s * 10 + p)
    n, b, c, o = 9, 2, 3, 2
    x = rng.integers(-4, 5, (b, c, n, n)).astype(np.float64)
    f = rng.integers(-4, 5, (o, c, k, k)).astype(np.float64)
    m = (n + 2 * p - k) // s + 1
    dy = rng.integers(-4, 5, (b, o, m, m)).astype(np.float64)
    strided = reference("conv2d_bf16_strided").forward(x, f, s, p)
    assert np.array_equal(strided, loops_conv(x, f, s, p))
    assert np.array_equal(reference("conv2d_bf16_input_vjp_strided").forward(dy, f, s, p, n),
                          loops_input_vjp(dy, f, s, p, n))
    assert np.array_equal(reference("conv2d_bf16_weight_grad_strided").forward(x, dy, k, s, p),
                          loops_weight_grad(x, dy, k, s, p))
    if s == 1:
        assert np.array_equal(reference("conv2d_bf16").forward(x, f, p), strided)
        assert np.array_equal(reference("conv2d_bf16_input_vjp").forward(dy, f, p, n), loops_input_vjp(dy, f, 1, p, n))
        assert np.array_equal(reference("conv2d_bf16_weight_grad").forward(x, dy, k, p), loops_weight_grad(x, dy, k, 1, p))
    # the adjoint identity <conv(x), dy> = <x, input_vjp(dy)> = <f, weight_grad(x, dy)>, exact here
    dot = float(np.sum(strided * dy))
    assert dot == float(np.sum(x * loops_input_vjp(dy, f, s, p, n))) == float(np.sum(f * loops_weight_grad(x, dy, k, s, p)))
    # the control: the same vectorised code without the padding (or without the stride) is not the loops
    wrong = reference("conv2d_bf16_strided")._conv(x, f, 1 if s > 1 else s, 0 if p else p)
    if (s, p) != (1, 0):
        assert wrong.shape != strided.shape or not np.array_equal(wrong, strided)


@pytest.mark.parametrize("name", sorted(SIX))
def test_the_six_kinds_are_classified_by_their_declared_sharding(name):
    kind = classify(load_package(BUILTINS / name))
    assert kind.label == SIX[name] and kind.bf16
    assert kind.kind == ("per_example" if SIX[name] == EXACT else "batch_contracting")


@pytest.mark.parametrize("name", sorted(SIX))
def test_each_kernel_carries_the_engine_rounding_verbatim(name):
    from test_bf16_device import SNIPPET
    text = (BUILTINS / name / "forward.wgsl").read_text()
    assert SNIPPET in text and text.count("bf16_round(") == 2      # the definition, and the one store


def test_a_batch_contracting_2d_op_cannot_claim_per_example(tmp_path):
    from studio.engine.errors import StudioError
    root = copy_package(BUILTINS / "conv2d_bf16_weight_grad", tmp_path / "p",
                        {"op.toml": [('kind = "batch_contracting"', 'kind = "per_example"')]})
    with pytest.raises(StudioError, match="does not start with the batch dim b"):
        load_package(root)


@pytest.mark.parametrize("k, s, p", [(1, 1, 0), (3, 1, 1), (3, 2, 1), (7, 2, 3)])
def test_the_device_kernels_agree_with_the_references_on_the_resnet_shapes(ctx, k, s, p):
    """Small integers: every f32 sum is exact, so each kernel's output is the reference's rounded once,
    bit for bit (the forward, the input VJP and the weight gradient, strided or not)."""
    rng = np.random.default_rng(7 + k + s + p)
    n, b, c, o = 10, 3, 2, 3
    x = rng.integers(-8, 9, (b, c, n, n)).astype(np.float32)
    f = rng.integers(-8, 9, (o, c, k, k)).astype(np.float32)
    m = (n + 2 * p - k) // s + 1
    dy = rng.integers(-8, 9, (b, o, m, m)).astype(np.float32)
    def pk(name):
        return load_package(BUILTINS / name)
    got = {"y": run_op(ctx, pk("conv2d_bf16_strided"), {"x": x, "f": f}, {"s": s, "p": p})["y"],
           "dx": run_op(ctx, pk("conv2d_bf16_input_vjp_strided"), {"dy": dy, "f": f}, {"s": s, "p": p, "n": n})["dx"],
           "df": run_op(ctx, pk("conv2d_bf16_weight_grad_strided"), {"x": x, "dy": dy}, {"k": k, "s": s, "p": p})["df"]}
    want = {"y": rnd(loops_conv(x, f, s, p)), "dx": rnd(loops_input_vjp(dy, f, s, p, n)),
            "df": rnd(loops_weight_grad(x, dy, k, s, p))}
    for key in want:
        assert np.array_equal(np.asarray(got[key], np.float64).reshape(want[key].shape), want[key]), key
    if s == 1:
        y1 = run_op(ctx, pk("conv2d_bf16"), {"x": x, "f": f}, {"p": p})["y"]
        df1 = run_op(ctx, pk("conv2d_bf16_weight_grad"), {"x": x, "dy": dy}, {"k": k, "p": p})["df"]
        assert np.array_equal(np.asarray(y1, np.float64), want["y"]) and np.array_equal(np.asarray(df1, np.float64), want["df"])


def sequential_f32(x, dy, k, s, p):
    """The other order, for the control: one f32 sum over (b, i1, i2) from +0, in order."""
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
    b, o, m, _ = dy.shape
    c = x.shape[1]
    out = np.zeros((o, c, k, k), np.float32)
    for j1 in range(k):
        for j2 in range(k):
            win = xp[:, :, j1:j1 + s * (m - 1) + 1:s, j2:j2 + s * (m - 1) + 1:s]
            terms = dy.transpose(1, 0, 2, 3).reshape(o, 1, -1) * win.transpose(1, 0, 2, 3).reshape(1, c, -1)
            out[:, :, j1, j2] = np.add.accumulate(terms, axis=2, dtype=np.float32)[..., -1]
    return out


def test_the_weight_gradient_sums_in_its_named_order_past_the_old_batch_cap(ctx):
    """b·m·m = 1100·8·8 = 70,400 terms per output: past the 1-D ops' cap (16,384) and past the
    65,535 loop iterations lavapipe allows an invocation. The device's bits are the chunked-256 model's
    (reference.py: chunked_f32) rounded once, every element; the sequential order's bits differ
    (the control: the test can tell the orders apart), and so do chunks of 128. The second half of the batch
    cancels the first exactly (the exact sum is 0 up to f64's own rounding): what the device returns is its f32 sums' rounding,
    which depends on the order."""
    ref = reference("conv2d_bf16_weight_grad_strided")
    rng = np.random.default_rng(3)
    b, c, o, n, k, s, p = 1100, 2, 3, 16, 3, 2, 1
    m = (n + 2 * p - k) // s + 1
    x = bf16(rng, b, c, n, n) * np.exp2(rng.integers(-6, 7, (b, c, n, n))).astype(np.float32)
    dy = bf16(rng, b, o, m, m) * np.exp2(rng.integers(-6, 7, (b, o, m, m))).astype(np.float32)
    x[b // 2:], dy[b // 2:] = x[:b // 2], -dy[:b // 2]        # the second half cancels the first exactly
    assert b * m * m == 70_400
    got = np.asarray(run_op(ctx, load_package(BUILTINS / "conv2d_bf16_weight_grad_strided"), {"x": x, "dy": dy},
                            {"k": k, "s": s, "p": p})["df"], np.float64)
    model = rnd(ref.chunked_f32(x, dy, k, s, p))
    assert np.array_equal(got, model)
    seq = rnd(sequential_f32(x, dy, k, s, p))
    exact = rnd(ref.forward(x.astype(np.float64), dy.astype(np.float64), k, s, p))
    ref.CHUNK = 128
    other = rnd(ref.chunked_f32(x, dy, k, s, p))
    print(f"elements {got.size}: chunked-256 model = device on all; sequential differs on "
          f"{np.count_nonzero(seq != got)}, chunked-128 on {np.count_nonzero(other != got)}, the exact sum rounded once "
          f"on {np.count_nonzero(exact != got)}")
    assert np.count_nonzero(seq != got) > 0 and np.count_nonzero(other != got) > 0
    # what is left is the f32 sums' rounding, within the contract's bound: gamma_K * sum|terms|, K = 256 + chunks
    size = ref.forward(np.abs(x).astype(np.float64), np.abs(dy).astype(np.float64), k, s, p)
    kk = 256 + -(-b * m * m // 256)
    assert np.all(np.abs(got - exact) <= kk * 2.0 ** -24 / (1 - kk * 2.0 ** -24) * size * (1 + 2.0 ** -7)
                  + 2.0 ** -8 * np.abs(exact))


@pytest.mark.parametrize("name, s", [("conv2d_bf16_weight_grad", 1), ("conv2d_bf16_weight_grad_strided", 2)])
def test_one_invocation_per_output_keeps_the_named_order_on_small_batches(ctx, name, s):
    """Up to 64 chunks (b·m² ≤ 16,384: a training replica) each lane takes an output and sums it alone
    in the same chunked-256 order: the device's bits are the model's, every element; 24·8·8 = 1,536
    terms make 6 chunks, and the sequential order's bits differ (the control)."""
    ref = reference(name)
    rng = np.random.default_rng(5)
    b, c, o, n, k, p = 24 * s * s, 3, 4, 8, 3, 1
    m = (n + 2 * p - k) // s + 1
    x = bf16(rng, b, c, n, n) * np.exp2(rng.integers(-6, 7, (b, c, n, n))).astype(np.float32)
    dy = bf16(rng, b, o, m, m) * np.exp2(rng.integers(-6, 7, (b, o, m, m))).astype(np.float32)
    x[b // 2:], dy[b // 2:] = x[:b // 2], -dy[:b // 2]        # cancellation: the order shows in the bits
    assert b * m * m <= 16_384
    params = {"k": k, "p": p} | ({"s": s} if s > 1 else {})
    got = np.asarray(run_op(ctx, load_package(BUILTINS / name), {"x": x, "dy": dy}, params)["df"], np.float64)
    assert np.array_equal(got, rnd(ref.chunked_f32(x, dy, k, s, p)))
    assert np.count_nonzero(rnd(sequential_f32(x, dy, k, s, p)) != got) > 0


BROKEN = [
    ("conv2d_bf16", "ignores the padding", [("p.pad", "0u")]),
    ("conv2d_bf16_input_vjp_strided", "ignores the stride", [("% p.s", "% 1u"), ("/ p.s", "/ 1u")]),
    ("conv2d_bf16_weight_grad", "ignores the padding", [("p.pad", "0u")]),
]


@pytest.mark.slow
@pytest.mark.parametrize("name, why, edits", BROKEN, ids=[f"{b[0]}: {b[1]}" for b in BROKEN])
def test_a_broken_twin_of_each_kernel_family_fails_conformance(ctx, tmp_path, name, why, edits):
    root = copy_package(BUILTINS / name, tmp_path / name, {"forward.wgsl": edits})
    pkg = load_package(root)
    ctx.trust.trust(pkg)
    rep = conform(ctx, pkg, stop_after=1)
    assert not rep.ok and rep.failures, f"{name} that {why} passed conformance"
    print(f"{name} that {why}: {rep.failures[0].describe()[:300]}")
