"""2-D and 3-D workgroups (docs/package-format.md, "Launch geometry"): `workgroup_size = [8, 8]`
with one `invocations` expression per axis, the fold applied per axis (an axis past the adapter's
per-dimension limit folds into the next unused one), and the fold's padded last row: the fold case
of the corpus always launches a workgroup past the end, so a kernel that does not guard it fails
conformance with a hint that names the fold."""
from pathlib import Path

import pytest
from conftest import _authored

from studio.engine.contract.package import load_package
from studio.engine.device.launch import geometry
from studio.engine.errors import StudioError
from studio.engine.proof.checker import check_package
from studio.engine.proof.conformance import conform, report_lines
from studio.engine.services.actions import earn_conformance_receipt

# the naive matrix multiply of the WebGPU compute tutorials: one invocation per output element
MATMUL_WGSL = """\
struct Dims {
    M: u32,
    K: u32,
    N: u32,
}

@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> c: array<f32>;
@group(0) @binding(3) var<uniform> dims: Dims;

@compute @workgroup_size(8, 8)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let row = gid.y;
    let col = gid.x;
    if (row >= dims.M || col >= dims.N) {
        return;
    }
    var sum = 0.0;
    for (var k = 0u; k < dims.K; k = k + 1u) {
        sum = sum + a[row * dims.K + k] * b[k * dims.N + col];
    }
    c[row * dims.N + col] = sum;
}
"""

BOUNDED = "m <= 524280, p <= 524280"        # 65535 workgroups of 8 per axis: no launch folds

OP_TOML = '''\
id = "user/test/matmul@1"
summary = "c = a @ b, one invocation per element of c"
signature = "matmul(a: f32[m, k] in [-1e15, 1e15], b: f32[k, p] in [-1e15, 1e15]; RELATIONS) -> c: f32[m, p]"

[tolerance]
class = "bound"
category = "contraction"

[kernel]
workgroup_size = [8, 8]
invocations = ["p", "m"]

[bindings]
text = """
@group(0) @binding(0) a : storage read       f32[m, k]
@group(0) @binding(1) b : storage read       f32[k, p]
@group(0) @binding(2) c : storage read_write f32[m, p]
@group(0) @binding(3) dims : uniform { M: u32 = m, K: u32 = k, N: u32 = p }
"""

[backward]
text = "nondifferentiable"
'''

REFERENCE = '''\
def forward(a, b):
    return a @ b
'''


def matmul_package(root: Path, kernel: str = MATMUL_WGSL, relations: str = BOUNDED,
                   toml: dict | None = None) -> Path:
    root.mkdir(parents=True)
    text = OP_TOML.replace("; RELATIONS", f"; {relations}" if relations else "")
    for old, new in (toml or {}).items():
        assert old in text
        text = text.replace(old, new)
    (root / "op.toml").write_text(text)
    (root / "forward.wgsl").write_text(kernel)
    (root / "reference.py").write_text(REFERENCE)
    _authored(root)
    return root


def test_the_fold_per_axis():
    one = geometry((64,), (65537 * 64,), 65535)                   # 1-D: x folds into y, one row padded
    assert one.grid == (32769, 2, 1) and one.folded == "x into y" and one.extra == 1
    flat = geometry((64,), (65535 * 64,), 65535)
    assert flat.grid == (65535, 1, 1) and flat.folded is None and flat.extra == 0
    two = geometry((8, 8), (16, 65537 * 8), 65535)                # 2-D: y folds into z
    assert two.grid == (2, 32769, 2) and two.folded == "y into z" and two.extra == 2
    assert "y into z" in two.describe() and "2 workgroup(s) past the end" in two.describe()
    x = geometry((8, 8), (65536 * 8, 8), 65535)                   # x folds into z, no padding needed
    assert x.grid == (32768, 1, 2) and x.folded == "x into z" and x.extra == 0
    assert geometry((4, 4, 4), (4, 4, 0), 65535).grid == (0, 0, 0)   # nothing to launch
    with pytest.raises(StudioError) as e:
        geometry((4, 4, 4), (65536 * 4, 4, 4), 65535, op="user/t/v@1")
    assert "no axis to fold into" in e.value.message and "bound the sizes" in e.value.hint
    with pytest.raises(StudioError) as e:
        geometry((8, 8), (65536 * 8, 65536 * 8), 65535)
    assert "x: 65,536, y: 65,536" in e.value.message


@pytest.mark.slow
def test_a_naive_2d_matmul_earns_a_receipt(ctx, tmp_path):
    pkg = load_package(matmul_package(tmp_path / "mm"))
    k = pkg.contract.kernel
    assert k.workgroup == (8, 8) and [str(a) for a in k.axes] == ["p", "m"] and k.workgroup_size == 64
    check = check_package(ctx, pkg)
    assert check.ok, [e.format() for e in check.errors]
    rep = conform(ctx, pkg)
    assert rep.ok, "\n".join(report_lines(rep))
    assert any("2-D launch fold" in m["what"] for m in rep.plan.not_reached)    # bounded: no run folds
    assert earn_conformance_receipt(pkg, rep, full_corpus=True, seal=ctx.seal) is not None


@pytest.mark.slow
def test_a_transposed_index_fails(ctx, tmp_path):
    bad = MATMUL_WGSL.replace("b[k * dims.N + col]", "b[col * dims.K + k]")
    rep = conform(ctx, load_package(matmul_package(tmp_path / "mm", bad)), stop_after=1)
    assert not rep.ok and rep.failures[0].output == "c"


def test_the_checker_compares_the_workgroup_per_axis(ctx, tmp_path):
    pkg = load_package(matmul_package(tmp_path / "one", toml={"workgroup_size = [8, 8]": "workgroup_size = 64",
                                                              'invocations = ["p", "m"]': 'invocations = "p * m"'}))
    errs = [e for e in check_package(ctx, pkg).errors if "@workgroup_size(8, 8)" in e.message]
    assert errs and "workgroup_size = [8, 8]" in errs[0].hint and errs[0].line == 12
    pkg = load_package(matmul_package(tmp_path / "four", toml={"workgroup_size = [8, 8]": "workgroup_size = [4, 16]"}))
    errs = [e for e in check_package(ctx, pkg).errors if "@workgroup_size(8, 8)" in e.message]
    assert errs and "(4, 16) per axis" in errs[0].message


@pytest.mark.parametrize("edit, words", [
    ({'invocations = ["p", "m"]': 'invocations = "p"'}, "invocations needs 2 expressions"),
    ({"workgroup_size = [8, 8]": "workgroup_size = [32, 16]"}, "512 invocations per workgroup"),
    ({"workgroup_size = [8, 8]": "workgroup_size = [1, 1, 128]"}, "axis z = 128 is outside [1, 64]"),
    ({'invocations = ["p", "m"]': 'invocations = ["p", "m +"]'}, "unexpected end of text"),
])
def test_a_bad_per_axis_launch_is_named_in_op_toml(tmp_path, edit, words):
    with pytest.raises(StudioError) as e:
        load_package(matmul_package(tmp_path / "mm", toml=edit))
    assert words in e.value.message and e.value.file.endswith("op.toml") and e.value.line is not None


FOLD_AWARE = MATMUL_WGSL.replace(
    "fn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n    let row = gid.y;",
    "fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {\n"
    "    let row = gid.y + gid.z * nwg.y * 8u;")


@pytest.mark.slow
def test_an_unbounded_2d_launch_folds_per_axis_and_the_kernel_must_index_it(ctx, tmp_path):
    """Unbounded, the corpus reaches m = 524,289 (65,537 workgroups of 8 rows): y folds into z with a
    padded row. The tutorial kernel misses the rows past the fold; the fold-aware one passes."""
    naive = load_package(matmul_package(tmp_path / "naive", relations=""))
    rep = conform(ctx, naive)
    assert not rep.ok and rep.fold and rep.fold["fold"] == "y into z" and rep.fold["extra"] >= 1
    text = "\n".join(report_lines(rep))
    assert rep.failures[0].case.shape_kind == "fold" and "folds that axis into z" in text, text
    assert "gid.y + gid.z * nwg.y" in text
    fixed = load_package(matmul_package(tmp_path / "fixed", FOLD_AWARE, relations=""))
    rep = conform(ctx, fixed, only_case=rep.failures[0].case.index)
    assert rep.ok, "\n".join(report_lines(rep))


# partial sums per workgroup (the first pass of a reduction): every element guarded, but the write
# of each workgroup's sum is not, which is right whenever the grid holds exactly the workgroups needed
BLOCK_SUMS_WGSL = """\
struct P {
    n: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> partial: array<f32>;
@group(0) @binding(2) var<uniform> p: P;
var<workgroup> s: array<f32, 64>;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>) {
    let g = wid.x + wid.y * nwg.x;
    let i = g * 64u + li;
    var v = 0.0;
    if (i < p.n) { v = x[i]; }
    s[li] = v;
    workgroupBarrier();
    for (var k = 32u; k > 0u; k = k >> 1u) {
        if (li < k) { s[li] = s[li] + s[li + k]; }
        workgroupBarrier();
    }
    if (li == 0u) { partial[g] = s[0]; }
}
"""

BLOCK_SUMS_TOML = '''\
id = "user/test/block_sums@1"
summary = "the sum of each block of 64 elements"
signature = "block_sums(x: f32[n] in [-1e30, 1e30]) -> partial: f32[cdiv(n, 64)]"

[tolerance]
class = "bound"
category = "reduction"

[kernel]
workgroup_size = 64
invocations = "n"

[bindings]
text = """
@group(0) @binding(0) x : storage read f32[n]
@group(0) @binding(1) partial : storage read_write f32[cdiv(n, 64)]
@group(0) @binding(2) p : uniform { n: u32 = n }
"""

[backward]
text = "nondifferentiable"
'''

BLOCK_SUMS_REFERENCE = '''\
import numpy as np


def forward(x):
    m = -(-x.shape[0] // 64)
    padded = np.zeros(m * 64, x.dtype)
    padded[:x.shape[0]] = x
    return padded.reshape(m, 64).sum(axis=1)
'''


@pytest.mark.slow
def test_the_fold_case_launches_a_workgroup_past_the_end_and_an_unguarded_write_fails(ctx, tmp_path):
    from studio.engine.proof.conformance import size_plan
    from studio.engine.proof.corpus import generate

    def package(name: str, kernel: str):
        root = tmp_path / name
        root.mkdir()
        (root / "op.toml").write_text(BLOCK_SUMS_TOML)
        (root / "forward.wgsl").write_text(kernel)
        (root / "reference.py").write_text(BLOCK_SUMS_REFERENCE)
        _authored(root)
        return load_package(root)
    pkg = package("unguarded", BLOCK_SUMS_WGSL)
    plan = size_plan(pkg, ctx.device, 0, False)
    assert plan.sizes["fold"] == 65536 * 64 + 1                   # 65,537 workgroups: an odd count
    fold = next(c for c in generate(pkg.contract.signature, sizes=plan.sizes).cases if c.shape_kind == "fold")
    small = next(c for c in generate(pkg.contract.signature, sizes=plan.sizes).cases if c.shape_kind == "random")
    assert conform(ctx, pkg, only_case=small.index).ok           # right while nothing folds
    rep = conform(ctx, pkg, only_case=fold.index)
    assert not rep.ok and rep.failures[0].kind == "out_of_range_write"
    assert rep.fold["grid"][:2] == [32769, 2] and rep.fold["extra"] == 1
    text = "\n".join(report_lines(rep))
    assert "launch is folded (x into y" in text and "1 workgroup(s) run past the end" in text, text
    assert "Launch geometry" in text and "number of workgroups needed" in text
    guarded = package("guarded", BLOCK_SUMS_WGSL.replace(
        "    let i = g * 64u + li;", "    if (g >= (p.n + 63u) / 64u) { return; }\n    let i = g * 64u + li;"))
    assert conform(ctx, guarded, only_case=fold.index).ok


VOLUME_WGSL = """\
struct D {
    a: u32,
    b: u32,
    c: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> d: D;

@compute @workgroup_size(4, 4, 4)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    if (gid.x >= d.c || gid.y >= d.b || gid.z >= d.a) { return; }
    let i = (gid.z * d.b + gid.y) * d.c + gid.x;
    y[i] = x[i] * 2.0;
}
"""

VOLUME_TOML = '''\
id = "user/test/double3@1"
summary = "y = 2 x over a volume, one invocation per voxel"
signature = "double3(x: f32[a, b, c]RELATIONS) -> y: f32[a, b, c]"

[tolerance]
class = "ulp(1)"
category = "elementwise"

[kernel]
workgroup_size = [4, 4, 4]
invocations = ["c", "b", "a"]

[bindings]
text = """
@group(0) @binding(0) x : storage read f32[a, b, c]
@group(0) @binding(1) y : storage read_write f32[a, b, c]
@group(0) @binding(2) d : uniform { a: u32 = a, b: u32 = b, c: u32 = c }
"""

[backward]
text = "nondifferentiable"
'''


def volume_package(root: Path, relations: str) -> Path:
    root.mkdir()
    (root / "op.toml").write_text(VOLUME_TOML.replace("RELATIONS", relations))
    (root / "forward.wgsl").write_text(VOLUME_WGSL)
    (root / "reference.py").write_text("def forward(x):\n    return 2 * x\n")
    _authored(root)
    return root


def test_a_3d_kernel_runs_per_axis_and_past_the_limit_is_refused(ctx, tmp_path):
    import numpy as np

    from studio.engine.grad.run import run_op
    pkg = load_package(volume_package(tmp_path / "v", ""))
    assert pkg.contract.kernel.workgroup == (4, 4, 4) and check_package(ctx, pkg).ok
    x = np.arange(3 * 5 * 7, dtype=np.float32).reshape(3, 5, 7)
    np.testing.assert_array_equal(run_op(ctx, pkg, {"x": x}, {})["y"], 2 * x)
    with pytest.raises(StudioError) as e:                        # 65,536 workgroups in x: no axis left
        run_op(ctx, pkg, {"x": np.zeros((1, 1, 65536 * 4), np.float32)}, {})
    assert "no axis to fold into" in e.value.message and "bound the sizes" in e.value.hint


@pytest.mark.slow
def test_a_bounded_3d_kernel_earns_a_receipt(ctx, tmp_path):
    pkg = load_package(volume_package(tmp_path / "v", "; a <= 4096, b <= 4096, c <= 4096"))
    rep = conform(ctx, pkg)
    assert rep.ok, "\n".join(report_lines(rep))
    assert any("3-D launch has no axis to fold into" in m["why"] for m in rep.plan.not_reached)


def test_an_override_constant_in_a_per_axis_launch_is_refused(tmp_path):
    root = matmul_package(tmp_path / "mm", toml={'invocations = ["p", "m"]': 'invocations = ["cdiv(p, RUN)", "m"]',
                                                 '@group(0) @binding(3)': 'override RUN: u32 = 64 tune [64, 128]\n'
                                                                          '@group(0) @binding(3)'})
    with pytest.raises(StudioError) as e:
        load_package(root)
    assert "per axis cannot name an override constant" in e.value.message and e.value.line == 11
