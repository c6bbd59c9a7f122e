"""``Op``: one op package as a Python callable. ``op(x, w=7)`` takes numpy arrays (or device arrays)
and keyword parameters, judges them against the signature with the messages ``scellis run`` gives,
and runs down ``scellis run``'s path. With ``require_receipt`` (the default) a result comes only from
an op proven on this GPU profile: the rule of ``scellis run --require-receipt``, asked once per call
geometry (content, GPU profile, input shapes, parameter values: the session's proof gate)."""
from __future__ import annotations

import numpy as np

from studio.engine.contract.expr import size
from studio.engine.contract.signature import DataDim
from studio.engine.errors import StudioError
from studio.engine.precision import numpy_dtype
from studio.engine.services import calls, reports

from .arrays import DeviceArray


class Op:
    def __init__(self, session, pkg, *, require_receipt: bool = True):
        self.session, self.package, self.require_receipt = session, pkg, require_receipt

    # ------------------------------------------------------------------ what it is
    @property
    def id(self) -> str:
        return self.package.id

    @property
    def hash(self) -> str:
        """The content hash: what receipts are bound to."""
        return self.package.hash

    @property
    def signature(self):
        return self.package.contract.signature

    @property
    def differentiable(self) -> bool:
        return self.package.contract.backward.differentiable

    @property
    def differentiable_inputs(self) -> list[str]:
        """The inputs the declared backward gives gradients for (none: nondifferentiable)."""
        return calls.gradient_inputs(self.package)

    def __repr__(self) -> str:
        return f"<scellis op {self.id} ({self.hash[:12]}): {self.signature.text}>"

    def output_specs(self, input_shapes: dict, params: dict) -> dict[str, tuple[tuple, np.dtype]]:
        """{output: (shape, dtype)} for inputs of ``input_shapes``, from the signature alone (nothing
        runs): the fake implementation a framework traces with. A data-dependent dim (``?m``, the
        dynamic shape class) is None."""
        sig = self.signature
        env = sig.resolve({k: tuple(int(d) for d in v) for k, v in input_shapes.items()}, dict(params))
        return {t.name: (tuple(None if isinstance(d, DataDim) else size(d, env, f"{t.name} dim {i}", t.name)
                               for i, d in enumerate(t.dims)), numpy_dtype(t.dtype)) for t in sig.outputs}

    # ------------------------------------------------------------------ calling it
    def bind(self, args: tuple, kwargs: dict) -> tuple[dict, dict]:
        """(inputs, params) from a call: positional arguments are the inputs in the signature's order,
        keywords name inputs or parameters."""
        sig = self.signature
        names = [t.name for t in sig.inputs]
        if len(args) > len(names):
            raise StudioError(f"{self.id} takes {len(names)} input(s); got {len(args)}", field="inputs",
                              hint=f"its inputs: {', '.join(names) or 'none'}; parameters go by keyword")
        inputs = dict(zip(names, args))
        params = {}
        for k, v in kwargs.items():
            if k in names:
                if k in inputs:
                    raise StudioError(f"{self.id}: input '{k}' is given twice", field=k)
                inputs[k] = v
            else:
                params[k] = v
        return inputs, params

    def __call__(self, *args, **kwargs):
        """The outputs: one array (or a tuple, in the signature's order, for several); device arrays
        when any input is one."""
        inputs, params = self.bind(args, kwargs)
        if any(isinstance(v, DeviceArray) for v in inputs.values()):
            return self._on_device(inputs, params)
        inputs = {k: np.asarray(v) for k, v in inputs.items()}
        return self._shaped(self.run(inputs, params))

    def run(self, inputs: dict, params: dict) -> dict[str, np.ndarray]:
        """{output: array} for host ``inputs`` by name."""
        ctx, pkg = self.session.context, self.package
        calls.check_call(pkg, inputs, params)            # refusals first, before any proof
        if self.require_receipt:
            self.session.gate.admit(ctx, pkg, inputs, params)
        return calls.run(ctx, pkg, inputs, params)

    def _on_device(self, inputs: dict, params: dict):
        s, pkg = self.session, self.package
        sig = self.signature
        missing = [t.name for t in sig.inputs if t.name not in inputs]
        if missing:
            raise StudioError(f"{self.id} needs input(s) {', '.join(missing)}", field=missing[0])
        arrays = {t.name: DeviceArray.of(inputs[t.name]) for t in sig.inputs}
        sig.resolve({k: v.shape for k, v in arrays.items()}, dict(params))      # shapes and params before any upload
        tensors = {t.name: arrays[t.name].tensor_for(s, t) for t in sig.inputs}
        if self.require_receipt:
            s.gate.admit(s.context, pkg, tensors, params)
        outs = s.calls.run(pkg, tensors, params)
        return self._shaped({k: DeviceArray(tensor=v, session=s) for k, v in outs.items()})

    def _shaped(self, outs: dict):
        names = [t.name for t in self.signature.outputs]
        return outs[names[0]] if len(names) == 1 else tuple(outs[n] for n in names)

    # ------------------------------------------------------------------ its backward
    def vjp(self, inputs: dict, params: dict, cotangents: dict, outputs: dict | None = None) -> dict[str, np.ndarray]:
        """{input: gradient} of the call (``inputs``, ``params``) for ``cotangents`` {output: array},
        from the declared backward. With ``require_receipt``, a declared VJP needs a passing gradcheck
        covering ``params`` (or one that passes now), training's rule; a nondifferentiable op refuses."""
        ctx, pkg = self.session.context, self.package
        if self.require_receipt and self.differentiable:
            self.session.gate.admit_vjp(ctx, pkg, params)
        return calls.vjp(ctx, pkg, inputs, params, cotangents, outputs)

    # ------------------------------------------------------------------ its proofs
    def prove(self, *, seed: int = 0, large: bool = False) -> reports.Conformance:
        """Conformance (``scellis conform``): the generated corpus against the reference, on this
        device; a pass earns the receipt."""
        return reports.conformance(self.session.context, self.package, seed=seed, large=large)

    def gradcheck(self, *, h: float | None = None, seed: int = 0, **params) -> reports.Gradcheck:
        """The declared backward against finite differences, with its negative controls
        (``scellis gradcheck``); ``params`` as keywords (none: the contract's sweep)."""
        return reports.gradcheck(self.session.context, self.package, params=params or None, h=h, seed=seed)

    @property
    def receipt(self) -> reports.Receipt:
        """This content's conformance receipts, judged for this GPU profile now (``scellis receipts``)."""
        return reports.receipt(self.session.context, self.package)

    def card(self) -> reports.Card:
        return reports.card(self.session.context, self.package)
