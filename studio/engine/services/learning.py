"""The learner use case (docs/learner.md), the one the CLI's `scellis learn` and the Studio's learner
panel both go through: find a learner (a file, its folder, or a shipped one), load it as a system
with the owners this machine may start, place it on its owners (the combine order, the contract and
a bf16 learner's divisor warning), run or resume it with checkpoints (owners on Dask), and report
its steps and its result."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import StudioError
from ..learner.combine import contract_hash, order_text
from ..learner.limits import OWNERS_HINT, default_max_owners
from ..learner.system import System, load_system
from ..resources import ROOT
from ..sharding.learner import learn_warning

if TYPE_CHECKING:                    # the run (owners on Dask, their devices) loads when a run starts
    from ..learner.run import LearnResult, StepRecord


def shipped() -> dict[str, Path]:
    """The shipped learners (package data, ``learners/``): name → folder, by name."""
    return {d.name: d for d in sorted((ROOT / "learners").iterdir()) if (d / "learner.toml").is_file()}


def find(file: str | Path) -> Path:
    """A learner.toml, its folder, or the name of a shipped learner."""
    p = Path(file)
    if p.exists():
        return p
    named = shipped()
    if str(file) in named:
        return named[str(file)]
    raise StudioError(f"no learner file or shipped learner named {str(file)!r}", file=str(file),
                      hint="give a learner.toml or its folder, or one of: " + ", ".join(named))


def open_learner(file: str | Path, *, owners: int | None = None, max_owners: int | None = None,
                 scheduler: str | None = None) -> System:
    """The learner as a system, judged before any process starts. ``max_owners``: the owners a run
    may start (default on a local cluster: two per CPU core, at least 8; none with a ``scheduler``);
    ``owners``: the count asked for, refused when over that cap."""
    cap = max_owners or (None if scheduler else default_max_owners())
    system = load_system(find(file), max_owners=cap)
    if owners and cap and owners > cap:
        raise StudioError(f"--owners {owners} is over the {cap} owners this run may start (one Dask worker "
                          f"process each)", field="--owners", hint=OWNERS_HINT)
    return system


@dataclass(frozen=True)
class Placement:
    """A system as it will run: on its file's owners, or on ``owners`` even shares."""
    system: System
    order: str                       # the combine tree, as text
    contract: str                    # the hash of the per-owner contract (it names the split)
    warning: str | None              # a bf16 learner's divisor warning (docs/bf16.md), else None

    def lines(self) -> list[str]:
        s = self.system
        return [f"learner {s.name}: k = {s.k}, s = {s.s}, m = {s.m}, {s.samples.shape[0]} samples, "
                f"rate {float(s.rate):g}", f"combine {self.order}", f"contract {self.contract}"]


def place(system: System, owners: int | None = None) -> Placement:
    placed = system.evenly(owners) if owners else system
    return Placement(placed, order_text(placed), contract_hash(placed), learn_warning(system, owners))


@dataclass(frozen=True)
class Outcome:
    """A run's end: its result, or the disagreement of the owners that stopped it (a failed check)."""
    result: LearnResult | None
    disagreement: StudioError | None = None


def run(system: System, *, owners: int | None = None, scheduler: str | None = None,
        checkpoint: str | Path | None = None, resume: bool = False, steps: int | None = None,
        on_step=None, on_event=None, stop=None, owner_device: str = "cpu") -> Outcome:
    """Train ``system`` to ``steps`` (default its own) on ``owners`` even shares (default its file's
    owners), on the Dask cluster at ``scheduler`` (default a local one, closed at the end). With
    ``checkpoint`` a checkpoint is written after every step; ``resume`` continues from it.
    ``on_step(StepRecord)`` and ``on_event(text)`` report as it goes; ``stop`` (a threading.Event)
    ends the run after the step in flight; ``owner_device``: where the owners compute (cpu, gpu, auto:
    docs/learner.md "Owners on a device"). Other errors (a lost cluster, a bad checkpoint) raise."""
    from ..learner.owners import Disagreement
    from ..learner.run import learn as run_learner
    try:
        return Outcome(run_learner(system, owners=owners, scheduler=scheduler, checkpoint=checkpoint, resume=resume,
                                   steps=steps, on_step=on_step, on_event=on_event, stop=stop,
                                   owner_device=owner_device))
    except Disagreement as e:
        return Outcome(None, e)


def step_line(rec: StepRecord, total: int) -> str:
    """One step as a line: its metric, its owners and shares, and whether they agreed."""
    agree = f"agree {rec.hashes[0][:12]}" if rec.agreed else "DISAGREE"
    shares = ",".join(map(str, rec.shares))
    return (f"step {rec.step:>4}/{total}  |mean contribution| {rec.metric:.6e}  owners {len(rec.owners)} "
            f"(shares {shares})  {agree}  {rec.seconds:.3f} s")


def result_lines(res: LearnResult) -> list[str]:
    return [f"done: {res.step} steps on {len(res.system.owners)} owner(s), shares {res.system.shares}",
            f"final parameter hash {res.params_hash}",
            f"final parameter-and-state hash {res.replica_hash}"]
