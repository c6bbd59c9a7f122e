"""Kernels whose inputs and outputs stay on the device: the workflow's executor.

``execution.dispatch`` (the one executor of single runs and conformance) uploads its inputs and
reads back its outputs on every call; a workflow step would then read its result back to the host
and the next step upload it again. ``Resident`` runs the same ``KernelProgram`` (the op's forward
kernel, ``execution.forward_program``) with the same binding rules (``device.layout``), the same
launch fold and the same workgroup isolation, but takes and returns ``DeviceTensor``s: a step's
output buffer *is* the next step's input buffer. Uploads and read-backs happen only where the
caller asks (a file source, a sink, the record's hashes) and are counted, so a test can show that
nothing in between moved (docs/workflows.md, "Intermediates stay on the device").

What device/execution.py would need to make this its own (the change described in the issue-14
report): ``dispatch`` accepting a device buffer in place of an input array, and returning the
output buffers instead of reading them back when asked."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from ..contract.package import OpPackage
from ..device.device import Device
from ..device.execution import KernelProgram, forward_program
from ..device.layout import layout_groups
from ..errors import StudioError
from ..grad.composite import evaluate
from ..precision import DTYPES, WORD_BYTES, from_device, numpy_dtype, to_device


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


@dataclass
class Resident:
    """Runs kernel programs on ``device`` with device-resident tensors, counting every transfer."""
    device: Device
    uploads: int = 0
    upload_bytes: int = 0
    readbacks: int = 0
    readback_bytes: int = 0
    dispatches: int = 0
    log: list[tuple[str, str]] = field(default_factory=list)   # ("upload"|"dispatch"|"readback", what)

    # ------------------------------------------------------------------ transfers
    def upload(self, array, dtype: str, label: str = "") -> DeviceTensor:
        """Host → device, once (a file source, a constant)."""
        spec = DTYPES.get(dtype)
        if spec is None or not spec.device:
            raise StudioError(f"'{label}': {dtype} tensors are not supported by the device layer", field=label)
        a = np.asarray(array)
        want = numpy_dtype(dtype)
        if a.dtype != want and a.dtype.kind == "f" and want.kind in "iu":
            raise StudioError(f"'{label}' holds {a.dtype} values, the op takes {dtype}", field=label,
                              hint=f"convert the data to {dtype}")
        a = to_device(a, dtype)                       # bf16: rounded once, in the high half of a word
        wgpu = self.device.wgpu
        buf = self.device.device.create_buffer_with_data(data=a.tobytes() or b"\0" * 4, usage=_usage(wgpu))
        self.uploads += 1
        self.upload_bytes += a.nbytes
        self.log.append(("upload", label))
        return DeviceTensor(buf, dtype, tuple(a.shape), label)

    def read(self, tensors: list[DeviceTensor]) -> list[np.ndarray]:
        """Device → host for several tensors in one submission (each counted once)."""
        if not tensors:
            return []
        wgpu, dev = self.device.wgpu, self.device.device
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
            a, malformed = from_device(raw[:t.nbytes].view(np.uint32), t.dtype)
            if malformed.size:
                raise StudioError(f"'{t.label}': element {int(malformed[0])} is no {t.dtype} (a word with a non-zero "
                                  "low half)", hint="round every bf16 result with bf16_round() (docs/bf16.md)")
            a = a.reshape(t.shape)
            self.readbacks += 1
            self.readback_bytes += t.nbytes
            self.log.append(("readback", t.label))
            out.append(a)
        return out

    # ------------------------------------------------------------------ kernels
    def run_op(self, pkg: OpPackage, inputs: dict[str, DeviceTensor], params: dict, *, catalog,
               label: str = "", timing: Timing | None = None) -> dict[str, DeviceTensor]:
        """Any op: a kernel op through ``run``, a composite op step by step through this same
        function (its intermediates stay on the device too)."""
        if pkg.contract.composite is None:
            return self.run(pkg, inputs, params, label=label, timing=timing)
        outs, _ = evaluate(pkg, inputs, params, lambda p, a, q: self.run_op(p, a, q, catalog=catalog, label=label,
                                                                              timing=timing), catalog=catalog)
        return outs

    def run(self, pkg: OpPackage, inputs: dict[str, DeviceTensor], params: dict, *, label: str = "",
            timing: Timing | None = None) -> dict[str, DeviceTensor]:
        """One kernel op on device-resident inputs; its outputs stay on the device."""
        sig = pkg.contract.signature
        env = sig.resolve({k: v.shape for k, v in inputs.items()}, dict(params))
        shapes = sig.output_shapes(env)
        self._fits(pkg, env, shapes, inputs)
        for t in sig.inputs:
            if inputs[t.name].dtype != t.dtype:
                raise StudioError(f"{pkg.id}: input '{t.name}' is {inputs[t.name].dtype}, the signature says {t.dtype}",
                                  field=t.name)
        program = forward_program(pkg)
        outs = self.dispatch(program, env, shapes, {t.name: t.dtype for t in sig.outputs}, inputs,
                             label=label or pkg.id, timing=timing)
        return outs

    def dispatch(self, program: KernelProgram, env: dict, shapes: dict[str, tuple], dtypes: dict[str, str],
                 inputs: dict[str, DeviceTensor], *, label: str, timing: Timing | None = None) -> dict[str, DeviceTensor]:
        """``execution.dispatch``'s binding rules with device buffers: bindings named in ``inputs``
        are bound as given; every other storage binding is allocated (zeroed, as WebGPU does) and
        returned when its name is in ``shapes``."""
        wgpu, dev = self.device.wgpu, self.device.device
        desc = program.bindings
        t0 = time.perf_counter()
        pipe, layouts = self.device.pipeline(program.source, program.entry, layout_groups(desc), file=program.path,
                                             user_lines=program.source.count("\n") + 1,
                                             constants=desc.override_values(env))
        t1 = time.perf_counter()
        self.device.isolate(program.owner or program.op)
        entries: dict[int, list] = {}
        outs: dict[str, DeviceTensor] = {}
        for b in desc.bindings:
            if b.kind == "uniform":
                data = b.uniform_bytes(env)
                data = data + b"\0" * (-len(data) % 16) if data else b"\0" * 16
                buf, size = dev.create_buffer_with_data(data=data, usage=wgpu.BufferUsage.UNIFORM), len(data)
            elif b.name in inputs:
                t = inputs[b.name]
                buf, size = t.buffer, max(t.nbytes, 4)
            else:
                count = b.element_count(env)
                size = max(count, 1) * 4
                buf = dev.create_buffer(size=size, usage=_usage(wgpu))
                if b.name in shapes:
                    outs[b.name] = DeviceTensor(buf, dtypes[b.name], tuple(shapes[b.name]), f"{label}.{b.name}")
            entries.setdefault(b.group, []).append({"binding": b.binding, "resource": {"buffer": buf, "offset": 0,
                                                                                      "size": size}})
        invocations = int(program.invocations.eval(env))
        groups = -(-invocations // program.workgroup_size)
        max_groups = self.device.profile.limits.get("max-compute-workgroups-per-dimension", 65535)
        gy = -(-groups // max_groups)       # folded into 2-D past the per-dimension limit, as dispatch does
        if gy > max_groups:
            raise StudioError(f"{program.op}: {invocations} invocations exceed the device's launch limit",
                              hint="raise [kernel] workgroup_size or process the input in pieces")
        enc = dev.create_command_encoder()
        cp = enc.begin_compute_pass()
        cp.set_pipeline(pipe)
        for g, layout in enumerate(layouts):
            cp.set_bind_group(g, dev.create_bind_group(layout=layout, entries=entries.get(g, [])))
        if groups > 0:
            cp.dispatch_workgroups(-(-groups // gy), gy)
        cp.end()
        # a fence: 4 bytes copied after the pass and mapped, so the step's time is its own (wgpu 0.32's
        # on_submitted_work_done_sync fails in its FFI); no tensor is read back
        fence = dev.create_buffer(size=4, usage=wgpu.BufferUsage.MAP_READ | wgpu.BufferUsage.COPY_DST)
        if outs:
            enc.copy_buffer_to_buffer(next(iter(outs.values())).buffer, 0, fence, 0, 4)
        dev.queue.submit([enc.finish()])
        fence.map_sync(wgpu.MapMode.READ)
        fence.unmap()
        fence.destroy()
        t2 = time.perf_counter()
        self.dispatches += 1
        self.log.append(("dispatch", label))
        if timing is not None:
            timing.compile_s += t1 - t0
            timing.run_s += t2 - t1
        return outs

    def _fits(self, pkg: OpPackage, env: dict, shapes: dict, inputs: dict[str, DeviceTensor]) -> None:
        limits = self.device.profile.limits
        cap = limits.get("max-storage-buffer-binding-size", 1 << 62)
        biggest = max([math.prod(s) * 4 for s in shapes.values()] + [t.nbytes for t in inputs.values()] + [0])
        if biggest > cap:
            raise StudioError(f"{pkg.id}: one buffer needs {biggest} bytes; the device binds at most {cap}",
                              hint="run on smaller inputs or a device with larger limits")


def _usage(wgpu):
    return wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST
