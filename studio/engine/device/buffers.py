"""The executor with device buffers in and out: ``dispatch_resident`` runs a ``KernelProgram`` on
tensors that stay on the device (the workflow's path, studio/engine/workflow/resident.py). It is
``execution.dispatch``'s own code (the buffer cap, the binding plan with its uniform padding, the
pipeline, workgroup isolation, the bind groups and the launch with its fold), called with
device buffers where ``dispatch`` uses its arenas, and without the upload and read-back; this
module only adds where its buffers come from, and the two transfers the caller asks for
(``upload``, ``read_words``). It lives beside execution.py to keep that module under the size
limit."""
from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass

import numpy as np

from ..errors import StudioError
from ..precision import DTYPES, WORD_BYTES, numpy_dtype, to_device
from .device import Device
from .execution import KernelProgram, _encode, _launch, _pipeline, _plan, check_binding_size


@dataclass(eq=False)
class DeviceTensor:
    """A tensor held in a device buffer (one 32-bit word per element)."""
    buffer: object
    dtype: str                       # the signature's dtype name: f32, i32, u32
    shape: tuple[int, ...]
    label: str = ""

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * WORD_BYTES                # one 32-bit word per element (bf16 too: docs/bf16.md)


@dataclass
class Timing:
    compile_s: float = 0.0           # building (or finding) the pipeline
    run_s: float = 0.0               # submission until the device finished (llvmpipe JITs at first use)


WORKGROUP_VAR = re.compile(r"\bvar\s*<\s*workgroup\s*>")


def uses_workgroup_memory(source: str) -> bool:
    """Whether a kernel declares workgroup memory: only such a kernel can read what another left there."""
    return WORKGROUP_VAR.search(source) is not None


def dispatch_resident(program: KernelProgram, env: dict, shapes: dict[str, tuple], dtypes: dict[str, str],
                      inputs: dict[str, DeviceTensor], *, device: Device, label: str = "",
                      timing: Timing | None = None, wait: bool = True) -> dict[str, DeviceTensor]:
    """One case of ``program``: bindings named in ``inputs`` are bound to those tensors' buffers;
    every other storage binding gets a new zeroed buffer of its own (it outlives the call, so not
    from the pool), returned when its name is in ``shapes`` (with its dtype from ``dtypes``).
    Nothing is uploaded or read back; the call waits for the device (a 4-byte fence: wgpu 0.32's
    on_submitted_work_done_sync fails in its FFI), so ``timing`` splits compiling from running —
    unless ``wait`` is False (a trainer's step: the queue keeps the submissions in order, and the
    read-back at the end waits for all of them). Workgroup memory is cleared between packages
    (Device.isolate) before a kernel that declares any: one that declares none cannot read it."""
    wgpu, dev = device.wgpu, device.device
    U = wgpu.BufferUsage
    check_binding_size(program.op, shapes, [t.nbytes for t in inputs.values()], device)
    t0 = time.perf_counter()
    pipeline = _pipeline(program, program.source, device, env)
    t1 = time.perf_counter()
    if uses_workgroup_memory(program.source):
        device.isolate(program.owner or program.op)
    launch = _launch(program, env, device)
    slots = _plan(program.bindings, env, {}, guard=False,
                  bound={k: (t.buffer, max(t.nbytes, 4)) for k, t in inputs.items()})
    outs: dict[str, DeviceTensor] = {}
    copies = []
    for s in slots:
        name = s.binding.name
        if s.binding.kind == "uniform":
            s.buffer, s.size = dev.create_buffer_with_data(data=s.data, usage=U.UNIFORM), len(s.data)
        elif s.inout:                 # in place (`y ... -> y_out`): a copy of the input, which stays as it was
            src, s.buffer, out = s.buffer, dev.create_buffer(size=s.size, usage=U.STORAGE | U.COPY_SRC | U.COPY_DST), \
                s.binding.output
            copies.append((src, s.buffer, s.size))
            outs[out] = DeviceTensor(s.buffer, dtypes[out], tuple(shapes[out]), f"{label}.{out}")
        elif s.buffer is None:
            s.buffer = dev.create_buffer(size=s.size, usage=U.STORAGE | U.COPY_SRC | U.COPY_DST)
            if name in shapes:
                outs[name] = DeviceTensor(s.buffer, dtypes[name], tuple(shapes[name]), f"{label}.{name}")
    enc = dev.create_command_encoder()
    for src, dst, size in copies:
        enc.copy_buffer_to_buffer(src, 0, dst, 0, size)
    cp = enc.begin_compute_pass()
    _encode(cp, dev, pipeline, slots, launch)
    cp.end()
    fence = dev.create_buffer(size=4, usage=U.MAP_READ | U.COPY_DST) if wait else None
    if outs and fence is not None:
        enc.copy_buffer_to_buffer(next(iter(outs.values())).buffer, 0, fence, 0, 4)
    dev.queue.submit([enc.finish()])
    if fence is not None:
        fence.map_sync(wgpu.MapMode.READ)
        fence.unmap()
        fence.destroy()
    if timing is not None:
        timing.compile_s += t1 - t0
        timing.run_s += time.perf_counter() - t1
    return outs


def upload(device: Device, array, dtype: str, label: str = "") -> DeviceTensor:
    """Host → device: a buffer of its own holding ``array`` as the device's words of ``dtype``."""
    spec = DTYPES.get(dtype)
    if spec is None or not spec.device:
        raise StudioError(f"'{label}': {dtype} tensors are not supported by the device layer", field=label)
    a = np.asarray(array)
    want = numpy_dtype(dtype)
    if a.dtype != want and a.dtype.kind == "f" and want.kind in "iu":
        raise StudioError(f"'{label}' holds {a.dtype} values, the op takes {dtype}", field=label,
                          hint=f"convert the data to {dtype}")
    a = to_device(a, dtype)                       # bf16: rounded once, in the high half of a word
    U = device.wgpu.BufferUsage
    buf = device.device.create_buffer_with_data(data=a.tobytes() or b"\0" * 4, usage=U.STORAGE | U.COPY_SRC | U.COPY_DST)
    return DeviceTensor(buf, dtype, tuple(a.shape), label)


def read_words(device: Device, tensors: list[DeviceTensor]) -> list[np.ndarray]:
    """Device → host: each tensor's words (uint32), all in one submission."""
    if not tensors:
        return []
    wgpu, dev = device.wgpu, device.device
    enc = dev.create_command_encoder()
    staged = []
    for t in tensors:
        size = max(t.nbytes, 4)
        staging = dev.create_buffer(size=size, usage=wgpu.BufferUsage.MAP_READ | wgpu.BufferUsage.COPY_DST)
        enc.copy_buffer_to_buffer(t.buffer, 0, staging, 0, size)
        staged.append((t, staging))
    dev.queue.submit([enc.finish()])
    out = []
    for t, staging in staged:
        staging.map_sync(wgpu.MapMode.READ)
        raw = np.frombuffer(staging.read_mapped(), dtype=np.uint8).copy()
        staging.unmap()
        staging.destroy()
        out.append(raw[:t.nbytes].view(np.uint32))
    return out
