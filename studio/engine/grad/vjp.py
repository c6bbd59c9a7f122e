"""Applying an op's declared backward. On the reference path (f64, unrounded: the anchor that
gradcheck checks by finite differences) and on the device (the `[backward]` kernel, run by the
one executor, for training).

Conventions (docs/gradients.md): the cotangent of output `y` is `dy`, the gradient of input `x`
is `dx`. A reference VJP function receives the inputs by name, every cotangent `d<output>` and
the params as keywords, and returns `{input: gradient}` (or an array when its rule covers one
input). `route(dy, to = f)`: `f(inputs, **params)` gives, per element of `y`, the flat index of
the input element the forward selected; `dx = 0` then `dx[f[i]] += dy[i]` in increasing `i`."""
from __future__ import annotations

import numpy as np

from ..context import Context
from ..contract.expr import unknown_symbols
from ..contract.package import OpPackage
from ..device.execution import KernelProgram, Result, dispatch, package_owner
from ..device.layout import check_layout
from ..device.overrides import check_constants, check_overrides
from ..errors import StudioError
from ..precision import is_float, numpy_dtype, to_f64
from .composite import bind, evaluate, step_error
from .run import run_op


def cotangent_name(output: str) -> str:
    return f"d{output}"


def gradient_name(input_: str) -> str:
    return f"d{input_}"


def vjp_inputs(pkg) -> list[str]:
    """The inputs the declared backward gives gradients for (f32 inputs only for composites)."""
    c = pkg.contract
    if c.backward.kind == "nondifferentiable":
        return []
    if c.backward.kind == "composite":
        return [t.name for t in c.signature.inputs if is_float(t.dtype)]
    return [n for r in c.backward.rules for n in r.inputs]


def device_inputs(pkg) -> list[str]:
    """The inputs whose gradient the device VJP kernel computes."""
    return [n for r in pkg.contract.backward.rules if r.device_kernel for n in r.inputs]


def _f64(pkg, inputs: dict) -> dict:
    out = {}
    for t in pkg.contract.signature.inputs:
        a = np.asarray(inputs[t.name])
        out[t.name] = to_f64(a, t.dtype)
    return out


def _shaped(pkg, what: str, name: str, a, shape) -> np.ndarray:
    a = np.asarray(a, dtype=np.float64)
    if a.shape != tuple(shape):
        if a.size != int(np.prod(shape)):
            raise StudioError(f"{what} '{name}' has shape {a.shape}, the signature says {tuple(shape)}",
                              file=pkg.reference_path, hint=f"return an array of shape {tuple(shape)}")
        a = a.reshape(shape)
    return a


def forward64(ctx: Context, pkg: OpPackage, inputs: dict, params: dict) -> dict[str, np.ndarray]:
    """The author's forward on the reference path in f64, unrounded."""
    c = pkg.contract
    if c.composite is not None:
        return evaluate(pkg, inputs, params, lambda p, a, q: forward64(ctx, p, a, q), catalog=ctx.catalog)[0]
    arrays = _f64(pkg, inputs)
    env = c.signature.resolve({k: v.shape for k, v in arrays.items()}, dict(params))
    shapes = c.signature.output_shapes(env)
    out = ctx.references.call_as_given(pkg, c.reference_forward, arrays, params)
    names = [o.name for o in c.signature.outputs]
    if not isinstance(out, dict):
        out = {names[0]: out} if len(names) == 1 else dict(zip(names, out))
    missing = [n for n in names if n not in out]
    if missing:
        raise StudioError(f"reference returned no output '{missing[0]}'", file=pkg.reference_path)
    return {n: _shaped(pkg, "reference output", n, out[n], shapes[n]) for n in names}


def reference_vjp(ctx: Context, pkg: OpPackage, inputs: dict, params: dict, cotangents: dict) -> dict[str, np.ndarray]:
    """The declared backward on the reference path in f64: {input: gradient}.
    cotangents: {d<output>: array} for every output."""
    c = pkg.contract
    kind = c.backward.kind
    if kind == "nondifferentiable":
        raise StudioError(f"{pkg.id} is declared nondifferentiable: it has no VJP", file=pkg.manifest_path,
                          field="backward.text", hint="declare a vjp, or keep gradients from flowing through it")
    arrays = _f64(pkg, inputs)
    cts = {cotangent_name(o.name): np.asarray(cotangents[cotangent_name(o.name)], np.float64)
           for o in c.signature.outputs}
    if kind == "composite":
        return _composite_vjp(ctx, pkg, arrays, params, cts)
    grads: dict[str, np.ndarray] = {}
    for rule in c.backward.rules:
        if rule.form == "route":
            grads.update(_route(ctx, pkg, rule, arrays, params, cts))
            continue
        out = ctx.references.call_as_given(pkg, rule.function, arrays, params, **cts)
        if not isinstance(out, dict):
            if len(rule.inputs) != 1:
                raise StudioError(f"reference {rule.function} returned one array for {len(rule.inputs)} inputs",
                                  file=pkg.reference_path, hint="return {input: gradient} for each input of the rule")
            out = {rule.inputs[0]: out}
        for name in rule.inputs:
            if name not in out:
                raise StudioError(f"reference {rule.function} returned no gradient for '{name}'",
                                  file=pkg.reference_path, hint=f"return {{'{name}': gradient, ...}}")
            grads[name] = _shaped(pkg, f"reference {rule.function} gradient", name, out[name], arrays[name].shape)
    return grads


def _composite_vjp(ctx: Context, pkg: OpPackage, inputs: dict, params: dict, cotangents: dict) -> dict:
    """The derived backward of a composite on the reference path (f64): the steps' reference
    forwards, then their VJPs in reverse order, cotangents summed per value."""
    sig = pkg.contract.signature
    env = sig.resolve({k: np.shape(v) for k, v in inputs.items()}, dict(params))
    steps = bind(pkg, ctx.catalog)
    values = dict(inputs)
    for bs in steps:
        out = forward64(ctx, bs.pkg, {k: values[v] for k, v in bs.inputs.items()}, bs.params(env))
        values.update({name: out[k] for k, name in bs.outputs.items()})
    cts = {t.name: np.asarray(cotangents[f"d{t.name}"], np.float64) for t in sig.outputs}
    for bs in reversed(steps):
        if not any(name in cts for name in bs.outputs.values()):
            continue
        args = {k: values[v] for k, v in bs.inputs.items()}
        dys = {f"d{k}": cts.get(name, np.zeros_like(values[name])) for k, name in bs.outputs.items()}
        try:
            grads = reference_vjp(ctx, bs.pkg, args, bs.params(env), dys)
        except StudioError as e:
            raise step_error(bs, pkg, e) from None
        for k, g in grads.items():
            name = bs.inputs[k]
            cts[name] = cts[name] + g if name in cts else g
    return {t.name: cts.get(t.name, np.zeros(np.shape(inputs[t.name]))) for t in sig.inputs if is_float(t.dtype)}


def _route(ctx: Context, pkg: OpPackage, rule, arrays, params, cts) -> dict[str, np.ndarray]:
    if len(rule.inputs) != 1 or rule.cotangent not in cts:
        raise StudioError(f"route({rule.cotangent}, to = {rule.index}) needs one input and a cotangent "
                          f"d<output> (one of {', '.join(cts)})", file=pkg.manifest_path, field="backward.text")
    name = rule.inputs[0]
    ct = cts[rule.cotangent]
    idx = np.asarray(ctx.references.call_as_given(pkg, rule.index, arrays, params))
    size = arrays[name].size
    if idx.size != ct.size or idx.dtype.kind not in "iu" or (idx.size and (idx.min() < 0 or idx.max() >= size)):
        raise StudioError(f"reference {rule.index} must give, per element of the output, the flat index of the "
                          f"selected element of '{name}' (integers in [0, {size}))", file=pkg.reference_path)
    dx = np.zeros(size)
    np.add.at(dx, idx.reshape(-1), ct.reshape(-1))
    return {name: dx.reshape(arrays[name].shape)}


# ------------------------------------------------------------------ the device VJP

def backward_tensors(pkg) -> dict[str, tuple[str, str, tuple]]:
    """What a backward kernel may bind, by name: (role, dtype, dims). Roles: input and output
    (the forward's, read), cotangent (d<output>, read), gradient (d<input>, read_write)."""
    sig = pkg.contract.signature
    out = {t.name: ("input", t.dtype, t.dims) for t in sig.inputs}
    out.update({t.name: ("output", t.dtype, t.dims) for t in sig.outputs})
    out.update({cotangent_name(t.name): ("cotangent", t.dtype, t.dims) for t in sig.outputs})
    for name in device_inputs(pkg):
        t = sig.input(name)
        out[gradient_name(name)] = ("gradient", t.dtype, t.dims)
    return out


def backward_program(pkg: OpPackage) -> KernelProgram:
    bk = pkg.contract.backward_kernel
    if bk is None:
        raise StudioError(f"{pkg.id} declares no device VJP", file=pkg.manifest_path, field="backward.kernel",
                          hint='add on device("backward.wgsl") to the vjp rule and a [backward] kernel section')
    return KernelProgram(f"{pkg.id} (backward)", pkg.backward_source, pkg.backward_path, bk.entry,
                         bk.workgroup_size, bk.invocations, bk.bindings, owner=package_owner(pkg))


def backward_dispatch(ctx: Context, pkg: OpPackage, items: list[tuple[dict, dict, dict, dict | None]], *,
                      guard: bool = False) -> list[Result]:
    """The [backward] kernel on many (inputs, params, cotangents, forward outputs or None) in one
    submission; with ``guard`` the gradients are poisoned and canaried like conformance's outputs."""
    program, prepared = backward_prepared(ctx, pkg, items)
    return dispatch(program, prepared, device=ctx.device, guard=guard)


def backward_prepared(ctx: Context, pkg: OpPackage, items: list[tuple[dict, dict, dict, dict | None]]) -> tuple:
    """The [backward] program and, per item, what the executor runs it on: (env, the gradients'
    shapes, the arrays of its read bindings) — also the race sanitizer's (proof/races.py)."""
    c = pkg.contract
    on_device = device_inputs(pkg)
    program = backward_program(pkg)
    tensors = backward_tensors(pkg)
    prepared = []
    for inputs, params, cotangents, outputs in items:
        env = c.signature.resolve({k: np.shape(v) for k, v in inputs.items()}, dict(params))
        arrays = {}
        for b in program.bindings:
            role, dtype, _ = tensors.get(b.name, ("scratch", None, None))
            if b.kind != "storage" or role in ("scratch", "gradient"):
                continue
            if role == "output":
                if outputs is None:
                    outputs = run_op(ctx, pkg, inputs, params)
                src = outputs[b.name]
            else:
                src = inputs[b.name] if role == "input" else cotangents[b.name]
            arrays[b.name] = np.ascontiguousarray(np.asarray(src, dtype=numpy_dtype(dtype)))
        prepared.append((env, {gradient_name(n): tuple(np.shape(inputs[n])) for n in on_device}, arrays))
    return program, prepared


def device_vjp(ctx: Context, pkg: OpPackage, inputs: dict, params: dict, cotangents: dict, *,
               outputs: dict | None = None) -> dict[str, np.ndarray]:
    """The declared backward on the device (f32): the [backward] kernel for the inputs whose rule
    says `on device(...)`; rules without a device kernel run on the reference path, rounded to f32."""
    on_device = device_inputs(pkg)
    grads: dict[str, np.ndarray] = {}
    if on_device:
        res = backward_dispatch(ctx, pkg, [(inputs, params, cotangents, outputs)])[0]
        grads = {n: res.outputs[gradient_name(n)] for n in on_device}
    rest = [n for n in vjp_inputs(pkg) if n not in grads]
    if rest:
        ref = reference_vjp(ctx, pkg, inputs, params, cotangents)
        grads.update({n: ref[n].astype(np.float32) for n in rest})
    return grads


def check_backward_kernel(pkg, *, device=None) -> list[StudioError]:
    """The device VJP's bindings against the VJP's tensors, then (with a device) against its WGSL,
    judged by wgpu's validator like the forward kernel's."""
    c = pkg.contract
    bk = c.backward_kernel
    if bk is None:
        return []
    mf = pkg.manifest_path
    desc = bk.bindings
    errors: list[StudioError] = []
    tensors = backward_tensors(pkg)
    forward_names = {t.name for t in c.signature.inputs + c.signature.outputs}
    for name, (role, _, _) in tensors.items():
        if role in ("cotangent", "gradient") and name in forward_names:
            errors.append(StudioError(f"the {role} '{name}' has the name of a tensor of the forward", file=mf,
                                      field="signature", hint="rename that input or output"))
    bound = {b.name: b for b in desc}
    for name in device_inputs(pkg):
        g = gradient_name(name)
        if g not in bound:
            t = tensors[g]
            errors.append(StudioError(f"the backward kernel computes the gradient of '{name}' but binds no '{g}'",
                                      file=desc.file or mf, line=desc.line, col=desc.col, field=g,
                                      hint=f"add: @group(0) @binding(N) {g} : storage read_write "
                                           f"{t[1]}[{', '.join(map(str, t[2]))}]"))
    for b in desc:
        for e in (*b.dims, *(f.value for f in b.fields)):
            stray = sorted(e.symbols() - c.signature.symbols)
            if stray:
                errors.append(StudioError(f"'{stray[0]}' is not a symbol of the signature", file=desc.file,
                                          line=b.line, col=b.col, field=b.name,
                                          hint=f"use {', '.join(sorted(c.signature.symbols))}"))
        if b.kind != "storage":
            continue
        role, dtype, dims = tensors.get(b.name, ("scratch", None, ()))
        if role == "scratch":
            if b.access == "read":
                errors.append(StudioError(f"'{b.name}' is read-only storage but is none of the VJP's tensors",
                                          file=desc.file, line=b.line, col=b.col, field=b.name,
                                          hint=f"bind one of {', '.join(tensors)}, or scratch as read_write"))
            continue
        access = "read_write" if role == "gradient" else "read"
        want = f"storage {access} {dtype}[{', '.join(map(str, dims))}]"
        if (b.access, b.dtype) != (access, dtype) or [str(d) for d in b.dims] != [str(d) for d in dims]:
            errors.append(StudioError(f"{b.name} is bound as '{b.layout}' but the VJP's {role} needs '{want}'",
                                      file=desc.file, line=b.line, col=b.col, field=b.name,
                                      hint=f"write: {b.name} : {want}"))
    errors += unknown_symbols(bk.invocations, set(c.signature.symbols), "[backward] invocations", mf,
                              "backward.invocations")
    if desc.overrides or "override" in (pkg.backward_source or ""):
        errors += check_overrides(pkg.backward_source, desc, kernel_file=pkg.backward_path, descriptor_file=mf)
    if device is not None and not errors:
        try:
            errors += check_layout(device, pkg.backward_source, desc, entry=bk.entry,
                                   kernel_file=pkg.backward_path, descriptor_file=mf,
                                   constants=check_constants(pkg.backward_source, desc))
        except StudioError as e:
            errors.append(e)
    return errors
