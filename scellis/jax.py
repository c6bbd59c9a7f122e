"""``scellis.jax.wrap(op)``: an op as a JAX function: ``jax.pure_callback`` runs it (the output shapes
and dtypes come from the signature, so ``jax.jit`` traces it without running anything), and
``jax.custom_vjp`` gives it the declared backward (``Op.vjp``: with ``require_receipt``, only a VJP
with a passing gradcheck is used; a nondifferentiable op refuses with the engine's message).
Parameters are Python numbers, fixed where the function is traced. The extra:
``pip install 'scellis-studio[jax]'``."""
from __future__ import annotations

import jax
import numpy as np

from studio.engine.errors import StudioError

from .op import Op

__all__ = ["wrap"]


def wrap(op: Op):
    """``f(*inputs, **params)``: JAX arrays in (the signature's order, or by name), JAX arrays out."""
    sig = op.signature
    if sig.shape_class == "dynamic":
        raise StudioError(f"{op.id} has an output of data-dependent size ({sig.text}); a JAX function needs its "
                          "output shapes before it runs", field="signature",
                          hint="call the op with numpy arrays, or use scellis.torch (dynamic sizes)")
    names, outs = [t.name for t in sig.inputs], [t.name for t in sig.outputs]
    grads = [n for n in names if n in op.differentiable_inputs]
    built: dict = {}

    def build(params: dict):
        def out_specs(xs):
            specs = op.output_specs({n: x.shape for n, x in zip(names, xs)}, params)
            return tuple(jax.ShapeDtypeStruct(specs[n][0], specs[n][1]) for n in outs)

        def run(*xs):
            got = op.run({n: np.asarray(x) for n, x in zip(names, xs)}, params)
            return tuple(np.ascontiguousarray(got[n]) for n in outs)

        def back(xs, ys, cts):
            got = op.vjp({n: np.asarray(x) for n, x in zip(names, xs)}, params,
                         {n: np.asarray(c) for n, c in zip(outs, cts)}, {n: np.asarray(y) for n, y in zip(outs, ys)})
            return tuple(np.asarray(got[n], np.float32) for n in grads)

        @jax.custom_vjp
        def f(*xs):
            return jax.pure_callback(run, out_specs(xs), *xs)

        def f_fwd(*xs):
            ys = f(*xs)
            return ys, (xs, ys)

        def f_bwd(res, cts):
            xs, ys = res
            if not grads:
                op.vjp({}, params, {})                    # nondifferentiable: raises the engine's message
            specs = tuple(jax.ShapeDtypeStruct(xs[names.index(n)].shape, np.float32) for n in grads)
            got = dict(zip(grads, jax.pure_callback(lambda a, b, c: back(a, b, c), specs, xs, ys, cts)))
            return tuple(got.get(n) for n in names)

        f.defvjp(f_fwd, f_bwd)
        return f

    def call(*args, **kwargs):
        inputs, params = op.bind(args, kwargs)
        key = tuple(sorted((k, repr(v)) for k, v in params.items()))
        if key not in built:
            built[key] = build(params)
        ys = built[key](*[inputs[n] for n in names])
        return ys[0] if len(outs) == 1 else ys

    call.op = op
    return call
