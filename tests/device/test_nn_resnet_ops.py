"""The nine ops of a small bf16 ResNet (resources/ops/core/nn/{relu_bf16, relu_bf16_vjp, add_bf16,
global_avg_pool_bf16, global_avg_pool_bf16_vjp, linear, linear_input_vjp, linear_weight_grad,
softmax_xent}) and the f32 twins of its bf16 ones (relu_f32, relu_f32_vjp, add_f32, global_avg_pool_f32,
global_avg_pool_f32_vjp; docs/bf16.md, "At f32"): each proven by its own conformance (once per run,
shared through proof_store with tests/proof/test_builtins.py), each kernel on the device against an
independent numpy computation (bit for bit wherever the bits are determined), their declared sharding
kinds, and a broken twin per family that fails conformance naming its case."""
import numpy as np
import pytest
from conftest import BUILTINS, copy_package
from proof_store import proven

from studio.engine.contract.package import load_package
from studio.engine.errors import StudioError
from studio.engine.grad.run import run_op
from studio.engine.proof.conformance import conform
from studio.engine.sharding.kinds import EXACT, EXACT_AT_ID, UNDECLARED, classify

NN = BUILTINS / "nn"
OPS = {"relu_bf16": EXACT, "relu_bf16_vjp": EXACT, "add_bf16": EXACT, "global_avg_pool_bf16": EXACT,
       "global_avg_pool_bf16_vjp": EXACT, "linear": EXACT, "linear_input_vjp": EXACT,
       "linear_weight_grad": EXACT_AT_ID, "softmax_xent": UNDECLARED,
       # the f32 twins of the bf16 nodes (docs/bf16.md, "At f32"): the head's ops serve both networks
       "relu_f32": EXACT, "relu_f32_vjp": EXACT, "add_f32": EXACT, "global_avg_pool_f32": EXACT,
       "global_avg_pool_f32_vjp": EXACT}
F32_TWINS = ["relu_f32", "relu_f32_vjp", "add_f32", "global_avg_pool_f32", "global_avg_pool_f32_vjp"]
BF16_KERNELS = ["relu_bf16", "relu_bf16_vjp", "add_bf16", "global_avg_pool_bf16_vjp"]


# ------------------------------------------------------------------ an independent bf16 rounding
def rne_bf16(v):
    """Round f64 values to bf16 (8 significant bits, f32's exponent range, subnormals down to 2^-133),
    to nearest, ties to even, written here from the definition (not the engine's bfloat16 module): the
    value over its own quantum (a power of two: exact), rounded half-even by np.rint, times the quantum.
    NaN stays NaN. Returned as f32 (exact: every bf16 is an f32)."""
    v = np.asarray(v, np.float64)
    _, e = np.frexp(v)
    q = np.ldexp(1.0, np.maximum(e, -125) - 8)
    with np.errstate(invalid="ignore"):
        out = np.where(np.isfinite(v), np.rint(v / q) * q, v)
    return out.astype(np.float32)


def bits(a):
    return np.ascontiguousarray(np.asarray(a, np.float32)).view(np.uint32)


def run(ctx, name, inputs, params=None):
    out = run_op(ctx, load_package(NN / name), inputs, params or {})
    return {k: np.asarray(v, np.float32) for k, v in out.items()}


def random_bf16(rng, *shape, spread=6):
    """bf16 values of assorted exponents (2^-spread .. 2^spread times a normal draw), as f32."""
    return rne_bf16(rng.standard_normal(shape) * np.exp2(rng.integers(-spread, spread + 1, shape)))


def test_the_independent_rounding_is_round_to_nearest_even():
    assert rne_bf16([1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8, 1 + 2.0 ** -8 + 2.0 ** -40, 255.5, 257.0, -0.0]).tolist() == \
        [1.0, 1 + 2.0 ** -6, 1 + 2.0 ** -7, 256.0, 256.0, -0.0]
    assert bits(rne_bf16([-0.0]))[0] == 0x80000000
    assert rne_bf16([2.0 ** -134, 3 * 2.0 ** -134]).tolist() == [0.0, 2.0 ** -132]     # ties at the subnormal grid


# ------------------------------------------------------------------ declarations
@pytest.mark.parametrize("name", sorted(OPS))
def test_each_op_declares_its_sharding_kind(name):
    pkg = load_package(NN / name)
    assert classify(pkg).label == OPS[name], classify(pkg)
    assert pkg.id == f"core/nn/{name}@1" and pkg.contract.backward.kind == "nondifferentiable"


def test_each_op_carries_the_public_bar_fields():
    """tests/trust/test_publish.py checks the top-level builtins' metadata; these live under nn/."""
    from studio.engine.publish import bar
    from studio.engine.publish.license import Licenses
    licenses = Licenses()
    for name in OPS:
        assert [str(s) for s in bar.metadata_shortfalls(load_package(NN / name), licenses)] == [], name


@pytest.mark.parametrize("name", BF16_KERNELS)
def test_each_bf16_kernel_carries_the_engine_rounding_verbatim(name):
    from test_bf16_device import SNIPPET
    text = (NN / name / "forward.wgsl").read_text()
    assert SNIPPET in text and text.count("bf16_round(") == 2      # the definition, and the one store


# ------------------------------------------------------------------ proofs (whole corpus, once per run)
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(OPS))
def test_each_op_passes_its_own_conformance(ctx, name, proof_store):
    entry = proven(proof_store, ctx, load_package(NN / name))
    assert entry["verdict"] == "pass", "\n".join(entry["lines"])
    assert entry["lines"][-1].endswith("PASS")


# ------------------------------------------------------------------ the device against numpy
SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 2.0 ** -133, -(2.0 ** -133), 2.0 ** -126,
                     -(2.0 ** -126), 1.0, -1.0, 3.3895313892515355e38, -3.3895313892515355e38], np.float32)


def test_relu_and_its_vjp_bit_for_bit_with_the_edge_values(ctx):
    """y = x where x > 0 else +0 (-0 gives +0; NaN stays NaN, quiet; subnormals kept), and
    dx = dy where x > 0 else +0, on random bf16 with every special value planted."""
    rng = np.random.default_rng(1)
    x = random_bf16(rng, 3, 2, 5, 5)
    flat = x.reshape(-1)
    flat[:SPECIALS.size] = SPECIALS
    dy = random_bf16(rng, 3, 2, 5, 5)
    y = run(ctx, "relu_bf16", {"x": x})["y"]
    nan = np.isnan(x)
    want = np.where(x > 0, x, np.float32(0.0))
    assert np.array_equal(bits(y)[~nan], bits(want)[~nan])
    assert np.all(np.isnan(y[nan])) and np.all(bits(y)[nan] & 0x00400000)
    assert bits(y).reshape(-1)[1] == 0 and bits(y).reshape(-1)[0] == 0      # -0 and +0 both give +0
    dx = run(ctx, "relu_bf16_vjp", {"x": x, "dy": dy})["dx"]
    assert np.array_equal(bits(dx), bits(np.where(x > 0, dy, np.float32(0.0))))
    assert np.count_nonzero(x > 0) > 50 and np.count_nonzero(x <= 0) > 50


def test_add_rounds_the_exact_sum_once(ctx):
    """rnd(a + b2), every element: the device against the exact f64 sum rounded by the independent
    rounding; the data mix every exponent gap (0 to 40) and plant exact ties, which rounding twice (or
    truncating) would get wrong."""
    rng = np.random.default_rng(2)
    shape = (4, 3, 6, 6)
    a = random_bf16(rng, *shape, spread=20)
    b2 = random_bf16(rng, *shape, spread=20)
    fa, fb = a.reshape(-1), b2.reshape(-1)
    fa[:40] = 1.0 + np.arange(40) % 8 * 2.0 ** -7       # ties: 1 + m 2^-7 plus 2^-8 halfway
    fb[:40] = np.float32(2.0 ** -8)
    y = run(ctx, "add_bf16", {"a": a, "b2": b2})["y"]
    want = rne_bf16(a.astype(np.float64) + b2.astype(np.float64))
    assert np.array_equal(bits(y), bits(want))
    truncated = ((a.astype(np.float32) + b2).view(np.uint32) & 0xFFFF0000).view(np.float32)
    assert np.count_nonzero(bits(truncated) != bits(want)) > 20          # the test can tell a truncation apart


def test_global_avg_pool_is_its_stated_f32_order(ctx):
    """Bit for bit the stated order modelled in numpy f32 (the pixels row-major from +0, then one
    division by n * n); within a few f32 ulps of the exact mean."""
    rng = np.random.default_rng(3)
    for n in (1, 3, 7, 16):
        x = random_bf16(rng, 5, 3, n, n, spread=10)
        y = run(ctx, "global_avg_pool_bf16", {"x": x})["y"]
        acc = np.add.accumulate(x.reshape(5, 3, n * n), axis=2, dtype=np.float32)[..., -1]
        model = acc / np.float32(n * n)
        assert np.array_equal(bits(y), bits(model)), n
        exact = x.astype(np.float64).mean(axis=(2, 3))
        assert np.all(np.abs(y - exact) <= (n * n + 5) * 2.0 ** -24 * np.abs(x).astype(np.float64).mean(axis=(2, 3)))


def test_global_avg_pool_vjp_is_the_quotient_rounded_once(ctx):
    """dx = rnd(dy / (n * n)) broadcast: bit for bit the exact quotient rounded once where n is a power of
    two (the f32 quotient is exact), and the f32 quotient rounded to bf16 for any n."""
    rng = np.random.default_rng(4)
    dy = (rng.standard_normal((6, 4)) * 10).astype(np.float32)
    for n in (1, 2, 3, 5, 16):
        dx = run(ctx, "global_avg_pool_bf16_vjp", {"dy": dy}, {"n": n})["dx"]
        assert dx.shape == (6, 4, n, n)
        f32 = rne_bf16(dy / np.float32(n * n))
        assert np.array_equal(bits(dx), bits(np.broadcast_to(f32[:, :, None, None], dx.shape))), n
        if n & (n - 1) == 0:
            exact = rne_bf16(dy.astype(np.float64) / (n * n))
            assert np.array_equal(bits(dx), bits(np.broadcast_to(exact[:, :, None, None], dx.shape)))


def test_the_linear_ops_bit_for_bit_on_integers_and_within_the_bound_on_normals(ctx):
    """Small integers: every f32 sum is exact, so each kernel gives numpy's f64 result exactly
    (y = x w^T + bias, dx = dy w, dw = dy^T x, db = sum_b dy); normal draws: within gamma_k sum|terms|."""
    rng = np.random.default_rng(5)
    b, d, o = 7, 9, 4
    for ints in (True, False):
        draw = (lambda *s: rng.integers(-8, 9, s).astype(np.float32)) if ints else \
            (lambda *s: rng.standard_normal(s).astype(np.float32))
        x, w, bias, dy = draw(b, d), draw(o, d), draw(o), draw(b, o)
        X, W, B, DY = (v.astype(np.float64) for v in (x, w, bias, dy))
        got = {"y": run(ctx, "linear", {"x": x, "w": w, "bias": bias})["y"],
               "dx": run(ctx, "linear_input_vjp", {"dy": dy, "w": w})["dx"],
               **run(ctx, "linear_weight_grad", {"x": x, "dy": dy})}
        want = {"y": X @ W.T + B, "dx": DY @ W, "dw": DY.T @ X, "db": DY.sum(axis=0)}
        size = {"y": (np.abs(X) @ np.abs(W).T + np.abs(B), d + 1), "dx": (np.abs(DY) @ np.abs(W), o),
                "dw": (np.abs(DY).T @ np.abs(X), b), "db": (np.abs(DY).sum(axis=0), b)}
        for k in want:
            assert got[k].shape == want[k].shape, k
            if ints:
                assert np.array_equal(got[k].astype(np.float64), want[k]), k
            else:
                mag, terms = size[k]
                assert np.all(np.abs(got[k] - want[k]) <= terms * 2.0 ** -24 / (1 - terms * 2.0 ** -24) * mag
                              + 2.0 ** -24 * np.abs(want[k])), k


def test_softmax_xent_against_numpy(ctx):
    """loss = -(1/b) sum t log_softmax(z) and dz = (softmax(z) - t) / b, computed here from
    log_softmax in f64 (one-hot and probability targets); dz is the gradient of the loss (a central
    difference in f64 agrees) and each row of dz sums to ~0."""
    rng = np.random.default_rng(6)
    b, k = 70, 10                                   # two rounds of the kernel's 64 lanes
    z = (rng.standard_normal((b, k)) * 4).astype(np.float32)
    onehot = np.eye(k, dtype=np.float32)[rng.integers(0, k, b)]
    soft = rng.random((b, k))
    soft = (soft / soft.sum(axis=1, keepdims=True)).astype(np.float32)
    for t in (onehot, soft):
        got = run(ctx, "softmax_xent", {"z": z, "t": t})
        Z, T = z.astype(np.float64), t.astype(np.float64)

        def loss_of(Z, T=T):
            lsm = Z - Z.max(axis=1, keepdims=True)
            lsm = lsm - np.log(np.exp(lsm).sum(axis=1, keepdims=True))
            return -(T * lsm).sum() / b
        sm = np.exp(Z - Z.max(axis=1, keepdims=True))
        sm /= sm.sum(axis=1, keepdims=True)
        assert got["loss"].shape == (1,) and got["dz"].shape == (b, k)
        assert abs(got["loss"][0] - loss_of(Z)) <= 1e-5 * loss_of(Z)
        assert np.all(np.abs(got["dz"] - (sm - T) / b) <= 1e-6 / b)
        h, (i, j) = 1e-6, (3, 5)
        bump = np.zeros_like(Z)
        bump[i, j] = h
        assert abs((loss_of(Z + bump) - loss_of(Z - bump)) / (2 * h) - got["dz"][i, j]) <= 1e-5
        assert np.all(np.abs(got["dz"].astype(np.float64).sum(axis=1)) <= 1e-6)


def test_the_per_example_ops_match_their_shards_bit_for_bit(ctx):
    """What [sharding] per_example claims, on the device: the whole batch's output, rows [0, 2) and
    [2, 5), is the two shards' outputs."""
    rng = np.random.default_rng(8)
    x, dy = random_bf16(rng, 5, 2, 4, 4), random_bf16(rng, 5, 2, 4, 4)
    f = rng.standard_normal((5, 6)).astype(np.float32)
    w, bias = rng.standard_normal((3, 6)).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    g = rng.standard_normal((5, 3)).astype(np.float32)
    cases = [("relu_bf16", {"x": x}, {}, ["x"]), ("relu_bf16_vjp", {"x": x, "dy": dy}, {}, ["x", "dy"]),
             ("add_bf16", {"a": x, "b2": dy}, {}, ["a", "b2"]), ("global_avg_pool_bf16", {"x": x}, {}, ["x"]),
             ("global_avg_pool_bf16_vjp", {"dy": np.ascontiguousarray(f[:, :2])}, {"n": 3}, ["dy"]),
             ("linear", {"x": f, "w": w, "bias": bias}, {}, ["x"]), ("linear_input_vjp", {"dy": g, "w": w}, {}, ["dy"])]
    for name, inputs, params, batch in cases:
        assert list(load_package(NN / name).contract.sharding.batch) == batch
        whole = run(ctx, name, inputs, params)
        parts = [run(ctx, name, {k: (v[lo:hi] if k in batch else v) for k, v in inputs.items()}, params)
                 for lo, hi in ((0, 2), (2, 5))]
        for out, v in whole.items():
            assert np.array_equal(bits(v), bits(np.concatenate([p[out] for p in parts]))), (name, out)


def test_the_f32_twins_bit_for_bit(ctx):
    """At f32 (rnd = id): ReLU and its VJP keep the f32 word or give +0 (specials planted, f32
    subnormals and values no bf16 holds among them); the add is the correctly rounded f32 sum (numpy's
    f32 addition); the pool is its stated f32 order; the pool's VJP the f32 quotient — and none of them
    rounds to bf16 (the test data carry f32 bits below a bf16's)."""
    rng = np.random.default_rng(9)
    x = (rng.standard_normal((3, 2, 5, 5)) * np.exp2(rng.integers(-20, 21, (3, 2, 5, 5)))).astype(np.float32)
    flat = x.reshape(-1)
    flat[:SPECIALS.size] = SPECIALS
    flat[SPECIALS.size:SPECIALS.size + 2] = [2.0 ** -149, -(2.0 ** -140)]
    dy = (rng.standard_normal((3, 2, 5, 5))).astype(np.float32)
    y = run(ctx, "relu_f32", {"x": x})["y"]
    nan = np.isnan(x)
    assert np.array_equal(bits(y)[~nan], bits(np.where(x > 0, x, np.float32(0.0)))[~nan])
    assert np.all(np.isnan(y[nan])) and bits(y).reshape(-1)[1] == 0
    assert np.count_nonzero(bits(y) & 0xFFFF) > 20                    # f32 words no bf16 holds, kept
    dx = run(ctx, "relu_f32_vjp", {"x": x, "dy": dy})["dx"]
    assert np.array_equal(bits(dx), bits(np.where(x > 0, dy, np.float32(0.0))))
    a = (rng.standard_normal((4, 3, 6, 6)) * np.exp2(rng.integers(-30, 31, (4, 3, 6, 6)))).astype(np.float32)
    b2 = (rng.standard_normal((4, 3, 6, 6)) * np.exp2(rng.integers(-30, 31, (4, 3, 6, 6)))).astype(np.float32)
    assert np.array_equal(bits(run(ctx, "add_f32", {"a": a, "b2": b2})["y"]), bits(a + b2))
    for n in (1, 3, 8):
        xp = rng.standard_normal((5, 3, n, n)).astype(np.float32)
        model = np.add.accumulate(xp.reshape(5, 3, n * n), axis=2, dtype=np.float32)[..., -1] / np.float32(n * n)
        assert np.array_equal(bits(run(ctx, "global_avg_pool_f32", {"x": xp})["y"]), bits(model)), n
        g = rng.standard_normal((6, 4)).astype(np.float32)
        got = run(ctx, "global_avg_pool_f32_vjp", {"dy": g}, {"n": n})["dx"]
        assert np.array_equal(bits(got), bits(np.broadcast_to((g / np.float32(n * n))[:, :, None, None], got.shape)))


def test_the_f32_twins_match_their_shards_bit_for_bit(ctx):
    """[sharding] per_example at f32: the whole batch's output is its shards' (rows [0, 2) and [2, 5))."""
    rng = np.random.default_rng(10)
    x, dy = (rng.standard_normal((5, 2, 4, 4)).astype(np.float32) for _ in range(2))
    g = rng.standard_normal((5, 2)).astype(np.float32)
    cases = [("relu_f32", {"x": x}, {}), ("relu_f32_vjp", {"x": x, "dy": dy}, {}), ("add_f32", {"a": x, "b2": dy}, {}),
             ("global_avg_pool_f32", {"x": x}, {}), ("global_avg_pool_f32_vjp", {"dy": g}, {"n": 3})]
    for name, inputs, params in cases:
        batch = list(load_package(NN / name).contract.sharding.batch)
        assert batch == list(inputs)
        whole = run(ctx, name, inputs, params)
        parts = [run(ctx, name, {k: v[lo:hi] for k, v in inputs.items()}, params) for lo, hi in ((0, 2), (2, 5))]
        for out, v in whole.items():
            assert np.array_equal(bits(v), bits(np.concatenate([p[out] for p in parts]))), (name, out)


# ------------------------------------------------------------------ broken twins fail conformance
BROKEN = [
    ("relu_bf16", "passes negatives", {"forward.wgsl": [("if (kept(bitcast<u32>(v))) { out = v; }", "out = v;")]}),
    ("relu_bf16_vjp", "lets the gradient through at x = 0 (x >= 0)",
     {"forward.wgsl": [("(w & 0x80000000u) == 0u && w != 0u && w <= 0x7f800000u", "(w & 0x7fffffffu) == 0u || "
                        "((w & 0x80000000u) == 0u && w <= 0x7f800000u)")]}),
    ("add_bf16", "truncates the sum instead of rounding it",
     {"forward.wgsl": [("y[i] = bf16_round(a[i] + b2[i]);",
                        "y[i] = bitcast<f32>(bitcast<u32>(a[i] + b2[i]) & 0xffff0000u);")]}),
    ("global_avg_pool_bf16", "drops the last pixel", {"forward.wgsl": [("t < p.pixels;", "t + 1u < p.pixels;")]}),
    ("global_avg_pool_bf16_vjp", "divides by n, not n * n",
     {"op.toml": [("pixels: u32 = n * n }", "pixels: u32 = n * n, side: u32 = n }")],
      "forward.wgsl": [("    pixels: u32,\n}", "    pixels: u32,\n    side: u32,\n}"),
                       ("/ f32(p.pixels))", "/ f32(p.side))")]}),
    ("linear", "forgets the bias", {"forward.wgsl": [("y[i] = acc + bias[oi];", "y[i] = acc + 0.0 * bias[oi];")]}),
    ("linear_weight_grad", "misses the last batch row",
     {"forward.wgsl": [("for (var bi = 0u; bi < p.b; bi = bi + 1u) {\n            acc = acc + dy[bi * p.o + oi] * x",
                        "for (var bi = 0u; bi + 1u < p.b; bi = bi + 1u) {\n            acc = acc + dy[bi * p.o + oi] * x")]}),
    ("softmax_xent", "leaves out the 1/b", {"forward.wgsl": [("loss[0] = total / fb;", "loss[0] = total;"),
                                                             ("- t[base + j]) / fb;", "- t[base + j]);")]}),
    # the f32 twins: the same families, and an f32 add that rounds to bf16 (a bf16 op passed off as f32)
    ("relu_f32", "passes negatives", {"forward.wgsl": [("if (kept(bitcast<u32>(v))) { out = v; }", "out = v;")]}),
    ("relu_f32_vjp", "lets the gradient through at x = 0 (x >= 0)",
     {"forward.wgsl": [("(w & 0x80000000u) == 0u && w != 0u && w <= 0x7f800000u", "(w & 0x7fffffffu) == 0u || "
                        "((w & 0x80000000u) == 0u && w <= 0x7f800000u)")]}),
    ("add_f32", "truncates the sum to bf16",
     {"forward.wgsl": [("y[i] = a[i] + b2[i];", "y[i] = bitcast<f32>(bitcast<u32>(a[i] + b2[i]) & 0xffff0000u);")]}),
    ("global_avg_pool_f32", "drops the last pixel", {"forward.wgsl": [("t < p.pixels;", "t + 1u < p.pixels;")]}),
    ("global_avg_pool_f32_vjp", "divides by n, not n * n",
     {"op.toml": [("pixels: u32 = n * n }", "pixels: u32 = n * n, side: u32 = n }")],
      "forward.wgsl": [("    pixels: u32,\n}", "    pixels: u32,\n    side: u32,\n}"),
                       ("/ f32(p.pixels);", "/ f32(p.side);")]}),
]


@pytest.mark.slow
@pytest.mark.parametrize("name, why, edits", BROKEN, ids=[f"{b[0]}: {b[1]}" for b in BROKEN])
def test_a_broken_twin_of_each_family_fails_conformance_naming_its_case(ctx, tmp_path, name, why, edits):
    root = copy_package(NN / name, tmp_path / name, edits)
    pkg = load_package(root)
    ctx.trust.trust(pkg)
    rep = conform(ctx, pkg, stop_after=1)
    assert not rep.ok and rep.failures, f"{name} that {why} passed conformance"
    first = rep.failures[0].describe()
    assert first.startswith("case ") and rep.failures[0].output in first, first
    print(f"{name} that {why}: {first[:300]}")


@pytest.mark.slow
def test_an_add_that_never_rounds_is_refused_naming_the_element(ctx, tmp_path):
    """The f32 sum stored as it is: conformance refuses the op at its first case, naming the output
    element and the word that is no bf16 (docs/bf16.md)."""
    root = copy_package(NN / "add_bf16", tmp_path / "raw", {"forward.wgsl": [("y[i] = bf16_round(a[i] + b2[i]);",
                                                                              "y[i] = a[i] + b2[i];")]})
    pkg = load_package(root)
    ctx.trust.trust(pkg)
    with pytest.raises(StudioError) as e:
        conform(ctx, pkg, stop_after=1)
    assert "output 'y'[" in e.value.message and "is no bf16" in e.value.message and "bf16_round" in e.value.hint
