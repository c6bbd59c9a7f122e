"""Composite ops: an op declared as a composition of other ops (its steps follow `composite` in
[backward] text, parsed by studio/engine/contract/backward.py): binding the steps to catalog ops,
evaluating them in order with a given step function (the device's in studio/engine/grad/run.py,
the reference path's in studio/engine/grad/vjp.py, which also derives the backward by reverse mode
over them), and the price in memory: every intermediate is materialized (`memory_plan`)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..contract.backward import Step
from ..contract.catalog import Catalog
from ..contract.package import OpPackage
from ..errors import StudioError
from ..precision import DTYPE_BYTES

# ------------------------------------------------------------------ binding the steps to ops

@dataclass
class BoundStep:
    step: Step
    pkg: OpPackage
    inputs: dict[str, str]           # callee input -> value name
    outputs: dict[str, str]          # callee output -> value name

    def params(self, env: dict) -> dict:
        return {k: e.eval(env) for k, e in self.step.params}


def bind(pkg: OpPackage, catalog: Catalog) -> list[BoundStep]:
    """Resolve each step's op and wire names; every problem is a StudioError at the step."""
    comp = pkg.contract.composite
    sig = pkg.contract.signature
    cat = catalog
    def err(st, msg, hint):
        return StudioError(msg, file=comp.file, line=st.line, col=st.col, field="backward.text", hint=hint)
    known = {t.name for t in sig.inputs}
    bound = []
    for st in comp.steps:
        if st.op == str(pkg.contract.id):
            raise err(st, f"{st.op} calls itself", "compose other ops")
        try:
            callee = cat.resolve(st.op)
        except StudioError as e:
            raise err(st, f"step op {st.op}: {e.message}", e.hint or "check the op id") from None
        csig = callee.contract.signature
        names = [t.name for t in csig.inputs]
        if len(st.args) != len(names):
            raise err(st, f"{st.op} takes {len(names)} input(s) ({', '.join(names) or 'none'}), the step gives "
                      f"{len(st.args)}", f"write {st.op}({', '.join(names)})")
        wiring = {}
        for k, (key, value) in enumerate(st.args):
            key = key or names[k]
            if key not in names or key in wiring:
                raise err(st, f"{st.op} has no input '{key}'" if key not in names else f"input '{key}' given twice",
                          f"its inputs: {', '.join(names)}")
            if value not in known:
                raise err(st, f"'{value}' is not an input of {sig.name} nor an output of an earlier step",
                          f"known here: {', '.join(sorted(known))}")
            wiring[key] = value
        pnames = {p.name for p in csig.params}
        given = {k for k, _ in st.params}
        for k, e in st.params:
            if k not in pnames:
                raise err(st, f"{st.op} has no param '{k}'", f"its params: {', '.join(sorted(pnames)) or 'none'}")
            stray = sorted(e.symbols() - sig.symbols)
            if stray:
                raise err(st, f"'{stray[0]}' is not a symbol of {sig.name}", f"use {', '.join(sorted(sig.symbols))}")
        if pnames - given:
            raise err(st, f"{st.op} needs param(s) {', '.join(sorted(pnames - given))}", "give each after ';'")
        onames = [t.name for t in csig.outputs]
        if len(st.outputs) != len(onames):
            raise err(st, f"{st.op} has {len(onames)} output(s) ({', '.join(onames)}), the step names "
                      f"{len(st.outputs)}", f"write {', '.join(onames)} = {st.op}(...)")
        for o in st.outputs:
            if o in known:
                raise err(st, f"'{o}' is already defined", "give each value its own name")
            known.add(o)
        bound.append(BoundStep(st, callee, wiring, dict(zip(onames, st.outputs))))
    missing = [t.name for t in sig.outputs if t.name not in known]
    if missing:
        raise StudioError(f"no step produces the output '{missing[0]}' of {sig.name}", file=comp.file,
                          line=comp.steps[-1].line, col=comp.steps[-1].col, field="backward.text",
                          hint=f"name a step's output {missing[0]}")
    return bound


def check_composition(pkg: OpPackage, catalog: Catalog) -> list[StudioError]:
    try:
        bind(pkg, catalog)
    except StudioError as e:
        return [e]
    return []


def _env(pkg, inputs: dict, params: dict) -> dict:
    return pkg.contract.signature.resolve({k: np.shape(v) for k, v in inputs.items()}, dict(params))


def step_error(bs: BoundStep, pkg, e: StudioError) -> StudioError:
    comp = pkg.contract.composite
    return StudioError(f"step {bs.step.op} of {pkg.id}: {e.message}", file=comp.file, line=bs.step.line,
                       col=bs.step.col, field=e.field, hint=e.hint)


def evaluate(pkg: OpPackage, inputs: dict, params: dict, call, *, catalog: Catalog) -> tuple[dict, dict]:
    """Run the steps in order with call(step_pkg, step_inputs, step_params) -> outputs.
    Returns (the composite's outputs, every value by name)."""
    env = _env(pkg, inputs, params)
    values = dict(inputs)
    for bs in bind(pkg, catalog):
        args = {k: values[v] for k, v in bs.inputs.items()}
        try:
            out = call(bs.pkg, args, bs.params(env))
        except StudioError as e:
            raise step_error(bs, pkg, e) from None
        for k, name in bs.outputs.items():
            values[name] = out[k]
    return {t.name: values[t.name] for t in pkg.contract.signature.outputs}, values


# ------------------------------------------------------------------ the memory it needs

@dataclass
class MemoryPlan:
    """Bytes of every tensor the composition materializes (static shapes: known before it runs)."""
    op: str
    tensors: list[tuple[str, str, tuple[int, ...], int]]    # (name, role, shape, bytes)

    @property
    def total(self) -> int:
        return sum(t[3] for t in self.tensors)

    @property
    def allocated(self) -> int:
        """What the op allocates beyond the inputs it is given: intermediates and outputs."""
        return sum(t[3] for t in self.tensors if t[1] != "input")

    def lines(self) -> list[str]:
        out = [f"memory  {self.op}: {self.total} bytes, {self.allocated} allocated beyond its inputs"]
        out += [f"  {role:12s} {name}: {list(shape)}  {b} bytes" for name, role, shape, b in self.tensors]
        return out


def memory_plan(pkg: OpPackage, input_shapes: dict, params: dict, *, catalog: Catalog) -> MemoryPlan:
    sig = pkg.contract.signature
    env = sig.resolve(dict(input_shapes), dict(params))
    shapes = {t.name: tuple(input_shapes[t.name]) for t in sig.inputs}
    dtypes = {t.name: t.dtype for t in sig.inputs}
    roles = {t.name: "input" for t in sig.inputs}
    for bs in bind(pkg, catalog):
        csig = bs.pkg.contract.signature
        cenv = csig.resolve({k: shapes[v] for k, v in bs.inputs.items()}, bs.params(env))
        for t in csig.outputs:
            name = bs.outputs[t.name]
            shapes[name], dtypes[name] = t.shape(cenv), t.dtype
            roles[name] = "output" if name in {o.name for o in sig.outputs} else "intermediate"
    return MemoryPlan(pkg.id, [(n, roles[n], shapes[n], math.prod(shapes[n]) * DTYPE_BYTES[dtypes[n]]) for n in shapes])
