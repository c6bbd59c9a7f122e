"""Kernels whose inputs and outputs stay on the device: the workflow's executor.

``execution.dispatch`` (single runs and conformance) uploads its inputs and reads back its outputs
on every call; a workflow step would then read its result back to the host and the next step upload
it again. ``Resident`` runs the op's forward kernel (``execution.forward_program``) through the
same executor with device buffers in and out (``device.buffers.dispatch_resident``: the same
binding plan, uniform padding, buffer cap, launch fold and workgroup isolation, written once in
device/execution.py), so a step's output buffer *is* the next step's input buffer. Uploads and
read-backs happen only where the caller asks (a file source, a sink, the record's hashes) and are
counted, so a test can show that nothing in between moved (docs/workflows.md, "Intermediates stay
on the device"). This module binds nothing and launches nothing itself (tests/device/test_one_executor.py)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..contract.domains import check_input_values
from ..contract.package import OpPackage
from ..device.buffers import DeviceTensor, Timing, dispatch_resident, read_words, upload
from ..device.device import Device
from ..device.execution import forward_program
from ..errors import StudioError
from ..grad.composite import evaluate
from ..precision import from_device

__all__ = ["DeviceTensor", "Resident", "Timing"]


@dataclass
class Resident:
    """Runs kernel programs on ``device`` with device-resident tensors, counting every transfer."""
    device: Device
    uploads: int = 0
    upload_bytes: int = 0
    readbacks: int = 0
    readback_bytes: int = 0
    dispatches: int = 0
    wait: bool = True                # wait for each kernel (its timing); False: only the read-back waits
    log: list[tuple[str, str]] = field(default_factory=list)   # ("upload"|"dispatch"|"readback", what)

    # ------------------------------------------------------------------ transfers
    def upload(self, array, dtype: str, label: str = "") -> DeviceTensor:
        """Host → device, once (a file source, a constant)."""
        t = upload(self.device, array, dtype, label)
        self.uploads += 1
        self.upload_bytes += t.nbytes
        self.log.append(("upload", label))
        return t

    def read(self, tensors: list[DeviceTensor]) -> list[np.ndarray]:
        """Device → host for several tensors in one submission (each counted once)."""
        out = []
        for t, words in zip(tensors, read_words(self.device, tensors)):
            a, malformed = from_device(words, t.dtype)
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
        for t in sig.inputs:
            if inputs[t.name].dtype != t.dtype:
                raise StudioError(f"{pkg.id}: input '{t.name}' is {inputs[t.name].dtype}, the signature says {t.dtype}",
                                  field=t.name)
        structured = [t for t in sig.inputs if t.domain.structured]
        for t, a in zip(structured, self.read([inputs[t.name] for t in structured]) if structured else []):
            check_input_values(t, a, env)      # an index input made on the device is judged before it is used
        outs = dispatch_resident(forward_program(pkg), env, sig.output_shapes(env), {t.name: t.dtype for t in sig.outputs},
                                 inputs, device=self.device, label=label or pkg.id, timing=timing, wait=self.wait)
        self.dispatches += 1
        self.log.append(("dispatch", label or pkg.id))
        return outs
