"""bf16 in the learner (LEARNER.md §10-12; docs/bf16.md "The learner at bf16"). A learner's
update on R replicas, with the mean contribution — its weight gradient — made a bf16 node the
way data-parallel training makes it: each replica divides its own sum by its own batch and rounds
that once to bf16, and the f32 all-reduce averages the R rounded values. On one device the same
node is rnd(S / N) once. The replicas are the learner's even shares (``System.evenly``), run in
this process through the learner's own functions (its contribution program, its canonical combine
tree, its update program); ``scellis learn`` runs the f32 learner on real owners.

Nodes reported, per step of training from the same start on R replicas and on one:
- contribution (per example): replica r's contributions are rows of the whole batch's, bit for bit;
- numerator at f32 (rnd = id): the canonical tree's sum on R owners is the one-owner sum, bit for
  bit (the learner's own contract) — the f32 statement, zero;
- weight gradient at bf16 (rounded per replica): (1/R)·Σ_r rnd(R·S_r/N) − rnd(S/N), exactly,
  in bf16 ulps and relative; and where R is no power of two, the divisor step's share of it."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .. import bfloat16 as bf
from ..errors import StudioError
from ..learner.combine import local_numerator, tree_sum
from . import measure
from .divisor import divisor_warning, power_of_two
from .kinds import EXACT, EXACT_AT_ID, ROUNDED

NODES = (("contribution", EXACT), ("numerator (f32, canonical tree)", EXACT_AT_ID),
         ("weight gradient (bf16 mean)", ROUNDED))


def rnd32(a: np.ndarray) -> np.ndarray:
    """bf16's rounding of f32 values, back as f32 (exact)."""
    return bf.to_f32(bf.from_f32(np.asarray(a, np.float32)))


def replica_means(system, params: np.ndarray, replicas: int) -> tuple[list[np.ndarray], np.ndarray]:
    """Per replica its f32 local mean S_r / N_r, and the f32 sums S_r (the tree over its samples)."""
    sums, means = [], []
    for idx in system.evenly(replicas).owners:
        c = system.contribution.contributions(params, system.samples[np.sort(idx)])
        s = tree_sum(c) if c.shape[0] else np.zeros(system.k, np.float32)
        sums.append(s)
        means.append(np.divide(s, np.float32(max(len(idx), 1)), dtype=np.float32))
    return means, np.stack(sums)


def bf16_mean(system, params: np.ndarray, replicas: int) -> np.ndarray:
    """The all-reduced bf16 weight gradient: (1/R)·Σ_r rnd(S_r / N_r), the sum in replica order."""
    means, _ = replica_means(system, params, replicas)
    acc = np.zeros(system.k, np.float32)
    for m in means:
        acc = np.add(acc, rnd32(m), dtype=np.float32)
    return np.divide(acc, np.float32(replicas), dtype=np.float32)


@dataclass
class LearnerRun:
    replicas: int
    steps: int
    nodes: dict = field(default_factory=dict)    # node name -> per-step measures
    final_params: list = field(default_factory=list)
    final_vs_one: dict = field(default_factory=dict)
    warning: str | None = None

    def to_json(self) -> dict:
        return {"replicas": self.replicas, "steps": self.steps, "power_of_two": power_of_two(self.replicas),
                "nodes": self.nodes, "final_params": self.final_params, "final_vs_one": self.final_vs_one,
                "warning": self.warning}


def _train(system, replicas: int, steps: int, record=None) -> np.ndarray:
    params, state = system.params.copy(), system.state.copy()
    for t in range(steps):
        mu = bf16_mean(system, params, replicas)
        if record is not None:
            record(t, params, mu)
        params, state = system.update.apply(params, state, mu, system.rate)
        params, state = np.asarray(params, np.float32), np.asarray(state, np.float32)
    return params


def learner_run(system, replicas: int, steps: int | None = None) -> LearnerRun:
    steps = int(steps or system.steps)
    n = system.samples.shape[0]
    if replicas < 1 or n % replicas:
        raise StudioError(f"{system.name}: {n} samples do not split into {replicas} equal replica shares",
                          field="--replicas", hint=f"choose a replica count that divides {n}")
    run = LearnerRun(replicas, steps, warning=divisor_warning(replicas, ["weight gradient (bf16 mean)"]))
    contrib = {"bitwise_steps": 0}
    f32 = {"bitwise_steps": 0}
    diffs, refs, run_diffs, run_refs = [], [], [], []

    def record(t, params, mu):
        whole = system.contribution.contributions(params, system.samples)
        parts = [system.contribution.contributions(params, system.samples[np.sort(i)])
                 for i in system.evenly(replicas).owners]
        contrib["bitwise_steps"] += bool(np.array_equal(np.concatenate(parts).view(np.uint32), whole.view(np.uint32)))
        one = local_numerator(system.evenly(1), params)
        many = local_numerator(system.evenly(replicas), params)
        f32["bitwise_steps"] += bool(np.array_equal(one.view(np.uint32), many.view(np.uint32)))
        _, sums = replica_means(system, params, replicas)
        exact_mean = measure._exact_sum(list(sums.astype(np.float64))) / n      # S / N, f64
        whole_node = bf.to_f32(bf.from_f64(exact_mean)).astype(np.float64)       # rnd(S / N) once
        collective = measure._exact_sum([R_rnd(s, replicas, n) for s in sums]) / replicas
        diffs.append(collective - whole_node)
        refs.append(whole_node)
        one_device = rnd32(np.divide(one, np.float32(n), dtype=np.float32)).astype(np.float64)   # rnd(S/N) as run
        run_diffs.append(mu.astype(np.float64) - one_device)          # both f32: the difference is exact in f64
        run_refs.append(one_device)

    final = _train(system, replicas, steps, record)
    one_final = _train(system, 1, steps)
    run.nodes = {"contribution": {"label": EXACT, "steps": steps, **contrib},
                 "numerator (f32, canonical tree)": {"label": EXACT_AT_ID, "steps": steps, **f32},
                 "weight gradient (bf16 mean)": {"label": ROUNDED, "steps": steps,
                                                 **measure.stats(np.stack(run_diffs), np.stack(run_refs), "bf16"),
                                                 "den": measure.stats(np.stack(diffs), np.stack(refs), "bf16")}}
    run.final_params = [float(v) for v in final]
    run.final_vs_one = measure.stats(final.astype(np.float64) - one_final.astype(np.float64),
                                     one_final.astype(np.float64), "f32")
    return run


def R_rnd(s: np.ndarray, replicas: int, n: int) -> np.ndarray:
    """Replica r's rounded local mean, rnd(S_r / N_r) with N_r = N / R, from its f32 sum S_r (f64 math:
    S_r·R/N is formed exactly for R and N/R powers of two, else once rounded in f64)."""
    return bf.to_f32(bf.from_f64(np.asarray(s, np.float64) * replicas / n)).astype(np.float64)


def learner_lines(name: str, run: LearnerRun) -> list[str]:
    lines = [f"learner {name} on {run.replicas} replica(s), {run.steps} steps from the same start, bf16 weight gradients"]
    for node, m in run.nodes.items():
        if "bitwise_steps" in m:
            lines.append(f"node {node:<32} {m['label']:<22} bit for bit at {m['bitwise_steps']}/{m['steps']} steps")
        else:
            d = m["den"]
            lines.append(f"node {node:<32} {m['label']:<22} (1/R)Σ rnd(R·S_r/N) − rnd(S/N) as run: {m['nonzero']}/"
                         f"{m['elements']} non-zero, max {m['max_ulps']:.3g} ulp (mean {m['mean_ulps']:.3g}), max rel "
                         f"{m['max_rel']:.3g}; at the den: max {d['max_ulps']:.3g} ulp (mean {d['mean_ulps']:.3g})")
    f = run.final_vs_one
    lines.append(f"final parameters vs 1 replica: max |diff| {f['max']:.3g} (max rel {f['max_rel']:.3g}, "
                 f"{f['nonzero']}/{f['elements']} differ)")
    if run.warning:
        lines.append(f"warning: {run.warning}")
    return lines
