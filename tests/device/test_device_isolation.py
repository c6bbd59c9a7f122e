"""No data crosses between packages through the device.

WebGPU promises that `var<workgroup>` memory starts zeroed; Mesa's lavapipe (22.3) breaks the
promise: a kernel reads what the previous kernel on the same executor thread left there. Two
real packages written here: A fills a large workgroup array with a marker, B copies its own
never-written workgroup array to its output. B must see nothing of A's marker (and nothing at
all: zeros), in the engine (Device.isolate before each package switch) — while on the same driver
without the clear, the leak shows."""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from studio.engine.context import Context
from studio.engine.contract.package import load_package
from studio.engine.device.device import (
    Device,
    llvmpipe_executors,
    zeroes_workgroup_memory,
)
from studio.engine.errors import StudioError
from studio.engine.grad.run import run_op
from studio.engine.services import actions

MARK = 0xA5A5                        # A's marker, in the high half of every word it writes
GROUPS = 256                         # A's workgroups: enough to reach every executor thread

_TOML = '''id = "user/test/{name}@1"
summary = "{summary}"
license = "Apache-2.0"
authors = ["Scellis Studio tests"]
signature = "{name}(; n: u32 in [1, 4294967295]) -> y: u32[n]"

[tolerance]
class = "exact"
category = "integer"
justification = "u32 words copied, no arithmetic on values"

[reference]
file = "reference.py"
forward = "forward"

[kernel]
file = "forward.wgsl"
entry = "main"
workgroup_size = 64
invocations = "n"

[bindings]
text = """
@group(0) @binding(0) y : storage read_write u32[n]
@group(0) @binding(1) p : uniform {{ n: u32 = n }}
"""

[backward]
text = "nondifferentiable"
'''

_HEAD = '''struct Params {{
    n: u32,
}}

@group(0) @binding(0) var<storage, read_write> y: array<u32>;
@group(0) @binding(1) var<uniform> p: Params;
var<workgroup> {var}: array<u32, {words}>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(local_invocation_index) li: u32,
        @builtin(num_workgroups) nwg: vec3<u32>) {{
    let i = gid.x + gid.y * nwg.x * 64u;
'''

WRITER = _HEAD + '''    // fill the whole workgroup array with the marker, then read one word of it back
    for (var j = li; j < {words}u; j += 64u) {{
        secret[j] = 0x{mark:04X}0000u | j;
    }}
    workgroupBarrier();
    if (i < p.n) {{
        y[i] = secret[(i * 7u) % {words}u];
    }}
}}
'''

READER = _HEAD + '''    // never written: whatever is in it comes from somewhere else
    if (i < p.n) {{
        y[i] = leftover[i % {words}u];
    }}
}}
'''

_REF = '''import numpy as np


def forward(*, n):
    return np.zeros(int(n), dtype=np.uint32)
'''


def words(device) -> int:
    return int(device.profile.limits["max-compute-workgroup-storage-size"]) // 4


def write_package(root: Path, name: str, summary: str, kernel: str):
    root.mkdir(parents=True)
    (root / "op.toml").write_text(_TOML.format(name=name, summary=summary))
    (root / "forward.wgsl").write_text(kernel)
    (root / "reference.py").write_text(_REF)
    return load_package(root)


@pytest.fixture
def pair(tmp_path, device):
    w = words(device)
    a = write_package(tmp_path / "a", "wg_writer", "fills its workgroup memory with a marker",
                      WRITER.format(var="secret", words=w, mark=MARK))
    b = write_package(tmp_path / "b", "wg_reader", "copies its never-written workgroup memory out",
                      READER.format(var="leftover", words=w))
    return a, b, w


def _a_then_b(ctx, a, b, w) -> tuple[np.ndarray, np.ndarray]:
    ya = run_op(ctx, a, {}, {"n": 64 * GROUPS})["y"]
    yb = run_op(ctx, b, {}, {"n": 4 * w})["y"]
    return ya, yb


def _marked(y: np.ndarray) -> int:
    return int(np.count_nonzero((y >> 16) == MARK))


def test_without_the_clear_another_packages_workgroup_memory_leaks_on_this_driver(pair, device, hosts):
    """The fault, reproduced: the same two kernels on a device that does not clear."""
    a, b, w = pair
    if zeroes_workgroup_memory(device.profile):
        pytest.skip(f"{device.profile.summary} zeroes workgroup memory itself (no clear needed)")
    raw = Device(isolate_workgroups=False)
    ctx = Context.open(device=raw, hosts=hosts)
    try:
        seen = []
        for _ in range(50):                               # a round shows it unless the OS kept
            ya, yb = _a_then_b(ctx, a, b, w)              # A's and B's threads apart (busy machine)
            assert _marked(ya) == ya.size                   # A's marker really was in its memory
            seen.append(_marked(yb))
            if seen[-1]:
                break
        assert seen[-1] > 0, f"B saw none of A's marker in {len(seen)} rounds: the leak did not reproduce"
        print(f"\nwithout the clear: B read {seen[-1]} of {4 * w} words of A's marker (round {len(seen)})")
    finally:
        device.clear_workgroup_memory()   # both devices run on the same lavapipe threads


def test_a_kernel_reads_nothing_of_another_packages_workgroup_memory(pair, ctx):
    a, b, w = pair
    for _ in range(5):
        ya, yb = _a_then_b(ctx, a, b, w)
        assert _marked(ya) == ya.size
        assert _marked(yb) == 0
        assert not yb.any(), "B read words that are neither A's marker nor zero"


def test_kernels_of_one_package_in_a_row_clear_nothing(pair, ctx):
    a, b, w = pair
    dev = ctx.device
    run_op(ctx, b, {}, {"n": 4 * w})
    n0 = dev.workgroup_clears
    for _ in range(3):
        run_op(ctx, b, {}, {"n": 4 * w})
    assert dev.workgroup_clears == n0
    run_op(ctx, a, {}, {"n": 64})
    run_op(ctx, b, {}, {"n": 4 * w})
    assert dev.workgroup_clears == n0 + (2 if dev.isolates_workgroups else 0)


@pytest.mark.slow
def test_a_clear_counts_only_when_every_executor_ran_it(pair, hosts):
    """The check that a clear reached every executor thread can fail: with one executor more
    than the driver has, its workgroups can never all run at once, and no kernel runs."""
    _, b, w = pair
    dev = Device()
    if not dev.isolates_workgroups:
        pytest.skip(f"{dev.profile.summary} zeroes workgroup memory itself")
    assert dev.executors == llvmpipe_executors() >= 1
    assert dev.clear_workgroup_memory() >= 1
    over = Device()
    over.executors += 1
    t0 = time.monotonic()
    with pytest.raises(StudioError, match="could not clear the device's workgroup memory") as info:
        run_op(Context.open(device=over, hosts=hosts), b, {}, {"n": 4 * w})
    assert info.value.hint and f"{over.executors} executor threads" in str(info.value)
    print(f"\nunprovable clear refused after {time.monotonic() - t0:.2f} s")


@pytest.mark.slow
def test_the_story_ops_conformance_pays_one_clear_per_kernel_family(ctx, pkg_copy):
    """The overhead, measured on the story's op: its conformance corpus runs one package's
    forward kernel and then its backward kernel, so it pays at most a clear before each."""
    pkg = load_package(pkg_copy())
    dev = ctx.device
    on = dev.isolates_workgroups
    dev.isolates_workgroups = False
    dev.isolate("someone else")                          # as if another package's kernel had just run
    dev.isolates_workgroups, n0 = on, dev.workgroup_clears
    t0 = time.perf_counter()
    out = actions.conform(ctx, pkg, receipt=False)
    seconds, clears = time.perf_counter() - t0, dev.workgroup_clears - n0
    assert out.verdict == "pass"
    # forward, then backward: two owners until grad/vjp.py gives its programs the package's owner
    assert clears in ((1, 2) if on else (0,))
    t0 = time.perf_counter()
    for _ in range(20):
        dev.clear_workgroup_memory()
    per_clear = (time.perf_counter() - t0) / 20
    print(f"\nconformance of the story op ({out.passed} cases) in {seconds:.2f} s, {clears} clear(s) of "
          f"{per_clear * 1e3:.2f} ms each ({dev.executors} executor threads): "
          f"{100 * clears * per_clear / seconds:.2f} % of the run")
