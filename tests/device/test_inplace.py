"""In-place bindings (docs/package-format.md, "In-place buffers"): `y : storage read_write f32[n]
-> y_out` is one buffer that holds the input y when the kernel starts and the output y_out when it
ends. The corpus gives the kernel y's values in that buffer, the reference sees y and returns
y_out, and the judge compares the buffer after the kernel with it. An axpy written as the usual
public kernel (`y[i] = a * x[i] + y[i]`) earns a receipt; one that forgets the old y fails."""
import textwrap
from pathlib import Path

import numpy as np
import pytest
from conftest import _authored

from studio.engine.contract.bindings import check_against_signature, parse_bindings
from studio.engine.contract.package import load_package
from studio.engine.contract.signature import parse_signature
from studio.engine.errors import StudioError
from studio.engine.grad.run import run_op
from studio.engine.proof.checker import check_package
from studio.engine.proof.conformance import conform, report_lines
from studio.engine.services.actions import earn_conformance_receipt

AXPY_WGSL = """\
// axpy as solver backends write it: y <- a * x + y, in place
struct Params {
    n: u32,
    a: f32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i >= p.n) { return; }
    y[i] = p.a * x[i] + y[i];
}
"""

OP_TOML = '''\
id = "user/test/axpy@1"
summary = "y <- a * x + y, in place"
signature = "axpy(x: f32[n] nonneg, y: f32[n] nonneg; a: f32 in [0, 4]) -> y_out: f32[n]"

[tolerance]
class = "ulp(2)"
category = "elementwise"

[kernel]
workgroup_size = 64
invocations = "n"

[bindings]
text = """
@group(0) @binding(0) x : storage read       f32[n]
@group(0) @binding(1) y : storage read_write f32[n] -> y_out
@group(0) @binding(2) p : uniform { n: u32 = n, a: f32 = a }
"""

[backward]
text = "vjp x, y: reference(vjp)"
'''

REFERENCE = '''\
def forward(x, y, *, a):
    return a * x + y


def vjp(x, y, dy_out, *, a):
    return {"x": a * dy_out, "y": dy_out}
'''


def axpy_package(root: Path, kernel: str = AXPY_WGSL, toml: str = OP_TOML) -> Path:
    root.mkdir(parents=True)
    (root / "op.toml").write_text(toml)
    (root / "forward.wgsl").write_text(kernel)
    (root / "reference.py").write_text(REFERENCE)
    _authored(root)
    return root


def test_the_descriptor_says_in_place_and_is_checked_against_the_signature():
    desc = parse_bindings(textwrap.dedent("""
        @group(0) @binding(0) x : storage read       f32[n]
        @group(0) @binding(1) y : storage read_write f32[n] -> y_out
    """))
    y = desc.by_name("y")
    assert y.writes == "y_out" and y.output == "y_out" and desc.in_place == {"y_out": y}
    assert str(y) == "@group(0) @binding(1) y : storage read_write f32[n] -> y_out"
    ok = parse_signature("axpy(x: f32[n], y: f32[n]) -> y_out: f32[n]")
    assert check_against_signature(desc, ok) == []
    # the output is missing, or has another shape: each named at the binding
    for sig, words in (("axpy(x: f32[n], y: f32[n]) -> z: f32[n]", "has no output 'y_out'"),
                       ("axpy(x: f32[n], y: f32[n]) -> y_out: f32[n + 1]", "the output f32[n + 1]"),
                       ("axpy(x: f32[n]) -> y_out: f32[n]", "has no input 'y'")):
        errs = check_against_signature(desc, parse_signature(sig))
        assert errs and words in errs[0].message and errs[0].line == 3, (sig, [e.message for e in errs])


@pytest.mark.parametrize("text, words, col", [
    ("@group(0) @binding(1) y : storage read f32[n] -> y_out", "but bound 'read'", 35),
    ("@group(0) @binding(1) y : storage read_write f32[n] -> y", "needs a name of its own", 56),
    ("@group(0) @binding(0) z : storage read_write f32[n]\n"
     "@group(0) @binding(1) y : storage read_write f32[n] -> z", "'z' is already bound", 56),
])
def test_a_bad_in_place_declaration_is_an_error_at_its_token(text, words, col):
    with pytest.raises(StudioError) as e:
        parse_bindings(text, file="op.toml", line=10)
    assert words in e.value.message and e.value.file == "op.toml" and e.value.col == col


@pytest.mark.slow
def test_axpy_in_place_earns_a_receipt(ctx, tmp_path):
    pkg = load_package(axpy_package(tmp_path / "axpy"))
    check = check_package(ctx, pkg)
    assert check.ok, [e.format() for e in check.errors]
    rep = conform(ctx, pkg)
    assert rep.ok, "\n".join(report_lines(rep))
    assert earn_conformance_receipt(pkg, rep, full_corpus=True, seal=ctx.seal) is not None


@pytest.mark.slow
def test_a_kernel_that_forgets_the_old_y_fails(ctx, tmp_path):
    root = axpy_package(tmp_path / "axpy", AXPY_WGSL.replace("p.a * x[i] + y[i]", "p.a * x[i]"))
    rep = conform(ctx, load_package(root), stop_after=1)
    assert not rep.ok and rep.failures[0].output == "y_out" and rep.failures[0].kind == "mismatch"


@pytest.mark.slow
def test_a_write_past_the_end_of_an_in_place_buffer_is_caught(ctx, tmp_path):
    root = axpy_package(tmp_path / "axpy", AXPY_WGSL.replace("y[i] = p.a * x[i] + y[i];",
                                                              "y[i] = p.a * x[i] + y[i]; if (i == 0u) { y[p.n] = 1.0; }"))
    rep = conform(ctx, load_package(root), stop_after=1)
    assert not rep.ok and rep.failures[0].kind == "out_of_range_write" and rep.failures[0].output == "y_out"


def test_run_is_input_to_output_and_leaves_the_input_alone(ctx, tmp_path):
    pkg = load_package(axpy_package(tmp_path / "axpy"))
    x = np.arange(5, dtype=np.float32)
    y = np.full(5, 10, np.float32)
    outs = run_op(ctx, pkg, {"x": x, "y": y}, {"a": 2.0})
    assert list(outs) == ["y_out"]
    np.testing.assert_array_equal(outs["y_out"], 2 * x + 10)
    np.testing.assert_array_equal(y, np.full(5, 10, np.float32))      # the caller's y is not the buffer
    # many cases in one submission: each case's buffer starts as its own y
    from studio.engine.device.execution import Case, run_cases
    res = run_cases(pkg, [Case({"x": x, "y": y + k}, {"a": 1.0}) for k in range(3)], device=ctx.device, guard=True)
    for k, r in enumerate(res):
        np.testing.assert_array_equal(r.outputs["y_out"], x + y + k)
        assert r.unwritten["y_out"].size == 0 and r.canary_hits["y_out"].size == 0


@pytest.mark.slow
def test_gradcheck_sees_the_op_as_a_function_of_its_inputs(ctx, tmp_path):
    """Defined, not refused: the engine never shows the caller the shared buffer (the input is
    copied in, the output read out), so the op is y_out = f(x, y) and its VJP gives dx and dy."""
    from studio.engine.services.actions import gradcheck
    pkg = load_package(axpy_package(tmp_path / "axpy"))
    out = gradcheck(ctx, pkg, receipt=False)
    assert out.verdict == "pass", out


def test_a_workflow_treats_it_as_input_to_output_and_keeps_the_input(ctx, tmp_path):
    """The workflow's resident path binds intermediates as they are on the device: an in-place
    binding gets a copy, so a source read by two steps is the same for both."""
    from studio.engine.workflow.run import run_workflow
    from studio.engine.workflow.spec import parse_workflow
    axpy_package(tmp_path / "axpy")
    text = '''[workflow]
name = "inplace"
[sources.x]
values = [1.0, 2.0, 3.0]
[sources.y]
values = [10.0, 20.0, 30.0]
[steps.first]
op = "./axpy"
inputs = { x = "x", y = "y" }
params = { a = 2.0 }
[steps.again]
op = "./axpy"
inputs = { x = "x", y = "y" }
params = { a = 1.0 }
[steps.chained]
op = "./axpy"
inputs = { x = "x", y = "first.y_out" }
params = { a = 1.0 }
'''
    (tmp_path / "w.toml").write_text(text)
    res = run_workflow(ctx, parse_workflow(text, file=str(tmp_path / "w.toml"), base=tmp_path), allow_unverified=True)
    np.testing.assert_array_equal(res.arrays["first.y_out"], [12, 24, 36])
    np.testing.assert_array_equal(res.arrays["again.y_out"], [11, 22, 33])      # y was not overwritten by first
    np.testing.assert_array_equal(res.arrays["chained.y_out"], [13, 26, 39])


def test_in_place_bindings_are_refused_in_a_device_vjp(tmp_path):
    toml = OP_TOML.replace('text = "vjp x, y: reference(vjp)"', '''text = 'vjp x: reference(vjp) on device("backward.wgsl")'
invocations = "n"
tolerance = "exact"
bindings = """
@group(0) @binding(0) dy_out : storage read_write f32[n] -> dx
"""''')
    root = axpy_package(tmp_path / "axpy", toml=toml)
    (root / "backward.wgsl").write_text(AXPY_WGSL)
    with pytest.raises(StudioError) as e:
        load_package(root)
    assert "in-place bindings are for the forward kernel" in e.value.message and e.value.line is not None


def test_the_studio_bindings_table_keeps_the_in_place_output():
    from studio.app.cells.bindings import compose, decompose
    text = ("@group(0) @binding(0) x : storage read f32[n]\n"
            "@group(0) @binding(1) y : storage read_write f32[n] -> y_out\n")
    rows = decompose(parse_bindings(text))
    assert rows[1][6] == "n -> y_out" and compose(rows) == text
