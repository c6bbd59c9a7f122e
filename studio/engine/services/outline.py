"""A workflow file as the front ends show it before anything runs (docs/workflows.md): its nodes in
run order, each step's op from the catalog with its hash and badge (tolerance, category, backward).
`scellis workflow show` prints it; the Studio's workflow notebook builds its cells from it. Running
and training a workflow are the worker's requests (studio/engine/services/workflows.py)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..context import Context
from ..errors import StudioError
from ..resources import ROOT
from ..workflow.graph import order
from ..workflow.plan import resolve_op
from ..workflow.spec import load_workflow

STORY = "spike_removal.toml"


def story_workflow() -> Path:
    """The README's main job: the story workflow shipped as package data."""
    return ROOT / "workflows" / STORY


@dataclass(frozen=True)
class Node:
    name: str
    is_step: bool                    # a step (an op), else a source
    kind: str                        # a source's kind; a step's op as written in the file
    trainable: bool = False          # a source the [train] section may change
    params: dict = field(default_factory=dict)      # a step's parameters, as written
    wires: str = ""                  # a step's inputs, as written ("x = signal.out")
    badge: dict = field(default_factory=dict)       # a step's op: op, hash, tolerance, category, backward


@dataclass(frozen=True)
class Outline:
    path: Path
    name: str
    hash: str                        # sha256 of the file
    summary: str
    trains: bool                     # it has a [train] section
    nodes: tuple[Node, ...]          # in run order
    data_parallel: bool = False      # its [train] names the gradients: owners on Dask (services/data_parallel.py)

    @property
    def steps(self) -> list[Node]:
        return [n for n in self.nodes if n.is_step]

    def lines(self) -> list[str]:
        out = [f"workflow  {self.name}  (sha256 {self.hash[:16]}): {self.summary}"]
        for n in self.nodes:
            if not n.is_step:
                out.append(f"source    {n.name:10s} {n.kind}" + (" (trainable)" if n.trainable else ""))
                continue
            b = n.badge
            out.append(f"step      {n.name:10s} {b.get('op', n.kind):34s} {b.get('hash', '?')[:12]}  "
                       f"{b.get('tolerance', '?')} ({b.get('category', '?')}), backward {b.get('backward', '?')}  "
                       f"({n.wires})")
        return out


def outline(path: str | Path, ctx: Context | None = None, *, strict: bool = True) -> Outline:
    """The workflow at ``path`` (a StudioError at file:line:col for a bad file). With ``ctx`` each
    step's op is looked up in its catalog (the way the run will, by id and pinned hash): ``strict``
    raises for an op that does not resolve, else its badge stays empty."""
    wf = load_workflow(path)
    nodes = []
    for n in order(wf):
        if n in wf.sources:
            s = wf.sources[n]
            nodes.append(Node(n, False, s.kind, trainable=bool(s.trainable)))
            continue
        st = wf.steps[n]
        nodes.append(Node(n, True, st.op, params=dict(st.params), badge=_badge(ctx, wf, st, strict),
                          wires=", ".join(f"{k} = {w.text}" for k, w in st.inputs.items())))
    return Outline(Path(path), wf.name, wf.hash, wf.summary, wf.train is not None, tuple(nodes),
                   wf.train is not None and wf.train.explicit)


def _badge(ctx: Context | None, wf, st, strict: bool) -> dict:
    if ctx is None:
        return {}
    try:
        pkg = resolve_op(ctx, wf, st)
    except StudioError:
        if strict:
            raise
        return {}
    c = pkg.contract
    return {"op": pkg.id, "hash": pkg.hash, "tolerance": str(c.tolerance), "category": c.tolerance.category,
            "backward": c.backward.kind}
