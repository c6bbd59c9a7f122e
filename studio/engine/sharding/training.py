"""Data-parallel training of a workflow whose gradients are values of its own (docs/workflows.md,
"Data-parallel training"; docs/bf16.md): the forward ops, the loss and every gradient are steps of the workflow,
each a proven op run down the one execution path; this module batches the data, runs the replicas
on the owners, combines their gradients in a fixed order and updates the parameters.

- A step's batch of ``[train] batch`` rows is cut into ``replicas`` equal contiguous replicas. The
  replicas are fixed by the file, not by the owners: owners (Dask workers, each with its own device)
  hold contiguous shares of them, so 1, 2 or 4 owners run the same replicas and give the same bits.
- Each replica's loss is the mean over its own rows (the divisor is the per-replica batch): its
  gradients are R times its shard of the whole batch's, and the combine is (1/R)·Σ_r g_r, the sum a
  fixed pairwise tree over the replicas in index order, in f32. At bf16 that factor goes through
  rounded nodes, exact only when R is a power of two (the divisor check, sharding/divisor.py).
- Every batch-contracting step (its op declares ``[sharding] kind = "batch_contracting"``: the weight
  gradients) is measured at every step: the same op on the whole batch (the replicas' inputs in
  order) on the driver's device, against the collective (1/R)·Σ_r rnd(S_r), the exact difference
  summed correctly rounded (measure.py).
- After each epoch the held-out rows go through the forward steps (to ``[train] prediction``) on
  the owners: held-out accuracy."""
from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from .. import bfloat16 as bf
from ..context import Context
from ..errors import StudioError
from ..learner.owners import workers_now
from ..precision import round_to
from ..workflow.dataset import Dataset, load
from ..workflow.graph import needed_for
from ..workflow.optim import Optimizer
from ..workflow.plan import Plan, make_plan, refuse_unverified
from ..workflow.resident import Resident
from ..workflow.run import evaluate
from ..workflow.spec import Workflow, load_workflow
from . import measure
from .divisor import divisor_warning, power_of_two
from .kinds import classify


# ------------------------------------------------------------------ what both sides know
def shares(replicas: int, owners: int) -> list[range]:
    """Owner o's replicas: contiguous, as equal as possible, in owner order."""
    if not 1 <= owners <= replicas:
        raise StudioError(f"{owners} owners for {replicas} replicas: each owner holds at least one replica",
                          field="--owners", hint=f"use 1 to {replicas} owners ([train] replicas = {replicas})")
    q, r = divmod(replicas, owners)
    out, start = [], 0
    for o in range(owners):
        n = q + (1 if o < r else 0)
        out.append(range(start, start + n))
        start += n
    return out


def ordered_sum(parts: list[np.ndarray]) -> np.ndarray:
    """Σ parts in f32 as a fixed pairwise tree over their index order: level by level, (0+1), (2+3),
    …, an odd last part carried up unchanged. The same additions of the same operands whoever runs it."""
    level = [np.asarray(p, np.float32) for p in parts]
    while len(level) > 1:
        nxt = [level[i] + level[i + 1] for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return level[0]


def params_hash(params: dict[str, np.ndarray]) -> str:
    h = hashlib.sha256()
    for k in sorted(params):
        h.update(k.encode() + b"\0" + np.ascontiguousarray(params[k], np.float32).tobytes())
    return h.hexdigest()


def rounding_stats(parts: list[np.ndarray], whole: np.ndarray, dtype: str, order: tuple | None = None) -> dict:
    """The exact difference d = (1/R)·(Σ_r out_r − whole) of a batch-contracting node (summed correctly
    rounded), its size, and at bf16 its ratio to the statement's bound: each rnd S_r and rnd S is within
    half an ulp, so |d| ≤ (1/R)·(Σ_r ½ulp(rnd S_r) + ½ulp(rnd S)) up to the f32 sums' own order
    (a ratio over 1 says where that order, not the rounding, shows). At f32 (rnd = id) only the order
    of the f32 sums differs. ``order``: (Σ|terms|, the count of terms N) per element of the whole
    node, for an f32 output: each replica's f32 sum and the whole batch's are within γ_N·Σ|terms| of
    the exact S_r and S (the same products, summed in another order), so an order-only difference is
    within (1/R)·2γ_N·Σ|terms|; ``of_order_bound`` is |d|'s largest ratio to it (measured: a
    difference that rounds per replica, to bf16 or otherwise, shows far past it)."""
    R = len(parts)
    p64 = [np.asarray(p).astype(np.float64) for p in parts]
    g = np.asarray(whole).astype(np.float64)
    d = measure.exact_sum([*p64, -g]) / R
    a = np.abs(d).reshape(-1)
    scale = float(np.max(np.abs(g), initial=0.0)) / R
    st = {"elements": int(a.size), "nonzero": int(np.count_nonzero(a)), "max_abs": float(a.max(initial=0.0)),
          "max_rel": float(a.max(initial=0.0)) / scale if scale > 0 else 0.0}
    if dtype == "bf16":
        bound = (sum(bf.ulp(np.abs(p)) for p in p64) + bf.ulp(np.abs(g))).reshape(-1) / (2 * R)
        ratio = np.divide(a, bound, out=np.where(a > 0, np.inf, 0.0), where=bound > 0)
        st["of_bound"] = float(ratio.max(initial=0.0))
    elif order is not None:
        mag, count = (np.asarray(v, np.float64).reshape(-1) for v in order)
        gamma = count * F32_U / (1 - count * F32_U)
        bound = 2 * gamma * mag * (1 + gamma) / R        # (1 + γ_N): Σ|terms| is itself an f32 sum of N terms
        ratio = np.divide(a, bound, out=np.where(a > 0, np.inf, 0.0), where=bound > 0)
        st["of_order_bound"] = float(ratio.max(initial=0.0))
    return st


F32_U = 2.0 ** -24            # f32's unit roundoff


PRECISIONS = ("bf16", "f32")


def workflow_precision(plan: Plan) -> tuple[str, list[str]]:
    """The precision a workflow's ops compute in, as its ops say: ("bf16", the steps whose op takes
    or gives a bf16 tensor) when any does, else ("f32", []) — every op f32, rnd = id."""
    steps = [n for n in plan.order if n in plan.steps and any(
        t.dtype == "bf16" for t in (*plan.steps[n].pkg.contract.signature.inputs,
                                    *plan.steps[n].pkg.contract.signature.outputs))]
    return ("bf16", steps) if steps else ("f32", [])


def check_precision(plan: Plan, precision: str | None) -> str:
    """The run's precision: ``precision`` when the workflow's ops compute in it, the ops' own when
    None; a precision the ops do not compute in is refused, naming the field and what to do."""
    own, steps = workflow_precision(plan)
    if precision is None or precision == own:
        return own
    hint_doc = '(docs/workflows.md, "Data-parallel training"; docs/bf16.md)'
    if precision not in PRECISIONS:
        raise StudioError(f"--precision {precision}: the data-parallel trainer computes in bf16 or f32",
                          field="--precision", hint=f"--precision {own}, the precision this workflow's ops compute in {hint_doc}")
    if own == "bf16":
        first = plan.steps[steps[0]]
        convs = [n for n in steps if "conv" in plan.steps[n].pkg.id]
        what = "convolutions are bf16 ops" if convs else "ops compute in bf16"
        raise StudioError(f"--precision {precision}: this workflow's {what} ({len(steps)} of its steps take or give "
                          f"bf16, the first '{steps[0]}': {first.pkg.id}); at f32 every op of the file must be f32",
                          field="--precision",
                          hint=f"train this file with --precision bf16, or train a file whose ops are all f32 with "
                               f"--precision f32 (resources/workflows/resnet_digits_f32.toml is resnet_digits.toml's f32 "
                               f"twin) {hint_doc}")
    raise StudioError(f"--precision {precision}: this workflow's ops are all f32 (none of its steps takes or gives a "
                      f"bf16), so nothing in it rounds to {precision}", field="--precision",
                      hint=f"train this file with --precision f32, or train a file whose ops are bf16 with "
                           f"--precision {precision} (resources/workflows/resnet_digits.toml) {hint_doc}")


def contracting_steps(plan: Plan) -> list[str]:
    """The steps whose op contracts the batch (its [sharding] kind): measured at every step."""
    return [n for n in plan.order if n in plan.steps and plan.steps[n].pkg.contract.sharding is not None
            and plan.steps[n].pkg.contract.sharding.kind == "batch_contracting"]


# ------------------------------------------------------------------ one process's replicas
class Replica:
    """The workflow on one process: its own context and device, its plan (every op looked up and
    verified here), the dataset. Runs replicas' batches and held-out chunks."""

    def __init__(self, path: str, ops_path: tuple[str, ...] = (), allow_unverified: bool = False,
                 ctx: Context | None = None, corpora: dict | None = None):
        """``corpora``: the driver's memo of regenerated corpora (Context.corpora), so an owner of the
        same install judges each receipt without generating its corpus again."""
        self.ctx = ctx or Context.open(ops_path)
        self.ctx.corpora.update(corpora or {})
        self.wf: Workflow = load_workflow(path)
        self.plan = make_plan(self.ctx, self.wf)
        refuse_unverified(self.plan, allowed=allow_unverified)
        tr = self.wf.train
        need = needed_for(self.wf, tr.prediction.node)            # the forward steps alone: held-out predictions
        self.forward = replace(self.plan, order=[n for n in self.plan.order if n in need], until=tr.prediction.node)
        self.data: Dataset = self.plan.dataset or load(self.wf.data)
        self.images = next(n for n, s in self.wf.sources.items() if s.kind == "dataset" and s.dataset == "images")
        self.labels = next((n for n, s in self.wf.sources.items() if s.kind == "dataset" and s.dataset == "labels"), None)
        self.contracting = contracting_steps(self.plan)
        self.grad_keys = {p: self.plan.key(w) for p, w in tr.gradients.items()}
        self.loss_key = self.plan.key(tr.loss_value)
        self.prediction_key = self.forward.key(tr.prediction)
        self.inputs_of = {n: {k: self.plan.key(w) for k, w in self.plan.steps[n].inputs.items()} for n in self.contracting}

    def _sources(self, params: dict[str, np.ndarray], rows: np.ndarray) -> dict[str, np.ndarray]:
        src = self.wf.sources
        out = {n: np.ascontiguousarray(round_to(a, src[n].dtype)) for n, a in params.items()}
        out[self.images] = np.ascontiguousarray(round_to(self.data.images[rows], src[self.images].dtype))
        if self.labels is not None:
            out[self.labels] = self.data.one_hot(rows)
        return out

    def gradients(self, params: dict[str, np.ndarray], batches: list[np.ndarray]) -> list[dict]:
        """Per replica (its rows): the loss, every parameter's gradient (f32, widened exactly), and the
        inputs and outputs of every batch-contracting step, with this process's compute time."""
        out = []
        for rows in batches:
            t0 = time.perf_counter()
            wanted = [self.loss_key, *self.grad_keys.values()]
            for n in self.contracting:
                wanted += [*self.inputs_of[n].values(), *(f"{n}.{o}" for o in self.plan.steps[n].outputs)]
            got = evaluate(self.ctx, self.plan, self._sources(params, np.asarray(rows)), list(dict.fromkeys(wanted)))
            out.append({"loss": float(np.asarray(got[self.loss_key], np.float64).reshape(-1)[0]),
                        "grads": {p: np.asarray(got[k]).astype(np.float32) for p, k in self.grad_keys.items()},
                        "contracting": {n: {"inputs": {k: got[v] for k, v in self.inputs_of[n].items()},
                                            "outputs": {o: got[f"{n}.{o}"] for o in self.plan.steps[n].outputs}}
                                        for n in self.contracting},
                        "seconds": time.perf_counter() - t0})
        return out

    def predict(self, params: dict[str, np.ndarray], chunks: list[np.ndarray]) -> list[np.ndarray]:
        """The prediction (``[train] prediction``) for each chunk of rows (a replica's batch each)."""
        return [np.asarray(evaluate(self.ctx, self.forward, self._sources(params, np.asarray(rows)),
                                    [self.prediction_key])[self.prediction_key], np.float32) for rows in chunks]

    def ping(self) -> bool:
        return True


# ------------------------------------------------------------------ the driver
@dataclass
class StepRecord:
    step: int
    epoch: int
    loss: float
    seconds: float
    split: dict[str, float]                   # owners, round_trip, tree, driver, measure
    shard: dict[str, dict]                    # batch-contracting step -> its measured difference


@dataclass
class EpochRecord:
    epoch: int
    loss: float                               # the mean of its steps' losses
    accuracy: float                           # held out
    seconds: float


@dataclass
class ParallelResult:
    workflow: str
    owners: int
    replicas: int
    batch: int
    precision: str
    steps: list[StepRecord] = field(default_factory=list)
    epochs: list[EpochRecord] = field(default_factory=list)
    params: dict[str, np.ndarray] = field(default_factory=dict)
    divisor: str = ""
    warning: str | None = None
    kinds: dict[str, dict] = field(default_factory=dict)
    seconds: float = 0.0
    status: str = "done"

    @property
    def params_hash(self) -> str:
        return params_hash(self.params)


def divisor_line(replicas: int, bf16_nodes: list[str]) -> tuple[str, str | None]:
    if not bf16_nodes:                          # at f32 (rnd = id) there is no bf16 rounding for the scale to meet
        return (f"divisor 1/{replicas}: at f32 no node rounds to bf16, so the scaled cotangents meet no bf16 "
                f"rounding" + (f"; {replicas} replicas is a power of two, so the 1/{replicas} is exact"
                               if power_of_two(replicas) else ""), None)
    if power_of_two(replicas):
        return (f"divisor 1/{replicas}: {replicas} replicas is a power of two, so rnd({replicas}·x) = "
                f"{replicas}·rnd(x) at bf16 and the scaled cotangents are exact multiples", None)
    return f"divisor 1/{replicas}: not a power of two", divisor_warning(replicas, bf16_nodes)


class Trainer:
    """The driver: owners (``call(Replica.method, args per owner)`` → their results, in owner order), the
    replicas' fixed split, the ordered combine, the update, the per-step shard report."""

    def __init__(self, ctx: Context, replica: Replica, owners: int, call: Callable[[Callable, list], list],
                 *, precision: str | None = None):
        self.ctx, self.local, self.call = ctx, replica, call
        self.wf, self.tr = replica.wf, replica.wf.train
        self.owners = owners
        self.shares = shares(self.tr.replicas, owners)
        self.precision = check_precision(replica.plan, precision)     # None: the workflow's ops' own
        self.params = {n: np.asarray(replica.plan.host[n][0], np.float32).copy()
                       for n, s in self.wf.sources.items() if s.trainable}
        self.optimizer = Optimizer(self.tr.optimizer, self.tr.learning_rate, self.tr.momentum, self.tr.beta1,
                                   self.tr.beta2, self.tr.epsilon)
        self.kinds = {n: classify(replica.plan.steps[n].pkg) for n in replica.contracting}
        bf16_nodes = [n for n, sp in replica.plan.steps.items()
                      if any(t.dtype == "bf16" for t in sp.pkg.contract.signature.outputs)]
        self.divisor, self.warning = divisor_line(self.tr.replicas, bf16_nodes)
        self._counts: dict[str, dict] = {}            # order_scale's count of terms per f32 node

    # -------------------------------------------------------------- one step
    def step(self, rows: np.ndarray, k: int, epoch: int) -> StepRecord:
        t0 = time.perf_counter()
        n = self.tr.batch // self.tr.replicas
        reps = [rows[r * n:(r + 1) * n] for r in range(self.tr.replicas)]
        got = self.call(Replica.gradients, [(self.params, [reps[r] for r in share]) for share in self.shares])
        t1 = time.perf_counter()
        results = [res for owner in got for res in owner]              # replica order: owners hold contiguous shares
        owner_s = max(sum(x["seconds"] for x in owner) for owner in got)
        R = self.tr.replicas
        scale = np.float32(1.0 / R)
        grads = {p: ordered_sum([x["grads"][p] for x in results]) * scale for p in self.params}
        loss = float(ordered_sum([np.float32(x["loss"]) for x in results]) * scale)
        t2 = time.perf_counter()
        shard = self.measure(results)
        t3 = time.perf_counter()
        if not np.isfinite(loss):
            raise StudioError(f"the loss became {loss} at step {k}", field="train.learning_rate",
                              hint="lower the learning rate")
        self.params = self.optimizer.step(self.params, grads)
        t4 = time.perf_counter()
        split = {"owners": owner_s, "round_trip": max(0.0, (t1 - t0) - owner_s), "tree": t2 - t1,
                 "measure": t3 - t2, "driver": t4 - t3}
        return StepRecord(k, epoch, loss, t4 - t0, split, shard)

    def measure(self, results: list[dict]) -> dict[str, dict]:
        """Per batch-contracting step: the op on the whole batch here (the replicas' inputs in order,
        through the one executor), and the exact difference of the collective (1/R)·Σ_r out_r from
        (1/R)·whole, per output, against the bound the statement gives it (rounding_stats)."""
        exe = Resident(self.ctx.device, wait=False)
        out = {}
        for n in self.local.contracting:
            sp = self.local.plan.steps[n]
            parts = [x["contracting"][n] for x in results]
            batch = sp.pkg.contract.sharding.batch
            args = {}
            for t in sp.pkg.contract.signature.inputs:
                value = (np.concatenate([np.asarray(p["inputs"][t.name]) for p in parts]) if t.name in batch
                         else parts[0]["inputs"][t.name])
                args[t.name] = exe.upload(value, t.dtype, label=f"{n}.{t.name}")
            got = exe.run(sp.pkg, args, sp.params, label=n)
            names = [t.name for t in sp.pkg.contract.signature.outputs]
            wholes = dict(zip(names, exe.read([got[o] for o in names])))
            order = self.order_scale(exe, n, sp, parts, batch, names)
            out[n] = {t.name: rounding_stats([p["outputs"][t.name] for p in parts], wholes[t.name], t.dtype,
                                             order.get(t.name))
                      for t in sp.pkg.contract.signature.outputs}
        return out

    def order_scale(self, exe, n: str, sp, parts: list[dict], batch, names: list[str]) -> dict[str, tuple]:
        """For the f32 outputs of a batch-contracting step (rnd = id): per element of the whole node,
        Σ|terms| (the same op on the whole batch's |inputs|: every term's magnitude, summed) and the
        count of terms N (the op on all-ones inputs, the same for every step: kept), on the driver's
        device, for rounding_stats' order-only bound. Nothing for an op without f32 outputs."""
        outs = [t for t in sp.pkg.contract.signature.outputs if t.dtype == "f32"]
        if not outs:
            return {}
        whole = {t.name: (np.concatenate([np.asarray(p["inputs"][t.name]) for p in parts]) if t.name in batch
                          else np.asarray(parts[0]["inputs"][t.name])) for t in sp.pkg.contract.signature.inputs}
        dtypes = {t.name: t.dtype for t in sp.pkg.contract.signature.inputs}

        def on(values: dict, label: str) -> dict:
            got = exe.run(sp.pkg, {k: exe.upload(v, dtypes[k], label=f"{n}.{k}.{label}") for k, v in values.items()},
                          sp.params, label=f"{n}.{label}")
            return dict(zip(names, exe.read([got[o] for o in names])))
        counts = self._counts.get(n)
        if counts is None:
            counts = self._counts[n] = on({k: np.ones_like(v, dtype=np.float32) for k, v in whole.items()}, "ones")
        mags = on({k: np.abs(np.asarray(v, np.float32)) for k, v in whole.items()}, "abs")
        return {t.name: (mags[t.name], counts[t.name]) for t in outs}

    # -------------------------------------------------------------- held out
    def accuracy(self) -> float:
        ds, n = self.local.data, self.tr.batch // self.tr.replicas
        rows = ds.held_out
        pad = (-len(rows)) % n
        padded = np.concatenate([rows, rows[:pad]]) if pad else rows
        chunks = [padded[i:i + n] for i in range(0, len(padded), n)]
        per = [chunks[i::self.owners] for i in range(self.owners)]     # round robin: owner o takes chunks o, o+O, …
        got = self.call(Replica.predict, [(self.params, c) for c in per])
        preds = [None] * len(chunks)
        for o, res in enumerate(got):
            for j, p in enumerate(res):
                preds[o + j * self.owners] = p
        logits = np.concatenate(preds)[:len(rows)]
        return float(np.mean(np.argmax(logits, axis=1) == ds.labels[rows]))

    # -------------------------------------------------------------- the loop
    def run(self, epochs: int | None = None, *, steps: int | None = None, on_step=None, on_epoch=None,
            stop=None) -> ParallelResult:
        """``epochs`` (default: the file's); ``steps``: stop after that many steps (the epoch under way
        ends there, with its held-out accuracy); ``stop``: a callable checked between steps."""
        E = int(epochs or self.tr.epochs)
        res = ParallelResult(self.wf.name, self.owners, self.tr.replicas, self.tr.batch, self.precision,
                             divisor=self.divisor, warning=self.warning,
                             kinds={n: k.to_json() for n, k in self.kinds.items()})
        t0, k = time.perf_counter(), 0
        ds = self.local.data
        for e in range(1, E + 1):
            te = time.perf_counter()
            order = ds.epoch_order(e)
            losses = []
            for s in range(len(order) // self.tr.batch):
                if stop is not None and stop():
                    res.status = "stopped"
                    break
                if steps is not None and k >= steps:
                    break
                k += 1
                rec = self.step(order[s * self.tr.batch:(s + 1) * self.tr.batch], k, e)
                res.steps.append(rec)
                losses.append(rec.loss)
                if on_step is not None:
                    on_step(rec)
            if res.status == "stopped":
                break
            if steps is not None and k >= steps and not losses:
                break
            ep = EpochRecord(e, float(np.mean(losses)) if losses else float("nan"), self.accuracy(),
                             time.perf_counter() - te)
            res.epochs.append(ep)
            if on_epoch is not None:
                on_epoch(ep)
        res.params = dict(self.params)
        res.seconds = time.perf_counter() - t0
        return res


def load_replica(path: str | Path, ctx: Context, *, allow_unverified: bool = False) -> Replica:
    """The driver's own copy (its plan judges the receipts the owners will judge again)."""
    wf = load_workflow(path)
    if wf.train is None or not wf.train.explicit:
        raise wf.error(("train",), "this workflow does not name its gradients: it trains through the tape",
                       hint="run it without --owners, or add [train] gradients (docs/workflows.md)")
    return Replica(str(path), allow_unverified=allow_unverified, ctx=ctx)


# ------------------------------------------------------------------ owners on Dask
class DaskOwners:
    """One Replica actor per owner on the client's workers (owner o on worker o mod W): each opens
    its own device, looks up and verifies every op, reads the dataset itself; a step sends the
    parameters and the replicas' row numbers, never images."""

    def __init__(self, client, path: str, owners: int, *, allow_unverified: bool = False, corpora: dict | None = None):
        workers = sorted(workers_now(client))
        if not workers:
            raise StudioError(f"{owners} owners asked for, the cluster has no workers", field="--owners",
                              hint="start workers (dask worker ADDRESS), or run without --scheduler")
        self.client = client
        self.addresses = [workers[o % len(workers)] for o in range(owners)]
        tag = hashlib.sha256(f"{path}{time.time_ns()}".encode()).hexdigest()[:8]
        futures = [client.submit(Replica, path, (), allow_unverified, None, dict(corpora or {}), actor=True, workers=[a],
                                 allow_other_workers=False, key=f"replica-owner{o}-{tag}")
                   for o, a in enumerate(self.addresses)]
        self.actors = [f.result() for f in futures]

    def call(self, method: Callable, args: list) -> list:
        """``method`` (a Replica method) on every owner's actor at once, each with its arguments; the
        results in owner order."""
        futures = [getattr(a, method.__name__)(*x) for a, x in zip(self.actors, args)]
        return [f.result() for f in futures]
