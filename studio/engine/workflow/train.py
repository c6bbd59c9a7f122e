"""Training a workflow: trainable sources before the median, a loss against a target, an optimizer,
N steps on the device, gradients through the ops' declared VJPs (docs/workflows.md, "Training").

Every forward and every VJP runs on the device through the tape (studio/engine/train/autodiff.py:
``Tape.call`` runs the op's kernel, ``Tape.backward`` its declared backward kernel); the tape's
ladder accepts a declared VJP only with a passing gradcheck receipt, a composite op is
differentiated through its steps (the composite rung, with its memory price: ``memory``), and a
nondifferentiable op on the way from a parameter to the loss is refused. This module checks the
ladder once before anything runs, naming the workflow step, and maps the tape's own refusals onto
the step too. The lookup and verification of every op are the workflow run's (plan.py)."""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import numpy as np

from ..context import Context
from ..errors import StudioError
from ..grad.composite import bind, memory_plan
from ..grad.vjp import vjp_inputs
from ..proof.receipts import gradcheck_status
from ..train.autodiff import Tape
from . import graph
from .optim import Optimizer
from .plan import (
    Plan,
    Verification,
    make_plan,
    refuse_unverified,
    resolve_op,
    verify_op,
)
from .report import centred
from .spec import Step, Workflow


@dataclass
class TrainStep:
    step: int                        # 1-based
    loss: float
    seconds: float


@dataclass
class TrainResult:
    losses: list[float]              # the loss before each update (losses[0]: at the initial parameters)
    final_loss: float                # at the parameters after the last update
    params: dict[str, np.ndarray]
    initial: dict[str, np.ndarray]
    seconds: list[float]
    status: str = "done"             # done | stopped
    ladder: list[str] = field(default_factory=list)
    places: dict[str, str] = field(default_factory=dict)       # step -> where its VJP ran

    @property
    def fall(self) -> float:
        return self.losses[0] / self.final_loss if self.final_loss > 0 else float("inf")


def swapped(wf: Workflow, swaps: dict[str, str]) -> Workflow:
    """The workflow with some steps' ops replaced (``{step: op id or path}``), e.g. the median by
    its composite rung, or by a nondifferentiable op to see the refusal."""
    steps = dict(wf.steps)
    for name, ref in swaps.items():
        if name not in steps:
            raise StudioError(f"no step '{name}' to swap", field="--swap", hint="steps: " + ", ".join(steps))
        steps[name] = replace(steps[name], op=ref)
    return replace(wf, steps=steps)


class Trainer:
    """``receipts``: where gradcheck receipts are looked up (default: each package's own); ``place``:
    "device" (the declared backward kernels) or "reference" (every VJP on the reference path, as
    the tape does it: a cross-check of the device's gradients)."""

    def __init__(self, ctx: Context, wf: Workflow, *, receipts=None, allow_unverified: bool = False,
                 optimizer: Optimizer | None = None, params: dict[str, np.ndarray] | None = None,
                 check: bool = True, place: str = "device"):
        """``check=False`` defers the refusals (unverified ops, the ladder) to ``check()``: a caller
        that first earns the missing receipts (services.workflows.train with ``prove``) calls it after."""
        if wf.train is None:
            raise wf.error(("train",), "the workflow has no [train] section",
                           hint="add [train] with prediction, target and an optimizer (docs/workflows.md)")
        self.ctx, self.wf, self.cfg, self.receipts, self.place = ctx, wf, wf.train, receipts, place
        self.trainable = [n for n, s in wf.sources.items() if s.trainable]
        if not self.trainable:
            raise wf.error(("sources",), "no source is trainable", hint="mark parameters with trainable = true")
        need = graph.needed_for(wf, self.cfg.prediction.node) | graph.needed_for(wf, self.cfg.target.node)
        self.plan: Plan = make_plan(ctx, wf)
        self.order = [n for n in self.plan.order if n in need]
        loss_step = Step("loss", self.cfg.loss, {}, {})
        self.loss_pkg = resolve_op(ctx, wf, loss_step)
        self.loss_verification: Verification = verify_op(ctx, self.loss_pkg)
        self.allow_unverified = allow_unverified
        self.downstream = self._downstream()
        if self.cfg.target.node in self.downstream:
            raise wf.error(self.cfg.target.path, f"the target '{self.cfg.target.text}' depends on trainable parameters",
                           hint="the target is data: the clean signal, not a result of the pipeline")
        if self.cfg.prediction.node not in self.downstream:
            raise wf.error(self.cfg.prediction.path, f"the prediction '{self.cfg.prediction.text}' depends on no "
                           "trainable parameter", hint="wire the trainable sources into the steps before it")
        self.params = {n: np.asarray(self.plan.host[n][0], np.float32).copy() for n in self.trainable}
        if params is not None:
            for n, a in params.items():
                if n not in self.params or self.params[n].shape != np.shape(a):
                    raise StudioError(f"the checkpoint's parameter '{n}' is not a trainable source of this shape",
                                      field=f"params.{n}", hint="resume with the workflow that wrote the checkpoint")
                self.params[n] = np.asarray(a, np.float32)
        self.initial = {n: a.copy() for n, a in self.params.items()}
        self.optimizer = optimizer or Optimizer(self.cfg.optimizer, self.cfg.learning_rate, self.cfg.momentum,
                                                self.cfg.beta1, self.cfg.beta2, self.cfg.epsilon)
        self.checks: dict = {}
        if check:
            self.check()

    def check(self) -> None:
        """The refusals, before anything runs: unverified ops (unless allowed), then the ladder."""
        refuse_unverified(self.plan, allowed=self.allow_unverified)    # a failed receipt: refused even then
        if self.allow_unverified and self.loss_verification.status == "failed":
            raise self.wf.error(("train", "loss"), f"the loss {self.loss_pkg.id}'s receipt on this GPU profile records "
                                "a failing conformance run; an op that failed never runs",
                                hint=f"fix the kernel; `scellis receipts {self.loss_pkg.root}` names the failing case")
        if not self.allow_unverified:
            if self.loss_verification.status != "valid":
                raise self.wf.error(("train", "loss"), f"the loss {self.loss_pkg.id} has no valid conformance "
                                    f"receipt on this GPU profile ({self.loss_verification.status})",
                                    hint=f"`scellis conform {self.loss_pkg.root}`, or allow unverified ops for this run")
        self.check_ladder()

    def reverify(self) -> None:
        """Look every op up and verify it again (after receipts were earned)."""
        self.plan = make_plan(self.ctx, self.wf)
        self.loss_verification = verify_op(self.ctx, self.loss_pkg)

    # ------------------------------------------------------------------ the ladder, before anything runs
    def _downstream(self) -> set[str]:
        down = set(self.trainable)
        for n in self.plan.order:
            if n in self.plan.steps and any(w.node in down for w in self.plan.steps[n].inputs.values()):
                down.add(n)
        return down

    def differentiated(self) -> list[tuple[str, object, list[str]]]:
        """(step, op package, the inputs the gradient passes through) for every step between a
        trainable parameter and the loss, the loss included."""
        up = graph.needed_for(self.wf, self.cfg.prediction.node)
        out = []
        for n in self.order:
            sp = self.plan.steps.get(n)
            if sp is None or n not in self.downstream or n not in up:
                continue
            out.append((n, sp.pkg, [k for k, w in sp.inputs.items() if w.node in self.downstream]))
        out.append(("loss", self.loss_pkg, [self.loss_pkg.contract.signature.inputs[0].name]))   # the prediction
        return out

    def check_ladder(self) -> None:
        for name, pkg, through in self.differentiated():
            self._rung(name, pkg, through)

    def _rung(self, name: str, pkg, through: list[str], within: str | None = None) -> None:
        c = pkg.contract
        label = f"step '{name}'" + (f" (inside {within})" if within else "")
        at = ("train", "loss") if name == "loss" else ("steps", name, "op")
        if c.backward.kind == "nondifferentiable":
            raise self.wf.error(at, f"{label}: {pkg.id} is declared nondifferentiable, and the gradient from the loss "
                                f"to the trainable parameters must pass through it (input {', '.join(through)})",
                                hint="use a differentiable op here (a declared vjp that passed `scellis gradcheck`, "
                                     "or a composite of such ops), or move it off the path to the loss")
        if c.backward.kind == "composite":
            for bs in bind(pkg, self.ctx.catalog):
                self._rung(name, bs.pkg, list(bs.inputs), within=pkg.id)
            return
        missing = [k for k in through if k not in vjp_inputs(pkg)]
        if missing:
            raise self.wf.error(at, f"{label}: {pkg.id} declares no VJP for its input '{missing[0]}'",
                                hint=f"add `vjp {missing[0]}: ...` to its [backward] and pass `scellis gradcheck`")
        status, why = gradcheck_status(pkg, self.receipts, seal=self.ctx.seal)
        if status != "pass":
            raise self.wf.error(at, f"{label}: the declared VJP of {pkg.id} has no passing gradcheck ({why}); "
                                "training will not use it",
                                hint=f"run `scellis gradcheck {pkg.root}` (or `scellis train --prove`, which runs it)")

    # ------------------------------------------------------------------ forward and backward
    def forward(self, params: dict[str, np.ndarray]):
        """The loss at ``params``: (tape, loss value, parameter leaves, step of each tape node)."""
        tape = Tape(self.ctx, receipts=self.receipts, place=self.place, checks=self.checks)
        values, leaves, step_of = {}, {}, {}
        for n in self.order:
            if n in self.wf.sources:
                arr = params[n] if n in params else self.plan.host[n][0]
                values[n] = leaves[n] = tape.leaf(arr, name=n, trainable=n in params)
                continue
            sp = self.plan.steps[n]
            before = len(tape.nodes)
            outs = tape.call(sp.pkg, {k: values[self.plan.key(w)] for k, w in sp.inputs.items()}, sp.params)
            for node in tape.nodes[before:]:
                step_of[id(node)] = n
            for o, v in outs.items():
                values[f"{n}.{o}"] = v
        pred = values[self.plan.key(self.cfg.prediction)]
        target = np.asarray(values[self.plan.key(self.cfg.target)].array)
        if target.size < pred.array.size:
            raise self.wf.error(self.cfg.target.path, f"the target has {target.size} samples, the prediction "
                                f"{pred.array.size}", hint="the target must be at least as long as the prediction")
        tgt = tape.leaf(centred(target, pred.array.size).reshape(pred.shape), name="target")
        names = [t.name for t in self.loss_pkg.contract.signature.inputs]
        before = len(tape.nodes)
        (loss,) = tape.call(self.loss_pkg, {names[0]: pred, names[1]: tgt}, {}).values()
        for node in tape.nodes[before:]:
            step_of[id(node)] = "loss"
        return tape, loss, {n: leaves[n] for n in params}, step_of

    def gradients(self, params: dict[str, np.ndarray]) -> tuple[float, dict[str, np.ndarray], Tape, dict]:
        tape, loss, leaves, step_of = self.forward(params)
        try:
            grads = tape.backward(loss)
        except StudioError as e:
            raise self._at_step(tape, step_of, e) from None
        return float(loss.array.reshape(-1)[0]), {n: grads.get(v, np.zeros_like(v.array)) for n, v in leaves.items()}, \
            tape, step_of

    def _at_step(self, tape: Tape, step_of: dict, e: StudioError) -> StudioError:
        node = next((nd for nd in tape.nodes if e.message.startswith(nd.label)), None)
        name = step_of.get(id(node)) if node is not None else None
        if name is None:
            return e
        at = ("train", "loss") if name == "loss" else ("steps", name, "op")
        err = self.wf.error(at, f"step '{name}': {e.message}", hint=e.hint)
        err.related.append(StudioError("the op's declaration", file=e.file, line=e.line, col=e.col, field=e.field))
        return err

    def ladder(self) -> list[str]:
        tape, loss, _, step_of = self.forward(self.params)
        try:
            lines = tape.ladder(loss)
        except StudioError as e:
            raise self._at_step(tape, step_of, e) from None
        order = [step_of[id(nd)] for nd in reversed(tape.plan(loss))]
        return [f"{s}: {line}" for s, line in zip(order, lines)]

    def memory(self) -> list[dict]:
        """Per differentiated step: its rung and the bytes it materializes (a composite: every
        intermediate, memory_plan; a declared op: its inputs and outputs)."""
        out = []
        for name, pkg, _ in self.differentiated():
            if name == "loss":
                continue
            sp = self.plan.steps[name]
            shapes = {k: self.plan.values[self.plan.key(w)].shape for k, w in sp.inputs.items()}
            if pkg.contract.composite is not None:
                mp = memory_plan(pkg, shapes, sp.params, catalog=self.ctx.catalog)
                out.append({"step": name, "op": pkg.id, "rung": "composite", "bytes": mp.total,
                            "allocated": mp.allocated, "lines": mp.lines()})
            else:
                sig = pkg.contract.signature
                env = sig.resolve(shapes, dict(sp.params))
                b = sig.memory_bytes(env)
                alloc = sum(int(np.prod(s)) * 4 for s in sig.output_shapes(env).values())
                out.append({"step": name, "op": pkg.id, "rung": pkg.contract.backward.kind, "bytes": b,
                            "allocated": alloc,
                            "lines": [f"memory  {pkg.id}: {b} bytes, {alloc} allocated beyond its inputs (its outputs)"]})
        return out

    # ------------------------------------------------------------------ the loop
    def run(self, steps: int | None = None, *, on_step=None, stop=None) -> TrainResult:
        n = int(steps or self.cfg.steps)
        losses, seconds, status, places = [], [], "done", {}
        for k in range(1, n + 1):
            if stop is not None and (stop.is_set() if hasattr(stop, "is_set") else stop()):
                status = "stopped"
                break
            t0 = time.perf_counter()
            loss, grads, tape, step_of = self.gradients(self.params)
            if not np.isfinite(loss):
                raise StudioError(f"the loss became {loss} at step {k}", field="train.learning_rate",
                                  hint="lower the learning rate")
            self.params = self.optimizer.step(self.params, grads)
            places = {step_of[id(nd)]: nd.vjp_place for nd in tape.nodes if nd.vjp_place}
            losses.append(loss)
            seconds.append(time.perf_counter() - t0)
            if on_step is not None:
                on_step(TrainStep(k, loss, seconds[-1]))
        _, final, _, _ = self.forward(self.params)
        return TrainResult(losses, float(final.array.reshape(-1)[0]), dict(self.params), self.initial, seconds,
                           status, places=places)
