"""Bindings against the kernel, judged by the compiler.

The descriptor becomes explicit bind-group layouts; wgpu's validator decides whether the
kernel's globals fit them (group, binding, storage vs uniform, access mode, struct size).
Per binding, an engine-generated probe entry point that touches only that variable is
compiled with only that binding in its layout, so each disagreement is attributed to one
binding; the probe also reads each uniform field by name and type and, run once, reports the
byte offset the compiler gave it, so field order is checked too. Positions on the WGSL side
come from the kernel's parse tree (contract/wgsl.py) and are for display only."""
from __future__ import annotations

import struct

import numpy as np

from ..contract import wgsl
from ..contract.bindings import Binding, BindingDescriptor
from ..errors import StudioError
from .layout_errors import parse_layout_error
from .layout_words import struct_size_words

WGSL_SCALAR = {"f32": "f32", "i32": "i32", "u32": "u32", "bf16": "f32"}   # bf16: the high half of an f32 word


def layout_entry(b: Binding) -> dict:
    return {"binding": b.binding, "kind": b.kind, "access": b.access,
            "min_size": b.struct_size if b.kind == "uniform" else 0}


def layout_groups(desc: BindingDescriptor, only: list[Binding] | None = None) -> dict[int, list[dict]]:
    groups: dict[int, list[dict]] = {}
    for b in (only if only is not None else desc.bindings):
        groups.setdefault(b.group, []).append(layout_entry(b))
    return groups


def wgsl_declarations(source: str) -> list[dict]:
    """Module-scope ``@group(g) @binding(b) var<...> name`` sites, with the line and column of the
    name, read with the product's WGSL grammar (contract/wgsl.py); none for a text it refuses (the
    compile has reported it by then)."""
    try:
        found = wgsl.variables(source)
    except (StudioError, RecursionError):
        return []
    return [{"group": v.group, "binding": v.binding, "name": v.name, "space": list(v.space), "line": v.line,
             "col": v.col} for v in found if v.group is not None or v.binding is not None]


def _probe_group(desc: BindingDescriptor) -> int:
    used = {b.group for b in desc.bindings}
    return next(g for g in range(4) if g not in used) if len(used) < 4 else -1


def _probe_source(kernel: str, desc: BindingDescriptor, out_group: int) -> tuple[str, dict[str, int]]:
    lines = [kernel, "", f"@group({out_group}) @binding(0) var<storage, read_write> _scellis_probe_out: array<u32>;"]
    first_line: dict[str, int] = {}
    for k, b in enumerate(desc.bindings):
        first_line[b.name] = kernel.count("\n") + len(lines) - 1 + 2
        if b.kind == "storage":
            t = WGSL_SCALAR[b.dtype]
            body = f"let _v: {t} = {b.name}[0]; _scellis_probe_out[0] = bitcast<u32>(_v);"
        else:
            body = " ".join(f"let _f{j}: {WGSL_SCALAR[f.dtype]} = {b.name}.{f.name}; "
                            f"_scellis_probe_out[{j}] = bitcast<u32>(_f{j});" for j, f in enumerate(b.fields))
        lines.append(f"@compute @workgroup_size(1) fn _scellis_probe_{k}() {{ {body} }}")
    return "\n".join(lines) + "\n", first_line


def check_layout(device, kernel: str, desc: BindingDescriptor, *, entry: str, kernel_file: str,
                 descriptor_file: str, constants: dict | None = None) -> list[StudioError]:
    """Every disagreement between the descriptor and the WGSL, each naming both places.
    ``constants``: values for the kernel's WGSL overrides that have no default (overrides.py)."""
    user_lines = kernel.count("\n") + 1
    device.compile(kernel, file=kernel_file, user_lines=user_lines)   # the author's own errors first
    decls = wgsl_declarations(kernel)
    by_name = {d["name"]: d for d in decls}
    by_slot = {(d["group"], d["binding"]): d for d in decls}

    def wgsl_site(d: dict | None, what: str) -> StudioError:
        if d is None:
            return StudioError(f"no module-scope variable {what}", file=kernel_file)
        return StudioError(f"`var<{', '.join(d['space'])}> {d['name']}` at @group({d['group']}) "
                           f"@binding({d['binding']})", file=kernel_file, line=d["line"], col=d["col"])

    def problem(b: Binding, msg: str, d: dict | None, hint: str) -> StudioError:
        return StudioError(f"binding '{b.name}': {msg}", file=descriptor_file, line=b.line, col=b.col,
                           related=[wgsl_site(d, f"named '{b.name}'")], hint=hint)

    errors: list[StudioError] = []
    for b in desc.bindings:
        if b.kind == "storage" and b.dtype not in WGSL_SCALAR:
            errors.append(StudioError(f"binding '{b.name}': {b.dtype} storage is not supported by the device layer",
                                      file=descriptor_file, line=b.line, col=b.col,
                                      hint="store bf16 values widened to f32 (or packed in u32) for now"))
    if errors:
        return errors
    out_group = _probe_group(desc)
    if out_group < 0:
        return errors  # all four groups in use: only the whole-layout check below applies
    src, _ = _probe_source(kernel, desc, out_group)
    try:
        device.compile(src, file=kernel_file, user_lines=user_lines)
        probes_compile = True
    except StudioError:
        probes_compile = False
    out_entry = {"binding": 0, "kind": "storage", "access": "read_write", "min_size": 0}
    for k, b in enumerate(desc.bindings):
        d = by_name.get(b.name)
        single = layout_groups(desc, only=[b])
        single.setdefault(out_group, []).append(out_entry)
        probe_only = (src if probes_compile else
                      _probe_source(kernel, BindingDescriptor((b,), desc.text), out_group)[0])
        try:
            pipe, layouts = device.pipeline(probe_only, f"_scellis_probe_{k if probes_compile else 0}", single,
                                            file=kernel_file, user_lines=user_lines, constants=constants)
        except StudioError as e:
            want = (f"{b.dtype} elements" if b.kind == "storage"
                    else "fields " + ", ".join(f"{f.name}: {f.dtype}" for f in b.fields))
            got = parse_layout_error(e.message)
            why = (f"the kernel's {'element' if b.kind == 'storage' else 'field'} type is {got.got}"
                   if got and got.kind == "element_type" else e.message)
            errors.append(problem(b, f"the descriptor says {want}; {why}", d,
                                  "make the WGSL variable's name and type agree with the descriptor"))
            continue
        except Exception as e:  # noqa: BLE001 (wgpu's validator: slot, address space, access or size)
            short = parse_layout_error(str(e))
            if short is not None and short.kind == "struct_size" and b.kind == "uniform":   # layout_words.py
                msg, hint = struct_size_words(b, kernel, short)
                errors.append(problem(b, msg, d or by_slot.get((b.group, b.binding)), hint))
                continue
            errors.append(problem(b, _layout_message(str(e), b), d or by_slot.get((b.group, b.binding)),
                                  "make @group/@binding, the address space and access mode agree"))
            continue
        if b.kind == "uniform" and b.fields:
            got = _field_offsets(device, pipe, layouts, b, out_group)
            for j, f in enumerate(b.fields):
                if got[j] != 4 * j:
                    errors.append(problem(b, f"field '{f.name}' is at byte {got[j]} in the kernel's struct, "
                                             f"the descriptor puts it at byte {4 * j}", d,
                                          "list the struct fields in the same order in both"))
    # the real entry point with the whole layout: globals the descriptor does not declare
    try:
        device.pipeline(kernel, entry, layout_groups(desc), file=kernel_file, user_lines=user_lines,
                        constants=constants)
    except StudioError as e:
        errors.append(e)
    except Exception as e:  # noqa: BLE001 (wgpu's validator, whatever it raises: its text is parsed into the slot it names)
        got = parse_layout_error(str(e))
        d = by_slot.get((got.group, got.binding)) if got and got.group is not None else None
        if got and got.kind == "entry_point":
            errors.append(StudioError(f"entry point '{entry}' not found in the kernel", file=kernel_file,
                                      hint="set [kernel] entry to the @compute function's name"))
        elif not errors:
            errors.append(StudioError(
                "the kernel uses " + (got.slot if got else "a binding")
                + " which the descriptor does not declare", file=kernel_file,
                line=d["line"] if d else None, col=d["col"] if d else None,
                related=[StudioError("bindings descriptor", file=descriptor_file,
                                     line=desc.bindings[0].line if desc.bindings else None)],
                hint="declare every global the kernel uses in [bindings]"))
    return errors


def _layout_message(text: str, b: Binding) -> str:
    got = parse_layout_error(text)
    if got is None or got.kind in ("entry_point", "element_type"):
        return " ".join([ln.strip() for ln in text.splitlines() if ln.strip()][-2:])
    if got.kind == "binding_type":
        return f"the descriptor says {got.layout}, the kernel declares {got.shader}"
    if got.kind == "struct_size":
        return f"struct size disagrees: {got.cause}"
    slot = got.slot if got.group is not None else "another slot"
    return f"the kernel declares it at {slot}, the descriptor at @group({b.group}) @binding({b.binding})"


def _field_offsets(device, pipe, layouts, b: Binding, out_group: int) -> list[int]:
    """Run the uniform probe with a marker in every 4-byte slot; the value each field reads
    back tells the offset the compiler assigned it."""
    wgpu = device.wgpu
    dev = device.device
    size = max(16, (b.struct_size + 15) // 16 * 16)
    markers = np.arange(1, size // 4 + 1, dtype=np.uint32) | np.uint32(0x5C000000)
    ubuf = dev.create_buffer_with_data(data=markers.tobytes(), usage=wgpu.BufferUsage.UNIFORM)
    obuf = dev.create_buffer(size=4 * max(1, len(b.fields)), usage=wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC)
    groups = {b.group: dev.create_bind_group(layout=layouts[b.group], entries=[
        {"binding": b.binding, "resource": {"buffer": ubuf, "offset": 0, "size": size}}]),
        out_group: dev.create_bind_group(layout=layouts[out_group], entries=[
            {"binding": 0, "resource": {"buffer": obuf, "offset": 0, "size": obuf.size}}])}
    for g in range(len(layouts)):
        if g not in groups:
            groups[g] = dev.create_bind_group(layout=layouts[g], entries=[])
    enc = dev.create_command_encoder()
    cp = enc.begin_compute_pass()
    cp.set_pipeline(pipe)
    for g, bg in groups.items():
        cp.set_bind_group(g, bg)
    cp.dispatch_workgroups(1)
    cp.end()
    dev.queue.submit([enc.finish()])
    vals = struct.unpack(f"<{len(b.fields)}I", bytes(dev.queue.read_buffer(obuf))[:4 * len(b.fields)])
    return [((v & 0xFFFFFF) - 1) * 4 if v & 0xFF000000 == 0x5C000000 else -1 for v in vals]
