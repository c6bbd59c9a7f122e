"""The one execution path of a kernel: signature → shapes → buffers from the binding descriptor →
dispatch → readback. Builtins and user ops go through here alike; nothing asks which (a composite
op runs its steps through here too: studio/engine/grad/run.py)."""
from __future__ import annotations

import re
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
from .launch import of_spec as launch_of
from .layout import layout_groups
from .layout_words import run_failure


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
    workgroup: tuple = ()              # 2-D/3-D: the workgroup size and invocations per axis (launch.py)
    axes: tuple = ()


def forward_program(pkg: OpPackage) -> KernelProgram:
    c = pkg.contract
    if c.kernel is None:
        raise StudioError(f"{pkg.id} is a composite op: it has no kernel of its own", file=pkg.manifest_path,
                          field="backward.text", hint="run it with run_op or in a workflow; its steps' kernels run")
    return KernelProgram(pkg.id, pkg.kernel_source, pkg.kernel_path, c.kernel.entry, c.kernel.workgroup_size,
                         c.kernel.invocations, c.bindings, owner=package_owner(pkg), workgroup=c.kernel.workgroup,
                         axes=c.kernel.axes)


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
        check_binding_size(pkg.id, shapes, [np.asarray(v).nbytes for v in case.inputs.values()], device,
                           margin=CANARY_WORDS * WORD_BYTES)
    for limit, what in limits:
        if need > limit:
            raise StudioError(f"{pkg.id}: needs {need} bytes for inputs and outputs, over {what} ({limit} bytes)",
                              hint="shrink the inputs or raise the budget")
    return env, shapes


def check_binding_size(op: str, shapes: dict, input_bytes: list[int], device: Device, *, margin: int = 0) -> None:
    """The buffer cap: no one binding (an output of ``shapes``, an input of ``input_bytes``, plus
    ``margin``: the canary words a guarded run adds) over the device's max storage binding size."""
    biggest = max([int(np.prod(s)) * 4 for s in shapes.values()] + list(input_bytes) + [0])
    cap = device.profile.limits.get("max-storage-buffer-binding-size", 1 << 62)
    if biggest + margin > cap:
        raise StudioError(f"{op}: one buffer needs {biggest} bytes; the device binds at most {cap}",
                          hint="run on smaller inputs or a device with larger limits")


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


ARENA_BYTES = 256 << 20        # one submission's inputs (or outputs) at most; more cases wait for the next
_LENGTH = re.compile(r"arrayLength\s*\(\s*&\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)")


def guarded_source(source: str, canaried: set[str]) -> str:
    """The kernel as conformance runs it: each output binding is followed by CANARY_WORDS canary
    words inside its bound range (so a write past the end lands on them, where the driver would
    otherwise drop it or put it anywhere in the binding), and ``arrayLength(&y)`` of such a binding
    is rewritten to subtract them, so the kernel observes exactly the length ``run`` gives it. No
    line changes: compile errors keep the author's line numbers."""
    if "arrayLength" not in source or not canaried:
        return source
    return _LENGTH.sub(lambda m: f"(arrayLength(&{m.group(1)}) - {CANARY_WORDS}u)" if m.group(1) in canaried
                       else m.group(0), source)


def _align(n: int, a: int) -> int:
    return -(-n // a) * a


def _pooled(n: int) -> int:
    """A buffer size for ``n`` bytes that later calls of similar sizes share (Device.buffer reuses by
    size): at least 4 KiB, else rounded up to an eighth of the next power of two."""
    if n <= 4096:
        return 4096
    return _align(n, (1 << (n - 1).bit_length()) // 8)


@dataclass
class _Slot:
    binding: object
    offset: int = 0
    size: int = 0
    count: int = 0
    data: object = None
    buffer: object = None            # where it is bound: an arena, or a device-resident tensor's own buffer
    inout: bool = False              # in place (`y : ... -> y_out`): data staged at ``src`` of the input arena,
    src: int = 0                     # copied into the output arena before the kernel, read back as y_out


def _plan(desc, env: dict, inputs: dict, guard: bool, bound: dict | None = None) -> list[_Slot]:
    """One case's bindings: uniforms (their bytes, padded to 16), inputs (their array; or, named in
    ``bound``, a device buffer and its size, bound as they are), outputs (their element count)."""
    slots = []
    for b in desc.bindings:
        if b.kind == "uniform":
            data = b.uniform_bytes(env)
            slots.append(_Slot(b, data=data + b"\0" * (-len(data) % 16) if data else b"\0" * 16))
        elif bound and b.name in bound:   # in place: the caller copies it (buffers.py), never writes the input
            slots.append(_Slot(b, buffer=bound[b.name][0], size=bound[b.name][1], inout=bool(b.writes)))
        elif b.name in inputs:
            arr = inputs[b.name]          # contiguous (_as_dtype): uploaded from its own memory, no copy
            raw = arr.reshape(-1).view(np.uint8) if arr.nbytes else np.zeros(4, np.uint8)
            if raw.nbytes % 4:            # queue writes come in whole words
                raw = np.concatenate([raw, np.zeros(-raw.nbytes % 4, np.uint8)])
            if b.writes:                  # in place: an output slot that starts as the input's values
                count = b.element_count(env)
                slots.append(_Slot(b, count=count, size=4 * (count + CANARY_WORDS if guard else max(count, 1)),
                                   data=raw, inout=True))
            else:
                slots.append(_Slot(b, data=raw))
        else:
            count = b.element_count(env)
            slots.append(_Slot(b, count=count, size=4 * (count + CANARY_WORDS if guard else max(count, 1))))
    return slots


def _chunks(cases: list, cap: int):
    """Runs of consecutive cases whose arenas stay under ``cap`` bytes (a bigger case alone)."""
    run, total = [], 0
    for at, slots in cases:
        size = sum(s.size or len(s.data) for s in slots)
        if run and total + size > cap:
            yield run
            run, total = [], 0
        run.append((at, slots))
        total += size
    if run:
        yield run


def dispatch(program: KernelProgram, prepared: list[tuple[dict, dict, dict]], *, device: Device,
             guard: bool = False) -> list[Result]:
    """Run a kernel program once per (env, output shapes, typed input arrays), batched: all cases
    in as few submissions as the device allows, each with one input arena, one output arena and
    one readback (a mapped staging buffer read once), every buffer from the device's pool. Each
    case binds its own ranges (offset and size), so it sees the lengths ``run`` gives it; under
    ``guard`` its outputs start poisoned and are followed by canary words (guarded_source), so
    unwritten elements and writes past the end show per case. Workgroup memory is cleared first
    when the device's last kernel was another package's (Device.isolate)."""
    desc = program.bindings
    groups_layout = layout_groups(desc)
    given = {n for _, _, inputs in prepared for n in inputs}
    canaried = {b.name for b in desc.bindings if b.kind == "storage" and (b.writes or b.name not in given)}
    source = guarded_source(program.source, canaried) if guard else program.source

    def pipeline_for(env: dict):
        return _pipeline(program, source, device, env, groups_layout)
    pipes = [pipeline_for(env) for env, _, _ in prepared] if desc.overrides else []
    default = pipes[0] if pipes else pipeline_for({})
    device.isolate(program.owner or program.op)
    cap = min(ARENA_BYTES, int(device.profile.limits.get("max-buffer-size", ARENA_BYTES)))
    planned = [(at, _plan(desc, env, inputs, guard)) for at, (env, _, inputs) in enumerate(prepared)]
    results: list[Result | None] = [None] * len(prepared)
    for chunk in _chunks(planned, cap):
        for at, res in _submit(program, device, chunk, prepared, pipes, default, guard):
            results[at] = res
    return results


def _pipeline(program: KernelProgram, source: str, device: Device, env: dict, groups_layout: dict | None = None):
    """One pipeline per value of the WGSL overrides (cached by the device)."""
    desc = program.bindings
    try:
        return device.pipeline(source, program.entry, groups_layout or layout_groups(desc), file=program.path,
                               user_lines=program.source.count("\n") + 1, constants=desc.override_values(env))
    except StudioError:
        raise
    except Exception as e:            # noqa: BLE001 (wgpu refused the layout: said in the product's words, layout_words.py)
        raise run_failure(program, e) or e from None


def _launch(program: KernelProgram, env: dict, device: Device) -> tuple[int, int, int]:
    """One case's grid (x, y, z); (0, 0, 0): nothing to launch. An axis past the per-dimension limit
    folds into the next unused axis (launch.py; docs/package-format.md, "Launch geometry")."""
    limit = device.profile.limits.get("max-compute-workgroups-per-dimension", 65535)
    return launch_of(program, env, limit, op=program.op).grid


def _encode(cp, dev, pipeline, slots: list[_Slot], launch: tuple[int, ...]) -> None:
    """One case in a compute pass: its pipeline, one bind group per group of the layout (each slot
    bound to its buffer at its offset and size), its launch."""
    pipe, layouts = pipeline
    entries: dict[int, list] = {}
    for s in slots:
        entries.setdefault(s.binding.group, []).append(
            {"binding": s.binding.binding, "resource": {"buffer": s.buffer, "offset": s.offset, "size": s.size}})
    cp.set_pipeline(pipe)
    for g, layout in enumerate(layouts):
        cp.set_bind_group(g, dev.create_bind_group(layout=layout, entries=entries.get(g, [])))
    if launch[0]:
        cp.dispatch_workgroups(*launch)


def _submit(program, device: Device, chunk: list, prepared: list, pipes: list, default, guard: bool):
    """One submission of a chunk of cases, in three steps: plan (each slot's offset in its arena) →
    encode (the arenas, their uploads, the outputs' first words, the compute pass, the copy to staging)
    → read back (one mapping, each case's outputs)."""
    dev = device.device
    launches = {at: _launch(program, prepared[at][0], device) for at, _ in chunk}   # refused before anything
    totals = _place(chunk, dev.limits)
    arenas = _take_arenas(device, totals)
    _upload(dev, chunk, arenas, totals)
    enc = dev.create_command_encoder()
    if arenas.output is not None:
        _prime_outputs(enc, dev, chunk, arenas, totals, guard)
    _encode_pass(enc, dev, chunk, arenas, pipes, default, launches)
    if arenas.output is not None:
        enc.copy_buffer_to_buffer(arenas.output, 0, arenas.staging, 0, totals["output"])
    dev.queue.submit([enc.finish()])
    return _read_back(program, device, chunk, prepared, arenas, totals["output"], guard)


def _arena_of(s: _Slot) -> str:
    """The arena a slot lives in: its uniform bytes, its input, or its output (in place too)."""
    return "uniform" if s.binding.kind == "uniform" else "input" if s.data is not None and not s.inout else "output"


def _place(chunk: list, limits) -> dict[str, int]:
    """Plan: each slot's offset in its arena (aligned as the device asks), an in-place input's staging
    place in the input arena; returns each arena's size in bytes."""
    s_align = int(limits.get("min-storage-buffer-offset-alignment", 256))
    u_align = int(limits.get("min-uniform-buffer-offset-alignment", 256))
    totals = {"uniform": 0, "input": 0, "output": 0}
    for _, slots in chunk:
        for s in slots:
            kind = _arena_of(s)
            s.offset = _align(totals[kind], u_align if kind == "uniform" else s_align)
            if s.data is not None and not s.inout:
                s.size = len(s.data)
            totals[kind] = s.offset + s.size
            if s.inout:                   # the input's values, staged in the input arena
                s.src = _align(totals["input"], s_align)
                totals["input"] = s.src + len(s.data)
    return totals


@dataclass
class _Arenas:
    uniform: object
    input: object
    output: object
    staging: object                   # the output arena's mapped copy
    used: list                        # every buffer taken from the pool, given back after the readback


def _take_arenas(device: Device, totals: dict[str, int]) -> _Arenas:
    """The chunk's buffers from the device's pool (None where an arena is empty)."""
    U = device.wgpu.BufferUsage
    used = []

    def arena(kind: str, usage):
        if not totals[kind]:
            return None
        buf = device.buffer(_pooled(totals[kind]), usage)
        used.append(buf)
        return buf
    ubuf = arena("uniform", U.UNIFORM | U.COPY_DST)
    ibuf = arena("input", U.STORAGE | U.COPY_SRC | U.COPY_DST)
    obuf = arena("output", U.STORAGE | U.COPY_SRC | U.COPY_DST)
    staging = arena("output", U.MAP_READ | U.COPY_DST)
    return _Arenas(ubuf, ibuf, obuf, staging, used)


def _upload(dev, chunk: list, arenas: _Arenas, totals: dict[str, int]) -> None:
    """The uniforms in one write, each input (and each in-place input's values) in its own."""
    if arenas.uniform is not None:
        blob = bytearray(totals["uniform"])
        for _, slots in chunk:
            for s in slots:
                if s.binding.kind == "uniform":
                    blob[s.offset:s.offset + s.size] = s.data
        dev.queue.write_buffer(arenas.uniform, 0, blob)
    for _, slots in chunk:
        for s in slots:
            if s.data is not None and s.binding.kind != "uniform":   # the whole range: nothing earlier is left
                dev.queue.write_buffer(arenas.input, s.src if s.inout else s.offset, s.data)


def _prime_outputs(enc, dev, chunk: list, arenas: _Arenas, totals: dict[str, int], guard: bool) -> None:
    """The output arena before the kernel: poison and canaries under ``guard``, else zeros; then each
    in-place output's input values copied over it."""
    if guard:                         # poison in every output, canaries after it
        words = np.full(totals["output"] // 4, CANARY_WORD, dtype=np.uint32)
        for _, slots in chunk:
            for s in slots:
                if s.data is None:
                    words[s.offset // 4:s.offset // 4 + s.count] = poison(s.binding.dtype)
        dev.queue.write_buffer(arenas.output, 0, words)
    else:                             # zeroed, as a new WebGPU buffer is
        enc.clear_buffer(arenas.output, 0, totals["output"])
    for _, slots in chunk:            # in place: the input's values, over the poison, before the kernel
        for s in slots:
            if s.inout and s.count:
                enc.copy_buffer_to_buffer(arenas.input, s.src, arenas.output, s.offset, 4 * s.count)


def _encode_pass(enc, dev, chunk: list, arenas: _Arenas, pipes: list, default, launches: dict) -> None:
    """One compute pass: each case's slots bound to their arena, its pipeline, its launch."""
    buffers = {"uniform": arenas.uniform, "input": arenas.input, "output": arenas.output}
    cp = enc.begin_compute_pass()
    for at, slots in chunk:
        for s in slots:
            s.buffer = buffers[_arena_of(s)]
        _encode(cp, dev, pipes[at] if pipes else default, slots, launches[at])
    cp.end()


def _read_back(program, device: Device, chunk: list, prepared: list, arenas: _Arenas, size: int, guard: bool):
    """Read back: the staging buffer mapped once, each case's outputs copied out of it; the arenas go
    back to the pool whatever happens."""
    staging, words = arenas.staging, None
    out = []
    try:
        if staging is not None:
            staging.map_sync(device.wgpu.MapMode.READ, 0, size)
            words = np.frombuffer(staging.read_mapped(0, size, copy=False), dtype=np.uint32)
        for at, slots in chunk:
            out.append((at, _read_case(program, prepared[at], slots, words, guard)))
    finally:
        if staging is not None and staging.map_state == "mapped":
            staging.unmap()
        device.give_back(arenas.used)
    return out


def _read_case(program, case, slots: list[_Slot], words, guard: bool) -> Result:
    env, shapes, _ = case
    res = Result(outputs={}, env=env)
    for s in slots:
        if s.data is not None and not s.inout:
            continue
        b, o, name = s.binding, s.offset // 4, s.binding.output    # in place: the buffer holds the output
        body = words[o:o + s.count].copy()                  # the one copy out of the mapped staging
        if guard:                     # in place: it starts as the input, so no element shows unwritten
            res.unwritten[name] = np.array([], int) if s.inout else np.flatnonzero(body == poison(b.dtype))
            res.canary_hits[name] = np.flatnonzero(words[o + s.count:o + s.count + CANARY_WORDS] != CANARY_WORD)
        if name in shapes:
            values, malformed = from_device(body, b.dtype)
            if malformed.size:
                i = int(malformed[0])
                raise StudioError(f"{program.op}: output '{name}'[{i}] was written as the word 0x{int(body[i]):08x}, "
                                  f"which is no {b.dtype} (its low half is not zero; {malformed.size} such "
                                  "element(s))", file=program.path,
                                  hint="round every bf16 result with bf16_round() before storing it "
                                       "(shaders/bf16.wgsl; docs/bf16.md)")
            res.outputs[name] = values.reshape(shapes[name])
    return res


def roundtrip(device: Device, data: np.ndarray) -> np.ndarray:
    """Upload ``data`` and read it back by dispatch's own path (a pooled arena written by the queue,
    a device copy into a pooled mapped staging buffer, one copy out of the mapping), without a
    kernel: the transfer alone, which the benchmarks compare with a plain memcpy of the same bytes."""
    wgpu, dev = device.wgpu, device.device
    U = wgpu.BufferUsage
    raw = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
    n = _align(max(raw.nbytes, 4), 4)
    buf = device.buffer(_pooled(n), U.STORAGE | U.COPY_SRC | U.COPY_DST)
    staging = device.buffer(_pooled(n), U.MAP_READ | U.COPY_DST)
    try:
        dev.queue.write_buffer(buf, 0, raw if raw.nbytes == n else np.concatenate([raw, np.zeros(n - raw.nbytes, np.uint8)]))
        enc = dev.create_command_encoder()
        enc.copy_buffer_to_buffer(buf, 0, staging, 0, n)
        dev.queue.submit([enc.finish()])
        staging.map_sync(wgpu.MapMode.READ, 0, n)
        try:
            out = np.frombuffer(staging.read_mapped(0, n, copy=False), dtype=np.uint8)[:raw.nbytes].copy()
        finally:
            staging.unmap()
    finally:
        device.give_back([buf, staging])
    return out.view(data.dtype).reshape(data.shape)
