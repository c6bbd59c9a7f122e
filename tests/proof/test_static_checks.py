"""Static checks at line:col: a barrier reached after a non-uniform return (an
error: WGSL's uniformity rule, which the pinned wgpu/naga does not enforce) and a storage read at
an invocation-derived index with no bounds guard before it (a warning). Each check has the kernel
that trips it and a clean one; no shipped op trips either (proof/kernel_flow.py)."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import copy_package
from studio.engine.contract.package import load_package
from studio.engine.errors import StudioError
from studio.engine.proof.checker import check_package
from studio.engine.proof.kernel_flow import check_kernel_flow
from studio.engine.resources import ROOT

PORTING = Path(__file__).parents[1] / "fixtures" / "porting"
UNIFORMITY = "every barrier is reached in uniform control flow (WGSL's uniformity rule)"
PORTABLE = "lavapipe returns 0 here; other GPUs may not"

REDUCTION_BODY = """
@group(0) @binding(0) var<storage, read> x: array<u32>;
@group(0) @binding(1) var<storage, read_write> y: array<u32>;
var<workgroup> acc: array<u32, 256>;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let i = gid.x;
%s
    for (var s = 128u; s > 0u; s >>= 1u) {
        if (t < s) { acc[t] += acc[t + s]; }
        workgroupBarrier();
    }
    if (t == 0u) { y[0] = acc[0]; }
}
"""
EARLY_RETURN = """    if (i >= arrayLength(&x)) { return; }
    acc[t] = x[i];
    workgroupBarrier();"""
GUARDED_LOAD = """    var v = 0u;
    if (i < arrayLength(&x)) { v = x[i]; }
    acc[t] = v;
    workgroupBarrier();"""


def flow(source: str, entry: str = "main"):
    return check_kernel_flow(source, entry, kernel_file="k.wgsl")


def test_the_pinned_naga_accepts_an_early_return_before_a_barrier(device):
    """Why the check is the product's own: wgpu/naga compiles the faulty kernel without a word."""
    device.compile(REDUCTION_BODY % EARLY_RETURN, file="k.wgsl")


def test_barrier_after_a_non_uniform_return_is_an_error_at_its_line_and_col():
    errors, _ = flow(REDUCTION_BODY % EARLY_RETURN)
    assert [(e.line, e.col) for e in errors] == [(10, 5), (13, 9)]        # both barriers after the return
    e = errors[0]
    assert "workgroupBarrier() is reached after a non-uniform 'return'" in e.message
    assert "uniformity rule" in e.message
    assert [(r.line, r.col) for r in e.related] == [(8, 33)]              # the return it follows
    assert "return before the barrier" in e.hint


def test_a_guarded_load_before_the_barrier_passes():
    assert flow(REDUCTION_BODY % GUARDED_LOAD) == ([], [])


@pytest.mark.parametrize("body, where", [
    ("    if (t < 128u) { acc[t] = x[i]; workgroupBarrier(); }", (8, 36)),     # a barrier inside the branch
    ("    if (t == 0u) { storageBarrier(); }", (8, 20)),
    ("    var k = 0u;\n    if (t > 3u) { k = 1u; }\n    if (k == 1u) { workgroupBarrier(); }", (10, 20)),
    ("    for (var j = t; j < 256u; j += 64u) { workgroupBarrier(); }", (8, 43)),   # trip count per invocation
])
def test_a_barrier_in_non_uniform_control_flow_is_an_error(body, where):
    errors, _ = flow(REDUCTION_BODY % body)
    assert errors and (errors[0].line, errors[0].col) == where
    assert "non-uniform control flow" in errors[0].message


def test_a_non_uniform_break_before_a_barrier_in_the_loop_is_an_error():
    body = "    for (var s = 0u; s < 8u; s++) {\n        if (t > s) { break; }\n        workgroupBarrier();\n    }"
    errors, _ = flow(REDUCTION_BODY % body)
    assert [(e.line, e.col) for e in errors] == [(10, 9)] and "'break'" in errors[0].message
    assert [(r.line, r.col) for r in errors[0].related] == [(9, 22)]      # the loop after it reconverges


def test_a_helper_that_holds_the_barrier_counts_at_its_call():
    src = (REDUCTION_BODY % EARLY_RETURN.replace("workgroupBarrier();", "sync();")) + \
        "fn sync() { workgroupBarrier(); }\n"
    errors, _ = flow(src)
    assert errors and errors[0].line == 10 and errors[0].message.startswith("sync()")


def test_uniform_branches_loops_and_workgroup_id_are_fine():
    src = REDUCTION_BODY % GUARDED_LOAD
    src = src.replace("@builtin(local_invocation_index) t: u32)",
                      "@builtin(local_invocation_index) t: u32, @builtin(workgroup_id) w: vec3<u32>)")
    src = src.replace("    for (var s", "    if (w.x == 0u) { workgroupBarrier(); }\n    for (var s")
    assert flow(src) == ([], [])


AXPY = """struct P { a: f32, n: u32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> p: P;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
%s    y[i] = p.a * x[i] + y[i];
}
"""


def test_an_unguarded_read_is_a_portability_warning_at_its_line_and_col():
    errors, warnings = flow(AXPY % "")
    assert errors == []
    assert [(w.line, w.col) for w in warnings] == [(8, 18), (8, 25)]      # x[i] and y[i]; the write y[i] is not a read
    assert all(PORTABLE in w.message for w in warnings)
    assert "'x'" in warnings[0].message and "(i)" in warnings[0].message
    assert "arrayLength(&x)" in warnings[0].hint


@pytest.mark.parametrize("guard", [
    "    if (i >= p.n) { return; }\n",
    "    if (i >= arrayLength(&y)) { return; }\n",
    "    if (gid.x + gid.y * nwg.x * 64u >= p.n) { return; }\n",
])
def test_a_guard_before_the_read_clears_the_warning(guard):
    assert flow(AXPY % guard) == ([], [])


def test_a_guard_around_the_read_clears_the_warning_and_one_after_it_does_not():
    around = AXPY.replace("%s    y[i] = p.a * x[i] + y[i];", "    if (i < arrayLength(&y)) { y[i] = p.a * x[i] + y[i]; }")
    assert flow(around) == ([], [])
    after = AXPY % "    let v = x[i];\n    if (i >= p.n) { return; }\n"
    assert [(w.line, w.col) for w in flow(after)[1]] == [(8, 13)]


def test_loop_bounds_and_clamps_are_guards():
    src = AXPY.replace("%s    y[i] = p.a * x[i] + y[i];",
                       "    let start = min(i * 4u, p.n);\n    var s = 0.0;\n"
                       "    for (var j = i; j < p.n; j += 64u) { s += x[j]; }\n"
                       "    for (var k = start; k < start + 4u; k++) { s += x[k]; }\n"
                       "    let w = i % p.n;\n    s += x[w] + x[start];\n    if (i < p.n) { y[i] = s; }")
    assert flow(src) == ([], [])


def test_no_shipped_kernel_trips_either_check():
    """No false alarm on any shipped op or example: every WGSL file of every builtin and shipped
    example, at its declared entry (the one broken example that does read past the end aside)."""
    kernels = 0
    for manifest in sorted((ROOT / "ops").rglob("op.toml")) + sorted((ROOT / "examples").rglob("op.toml")):
        if manifest.parent.name == "no_guard":
            continue
        pkg = load_package(manifest.parent)
        c = pkg.contract
        for spec, source, path in ((c.kernel, pkg.kernel_source, pkg.kernel_path),
                                   (c.backward_kernel, pkg.backward_source, pkg.backward_path)):
            if spec is not None and source:
                kernels += 1
                assert check_kernel_flow(source, spec.entry, kernel_file=path) == ([], []), path
    assert kernels >= 20


def test_the_shipped_no_guard_example_earns_the_warning():
    """The broken example kept for conformance reads x past the end; the static check says so first."""
    pkg = load_package(ROOT / "examples" / "broken_medians" / "no_guard")
    _, warnings = check_kernel_flow(pkg.kernel_source, "main", kernel_file=pkg.kernel_path)
    assert [(w.line, w.col) for w in warnings] == [(19, 18)] and PORTABLE in warnings[0].message


def test_check_refuses_the_reduction_with_the_early_return(ctx, tmp_path, device):
    """Through the checker `scellis check` and the Studio's problems use: an error at the barrier."""
    root = copy_package(PORTING / "u32_sum", tmp_path / "u32_sum")
    shutil.copy(PORTING / "originals" / "u32_sum.wgsl", root / "forward.wgsl")
    rep = check_package(ctx, load_package(root))
    assert not rep.ok and UNIFORMITY not in rep.passed
    e = rep.errors[0]
    assert (Path(e.file).name, e.line, e.col) == ("forward.wgsl", 22, 5)
    assert "non-uniform 'return'" in e.message and e.related[0].line == 19
    assert StudioError.from_dict(rep.to_json()["errors"][0]).format().startswith(f"{e.file}:22:5: ")


def test_check_passes_the_ported_reduction(ctx, device):
    rep = check_package(ctx, load_package(PORTING / "u32_sum"))
    assert rep.ok and UNIFORMITY in rep.passed and rep.warnings == []


def test_check_warns_on_the_unguarded_read_and_still_passes(ctx, tmp_path, device):
    root = copy_package(PORTING / "partial_sums", tmp_path / "partial_sums", {"forward.wgsl": [
        ("    if (i < params.n) {\n        v = input[i];\n    }", "    v = input[i];")]})
    rep = check_package(ctx, load_package(root))
    assert rep.ok                                   # a warning, not an error
    assert [(Path(w.file).name, w.line, w.col) for w in rep.warnings] == [("forward.wgsl", 20, 9)]
    assert PORTABLE in rep.warnings[0].message


@pytest.mark.slow
def test_scellis_check_prints_the_error_and_the_warning_at_line_and_col(tmp_path):
    bad = copy_package(PORTING / "u32_sum", tmp_path / "u32_sum")
    shutil.copy(PORTING / "originals" / "u32_sum.wgsl", bad / "forward.wgsl")
    res = subprocess.run([sys.executable, "-m", "studio.cli", "check", str(bad)], capture_output=True, text=True)
    assert res.returncode == 1, res.stdout + res.stderr
    assert f"FAIL  {bad}/forward.wgsl:22:5: workgroupBarrier() is reached after a non-uniform 'return'" in res.stdout
    assert f"{bad}/forward.wgsl:19:9: this 'return' depends on the invocation" in res.stdout
    warned = copy_package(PORTING / "partial_sums", tmp_path / "partial_sums", {"forward.wgsl": [
        ("    if (i < params.n) {\n        v = input[i];\n    }", "    v = input[i];")]})
    res = subprocess.run([sys.executable, "-m", "studio.cli", "check", str(warned)], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"warn  {warned}/forward.wgsl:20:9: read of 'input'" in res.stdout and PORTABLE in res.stdout
    assert "Traceback" not in res.stdout + res.stderr


def test_a_non_uniform_break_if_in_a_loop_with_a_barrier_is_an_error():
    src = ("@compute @workgroup_size(64)\nfn main(@builtin(local_invocation_index) t: u32) {\n    var s = 0u;\n"
           "    loop {\n        workgroupBarrier();\n        s += 1u;\n        continuing {\n            break if s > t;\n"
           "        }\n    }\n}\n")
    errors, _ = flow(src)
    assert [(e.line, e.col) for e in errors] == [(5, 9)] and "'break if'" in errors[0].message
    assert flow(src.replace("break if s > t;", "break if s > 8u;")) == ([], [])


def test_any_text_is_judged_without_raising_and_in_bounded_time():
    """The Studio checks as the author types: a half-written kernel, deep nesting and stray brackets
    give findings or none, never an exception; nested loops are not walked 2^depth times."""
    sources = [(PORTING / n / "forward.wgsl").read_text() for n in ("u32_sum", "partial_sums", "matmul")]
    for s in sources:
        for cut in range(0, len(s), 13):
            flow(s[:cut])
    for text in ("fn main() {" + "{" * 3000 + "}" * 3000 + "}", "fn main() {" + "if (a) {" * 3000,
                 "fn main() {" + "(" * 5000 + ";}", "fn main() { ) ] } return; workgroupBarrier(",
                 "fn main(@builtin(local_invocation_index) t: u32) {" + "for (var i = 0u; i < t; i++) {" * 40
                 + "workgroupBarrier();" + "}" * 40 + "}"):
        errors, warnings = flow(text)
        assert isinstance(errors, list) and isinstance(warnings, list)


def test_builtins_passed_in_a_struct_are_followed():
    src = ("struct Inputs {\n    @builtin(global_invocation_id) gid: vec3<u32>,\n"
           "    @builtin(local_invocation_index) lid: u32,\n}\n"
           "@group(0) @binding(0) var<storage, read> x: array<u32>;\n"
           "@group(0) @binding(1) var<storage, read_write> y: array<u32>;\n"
           "@compute @workgroup_size(64)\nfn main(in: Inputs) {\n"
           "    if (in.gid.x >= arrayLength(&x)) { return; }\n    workgroupBarrier();\n    y[0] = x[in.lid];\n}\n")
    errors, warnings = flow(src)
    assert [(e.line, e.col) for e in errors] == [(10, 5)]
    # names are judged whole (a documented limit): comparing in.gid.x counts as a guard of in.lid too
    assert flow(src.replace("    workgroupBarrier();\n", "")) == ([], [])
