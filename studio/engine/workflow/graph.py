"""The workflow as a graph: which node each wire names, an order to run the nodes in (a
topological order: any DAG, one node may feed several), the nodes a "run to here" needs, and the
errors of a graph that cannot run: a wire to nothing, a cycle (named, at its first wire)."""
from __future__ import annotations

import difflib

from .spec import Wire, Workflow


def dependencies(wf: Workflow, node: str) -> list[Wire]:
    """The wires a node reads (a step's inputs, a fill source's ``like``)."""
    if node in wf.steps:
        return list(wf.steps[node].inputs.values())
    s = wf.sources[node]
    return [s.like] if s.like is not None else []


def check_wire(wf: Workflow, w: Wire) -> None:
    if w.node in wf.sources or w.node in wf.steps:
        if w.node in wf.sources and w.output is not None:
            raise wf.error(w.path, f"'{w.text}': source '{w.node}' has one value; write \"{w.node}\"")
        return
    near = difflib.get_close_matches(w.node, wf.nodes, n=1)
    raise wf.error(w.path, f"'{w.text}' names no source or step '{w.node}' (a dangling wire)",
                   hint=(f"did you mean '{near[0]}'? " if near else "") + "known: " + ", ".join(wf.nodes))


def order(wf: Workflow) -> list[str]:
    """Every source and step, each after everything it reads; file order among equals."""
    for n in wf.nodes:
        for w in dependencies(wf, n):
            check_wire(wf, w)
    for s in wf.sources.values():
        if s.spike_free is not None and s.spike_free not in wf.steps:
            raise wf.error(("sources", s.name, "spike_free"), f"source '{s.name}': '{s.spike_free}' is not a step",
                           hint="name the step that runs core/signal/spiky_signal@1")
    for sink in wf.sinks.values():
        for w in sink.series:
            check_wire(wf, w)
    for part in (wf.report, wf.train):
        if part is not None:
            for w in (vars(part).values()):
                if isinstance(w, Wire):
                    check_wire(wf, w)
    deps = {n: [w.node for w in dependencies(wf, n)] for n in wf.nodes}
    for s in wf.sources.values():               # the spike-free signal follows the step it is taken from
        if s.spike_free is not None:
            deps[s.name].append(s.spike_free)
    cycle = find_cycle(deps)
    if cycle:
        first = cycle[0]
        at = next((w.path for w in dependencies(wf, first) if w.node == cycle[1 % len(cycle)]),
                  ("sources", first, "spike_free"))
        raise wf.error(at, "the workflow has a cycle: " + " → ".join([*reversed(cycle), cycle[-1]]),
                       hint="a workflow is a DAG: no step may read, directly or not, its own output")
    done: list[str] = []
    seen: set[str] = set()
    pending = list(wf.nodes)
    while pending:
        for n in pending:
            if all(d in seen for d in deps[n]):
                done.append(n)
                seen.add(n)
                pending.remove(n)
                break
    return done


def find_cycle(deps: dict[str, list[str]]) -> list[str]:
    """A cycle as [a, b, ..., z] where a reads b, b reads ..., z reads a; [] when there is none."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str]:
        state[n] = 1
        stack.append(n)
        for d in deps.get(n, []):
            if state.get(d) == 1:
                return stack[stack.index(d):]
            if d not in state:
                found = visit(d)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return []

    for n in deps:
        if n not in state:
            found = visit(n)
            if found:
                return found
    return []


def needed_for(wf: Workflow, target: str) -> set[str]:
    """``target`` and every node it reads, directly or not (what "run to here" runs)."""
    if target not in wf.steps and target not in wf.sources:
        raise wf.error(("steps",), f"no step '{target}' to run to", hint="steps: " + ", ".join(wf.steps))
    need, todo = set(), [target]
    while todo:
        n = todo.pop()
        if n in need:
            continue
        need.add(n)
        todo += [w.node for w in dependencies(wf, n)]
        s = wf.sources.get(n)
        if s is not None and s.spike_free:
            todo.append(s.spike_free)
    return need


def consumers(wf: Workflow, node: str) -> list[str]:
    """The steps and sources that read ``node`` (one node may feed several)."""
    return [n for n in wf.nodes if any(w.node == node for w in dependencies(wf, n))]
