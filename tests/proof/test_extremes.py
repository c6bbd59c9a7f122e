"""The corpus derived from the whole contract (docs/verification.md, "The domain's extremes"):
every dim and parameter at its minimum, the next value, the one below its maximum and its maximum;
the workgroup boundaries along each axis; each axis at its own fold and large size with the other
dims above 1; a pairwise covering of the extremes; several seeds. Each class has a broken 2-D
kernel that now fails and a correct one that passes."""
from pathlib import Path

import numpy as np
import pytest
from conftest import _authored

from studio.engine.contract.package import load_package
from studio.engine.contract.signature import parse_signature
from studio.engine.errors import StudioError
from studio.engine.proof import pairwise
from studio.engine.proof.conformance import conform, report_lines, size_plan
from studio.engine.proof.corpus import SEEDS, axis_env, generate, regenerate

# y = 2 x over a matrix, one invocation per element, 8 x 8 workgroups; the rows fold into z
SCALE_WGSL = """\
struct D {
    rows: u32,
    cols: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> d: D;

@compute @workgroup_size(8, 8)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let row = gid.y + gid.z * nwg.y * 8u;
    let col = gid.x;
    if (row >= d.rows || col >= d.cols) {
        return;
    }
    let i = row * d.cols + col;
    y[i] = 2.0 * x[i];
}
"""

SCALE_TOML = '''\
id = "user/test/scale2d@1"
summary = "y = 2 x over a matrix"
signature = "scale2d(x: f32[rows, cols]RELATIONS) -> y: f32[rows, cols]"

[tolerance]
class = "ulp(1)"
category = "elementwise"

[kernel]
workgroup_size = [8, 8]
invocations = ["cols", "rows"]

[bindings]
text = """
@group(0) @binding(0) x : storage read f32[rows, cols]
@group(0) @binding(1) y : storage read_write f32[rows, cols]
@group(0) @binding(2) d : uniform { rows: u32 = rows, cols: u32 = cols }
"""

[backward]
text = "nondifferentiable"
'''


def scale_package(root: Path, kernel: str = SCALE_WGSL, relations: str = "") -> Path:
    root.mkdir(parents=True)
    (root / "op.toml").write_text(SCALE_TOML.replace("RELATIONS", f"; {relations}" if relations else ""))
    (root / "forward.wgsl").write_text(kernel)
    (root / "reference.py").write_text("def forward(x):\n    return 2 * x\n")
    _authored(root)
    return root


# ------------------------------------------------------------------ the generator (no device)

def test_the_pairwise_covering_meets_every_pair_and_names_the_excluded_ones():
    factors = {"a": [1, 2, 3], "b": ["x", "y", "z", "w"], "c": [0, 1], "d": [5, 6, 7]}
    rows = []

    def build(row):
        if row.get("a") == 3 and row.get("c") == 1:       # the "relations" exclude this pair
            return None
        rows.append({**{k: v[0] for k, v in factors.items()}, **row})
        return rows[-1]
    built, unreachable = pairwise.cover(factors, build)
    assert unreachable == [(("a", 3), ("c", 1))] and built == len(rows) <= 16      # 4 x 3 = 12 at least
    met = set().union(*(pairwise._pairs_of(r, list(factors)) for r in rows))
    assert pairwise.all_pairs(factors) - met == {(("a", 3), ("c", 1))}


def test_every_dim_and_param_reaches_its_domain_extremes():
    sig = parse_signature("f(x: f32[rows, cols]; k: u32 odd in [1, 31], cols <= 256, k <= rows) -> y: f32[rows, cols]")
    c = generate(sig, seeds=1, workgroups={"rows": 8, "cols": 8})
    assert {1, 255, 256, 7, 8, 9, 17} <= c.reach.values["cols"]           # min, max - 1, max, workgroup ± 1
    assert {1, 3, 29, 31} <= c.reach.values["k"]
    assert any(case.dims["cols"] == 256 and case.params["k"] == 31 for case in c.cases)   # a pair of maxima
    assert any("rows = max" in m["what"] and "no maximum" in m["why"] for m in c.reach.missing)
    assert c.reach.pairs > 50 and not c.reach.unreachable_pairs     # k = max next to rows = 7 is k = 7
    clip = generate(parse_signature("clip(x: f32[n]; lo: f32, hi: f32, lo <= hi) -> y: f32[n]"), seeds=1)
    assert "lo = max with hi = min" in clip.reach.unreachable_pairs          # the relation excludes it


def test_a_1d_corpus_keeps_its_version_3_cases_as_its_first():
    """The cases of the previous generator, in order and bit for bit, then the new ones."""
    sig = parse_signature("windowed_median(x: f32[n] finite; w: u32 odd in [1, 31], w <= n) -> y: f32[n - w + 1]")
    one, three = generate(sig, seeds=1), generate(sig, seeds=SEEDS, workgroups={"n": 64})
    legacy = [c for c in one.cases if "extreme" not in c.shape_kind]
    assert len(legacy) == 427 and all(
        (a.shape_kind, a.dims, a.params) == (b.shape_kind, b.dims, b.params)
        and all(np.array_equal(a.inputs[k], b.inputs[k], equal_nan=True) for k in a.inputs)
        for a, b in zip(legacy, three.cases))
    assert three.identity["seeds"] == [0, 1, 2] and {c.seed for c in three.cases} == {None, 1, 2}
    again = regenerate(sig, {**three.identity})
    assert again.hash == three.hash
    with pytest.raises(StudioError, match="corpus.seeds"):
        regenerate(sig, {**three.identity, "seeds": [0, 2]})


def test_a_2d_op_without_a_swept_size_at_1_plans_each_axis(ctx, tmp_path):
    """A 3 x 3 filter's signature (rows, cols >= 3) has no case with the other dim at 1: each axis
    still gets its own fold and large size, the other axis above 1."""
    pkg = load_package(scale_package(tmp_path / "s", relations="rows >= 3, cols >= 3"))
    plan = size_plan(pkg, ctx.device, 0, False)
    assert plan.sizes["fold@rows"] == 65536 * 8 + 1 and plan.sizes["fold@cols"] == 65536 * 8 + 1   # 65,537 workgroups
    assert plan.sizes["big@rows"] == 1_000_003 and plan.sizes["big@cols"] == 1_000_003
    assert not any("no swept size" in m["why"] for m in plan.not_reached)
    assert plan.invocations["fold@rows"]["fold"] == "y into z"
    assert axis_env(pkg.contract.signature, "rows") == {"cols": 3}       # the other axis above 1


# ------------------------------------------------------------------ broken 2-D kernels fail, the right one passes

@pytest.mark.slow
def test_a_2d_kernel_that_ignores_the_folded_row_index_fails(ctx, tmp_path):
    """rows, cols >= 3 (a 3 x 3 filter's signature): no case has the other dim at 1, so the corpus
    used to hold no large or fold case at all, and this kernel kept its receipt."""
    bad = SCALE_WGSL.replace("let row = gid.y + gid.z * nwg.y * 8u;", "let row = gid.y;")
    rep = conform(ctx, load_package(scale_package(tmp_path / "bad", bad, "rows >= 3, cols >= 3")), stop_after=1)
    assert not rep.ok and rep.failures[0].case.shape_kind == "fold", "\n".join(report_lines(rep))
    assert rep.failures[0].case.dims["cols"] >= 2 and rep.failures[0].kind == "unwritten"


@pytest.mark.slow
def test_a_kernel_wrong_only_at_a_dims_domain_maximum_fails(ctx, tmp_path):
    """A row stride capped at 255 (a scratch row too short by one): wrong only at cols = 256."""
    bad = SCALE_WGSL.replace("let i = row * d.cols + col;", "let i = row * min(d.cols, 255u) + col;")
    rep = conform(ctx, load_package(scale_package(tmp_path / "bad", bad, "cols <= 256")), stop_after=1)
    assert not rep.ok and rep.failures[0].case.dims["cols"] == 256, "\n".join(report_lines(rep))
    assert "extreme" in rep.failures[0].case.shape_kind


@pytest.mark.slow
def test_a_kernel_wrong_past_a_size_only_when_the_second_dim_is_2_or_more_fails(ctx, tmp_path):
    bad = SCALE_WGSL.replace("    y[i] = 2.0 * x[i];", "    var v = 2.0 * x[i];\n"
                             "    if (i >= 1000000u && d.cols >= 2u) { v = 0.0; }\n    y[i] = v;")
    rep = conform(ctx, load_package(scale_package(tmp_path / "bad", bad)), stop_after=1)
    assert not rep.ok, "\n".join(report_lines(rep))
    f = rep.failures[0].case
    assert f.dims["cols"] >= 2 and f.dims["rows"] * f.dims["cols"] > 1_000_000


@pytest.mark.slow
def test_a_correct_2d_kernel_passes_and_the_receipt_lists_what_it_reached(ctx, tmp_path):
    rep_pkg = load_package(scale_package(tmp_path / "ok", relations="cols <= 256"))
    rep = conform(ctx, rep_pkg)
    text = "\n".join(report_lines(rep))
    assert rep.ok, text
    axes = rep.coverage["axes"]
    assert axes["cols"]["max"] == 256 and {255, 256} <= set(axes["cols"]["extremes"])
    assert axes["rows"]["max"] >= 65537 * 8 and rep.coverage["seeds"] == [0, 1, 2]
    assert rep.coverage["fold"]["forward"] and "fold@rows" in rep.coverage["sizes"]
    assert "extremes  : cols:" in text and "pairs of extremes met" in text
    assert any(m["what"].startswith("forward 2-D launch fold along cols") and "256" in m["why"]
               for m in rep.coverage["not_reached"])
    from studio.engine.proof import receipts
    from studio.engine.services.actions import earn_conformance_receipt
    r = receipts.read_receipt(earn_conformance_receipt(rep_pkg, rep, full_corpus=True, seal=ctx.seal))
    assert r["corpus"]["seeds"] == [0, 1, 2] and r["coverage"]["axes"]["cols"]["max"] == 256
    assert receipts.verify_receipt(rep_pkg, r, ctx.device.profile.id, ctx.seal).status == "valid"
    one = {k: v for k, v in r.items() if k != "seal"}
    one["corpus"] = {**r["corpus"], "seeds": [0]}                     # earned over one seed: not enough
    v = receipts.verify_receipt(rep_pkg, ctx.seal.seal(one), ctx.device.profile.id, ctx.seal)
    assert v.status == "stale" and any("at least 3" in p for p in v.problems), v.problems


# ------------------------------------------------------------------ gradcheck and backward conformance at the extremes

ROWS_TOML = '''\
id = "user/test/rowscale@1"
summary = "y = 2 x over rows of at most 256 columns, with a device VJP"
signature = "rowscale(x: f32[rows, cols] in [-1e15, 1e15]; cols <= 256, rows <= 4096) -> y: f32[rows, cols]"

[tolerance]
class = "ulp(1)"
category = "elementwise"

[kernel]
workgroup_size = 64
invocations = "rows * cols"

[bindings]
text = """
@group(0) @binding(0) x : storage read f32[rows, cols]
@group(0) @binding(1) y : storage read_write f32[rows, cols]
@group(0) @binding(2) d : uniform { n: u32 = rows * cols, cols: u32 = cols }
"""

[backward]
text = 'vjp x: reference(vjp) on device("backward.wgsl")'
invocations = "rows * cols"
tolerance = "exact"
subgradient = "none needed: y = 2 x is linear"
bindings = """
@group(0) @binding(0) dy : storage read       f32[rows, cols]
@group(0) @binding(1) dx : storage read_write f32[rows, cols]
@group(0) @binding(2) d  : uniform { n: u32 = rows * cols, cols: u32 = cols }
"""
'''

ROWS_KERNEL = """\
struct D {
    n: u32,
    cols: u32,
}

@group(0) @binding(0) var<storage, read> IN: array<f32>;
@group(0) @binding(1) var<storage, read_write> OUT: array<f32>;
@group(0) @binding(2) var<uniform> d: D;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i >= d.n) { return; }
    OUT[i] = 2.0 * IN[i];
}
"""

ROWS_REFERENCE = '''\
import numpy as np


def forward(x):
    return 2 * x


def vjp(x, dy):
    g = 2 * np.asarray(dy)
    return {"x": WRONG}
'''


def rows_package(root: Path, backward: str = ROWS_KERNEL, vjp: str = "g") -> Path:
    root.mkdir(parents=True)
    (root / "op.toml").write_text(ROWS_TOML)
    (root / "forward.wgsl").write_text(ROWS_KERNEL.replace("IN", "x").replace("OUT", "y"))
    (root / "backward.wgsl").write_text(backward.replace("IN", "dy").replace("OUT", "dx"))
    (root / "reference.py").write_text(ROWS_REFERENCE.replace("WRONG", vjp))
    _authored(root)
    return root


WIDE_WRONG = "g * (1.5 if x.shape[1] > 200 else 1.0)"        # a VJP wrong only for rows wider than 200


@pytest.mark.slow
def test_gradcheck_reaches_a_dims_domain_maximum(ctx, tmp_path):
    from studio.engine.proof.gradcheck import gradcheck
    good = gradcheck(ctx, load_package(rows_package(tmp_path / "good")))
    assert good.verdict == "pass" and any(s["shapes"]["x"][1] == 256 for s in good.sites), good.verdict
    bad = gradcheck(ctx, load_package(rows_package(tmp_path / "bad", vjp=WIDE_WRONG)))
    assert bad.verdict == "fail"


@pytest.mark.slow
def test_backward_conformance_reaches_a_dims_domain_maximum(ctx, tmp_path):
    wrong = ROWS_KERNEL.replace("OUT[i] = 2.0 * IN[i];", "OUT[i] = select(2.0, 3.0, d.cols > 200u) * IN[i];")
    rep = conform(ctx, load_package(rows_package(tmp_path / "bad", wrong)), seeds=SEEDS)
    assert not rep.ok and rep.backward is not None and not rep.backward.ok, "\n".join(report_lines(rep))
    assert all(f.case.dims["cols"] > 200 for f in rep.backward.failures)


@pytest.mark.slow
def test_a_correct_device_vjp_passes_and_its_mutants_are_scored(ctx, tmp_path):
    rep = conform(ctx, load_package(rows_package(tmp_path / "good")), mutants=3)
    assert rep.ok, "\n".join(report_lines(rep))
    back = rep.mutation["backward"]
    assert back["total"] == 3 and back["killed"] >= 2 and all(k.startswith("backward/") for k in back["killed_by"])
    assert any(ln.startswith("  mutants   : backward:") for ln in report_lines(rep))


def test_fewer_than_three_seeds_is_refused_in_one_line(ctx):
    from studio.engine.services.actions import conform as conform_action
    from conftest import MEDIAN
    with pytest.raises(StudioError) as e:
        conform_action(ctx, load_package(MEDIAN), seeds=2)
    assert e.value.field == "--seeds" and "3 to 64 seeds" in e.value.message


@pytest.mark.slow
def test_a_weight_gradient_kernel_that_ignores_the_2d_fold_fails_backward_conformance(ctx, tmp_path):
    """The twin that survived an earlier round: core/signal/fir@1's backward with the workgroup's linear
    index taken from x alone (the fold into y ignored). The default corpus reaches the taps gradient
    past 65,535 workgroups through k's extreme, and the unwritten taps fail; the forward, untouched,
    passes (the shipped fir passes whole: tests/trust/test_publish.py's bar test)."""
    from conftest import BUILTINS, copy_package
    twin = copy_package(BUILTINS / "fir", tmp_path / "twin",
                        {"backward.wgsl": [("    let g = wid.x + wid.y * nwg.x;", "    let g = wid.x;")]})
    rep = conform(ctx, load_package(twin))
    text = "\n".join(report_lines(rep))
    assert not rep.ok and not rep.failures, text                      # every forward case passed
    back = rep.backward.failures
    assert back and all(f.case.dims["k"] > 32_768 for f in back), text
    assert "dtaps" in text and "never written" in text, text
