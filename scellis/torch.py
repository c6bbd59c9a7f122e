"""``scellis.torch.register(op)``: an op as a PyTorch custom operator (``torch.library.custom_op``) on
CPU tensors. Its fake implementation (for tracing, ``torch.compile``, ``opcheck``) gives the outputs'
shapes and dtypes from the signature alone, a data-dependent dim (the dynamic shape class) as a new
dynamic size; its autograd formula is the op's declared backward (``Op.vjp``: with
``require_receipt``, only a VJP with a passing gradcheck is used). A nondifferentiable op refuses
``backward()`` with the engine's message. The extra: ``pip install 'scellis-studio[torch]'``."""
from __future__ import annotations

import re

import numpy as np
import torch

from studio.engine.errors import StudioError

from .op import Op

__all__ = ["register"]

_TORCH = {"f32": torch.float32, "i32": torch.int32, "u32": torch.uint32}


def _ident(op: Op) -> str:
    return re.sub(r"\W", "_", op.id).strip("_") + "_" + op.hash[:12]


def _schema(op: Op) -> str:
    sig = op.signature
    for t in sig.inputs + sig.outputs:
        if t.dtype not in _TORCH:
            raise StudioError(f"{op.id}: {t.name} is {t.dtype}; the PyTorch bridge takes f32, i32 and u32 tensors",
                              field=t.name, hint="call the op with numpy arrays instead (op(x, ...))")
    ins = [f"Tensor {t.name}" for t in sig.inputs]
    params = [f"{'float' if p.dtype in ('f32', 'f64') else 'int'} {p.name}" for p in sig.params]
    outs = ["Tensor"] * len(sig.outputs)
    return (f"({', '.join(ins + (['*'] + params if params else []))}) -> "
            + (outs[0] if len(outs) == 1 else f"({', '.join(outs)})"))


def register(op: Op, *, name: str | None = None):
    """The op as ``torch.ops.scellis.<name>`` (default: its id and content hash as an identifier, with a
    suffix where another ``Op`` of the same content holds it); returns the ``CustomOpDef``, callable as
    ``f(x, ..., w=7)`` with CPU tensors. Registering the same ``Op`` again returns the same operator."""
    if getattr(op, "_torch_op", None) is not None:
        return op._torch_op
    sig = op.signature
    names, pnames = [t.name for t in sig.inputs], [p.name for p in sig.params]
    outs = [t.name for t in sig.outputs]
    qual = f"scellis::{_free_name(name, _ident(op))}"

    def split(args, kwargs):
        tensors = dict(zip(names, args))
        params = {k: kwargs[k] for k in pnames if k in kwargs}
        return tensors, params

    def forward(*args, **kwargs):
        tensors, params = split(args, kwargs)
        got = op.run({k: _host(v) for k, v in tensors.items()}, params)
        res = tuple(torch.from_numpy(np.ascontiguousarray(got[n])) for n in outs)
        return res[0] if len(res) == 1 else res

    custom = torch.library.custom_op(qual, forward, mutates_args=(), device_types="cpu", schema=_schema(op))

    def fake(*args, **kwargs):
        tensors, params = split(args, kwargs)
        specs = op.output_specs({k: tuple(v.shape) for k, v in tensors.items()}, params)
        res = []
        for n in outs:
            shape, _ = specs[n]
            shape = [torch.library.get_ctx().new_dynamic_size() if d is None else d for d in shape]
            res.append(tensors[names[0]].new_empty(shape, dtype=_TORCH[sig.output(n).dtype]) if names
                       else torch.empty(shape, dtype=_TORCH[sig.output(n).dtype]))
        return res[0] if len(res) == 1 else tuple(res)

    custom.register_fake(fake)

    grads = [n for n in names if n in op.differentiable_inputs]
    vjp_op = _register_vjp(op, qual, names, outs, grads) if grads else None

    def save(ctx, inputs, params, output):
        ctx.params = params
        ctx.save_for_backward(*inputs, *(output if isinstance(output, tuple) else (output,)))

    if pnames:          # torch passes keyword-only arguments (the params) by this name
        def setup_context(ctx, inputs, keyword_only_inputs, output):
            save(ctx, inputs, {k: keyword_only_inputs[k] for k in pnames if k in keyword_only_inputs}, output)
    else:
        def setup_context(ctx, inputs, output):
            save(ctx, inputs, {}, output)

    def backward(ctx, *cts):
        if vjp_op is None:                       # nondifferentiable: the engine's refusal, by name
            op.vjp({}, ctx.params, {})
        saved = ctx.saved_tensors
        cts = [c if c is not None else torch.zeros_like(o) for c, o in zip(cts, saved[len(names):])]
        got = vjp_op(*saved, *cts, **ctx.params)
        got = dict(zip(grads, got if isinstance(got, tuple) else (got,)))
        return tuple(got.get(n) for n in names)

    custom.register_autograd(backward, setup_context=setup_context)
    op._torch_op = custom
    return custom


def _register_vjp(op: Op, qual: str, names: list[str], outs: list[str], grads: list[str]):
    """The declared backward as an operator of its own (``<name>_vjp``: inputs, outputs, cotangents ->
    the gradients), so that autograd's formula is traceable (a fake implementation: the gradients
    have their inputs' shapes)."""
    sig = op.signature
    params = [f"{'float' if p.dtype in ('f32', 'f64') else 'int'} {p.name}" for p in sig.params]
    args = [f"Tensor {n}" for n in names] + [f"Tensor {n}" for n in outs] + [f"Tensor d{n}" for n in outs]
    schema = (f"({', '.join(args + (['*'] + params if params else []))}) -> "
              + ("Tensor" if len(grads) == 1 else f"({', '.join(['Tensor'] * len(grads))})"))
    k, m = len(names), len(outs)
    pnames = [p.name for p in sig.params]

    def vjp(*args, **kwargs):
        inputs = {n: _host(a) for n, a in zip(names, args[:k])}
        outputs = {n: _host(a) for n, a in zip(outs, args[k:k + m])}
        cts = {n: _host(a) for n, a in zip(outs, args[k + m:])}
        got = op.vjp(inputs, {p: kwargs[p] for p in pnames if p in kwargs}, cts, outputs)
        res = tuple(torch.from_numpy(np.ascontiguousarray(got[n])) for n in grads)
        return res[0] if len(res) == 1 else res

    custom = torch.library.custom_op(qual + "_vjp", vjp, mutates_args=(), device_types="cpu", schema=schema)

    def fake(*args, **kwargs):
        res = tuple(torch.empty_like(args[names.index(n)], dtype=torch.float32) for n in grads)
        return res[0] if len(res) == 1 else res

    custom.register_fake(fake)
    return custom


def _taken(name: str) -> bool:
    try:
        getattr(torch.ops.scellis, name)
    except (AttributeError, RuntimeError):
        return False
    return True


def _free_name(given: str | None, base: str) -> str:
    """``given`` if free, else ``base`` or ``base_2``, ``base_3``...: each registered ``Op`` keeps its own
    operator (its session and its receipt rule), even for the same content."""
    if given is not None:
        if _taken(given) or _taken(given + "_vjp"):
            raise StudioError(f"torch.ops.scellis.{given} is registered already", field="name",
                              hint="choose another name, or leave it out")
        return given
    k, name = 1, base
    while _taken(name) or _taken(name + "_vjp"):
        k += 1
        name = f"{base}_{k}"
    return name


def _host(t) -> np.ndarray:
    return t.detach().cpu().numpy()
