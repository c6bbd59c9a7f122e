"""The shipped CSR SpMV (core/sparse/spmv@1, index-valued inputs): it earns a receipt, its broken twins do
not, and every run path (the use case the CLI and the Studio's Run cell call through the worker,
the CLI itself, a workflow, a device-resident workflow input) refuses a bad index before dispatch."""
import subprocess
import sys

import numpy as np
import pytest
from conftest import BUILTINS, copy_package

from studio.engine.contract.package import load_package
from studio.engine.errors import StudioError
from studio.engine.precision import numpy_dtype
from studio.engine.proof.conformance import conform
from studio.engine.services import actions
from studio.engine.workflow.resident import Resident
from studio.engine.workflow.run import run_workflow
from studio.engine.workflow.spec import parse_workflow

SPMV = BUILTINS / "spmv"
LOOP = "for (var j = start; j < end; j = j + 1u) {"


def random_csr(rng, rows=300, cols=97, density=0.05):
    dense = rng.normal(size=(rows, cols)) * (rng.random((rows, cols)) < density)
    dense[7] = 0.0                                           # an empty row
    row_ptr = np.concatenate([[0], np.cumsum((dense != 0).sum(axis=1))]).astype(np.uint32)
    col = np.nonzero(dense)[1].astype(np.uint32)
    return dense.astype(np.float32), {"row_ptr": row_ptr, "col": col, "val": dense[dense != 0].astype(np.float32),
                                      "x": rng.normal(size=cols).astype(np.float32)}


@pytest.mark.slow
def test_spmv_passes_conformance_and_earns_a_receipt(ctx, tmp_path):
    root = copy_package(SPMV, tmp_path / "spmv")
    pkg = load_package(root)
    out = actions.conform(ctx, pkg)
    assert out.verdict == "pass" and out.receipt, out.lines
    assert out.fold["folded"]                                    # the many-rows case folds the launch
    assert [r.status for r in actions.verify_receipts(ctx, pkg).found] == ["valid"]


@pytest.mark.slow
@pytest.mark.parametrize("old, new, why", [
    ("sum = sum + val[j] * x[col[j]];", "sum = sum + val[j] * x[col[j] + 1u];", "reads col[j] + 1"),
    (LOOP, "for (var j = start; j + 1u < end; j = j + 1u) {", "stops at row_ptr[r + 1] - 1"),
])
def test_a_broken_twin_fails(ctx, tmp_path, old, new, why):
    pkg = load_package(copy_package(SPMV, tmp_path / "twin", {"forward.wgsl": [(old, new)]}))
    rep = conform(ctx, pkg)
    assert not rep.ok and rep.failures, why
    assert {f.kind for f in rep.failures} <= {"mismatch"}


def test_spmv_runs_and_matches_the_dense_product(ctx, device):
    dense, inputs = random_csr(np.random.default_rng(5))
    y = actions.run(ctx, load_package(SPMV), inputs=inputs, params={})["y"]
    want = dense.astype(np.float64) @ inputs["x"].astype(np.float64)
    assert y.shape == (300,) and y[7] == 0.0 and np.allclose(y, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name, bad, words", [
    ("col", lambda a: np.where(np.arange(a.size) == 5, 97, a), "col[5] = 97 is outside in [0, cols) = [0, 96]"),
    ("row_ptr", lambda a: np.where(np.arange(a.size) == 3, a[3] + 100, a), "is below row_ptr[3] = "),
    ("row_ptr", lambda a: np.concatenate([a[:-1], [a[-1] + 1]]), "but a csr(nnz) row pointer ends at nnz ="),
])
def test_run_refuses_a_bad_index_before_dispatch(ctx, device, name, bad, words):
    _, inputs = random_csr(np.random.default_rng(5))
    inputs[name] = bad(inputs[name].astype(np.int64)).astype(np.uint32)
    with pytest.raises(StudioError) as e:
        actions.run(ctx, load_package(SPMV), inputs=inputs, params={})
    assert words in e.value.message and e.value.field == name


@pytest.mark.slow
def test_the_cli_refuses_a_bad_index_in_one_line(tmp_path):
    _, inputs = random_csr(np.random.default_rng(5), rows=20, cols=9, density=0.3)
    inputs["col"][2] = 9
    args = []
    for k, v in inputs.items():
        np.save(tmp_path / f"{k}.npy", v)
        args += ["--input", f"{k}={tmp_path / f'{k}.npy'}"]
    res = subprocess.run([sys.executable, "-m", "studio.cli", "run", "core/sparse/spmv@1", *args],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "col[2] = 9 is outside in [0, cols) = [0, 8] (cols = 9)" in res.stderr


WORKFLOW = '''[workflow]
name = "sparse"
[sources.row_ptr]
values = [0, 2, 2, 3]
dtype = "u32"
[sources.col]
values = [0, COL, 1]
dtype = "u32"
[sources.val]
values = [1.0, 2.0, 3.0]
dtype = "f32"
[sources.x]
values = [1.0, 10.0, 100.0]
dtype = "f32"
[steps.y]
op = "core/sparse/spmv@1"
inputs = { row_ptr = "row_ptr", col = "col", val = "val", x = "x" }
'''


def test_a_workflow_checks_index_sources_and_device_inputs(ctx, device):
    res = run_workflow(ctx, parse_workflow(WORKFLOW.replace("COL", "2")), allow_unverified=True)
    assert res.value("y.y").tolist() == [201.0, 0.0, 30.0]
    with pytest.raises(StudioError, match=r"input 'col' from source 'col': col\[1\] = 3 is outside"):
        run_workflow(ctx, parse_workflow(WORKFLOW.replace("COL", "3")), allow_unverified=True)
    exe = Resident(ctx.device)                      # an index made on the device is read back and judged
    tensors = {k: exe.upload(np.asarray(v, numpy_dtype(dt)), dt, k) for k, v, dt in (
        ("row_ptr", [0, 2, 2, 3], "u32"), ("col", [0, 3, 1], "u32"), ("val", [1.0, 2.0, 3.0], "f32"),
        ("x", [1.0, 10.0, 100.0], "f32"))}
    with pytest.raises(StudioError, match=r"col\[1\] = 3 is outside"):
        exe.run(load_package(SPMV), tensors, {})
    assert exe.dispatches == 0


def test_an_example_with_a_bad_index_is_a_shortfall(tmp_path):
    from studio.engine.publish.metadata import read_fields
    assert read_fields(load_package(SPMV)).problems == []
    root = copy_package(SPMV, tmp_path / "ex", {"op.toml": [("col = [0, 2, 1]", "col = [0, 3, 1]")]})
    (problem,) = read_fields(load_package(root)).problems
    assert problem[0] == "examples[0].inputs" and "col[1] = 3 is outside in [0, cols) = [0, 2]" in problem[1]


def test_tuning_times_spmv_on_valid_indices():
    from studio.engine.contract.domains import check_values
    from studio.engine.proof.tuning import timing_cases
    pkg = load_package(SPMV)
    for case in timing_cases(pkg, {}, [1, 1000, 70_000]):
        check_values(pkg.contract.signature, case.inputs, case.params)


@pytest.mark.slow
def test_the_worker_run_the_studio_calls_refuses_a_bad_index():
    """The Studio's Run cell and `scellis run` submit the worker's "run": the same check, across the process."""
    from studio.engine.worker.client import WorkerClient
    _, inputs = random_csr(np.random.default_rng(6), rows=40, cols=11, density=0.2)
    client = WorkerClient(budget_s=60.0)
    try:
        y = client.call("run", target="core/sparse/spmv@1", inputs=inputs, params={}).outputs["y"]
        assert y.shape == (40,)
        inputs["col"][-1] = 11
        with pytest.raises(StudioError) as e:
            client.call("run", target="core/sparse/spmv@1", inputs=inputs, params={})
        assert e.value.field == "col" and f"col[{inputs['col'].size - 1}] = 11 is outside" in e.value.message
    finally:
        client.close()


def test_the_contraction_check_scales_values_not_indices(ctx, tmp_path):
    """Linearity is checked in val and x; row_ptr and col place terms and are not scaled (scaling
    them would read out of range). A reference not linear in val still breaks its category."""
    from studio.engine.proof.category import verify_category
    from studio.engine.proof.corpus import generate
    pkg = load_package(SPMV)
    cases = generate(pkg.contract.signature).cases[:12]
    assert verify_category(ctx.references, pkg, cases) == []
    bad = load_package(copy_package(SPMV, tmp_path / "sq", {"reference.py": [("val * x[col]", "val * val * x[col]")]}))
    (e,) = verify_category(ctx.references, bad, cases)
    assert "not linear in input 'val'" in e.message
