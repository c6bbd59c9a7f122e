"""Calling an op from the user's own Python (the ``scellis`` package, docs/api.md): the rules a call
obeys, held in objects the caller owns, so nothing is cached in a module.

* ``ProofGate``: "a result only from a proven op" (``actions.require_proof``, the rule of
  ``scellis run --require-receipt``), asked once per call geometry (content hash, GPU profile,
  input shapes, parameter values): a later call with the same geometry pays no receipt
  re-verification, any other asks ``require_proof`` again (which applies its coverage rules).
  The same for the declared backward: a declared VJP is used only with a passing gradcheck receipt
  that covers the call's parameters, or a gradcheck that passes at them now (training's rule,
  studio/engine/train/autodiff.py).
* ``DeviceCalls``: ops on tensors that stay on the device between calls (the workflow executor's
  ``Resident``), with every transfer counted.
* ``vjp``: the declared backward of one call (on the device when the op has a backward kernel,
  else on the reference path rounded to f32); a nondifferentiable op refuses with the engine's
  message."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..arrays import check_input
from ..context import Context
from ..contract.domains import check_values
from ..contract.package import OpPackage
from ..errors import StudioError
from ..grad.vjp import cotangent_name, device_vjp, reference_vjp, vjp_inputs
from ..proof import receipts
from ..proof.gradcoverage import outside, param_args, recorded
from ..workflow.resident import DeviceTensor, Resident
from . import actions
from .tuning import tuned

__all__ = ["DeviceCalls", "DeviceTensor", "ProofGate", "check_call", "gradient_inputs", "run", "vjp"]


def check_call(pkg: OpPackage, inputs: dict, params: dict) -> None:
    """What ``actions.run`` judges before anything runs, for host arrays: every input named, its dtype
    and domain, the index inputs' values, and (``Signature.resolve``) the shapes and parameters, with
    the CLI's messages."""
    sig = pkg.contract.signature
    missing = [t.name for t in sig.inputs if t.name not in inputs]
    if missing:
        raise StudioError(f"{pkg.id} needs input(s) {', '.join(missing)}", field=missing[0],
                          hint=f"call it with {', '.join(t.name for t in sig.inputs)} (the signature's order)")
    for t in sig.inputs:
        check_input(np.asarray(inputs[t.name]), t)
    check_values(sig, inputs, params)
    sig.resolve({k: np.shape(v) for k, v in inputs.items()}, dict(params))


def run(ctx: Context, pkg: OpPackage, inputs: dict, params: dict) -> dict[str, np.ndarray]:
    """One call on host arrays, down ``scellis run``'s path (``actions.run``); the proof is the gate's."""
    return actions.run(ctx, pkg, inputs=inputs, params=params, require_receipt=False)


@dataclass
class ProofGate:
    """``require_proof``'s answer remembered for one call's geometry: the content hash, the GPU profile,
    the input shapes and the parameter values. A call with the same geometry pays no receipt
    re-verification; any other asks ``require_proof`` again, so every rule it applies (coverage of
    sizes, folds and parameter values, a failed receipt refusing) is applied by it, never here.
    ``verifications`` counts the asks (a test reads it: a second call with the same geometry adds none)."""
    verifications: int = 0
    gradchecks: int = 0
    _proven: dict = field(default_factory=dict)       # geometry key -> the Proof require_proof gave
    _grads: dict = field(default_factory=dict)        # (hash, params) -> None (allowed)

    def admit(self, ctx: Context, pkg: OpPackage, inputs: dict, params: dict) -> actions.Proof:
        """The ``Proof`` for this call: remembered for its geometry, or ``require_proof``'s now (which
        raises for a failing op, and proves first where no receipt covers the call)."""
        key = (pkg.hash, ctx.device.profile.id, tuple(sorted((k, tuple(np.shape(v))) for k, v in inputs.items())),
               tuple(sorted((k, repr(v)) for k, v in params.items())))
        proof = self._proven.get(key)
        if proof is None:
            proof = actions.require_proof(ctx, pkg, inputs=inputs, params=params)
            self.verifications += 1
            self._proven[key] = proof
        return proof

    def admit_vjp(self, ctx: Context, pkg: OpPackage, params: dict) -> None:
        """A declared VJP runs only with a passing gradcheck receipt covering ``params``, or a gradcheck
        that passes at them now (it earns its receipt); otherwise the engine's refusal."""
        if pkg.contract.backward.kind != "vjp":
            return
        key = (pkg.hash, tuple(sorted((k, repr(v)) for k, v in params.items())))
        if key in self._grads:
            return
        status, why = receipts.gradcheck_status(pkg, seal=ctx.seal)
        reasons = outside(recorded(pkg, seal=ctx.seal), pkg.contract.signature, params) if status == "pass" else [why]
        if reasons:
            rep = actions.gradcheck(ctx, pkg, params=dict(params))
            self.gradchecks += 1
            if rep.verdict != "pass":
                cmd = f"scellis gradcheck {pkg.root} {param_args(params)}".rstrip()
                raise StudioError(f"{pkg.id}: its declared VJP has no passing gradcheck for this call "
                                  f"({'; '.join(reasons)}), and gradcheck here gives {rep.verdict.upper()}: "
                                  f"{rep.why}; no gradient is taken through it", file=str(pkg.manifest_path),
                                  field="backward.text", hint=f"see the report: `{cmd}`")
        self._grads[key] = None


def gradient_inputs(pkg: OpPackage) -> list[str]:
    """The inputs the declared backward gives gradients for ([] for a nondifferentiable op)."""
    return vjp_inputs(pkg)


def vjp(ctx: Context, pkg: OpPackage, inputs: dict, params: dict, cotangents: dict,
        outputs: dict | None = None) -> dict[str, np.ndarray]:
    """{input: gradient (f32)} of one call, from the declared backward; ``cotangents``: {output: array}.
    A nondifferentiable op raises the engine's StudioError (reference_vjp's)."""
    cts = {cotangent_name(k): np.asarray(v, np.float32) for k, v in cotangents.items()}
    if pkg.contract.backward.kind == "nondifferentiable":
        reference_vjp(ctx, pkg, inputs, params, cts)            # raises: declared nondifferentiable
    if pkg.contract.backward_kernel is not None and pkg.contract.composite is None:
        grads = device_vjp(ctx, pkg, inputs, params, cts, outputs=outputs)
    else:
        grads = reference_vjp(ctx, pkg, inputs, params, cts)
    return {k: np.asarray(g, np.float32).reshape(np.shape(inputs[k])) for k, g in grads.items() if k in vjp_inputs(pkg)}


@dataclass
class DeviceCalls:
    """Ops on device-resident tensors: an input is uploaded once (judged against the signature's
    tensor first), an output stays on the device until read; ``uploads`` and ``readbacks`` count."""
    ctx: Context
    resident: Resident | None = None

    def _res(self) -> Resident:
        if self.resident is None:
            self.resident = Resident(self.ctx.device)
        return self.resident

    def upload(self, array, spec, label: str = "") -> DeviceTensor:
        a = np.ascontiguousarray(array)
        check_input(a, spec)
        return self._res().upload(a, spec.dtype, label or spec.name)

    def run(self, pkg: OpPackage, inputs: dict[str, DeviceTensor], params: dict) -> dict[str, DeviceTensor]:
        """One call on device tensors: shapes, dtypes and parameters judged by the signature (the
        index inputs' values too), the tuned values as ``actions.run`` picks them."""
        sig = pkg.contract.signature
        missing = [t.name for t in sig.inputs if t.name not in inputs]
        if missing:
            raise StudioError(f"{pkg.id} needs input(s) {', '.join(missing)}", field=missing[0])
        pkg, _ = tuned(self.ctx, pkg, params)
        return self._res().run_op(pkg, inputs, params, catalog=self.ctx.catalog, label=pkg.id)

    def read(self, tensors: list[DeviceTensor]) -> list[np.ndarray]:
        return self._res().read(tensors)

    @property
    def uploads(self) -> int:
        return self.resident.uploads if self.resident else 0

    @property
    def readbacks(self) -> int:
        return self.resident.readbacks if self.resident else 0
