"""The one execution path of a kernel: signature → shapes → buffers from the binding descriptor →
dispatch → readback. Builtins and user ops go through here alike; nothing asks which (a composite
op runs its steps through here too: studio/engine/grad/run.py)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..contract.package import OpPackage
from ..errors import StudioError
from ..precision import (
    CANARY_WORD,
    CANARY_WORDS,
    DTYPES,
    POISON_WORD,
    WORD_BYTES,
    from_device,
    numpy_dtype,
    poison,
    to_device,
    words_of,
)
from .device import Device
from .layout import layout_groups


@dataclass
class Case:
    inputs: dict[str, np.ndarray]
    params: dict[str, int | float]


@dataclass
class KernelProgram:
    """What the executor needs of a kernel: its WGSL, entry point, launch geometry and binding
    descriptor. An op's forward kernel is one (forward_program); its device VJP is another
    (studio/engine/grad/vjp.py: backward_program)."""
    op: str
    source: str
    path: str
    entry: str
    workgroup_size: int
    invocations: object                # an Expr over the signature's symbols
    bindings: object                   # a BindingDescriptor
    owner: str = ""                    # whose code it is (package_owner); "": the op name stands for it


def forward_program(pkg: OpPackage) -> KernelProgram:
    c = pkg.contract
    if c.kernel is None:
        raise StudioError(f"{pkg.id} is a composite op: it has no kernel of its own", file=pkg.manifest_path,
                          field="backward.text", hint="run it with run_op or in a workflow; its steps' kernels run")
    return KernelProgram(pkg.id, pkg.kernel_source, pkg.kernel_path, c.kernel.entry, c.kernel.workgroup_size,
                         c.kernel.invocations, c.bindings, owner=package_owner(pkg))


def package_owner(pkg: OpPackage) -> str:
    """Who a kernel belongs to, for Device.isolate: kernels of one package (its forward and
    backward) may see each other's workgroup memory, no other package's."""
    return f"{pkg.id}@{pkg.hash}"


@dataclass
class Result:
    outputs: dict[str, np.ndarray]
    env: dict
    unwritten: dict[str, np.ndarray] = field(default_factory=dict)   # indices still holding the poison
    canary_hits: dict[str, np.ndarray] = field(default_factory=dict)  # words past the end that changed

    def guard(self, name: str, expected: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Under ``guard``: (canary words past the end that changed, elements still holding the
        poison). The poison is a NaN payload no reference produces; where the expected value is
        exactly that word, the element does not count as unwritten."""
        hits = self.canary_hits.get(name, np.array([], int))
        unwritten = self.unwritten.get(name, np.array([], int))
        if unwritten.size:
            wb = words_of(expected)
            unwritten = unwritten[wb[unwritten] != POISON_WORD]
        return hits, unwritten


def _as_dtype(arr, dtype: str, name: str) -> np.ndarray:
    a = np.asarray(arr)
    if not DTYPES[dtype].device:
        raise StudioError(f"input '{name}': {dtype} tensors are not supported by the device layer", field=name)
    want = numpy_dtype(dtype)
    if a.dtype != want and a.dtype.kind == "f" and want.kind in "iu":
        raise StudioError(f"input '{name}' is {a.dtype}, the signature says {dtype}", field=name,
                          hint=f"convert the data to {dtype}")
    return to_device(a, dtype)          # bf16: rounded once, in the high half of a word


def prepare(pkg: OpPackage, case: Case, *, budget_bytes: int | None = None, device: Device | None = None) -> tuple[dict, dict]:
    """Resolve shapes and parameters; refuse before anything runs if over budget."""
    sig = pkg.contract.signature
    env = sig.resolve({k: np.shape(v) for k, v in case.inputs.items()}, dict(case.params))
    shapes = sig.output_shapes(env)
    need = sig.memory_bytes(env)
    limits = []
    if budget_bytes is not None:
        limits.append((budget_bytes, "the run's memory budget"))
    if device is not None:
        limits.append((device.profile.limits.get("max-buffer-size", 1 << 62), "the device's max buffer size"))
        biggest = max([int(np.prod(s)) * 4 for s in shapes.values()] + [np.asarray(v).nbytes for v in case.inputs.values()] + [0])
        cap = device.profile.limits.get("max-storage-buffer-binding-size", 1 << 62)
        if biggest + CANARY_WORDS * WORD_BYTES > cap:
            raise StudioError(f"{pkg.id}: one buffer needs {biggest} bytes; the device binds at most {cap}",
                              hint="run on smaller inputs or a device with larger limits")
    for limit, what in limits:
        if need > limit:
            raise StudioError(f"{pkg.id}: needs {need} bytes for inputs and outputs, over {what} ({limit} bytes)",
                              hint="shrink the inputs or raise the budget")
    return env, shapes


def run_cases(pkg: OpPackage, cases: list[Case], *, device: Device, guard: bool = False,
              budget_bytes: int | None = None) -> list[Result]:
    """Run many cases of a kernel op in one submission. With ``guard``, outputs are poisoned before
    the dispatch and followed by canary words, so unwritten elements and writes past the end show."""
    program = forward_program(pkg)
    c = pkg.contract
    prepared = []
    for case in cases:
        env, shapes = prepare(pkg, case, budget_bytes=budget_bytes, device=device)
        inputs = {t.name: _as_dtype(case.inputs[t.name], t.dtype, t.name) for t in c.signature.inputs}
        prepared.append((env, shapes, inputs))
    return dispatch(program, prepared, device=device, guard=guard)


def dispatch(program: KernelProgram, prepared: list[tuple[dict, dict, dict]], *, device: Device,
             guard: bool = False) -> list[Result]:
    """Run a kernel program once per (env, output shapes, typed input arrays) in one submission.
    Bindings named in the inputs are uploaded read-only; every other storage binding is allocated
    (poisoned under ``guard``) and read back when its name is in the output shapes. Workgroup
    memory is cleared first when the device's last kernel was another package's (Device.isolate)."""
    wgpu, dev = device.wgpu, device.device
    desc = program.bindings
    user_lines = program.source.count("\n") + 1
    groups_layout = layout_groups(desc)

    def pipeline_for(env: dict):
        # one pipeline per value of the WGSL overrides (cached by the device)
        return device.pipeline(program.source, program.entry, groups_layout, file=program.path,
                               user_lines=user_lines, constants=desc.override_values(env))
    pipes = [pipeline_for(env) for env, _, _ in prepared] if desc.overrides else []
    pipe, layouts = pipes[0] if pipes else pipeline_for({})
    device.isolate(program.owner or program.op)
    max_groups = device.profile.limits.get("max-compute-workgroups-per-dimension", 65535)
    enc = dev.create_command_encoder()
    pending = []
    used: list = []                   # storage buffers, given back to the device once read
    for at, (env, shapes, inputs) in enumerate(prepared):
        if pipes:
            pipe, layouts = pipes[at]
        entries: dict[int, list] = {}
        reads = []
        for b in desc.bindings:
            if b.kind == "uniform":
                data = b.uniform_bytes(env)
                data = data + b"\0" * (-len(data) % 16) if data else b"\0" * 16
                buf = dev.create_buffer_with_data(data=data, usage=wgpu.BufferUsage.UNIFORM)
                size = len(data)
            elif b.name in inputs:
                arr = inputs[b.name]          # contiguous (_as_dtype): uploaded from its own memory, no copy
                raw = arr.reshape(-1).view(np.uint8) if arr.nbytes else np.zeros(4, np.uint8)
                if raw.nbytes % 4:            # queue writes come in whole words
                    raw = np.concatenate([raw, np.zeros(-raw.nbytes % 4, np.uint8)])
                buf = device.buffer(raw.nbytes, wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_DST)
                dev.queue.write_buffer(buf, 0, raw)          # the whole buffer: nothing earlier is left
                size = raw.nbytes
                used.append(buf)
            else:
                count = b.element_count(env)
                usage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST
                if guard:
                    words = np.full(max(count, 1) + CANARY_WORDS, poison(b.dtype), dtype=np.uint32)
                    words[count:] = CANARY_WORD
                    buf = device.buffer(words.nbytes, usage)
                    dev.queue.write_buffer(buf, 0, words)
                    size = nbytes = words.nbytes
                else:                         # zeroed, as a new WebGPU buffer is
                    size = nbytes = max(count, 1) * 4
                    buf = device.buffer(nbytes, usage)
                    enc.clear_buffer(buf)
                staging = device.buffer(nbytes, wgpu.BufferUsage.MAP_READ | wgpu.BufferUsage.COPY_DST)
                reads.append((b, count, buf, staging))
                used += [buf, staging]
            entries.setdefault(b.group, []).append({"binding": b.binding, "resource": {"buffer": buf, "offset": 0, "size": size}})
        invocations = int(program.invocations.eval(env))
        groups = -(-invocations // program.workgroup_size)
        # past the per-dimension limit the launch folds into 2-D; kernels index as
        # gid.x + gid.y * num_workgroups.x * workgroup_size (see docs/package-format.md)
        gy = -(-groups // max_groups)
        if gy > max_groups:
            raise StudioError(f"{program.op}: {invocations} invocations exceed the device's launch limit",
                              hint="raise [kernel] workgroup_size or process the input in pieces")
        cp = enc.begin_compute_pass()
        cp.set_pipeline(pipe)
        for g, layout in enumerate(layouts):
            cp.set_bind_group(g, dev.create_bind_group(layout=layout, entries=entries.get(g, [])))
        if groups > 0:
            cp.dispatch_workgroups(-(-groups // gy), gy)
        cp.end()
        for b, count, buf, staging in reads:
            enc.copy_buffer_to_buffer(buf, 0, staging, 0, staging.size)
        pending.append((env, shapes, reads))
    dev.queue.submit([enc.finish()])
    results = []
    for env, shapes, reads in pending:
        res = Result(outputs={}, env=env)
        for b, count, buf, staging in reads:
            staging.map_sync(wgpu.MapMode.READ)
            words = np.frombuffer(staging.read_mapped(copy=False), dtype=np.uint32).copy()  # one copy
            staging.unmap()
            body = words[:count]
            if guard:
                res.unwritten[b.name] = np.flatnonzero(body == poison(b.dtype))
                res.canary_hits[b.name] = np.flatnonzero(words[count:count + CANARY_WORDS] != CANARY_WORD)
            if b.name in shapes:
                values, malformed = from_device(body, b.dtype)
                if malformed.size:
                    i = int(malformed[0])
                    raise StudioError(f"{program.op}: output '{b.name}'[{i}] was written as the word 0x{int(body[i]):08x}, "
                                      f"which is no {b.dtype} (its low half is not zero; {malformed.size} such "
                                      "element(s))", file=program.path,
                                      hint="round every bf16 result with bf16_round() before storing it "
                                           "(studio/resources/shaders/bf16.wgsl; docs/bf16.md)")
                res.outputs[b.name] = values.reshape(shapes[b.name])
        results.append(res)
    device.give_back(used)
    return results
