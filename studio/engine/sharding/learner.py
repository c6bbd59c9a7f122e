"""bf16 in the learner (docs/requirements.md L10-L12; docs/bf16.md "The learner at bf16"). The learner's own
bf16 combine (studio/engine/learner/combine.py, precision "bf16", per-owner tree): each owner's
partial sum S_r of contributions is rounded once to bf16, the rounded partials are added in f32 in
the per-owner tree, and the mean divides by the mass N — the collective Σ_r rnd(S_r) / N, where one
owner gives the global rounding rnd(S) / N. The replicas are the learner's R even shares
(``System.evenly``), run here through ``combine.local_step``: the same functions, the same plan and
the same operands as ``scellis learn`` on R Dask owners, so the parameters are the same bits
(tests/learner/test_learner_bf16.py checks that against a real Dask run). An f32 learner file is reported
as its bf16 variant (the same programs and data, ``[combine] tree = "per-owner", precision = "bf16"``).

Nodes reported, per step of training from the same start on R replicas and on one:
- contribution (per example): replica r's contributions are rows of the whole batch's, bit for bit;
- numerator at f32 (rnd = id): the canonical tree's sum on R owners is the one-owner sum, bit for
  bit (the learner's f32 contract) — the f32 statement, zero;
- weight gradient at bf16 (rounded per replica): Σ_r rnd(S_r)/N − rnd(S)/N as run (R owners
  against one at the same parameters), and at the den (Σ_r rnd S_r − rnd Σ_r S_r)/N exactly, in bf16
  ulps and relative; where R is no power of two, the divisor warning."""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from .. import bfloat16 as bf
from ..errors import StudioError
from ..learner import combine
from ..learner.fingerprint import array_hash
from . import measure
from .divisor import divisor_warning, power_of_two
from .kinds import EXACT, EXACT_AT_ID, ROUNDED

BF16_NODE = "weight gradient (bf16 mean)"
NODES = (("contribution", EXACT), ("numerator (f32, canonical tree)", EXACT_AT_ID), (BF16_NODE, ROUNDED))


def bf16_system(system, replicas: int):
    """The learner's bf16 variant on ``replicas`` even shares (a bf16 learner as it is)."""
    base = system if system.precision == "bf16" else replace(system, tree="per-owner", precision="bf16")
    return base.evenly(replicas)


def f32_system(system, replicas: int):
    """Its f32 counterpart (rnd = id): an f32 learner as it is, a bf16 one on the canonical tree."""
    base = system if system.precision == "f32" else replace(system, tree="canonical", precision="f32")
    return base.evenly(replicas)


def learn_warning(system, owners: int | None = None) -> str | None:
    """The divisor warning for a bf16 learner run on its owners (or ``owners`` even shares): the
    count is that of the owners whose rounded partials are combined (the non-empty ones)."""
    if system.precision != "bf16":
        return None
    s = system.evenly(owners) if owners else system
    return divisor_warning(sum(1 for o in s.owners if o.size), [BF16_NODE])


@dataclass
class LearnerRun:
    replicas: int
    steps: int
    nodes: dict = field(default_factory=dict)    # node name -> per-step measures
    final_params: list = field(default_factory=list)
    final_vs_one: dict = field(default_factory=dict)
    warning: str | None = None
    contract_hash: str = ""                      # the bf16 learner's contract on R owners
    final_hash: str = ""                         # array_hash of the final parameters (as `scellis learn` prints)

    def to_json(self) -> dict:
        return {"replicas": self.replicas, "steps": self.steps, "power_of_two": power_of_two(self.replicas),
                "nodes": self.nodes, "final_params": self.final_params, "final_vs_one": self.final_vs_one,
                "warning": self.warning, "contract_hash": self.contract_hash, "final_hash": self.final_hash}


def owner_sums(system, params: np.ndarray) -> np.ndarray:
    """Per owner its f32 partial sum S_r (the per-owner tree over its list), unrounded."""
    rows = [combine.tree_sum(system.contribution.contributions(params, system.samples[idx]))
            for idx in system.owners if idx.size]
    return np.stack(rows)


def train(system, steps: int, record=None):
    """``steps`` updates by the learner's own combine (``combine.local_step``): (params, state)."""
    params, state = system.params.copy(), system.state.copy()
    for t in range(steps):
        new_p, new_s, mu = combine.local_step(system, params, state)
        if record is not None:
            record(t, params, mu)
        params, state = new_p, new_s
    return params, state


def learner_run(system, replicas: int, steps: int | None = None) -> LearnerRun:
    steps = int(steps or system.steps)
    n = system.samples.shape[0]
    if replicas < 1 or n % replicas:
        raise StudioError(f"{system.name}: {n} samples do not split into {replicas} equal replica shares",
                          field="--replicas", hint=f"choose a replica count that divides {n}")
    many, one = bf16_system(system, replicas), bf16_system(system, 1)
    run = LearnerRun(replicas, steps, warning=learn_warning(many), contract_hash=combine.contract_hash(many))
    contrib = {"bitwise_steps": 0}
    f32 = {"bitwise_steps": 0}
    f32_one, f32_many = f32_system(system, 1), f32_system(system, replicas)
    diffs, refs, run_diffs, run_refs = [], [], [], []

    def record(t, params, mu):
        whole = system.contribution.contributions(params, system.samples)
        parts = [system.contribution.contributions(params, system.samples[idx]) for idx in many.owners]
        contrib["bitwise_steps"] += bool(np.array_equal(np.concatenate(parts).view(np.uint32), whole.view(np.uint32)))
        a, b = combine.local_numerator(f32_one, params), combine.local_numerator(f32_many, params)
        f32["bitwise_steps"] += bool(np.array_equal(a.view(np.uint32), b.view(np.uint32)))
        mu_one = combine.mean(combine.local_numerator(one, params), n).astype(np.float64)     # rnd(S)/N as run
        run_diffs.append(mu.astype(np.float64) - mu_one)          # both f32: the difference is exact in f64
        run_refs.append(mu_one)
        sums = owner_sums(many, params)
        whole_node = bf.to_f32(bf.from_f64(measure.exact_sum(list(sums.astype(np.float64))))).astype(np.float64)
        collective = measure.exact_sum([combine.rnd(s).astype(np.float64) for s in sums])
        diffs.append((collective - whole_node) / n)              # (Σ_r rnd S_r − rnd Σ_r S_r) / N
        refs.append(whole_node / n)

    final, _ = train(many, steps, record)
    one_final, _ = train(one, steps)
    run.nodes = {"contribution": {"label": EXACT, "steps": steps, **contrib},
                 "numerator (f32, canonical tree)": {"label": EXACT_AT_ID, "steps": steps, **f32},
                 BF16_NODE: {"label": ROUNDED, "steps": steps,
                             **measure.stats(np.stack(run_diffs), np.stack(run_refs), "bf16"),
                             "den": measure.stats(np.stack(diffs), np.stack(refs), "bf16")}}
    run.final_params = [float(v) for v in final]
    run.final_hash = array_hash(np.asarray(final, np.float32))
    run.final_vs_one = measure.stats(final.astype(np.float64) - one_final.astype(np.float64),
                                     one_final.astype(np.float64), "f32")
    return run


def learner_lines(name: str, run: LearnerRun) -> list[str]:
    lines = [(f"learner {name} on {run.replicas} replica(s), {run.steps} steps from the same start, bf16 combine "
              f"(each owner's partial sum rounded once), contract {run.contract_hash[:16]}")]
    for node, m in run.nodes.items():
        if "bitwise_steps" in m:
            lines.append(f"node {node:<32} {m['label']:<22} bit for bit at {m['bitwise_steps']}/{m['steps']} steps")
        else:
            d = m["den"]
            lines.append(f"node {node:<32} {m['label']:<22} Σ_r rnd(S_r)/N − rnd(S)/N as run: {m['nonzero']}/"
                         f"{m['elements']} non-zero, max {m['max_ulps']:.3g} ulp (mean {m['mean_ulps']:.3g}), max rel "
                         f"{m['max_rel']:.3g}; at the den: max {d['max_ulps']:.3g} ulp (mean {d['mean_ulps']:.3g})")
    f = run.final_vs_one
    lines.append(f"final parameters vs 1 replica: max |diff| {f['max']:.3g} (max rel {f['max_rel']:.3g}, "
                 f"{f['nonzero']}/{f['elements']} differ); final parameter hash {run.final_hash}")
    if run.warning:
        lines.append(f"warning: {run.warning}")
    return lines
