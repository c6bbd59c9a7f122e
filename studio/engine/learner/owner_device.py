"""Where an owner computes its contributions and its blocks of the tree (docs/learner.md "Owners on
a device"): ``cpu`` (the numpy reference), ``gpu`` (the device of its worker process: refused if
there is none) or ``auto`` (the device when one opens and the program compiles for it, else the
numpy reference, saying why). Chosen per owner, on its own worker; the step records name the path.

On the device path the contributions run as the staged program (staged.py: one invocation per
sample x slot, statements with an operation WGSL does not round correctly on the host) and the
owner's complete blocks of the canonical tree as device_tree's fixed-shape reduction: both bitwise
the numpy path. The update stays the numpy program on every replica (the driver's too).

DEVICE_CONTEXT is this process's device, opened once on first use (each Dask worker process opens
its own) and shared by the owners the worker hosts (a worker runs its actors' calls one at a time)."""
from __future__ import annotations

import threading

import numpy as np

from ..errors import StudioError
from . import device_tree
from .combine import Block, rnd

MODES = ("cpu", "gpu", "auto")
CPU = "cpu (numpy)"
DEVICE_CONTEXT: dict = {}              # "device": the Device, or "error": why none opened (per process)
_LOCK = threading.Lock()
FRAME_WORDS = 1 << 24                  # contribution frames [params | sample | 0] built per batch of rows


def process_device():
    """This process's device, opened on first use (the failure is remembered too: raised again)."""
    with _LOCK:
        if "device" not in DEVICE_CONTEXT and "error" not in DEVICE_CONTEXT:
            try:
                from ..device.device import Device
                DEVICE_CONTEXT["device"] = Device()
            except Exception as e:                 # noqa: BLE001 (no adapter, no driver: a reason, not a crash)
                DEVICE_CONTEXT["error"] = f"{type(e).__name__}: {e}".splitlines()[0]
        if "device" in DEVICE_CONTEXT:
            return DEVICE_CONTEXT["device"]
        raise StudioError(f"no device for this owner: {DEVICE_CONTEXT['error']}", field="--owner-device",
                          hint="use --owner-device cpu or auto (auto falls back to the numpy path)")


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise StudioError(f"--owner-device {mode!r} is not a path", field="--owner-device",
                          hint=f"one of {', '.join(MODES)}")
    return mode


class OwnerPath:
    """One owner's compute path, resolved on its worker (``describe`` is what the records show)."""

    def __init__(self, mode: str, contribution, k: int, s: int):
        check_mode(mode)
        self.device, self.staged, self.note = None, None, ""
        if mode == "cpu":
            return
        try:
            bound = getattr(contribution, "bound", None)
            if bound is None or not hasattr(contribution, "program"):
                raise StudioError("the device path runs contribution programs; this contribution is a rule of "
                                  "its own (a workflow's gradient runs on its ops' own devices)",
                                  field="--owner-device", hint="use --owner-device cpu or auto")
            from .staged import compile_staged
            self.staged = compile_staged(bound)
            device = process_device()
            words = int(device.profile.limits.get("max-storage-buffer-binding-size", 1 << 27)) // 4
            if 2 * k + s + 64 > words:
                raise StudioError(f"a contribution frame row of {2 * k + s:,} words is more than this device binds "
                                  f"at once ({words:,} words)", field="--owner-device",
                                  hint="use --owner-device cpu or auto")
            self.device = device
        except StudioError as e:
            if mode == "gpu":
                raise
            self.device, self.staged, self.note = None, None, e.message
        self.k, self.s = k, s

    @property
    def describe(self) -> str:
        if self.device is None:
            return CPU + (f" (auto: {self.note})" if self.note else "")
        a = self.device.profile.adapter
        return f"device ({a.get('device')} [{a.get('backend_type')}, {a.get('adapter_type')}]; {self.staged.describe()})"

    def block_sums(self, contribution, params: np.ndarray, shard: np.ndarray, blocks: list[Block],
                   precision: str) -> list[np.ndarray]:
        from .combine import block_sums
        if self.device is None:
            return block_sums(contribution.contributions(params, shard), blocks, precision)
        sums = device_tree.block_sums(self.contributions(params, shard), blocks, device=self.device)
        return [rnd(x) for x in sums] if precision == "bf16" else sums

    def contributions(self, params: np.ndarray, samples: np.ndarray) -> np.ndarray:
        """(rows, k) on the device: frames [params | sample | 0] a batch of rows at a time."""
        from .staged import run_staged
        k, s = self.k, self.s
        n, width = samples.shape[0], 2 * k + s
        out = np.empty((n, k), np.float32)
        step = max(1, FRAME_WORDS // max(1, width))
        for r0 in range(0, n, step):
            rows = samples[r0:r0 + step]
            frame = np.zeros((rows.shape[0], width), np.float32)
            frame[:, :k], frame[:, k:k + s] = params, rows
            run_staged(self.staged, frame, device=self.device)
            out[r0:r0 + rows.shape[0]] = frame[:, k + s:]
        return out


__all__ = ["OwnerPath", "process_device", "check_mode", "MODES", "CPU", "DEVICE_CONTEXT"]
