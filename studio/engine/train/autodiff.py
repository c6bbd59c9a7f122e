"""Reverse mode over op calls: the tape training runs on, and the differentiability ladder.

Every forward goes through the one execution path (execution.run_op); every backward is the
op's declared VJP, on the device when the op declares a backward kernel. Before anything runs
backward, the tape walks the ops between the loss and the trainable values and applies the
ladder (docs/gradients.md):

- ``composite``: the op is its steps; they are recorded on the tape one by one, so reverse
  mode derives its backward (the steps' own rungs apply);
- ``declared`` (vjp rules): allowed only once gradcheck passed for this exact content (a
  receipt, studio/engine/proof/gradcheck.py); an unchecked, failing or inconclusive one is refused.
  A call whose params the receipt does not cover (studio/engine/proof/gradcoverage.py) is checked
  at its own params first, and refused unless that check passes too;
- ``nondifferentiable``: any training that needs a gradient through it is refused, naming it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..context import Context
from ..errors import StudioError
from ..grad.composite import evaluate
from ..grad.run import run_op
from ..grad.vjp import cotangent_name, device_vjp, reference_vjp, vjp_inputs
from ..proof.conformance import conform, report_lines
from ..proof.gradcheck import gradcheck
from ..proof.gradcoverage import outside, param_args, recorded
from ..proof.receipts import gradcheck_status, local_status


@dataclass(eq=False)
class Value:
    """A tensor on the tape: a leaf (data or a trainable parameter) or an op call's output."""
    array: np.ndarray
    name: str = ""
    node: "Node | None" = None
    trainable: bool = False

    @property
    def shape(self) -> tuple[int, ...]:
        return self.array.shape


@dataclass(eq=False)
class Node:
    pkg: object                       # OpPackage
    params: dict
    inputs: dict[str, Value]
    outputs: dict[str, Value]
    within: str | None = None         # the composite op this call is a step of
    vjp_place: str | None = None      # device | reference, once backward ran
    own_check: str | None = None      # why its params were checked here (outside the receipt's coverage)

    @property
    def label(self) -> str:
        return self.pkg.id + (f" (a step of {self.within})" if self.within else "")


@dataclass
class Tape:
    """Record op calls, then `backward(loss)`. ctx: the process's context (device, catalog,
    references); receipts: where gradcheck receipts are looked up (default: each package's
    receipts/gradcheck/); place: "device" runs declared backward kernels on the GPU, "reference"
    runs every VJP on the reference path (rounded to f32); checks: the verdicts of the gradchecks
    run for calls outside a receipt's coverage, keyed by content hash and params (pass one dict to
    several tapes to run each such check once)."""
    ctx: Context
    receipts: str | None = None
    place: str = "device"
    nodes: list[Node] = field(default_factory=list)
    checks: dict = field(default_factory=dict)

    def leaf(self, array, *, name: str = "", trainable: bool = False) -> Value:
        return Value(np.ascontiguousarray(np.asarray(array, dtype=np.float32)
                                          if np.asarray(array).dtype.kind == "f" else np.asarray(array)),
                     name, None, trainable)

    def _resolve(self, op):
        if not isinstance(op, str):
            return op
        return self.ctx.catalog.resolve(op)

    def call(self, op, inputs: dict, params: dict | None = None, *, within: str | None = None) -> dict[str, Value]:
        """Run op (an OpPackage, id or path) forward on the device and record it."""
        pkg = self._resolve(op)
        params = dict(params or {})
        vals = {k: v if isinstance(v, Value) else self.leaf(v, name=k) for k, v in inputs.items()}
        if pkg.contract.composite is not None:
            outs, _ = evaluate(pkg, vals, params, lambda p, a, q: self.call(p, a, q, within=pkg.id),
                               catalog=self.ctx.catalog)
            return outs
        arrays = run_op(self.ctx, pkg, {k: v.array for k, v in vals.items()}, params)
        node = Node(pkg, params, vals, {}, within)
        node.outputs = {k: Value(a, k, node) for k, a in arrays.items()}
        self.nodes.append(node)
        return node.outputs

    # ------------------------------------------------------------------ the ladder

    def _needs_grad(self) -> set[int]:
        need: set[int] = set()
        for node in self.nodes:                      # call order is a topological order
            if any(v.trainable or id(v) in need for v in node.inputs.values()):
                need |= {id(v) for v in node.outputs.values()}
        return need

    def plan(self, loss: Value) -> list[Node]:
        """The calls backward will differentiate, last first; refuses (StudioError) before anything
        runs if the ladder does not allow one of them."""
        need = self._needs_grad()
        if not (loss.trainable or id(loss) in need):
            raise StudioError(f"the loss{' ' + loss.name if loss.name else ''} does not depend on any trainable value",
                              hint="mark the parameters to train with tape.leaf(..., trainable=True)")
        reach = {id(loss)}
        order = []
        for node in reversed(self.nodes):
            if not any(id(v) in reach for v in node.outputs.values()):
                continue
            through = [k for k, v in node.inputs.items() if v.trainable or id(v) in need]
            if not through:
                continue
            self._allow(node, through)
            reach |= {id(node.inputs[k]) for k in through}
            order.append(node)
        return order

    def _allow(self, node: Node, through: list[str]) -> None:
        pkg = node.pkg
        kind = pkg.contract.backward.kind
        if kind == "nondifferentiable":
            raise StudioError(f"{node.label} is declared nondifferentiable: training cannot pass a gradient "
                              f"through it (its input{'s' if len(through) > 1 else ''} {', '.join(through)} "
                              f"depend{'' if len(through) > 1 else 's'} on trainable values)",
                              file=pkg.manifest_path, field="backward.text",
                              hint="move it off the path from the parameters to the loss, or declare a vjp "
                                   "and pass `scellis gradcheck`")
        missing = [k for k in through if k not in vjp_inputs(pkg)]
        if missing:
            raise StudioError(f"{node.label} declares no VJP for its input '{missing[0]}', which depends on "
                              "trainable values", file=pkg.manifest_path, field="backward.text",
                              hint=f"add: vjp {missing[0]}: reference(...)")
        if kind == "vjp":
            status, why = gradcheck_status(pkg, self.receipts, seal=self.ctx.seal)
            if status != "pass":
                verb = {"none": "has not been checked", "fail": "failed gradcheck",
                        "inconclusive": "was only inconclusively checked"}.get(status, "has no valid gradcheck")
                raise StudioError(f"{node.label}: its declared VJP {verb}; training will not use it ({why})",
                                  file=pkg.manifest_path, field="backward.text",
                                  hint=f"run `scellis gradcheck {pkg.root}` until it passes")
            reasons = outside(recorded(pkg, self.receipts, seal=self.ctx.seal), pkg.contract.signature, node.params)
            if reasons:
                self._check_here(node, reasons)
        if self.place == "device" and pkg.contract.backward_kernel is not None:
            self._require_backward_conformance(node)

    def _require_backward_conformance(self, node: Node) -> None:
        """A device VJP runs in training only when backward conformance passed for this content on
        this GPU profile: a valid (sealed) conformance receipt, or conformance now, once per
        content and profile in this process (``ctx.proven``)."""
        pkg, ctx = node.pkg, self.ctx
        key = (pkg.hash, ctx.device.profile.id)
        if key not in ctx.proven:
            if local_status(pkg, key[1], ctx.seal) == "valid":
                ctx.proven[key] = (True, "a valid conformance receipt")
            else:
                rep = conform(ctx, pkg)
                why = ("conformance passed here" if rep.ok else
                       "; ".join(report_lines(rep)[-3:]).replace("  ", " ").strip())
                ctx.proven[key] = (rep.ok, why)
        ok, why = ctx.proven[key]
        if not ok:
            raise StudioError(f"{node.label}: its device VJP fails conformance on this GPU profile ({why}); "
                              "training will not run it on the device", file=pkg.backward_path or pkg.manifest_path,
                              hint=f"run `scellis conform {pkg.root}` and fix the backward kernel, or train with "
                                   "place='reference'")

    def _check_here(self, node: Node, reasons: list[str]) -> None:
        """A call outside the receipt's coverage: gradcheck at the call's own params, now (once per
        content and params for the tapes sharing ``checks``); refused unless it passes."""
        pkg = node.pkg
        key = (pkg.hash, tuple(sorted((k, repr(v)) for k, v in node.params.items())))
        if key not in self.checks:
            rep = gradcheck(self.ctx, pkg, dict(node.params))
            self.checks[key] = (rep.verdict, rep.why)
        verdict, why = self.checks[key]
        cmd = f"scellis gradcheck {pkg.root} {param_args(node.params)}".rstrip()
        if verdict != "pass":
            raise StudioError(f"{node.label}: its gradcheck receipt does not cover this call ({'; '.join(reasons)}), "
                              f"and gradcheck at the call's own params gives {verdict.upper()}: {why}; training will "
                              "not use its declared VJP", file=pkg.manifest_path, field="backward.text",
                              hint=f"see the report: `{cmd}`")
        node.own_check = "; ".join(reasons)

    def ladder(self, loss: Value) -> list[str]:
        """One line per differentiated call: its rung, where its VJP runs, its subgradient convention."""
        out = []
        for node in reversed(self.plan(loss)):
            c = node.pkg.contract
            where = "device" if self.place == "device" and c.backward_kernel is not None else "reference path"
            line = f"{node.label}: declared vjp, gradcheck passed, runs on the {where}"
            if node.own_check:
                line += f"; checked here at its own params ({node.own_check})"
            if c.subgradient:
                line += f"; subgradient: {c.subgradient}"
            out.append(line)
        return out

    # ------------------------------------------------------------------ reverse mode

    def backward(self, loss: Value, seed=None) -> dict[Value, np.ndarray]:
        """Gradients of loss (seeded with ones, or `seed`) for every trainable leaf it depends on."""
        order = self.plan(loss)
        cts: dict[int, np.ndarray] = {id(loss): np.ones_like(loss.array, dtype=np.float32) if seed is None
                                      else np.asarray(seed, np.float32).reshape(loss.shape)}
        leaves: dict[int, Value] = {id(loss): loss} if loss.trainable else {}
        need = self._needs_grad()
        for node in order:
            cot = {cotangent_name(k): cts.get(id(v), np.zeros_like(v.array)) for k, v in node.outputs.items()}
            arrays = {k: v.array for k, v in node.inputs.items()}
            c = node.pkg.contract
            if self.place == "device" and c.backward_kernel is not None:
                grads = device_vjp(self.ctx, node.pkg, arrays, node.params, cot,
                                   outputs={k: v.array for k, v in node.outputs.items()})
                node.vjp_place = "device"
            else:
                grads = {k: g.astype(np.float32) for k, g in
                         reference_vjp(self.ctx, node.pkg, arrays, node.params, cot).items()}
                node.vjp_place = "reference"
            for k, v in node.inputs.items():
                if k not in grads or not (v.trainable or id(v) in need):
                    continue
                g = np.asarray(grads[k], np.float32).reshape(v.shape)
                cts[id(v)] = cts[id(v)] + g if id(v) in cts else g
                if v.trainable:
                    leaves[id(v)] = v
        return {v: cts[k] for k, v in leaves.items()}
