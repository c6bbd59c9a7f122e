"""The two compilations of an assignment program agree: the WGSL kernel, run through the
product's executor (studio/engine/device/execution.py ``dispatch``, with poisoned outputs and
canary words), against the numpy reference (``evaluate``), judged by the product's tolerance
comparison (studio/engine/contract/tolerance.py ``compare``) under the program's declared tolerance:

- ``ulp(0)`` where the propagated error bound is 0 (every slot computed from + - * select min max
  abs and comparisons on agreeing operands): the same bits, up to the sign of a zero and a
  flushed subnormal;
- ``bound`` elsewhere, the magnitude being the bound that accuracy.py propagates from WGSL's
  accuracy table (exp, log, sqrt and / are not correctly rounded in WGSL).

The reference runs in this process, not in the confined host: it is the engine's own code over a
program that is data (no author Python runs), so there is nothing to confine."""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..contract.tolerance import U32, Mismatch, Tolerance, compare
from ..device.device import Device
from ..device.execution import Result, dispatch
from ..errors import StudioError
from .accuracy import error_bounds, inexact_ops
from .evaluate import evaluate
from .slots import Bound
from .wgsl import Kernel, compile_wgsl

EXACT = Tolerance("ulp", ulps=0, category="elementwise",
                  justification="+ - * are correctly rounded in WGSL as in numpy; the kernel hides every rounded "
                                "result from the compiler's float rewrites (fx) and keeps the program's order, "
                                "so agreeing operands give the same bits")
_GAMMA3 = 3 * U32 / (1 - 3 * U32)            # compare's gamma_{terms + 2} with terms = 1


def declared_tolerance(bound: Bound) -> str:
    ops = inexact_ops(bound)
    if not ops:
        return "ulp(0): every slot bit for bit (the sign of a zero and flushed subnormals aside)"
    return (f"ulp(0) where no inexact operation reaches the slot; elsewhere bound: |device - reference| <= the "
            f"bound propagated from WGSL's accuracy for {', '.join(ops)} (+ u|reference|)")


@dataclass
class Agreement:
    program_hash: str
    role: str
    rows: int
    tolerance: str
    kind: str = ""                    # "" (agree) | mismatch | unwritten | out_of_range_write
    row: int = -1
    slot: int = -1
    mismatch: Mismatch | None = None
    exact_slots: int = 0              # slots judged bit for bit
    bounded_slots: int = 0            # slots judged against a propagated bound
    unbounded_slots: int = 0          # of those, slots whose bound is infinite (an overflow upstream)
    largest_bound: float = 0.0
    seconds: float = 0.0
    device: str = ""
    details: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.kind

    def describe(self) -> str:
        head = (f"{self.role} program {self.program_hash[:16]} on {self.rows} row(s), {self.device}: "
                f"{self.exact_slots} slot values bit for bit, {self.bounded_slots} within their bound"
                + (f" ({self.unbounded_slots} unbounded: an overflow upstream)" if self.unbounded_slots else ""))
        if self.ok:
            return head + " — agree"
        what = f"row {self.row}, slot {self.slot}: {self.kind}"
        if self.mismatch is not None:
            m = self.mismatch
            what += (f": reference {m.expected!r} (0x{m.expected_bits:08x}), device {m.got!r} "
                     f"(0x{m.got_bits:08x}); allowed {m.allowed}")
        return head + " — DISAGREE at " + what


def run_kernel(kernel: Kernel, frame: np.ndarray, *, device: Device, guard: bool = True) -> Result:
    """One dispatch of the compiled program over every row of frame (float32, rows x width);
    its output ``out`` holds the written slots kernel.written of each row."""
    frame = np.ascontiguousarray(frame, dtype=np.float32)
    if frame.ndim != 2 or frame.shape[1] != kernel.width:
        raise StudioError(f"the kernel's frame is (rows, {kernel.width}); got {frame.shape}", field="frame")
    rows = frame.shape[0]
    lo, hi = kernel.written
    cap = int(device.profile.limits.get("max-storage-buffer-binding-size", 1 << 31))
    if frame.nbytes > cap or frame.size >= 1 << 32:
        raise StudioError(f"a frame of {rows} x {kernel.width} f32 ({frame.nbytes:,} bytes) is more than the device "
                          f"binds at once ({cap:,} bytes)", field="frame", hint="run the rows in smaller batches")
    return dispatch(kernel.program(), [(kernel.env(rows), {"out": (rows, max(1, hi - lo))}, kernel.inputs(frame))],
                    device=device, guard=guard)[0]


def device_evaluate(bound: Bound, frame: np.ndarray, *, device: Device, kernel: Kernel | None = None) -> np.ndarray:
    """The program on the device: the new frame (the same contract as evaluate)."""
    kernel = kernel or compile_wgsl(bound)
    res = run_kernel(kernel, frame, device=device)
    return _frame(kernel, frame, res.outputs["out"])


def _frame(kernel: Kernel, frame: np.ndarray, out: np.ndarray) -> np.ndarray:
    lo, hi = kernel.written
    full = np.array(frame, np.float32, copy=True)
    cols = lo + np.flatnonzero(kernel.mask)          # the slots the kernel writes; the rest keep their values
    full[:, cols] = out[:, cols - lo]
    return full


def agree(bound: Bound, frame: np.ndarray, *, device: Device, kernel: Kernel | None = None) -> Agreement:
    """Run both compilations on ``frame`` and judge the device against the reference.
    ``kernel``: a compiled kernel to judge instead of compile_wgsl(bound) (the tests pass a
    corrupted one to see the check fail)."""
    t0 = time.perf_counter()
    frame = np.ascontiguousarray(frame, dtype=np.float32)
    want = evaluate(bound, frame)
    bounds = error_bounds(bound, frame)
    kernel = kernel or compile_wgsl(bound)
    res = run_kernel(kernel, frame, device=device)
    rep = Agreement(bound.hash, bound.role, frame.shape[0], declared_tolerance(bound),
                    device=str(device.profile.adapter.get("device")))
    lo, hi = kernel.written
    width = hi - lo
    if width == 0:                               # nothing to write (k = 0 and m = 0): nothing to judge
        rep.seconds = time.perf_counter() - t0
        return rep
    hits, unwritten = res.guard("out", np.ascontiguousarray(want[:, lo:hi]))
    if hits.size:
        rep.kind, rep.row, rep.slot = "out_of_range_write", frame.shape[0], int(hits[0])
        rep.details.append(f"the kernel wrote {hits.size} canary word(s) past the end of its output")
    elif (unwritten := unwritten[kernel.mask[unwritten % width]]).size:   # slots it never writes keep the poison
        i = int(unwritten[0])
        rep.kind, rep.row, rep.slot = "unwritten", i // width, lo + i % width
    else:
        got = _frame(kernel, frame, res.outputs["out"])[:, lo:hi].reshape(-1)
        flat_want, flat_bound = np.ascontiguousarray(want[:, lo:hi]).reshape(-1), bounds[:, lo:hi].reshape(-1)
        exact = flat_bound == 0
        rep.exact_slots, rep.bounded_slots = int(exact.sum()), int((~exact).sum())
        finite = np.isfinite(flat_bound)
        rep.unbounded_slots = int((~finite).sum())
        rep.largest_bound = float(flat_bound[finite].max(initial=0.0))
        first: tuple[int, Mismatch] | None = None
        for mask, tol, mag in ((exact, EXACT, None),
                               (~exact, Tolerance("bound", factor=1.0, category="reduction",
                                                  justification="accuracy.py's propagated bound"), None)):
            where = np.flatnonzero(mask)
            if not where.size:
                continue
            if tol.kind == "bound":
                mag = flat_bound[where] / _GAMMA3
            mm = compare(tol, flat_want[where], got[where], magnitude=mag, terms=1)
            if mm is not None and (first is None or where[mm.index] < first[0]):
                first = (int(where[mm.index]), mm)
        if first is not None:
            i, mm = first
            rep.kind, rep.row, rep.slot, rep.mismatch = "mismatch", i // width, lo + i % width, mm
    rep.seconds = time.perf_counter() - t0
    return rep


__all__ = ["agree", "Agreement", "run_kernel", "device_evaluate", "declared_tolerance", "EXACT"]
