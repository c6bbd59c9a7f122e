"""One executor: a workflow's resident step runs through device/execution.py's
own code (the binding plan, uniform padding, buffer cap and the 2-D launch fold), with device
buffers in and out; workflow/resident.py binds and launches nothing itself. Real wgpu on lavapipe."""
import ast
from pathlib import Path

import numpy as np
import pytest
from conftest import BUILTINS

from studio.engine.contract.package import load_package
from studio.engine.device.execution import Case, _launch, forward_program, run_cases
from studio.engine.errors import StudioError
from studio.engine.workflow.resident import Resident
from studio.engine.workflow.run import run_workflow
from studio.engine.workflow.spec import parse_workflow

ENGINE = Path(__file__).resolve().parents[2] / "studio" / "engine"
N = 70_000                     # with one invocation per workgroup: 70,000 workgroups, past the 65,535 per dimension
# affine with @workgroup_size(1): its launch must fold into 2-D (35,000 x 2)
ONE = {"op__toml": [("workgroup_size = 64", "workgroup_size = 1")],
       "forward__wgsl": [("@workgroup_size(64)", "@workgroup_size(1)"), ("nwg.x * 64u", "nwg.x * 1u")]}
# the same kernel indexing as if no fold happened: the second row of workgroups rewrites the first
NO_FOLD = {"op__toml": ONE["op__toml"],
           "forward__wgsl": [("@workgroup_size(64)", "@workgroup_size(1)"), ("gid.x + gid.y * nwg.x * 64u", "gid.x")]}
PARAMS = {"scale": 0.5, "offset": 0.25}


def bits(a):
    return np.ascontiguousarray(a).view(np.uint32)


def single(pkg, x, device):
    return run_cases(pkg, [Case({"x": x}, dict(PARAMS))], device=device)[0].outputs["y"]


def in_a_workflow(ctx, op: Path, tmp_path, n: int = N):
    """The op as the second step of a workflow, fed by a signal generator's output on the device."""
    text = f'''[workflow]
name = "fold"
[steps.signal]
op = "{BUILTINS / 'spiky_signal'}"
params = {{ n = {n}, seed = 5 }}
[steps.scaled]
op = "{op}"
inputs = {{ x = "signal.y" }}
params = {{ scale = {PARAMS["scale"]}, offset = {PARAMS["offset"]} }}
'''
    p = tmp_path / "fold.toml"
    p.write_text(text)
    res = run_workflow(ctx, parse_workflow(text, file=str(p), base=tmp_path), allow_unverified=True)
    assert res.transfers["uploads"] == 0 and res.transfers["dispatches"] == 2     # resident: nothing went through the host
    return res.arrays["signal.y"], res.arrays["scaled.y"]


@pytest.mark.slow
def test_a_folded_launch_gives_the_same_bits_as_a_single_op_and_resident_in_a_workflow(ctx, pkg_copy, device, tmp_path):
    op = pkg_copy(BUILTINS / "affine", "affine1", **ONE)
    pkg = load_package(op)
    assert _launch(forward_program(pkg), {"n": N}, device)[:2] == (35_000, 2)      # the fold is reached
    x, resident = in_a_workflow(ctx, op, tmp_path)
    assert x.size == N and np.array_equal(bits(resident), bits(single(pkg, x, device)))
    assert np.array_equal(bits(resident), bits(np.float32(PARAMS["scale"]) * x + np.float32(PARAMS["offset"])))


@pytest.mark.slow
def test_a_kernel_that_ignores_the_fold_is_wrong_the_same_way_on_both_paths(ctx, pkg_copy, device, tmp_path):
    """The control: both paths launched 35,000 x 2 workgroups, so a kernel indexing by gid.x alone
    leaves the same tail unwritten (zero) in both; a path that did not fold could not launch at all."""
    op = pkg_copy(BUILTINS / "affine", "nofold", **NO_FOLD)
    x, resident = in_a_workflow(ctx, op, tmp_path)
    one = single(load_package(op), x, device)
    assert np.array_equal(bits(resident), bits(one))
    assert np.all(one[35_000:] == 0) and np.all(one[:35_000] != 0)


def test_both_paths_refuse_the_same_launch_and_the_same_buffer(ctx, pkg_copy, device, monkeypatch):
    """The launch limit and the buffer cap are one rule each: on a device whose profile says less
    (the real device, its limits lowered), a single run and a resident step refuse alike, and fold
    alike within them (the fast lane's test of the resident path)."""
    pkg = load_package(pkg_copy(BUILTINS / "affine", "affine1", **ONE))
    x = np.arange(300, dtype=np.float32)
    exe = Resident(device)
    t = exe.upload(x, "f32", "x")
    messages = []
    for limit, value in (("max-compute-workgroups-per-dimension", 16), ("max-storage-buffer-binding-size", 1024)):
        with monkeypatch.context() as m:
            m.setitem(device.profile.limits, limit, value)
            for run in (lambda: single(pkg, x, device), lambda: exe.run(pkg, {"x": t}, dict(PARAMS))):
                with pytest.raises(StudioError) as e:
                    run()
                messages.append(e.value.message)
    assert messages[0] == messages[1] and "limit" in messages[0]
    assert messages[2] == messages[3] and "the device binds at most 1024" in messages[2]
    # and within the limits both run: 300 workgroups of one invocation fold into 20 x 15 on a 20-wide device
    with monkeypatch.context() as m:
        m.setitem(device.profile.limits, "max-compute-workgroups-per-dimension", 20)
        y = exe.read([exe.run(pkg, {"x": t}, dict(PARAMS))["y"]])[0]
    assert np.array_equal(bits(y), bits(single(pkg, x, device)))


# ------------------------------------------------------------------ nothing of the executor outside it
BINDING_CALLS = {"create_bind_group", "set_bind_group", "dispatch_workgroups", "uniform_bytes",
                 "begin_compute_pass", "create_buffer", "create_buffer_with_data", "element_count"}
# where the engine may build bind groups and launch: the executor (execution.py, with its device-buffer
# face buffers.py), the layout validator's probe and the device's own workgroup-memory clearing kernel
ALLOWED = {"device/execution.py", "device/buffers.py", "device/layout.py", "device/device.py"}


def executor_calls(path: Path) -> set[str]:
    """The binding and launch calls a module makes, and whether it imports wgpu."""
    found = set()
    text = path.read_text()
    if not any(w in text for w in (*BINDING_CALLS, "wgpu", "BufferUsage", "layout")):
        return found
    for node in ast.walk(ast.parse(text, str(path))):
        if isinstance(node, ast.Attribute) and node.attr in BINDING_CALLS:
            found.add(node.attr)
        if isinstance(node, ast.Attribute) and node.attr in ("wgpu", "BufferUsage"):
            found.add(node.attr)
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
            if any(n == "wgpu" or n.startswith("wgpu.") or n.endswith("layout") for n in names):
                found.add("import " + ",".join(n for n in names if n))
    return found


def test_the_workflow_path_binds_and_launches_nothing_itself():
    assert executor_calls(ENGINE / "workflow" / "resident.py") == set()
    outside = {str(p.relative_to(ENGINE)): sorted(c) for p in sorted(ENGINE.rglob("*.py"))
               if str(p.relative_to(ENGINE)) not in ALLOWED and (c := executor_calls(p) & {
                   "create_bind_group", "set_bind_group", "dispatch_workgroups", "uniform_bytes"})}
    assert outside == {}


def test_the_executor_check_can_fail(tmp_path):
    """The check on the module as it was before the one executor: its own bind groups, padding and fold."""
    bad = tmp_path / "resident.py"
    bad.write_text("from ..device.layout import layout_groups\n"
                   "def dispatch(self, program, env, desc, dev, cp, layouts, entries):\n"
                   "    wgpu = self.device.wgpu\n"
                   "    data = desc.bindings[0].uniform_bytes(env)\n"
                   "    buf = dev.create_buffer_with_data(data=data, usage=wgpu.BufferUsage.UNIFORM)\n"
                   "    cp.set_bind_group(0, dev.create_bind_group(layout=layouts[0], entries=entries))\n"
                   "    cp.dispatch_workgroups(2, 1)\n")
    assert executor_calls(bad) >= {"uniform_bytes", "create_bind_group", "set_bind_group", "dispatch_workgroups",
                                   "create_buffer_with_data", "wgpu", "BufferUsage"}
    assert any(c.startswith("import") for c in executor_calls(bad))
