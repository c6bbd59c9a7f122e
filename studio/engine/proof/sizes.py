"""Which large sizes the corpus reaches, planned from the signature and each kernel's launch —
not from the forward's launch alone — and why any size is not reached.

* ``fold``: the smallest swept size whose forward launch needs more than the device's
  workgroups per dimension on some axis (the engine then folds that axis into the next unused
  one: device/launch.py), with an odd number of workgroups there, so the folded grid has a
  workgroup past the end, which the kernel must guard;
* ``backward_fold``: the same for the `[backward]` kernel, with its own workgroup size and
  invocations (fir's backward, 256 wide, folds only past 16.7 M elements);
* ``big``: a large size (about 10⁶, or the largest the signature admits below that) for every
  op, whatever its launch shape: a scan launched as 256 invocations still gets one.

Each axis of an op with more than one dim gets its own (``plan_axes``): ``fold@h``, ``backward_fold@h``
and ``big@h``, that axis swept with every other dim above 1 (a kernel that ignores the folded row
index, or is wrong past 10⁶ elements only when cols ≥ 2, fails there); an axis the signature caps
below the fold, or whose launch does not grow with it, is named in ``not_reached``. The swept size
of a 1-D launch keeps the fold it reached with the other dims at 1 (the same launch).

The default corpus holds a size when its arrays fit ``BUDGET_BYTES``; ``--large`` holds all."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..contract.signature import Signature
from ..device.launch import folds, of_spec
from ..errors import StudioError
from ..precision import DTYPE_BYTES

BUDGET_BYTES = 96 << 20
BIG_SIZE = 1_000_003
SEARCH_TOP = 1 << 31


@dataclass
class SizePlan:
    sizes: dict[str, int] = field(default_factory=dict)           # kind -> swept size
    invocations: dict[str, dict] = field(default_factory=dict)    # kind -> {"invocations", "workgroups", "folded"}
    not_reached: list[dict] = field(default_factory=list)         # {"what", "why"}

    def backward_fold_sizes(self) -> list[int]:
        """The swept sizes at which the backward launch folds (its own case, or the forward's fold case)."""
        out = []
        for k, g in self.invocations.items():
            kind, _, axis = k.partition("@")
            size = self.sizes.get(k) or self.sizes.get("fold" + (f"@{axis}" if axis else ""))
            if kind == "backward_fold" and g["folded"] and size:
                out.append(size)
        return out

    def add(self, extra: dict[str, int], contract, env_for, limit: int) -> None:
        """Sizes asked for besides the plan (a run's own size: coverage.py), with their launches."""
        for kind, v in extra.items():
            self.sizes[kind] = int(v)
            if contract.kernel is not None:
                self.invocations[kind] = launch(contract.kernel, env_for(int(v)), limit)

    def to_json(self) -> dict:
        return {"sizes": dict(self.sizes), "launch": dict(self.invocations), "not_reached": list(self.not_reached)}


def _admissible(sig: Signature, env: dict, size_param: str | None) -> bool:
    try:
        shapes = {t.name: tuple(int(d.eval(env)) for d in t.dims) for t in sig.inputs}
        if any(s < 0 for sh in shapes.values() for s in sh):
            return False
        e = sig.resolve(shapes, {p.name: env[p.name] for p in sig.params if p.name in env})
        return all(s > 0 for sh in sig.output_shapes(e).values() for s in sh)
    except (StudioError, KeyError, ValueError, OverflowError, ZeroDivisionError):
        return False


def largest_admissible(sig: Signature, env_for, lo: int, hi: int) -> int | None:
    """The largest size in [lo, hi] the signature admits (admissibility taken as monotone above lo)."""
    if not _admissible(sig, env_for(lo), None):
        return None
    if _admissible(sig, env_for(hi), None):
        return hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if _admissible(sig, env_for(mid), None) else (lo, mid)
    return lo


def fold_point(spec, env_for, limit: int, lo: int, hi: int) -> int | None:
    """The smallest size whose launch of ``spec`` needs more than ``limit`` workgroups on an axis,
    and an odd number of them (limit + 2 for the usual odd limit): folded into two rows, the grid
    then holds one workgroup past the end, as a run's fold may."""
    past = limit if limit % 2 == 0 else limit + 1

    def over(v):
        try:
            return folds(spec, env_for(v), past)
        except (StudioError, KeyError, ValueError, OverflowError, ZeroDivisionError):
            return False
    if not over(hi):
        return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if over(mid) else (mid, hi)
    return hi


def launch(spec, env: dict, limit: int) -> dict:
    g = of_spec(spec, env, limit)
    return {"invocations": g.total_invocations, "workgroup_size": spec.workgroup_size, "workgroups": g.workgroups,
            "folded": g.folded is not None, **({"grid": list(g.grid), "fold": g.folded, "extra": g.extra}
                                                if g.folded or spec_axes(spec) else {})}


def axis_workgroups(contract) -> dict[str, int]:
    """The forward kernel's workgroup along each dim: the axis a dim alone launches (``["w", "h"]``
    with 8 × 8 workgroups: w → 8, h → 8), else every dim of a 1-D launch's invocations."""
    spec = contract.kernel
    if spec is None:
        return {}
    dims = set(contract.signature.symbols) - {p.name for p in contract.signature.params}
    out: dict[str, int] = {}
    for expr, wg in zip(spec_axes(spec) or (spec.invocations,), getattr(spec, "workgroup", ()) or (spec.workgroup_size,)):
        for sym in sorted(expr.symbols() & dims):
            out.setdefault(sym, int(wg))
    return out


def plan_axes(out: SizePlan, contract, axis_envs: dict, limit: int, *, large: bool, budget: int,
              bytes_at, primary: str | None = None) -> None:
    """Each axis's own fold (forward and backward) and large size, the other dims above 1.
    ``axis_envs``: axis -> its env without it (None: no admissible one); ``bytes_at(env)``. The
    swept size ``primary`` gets no fold of its own where a 1-D launch already folded along it."""
    sig = contract.signature
    for axis, base in axis_envs.items():
        if base is None:
            out.not_reached.append({"what": f"{axis}'s own large sizes", "size": None, "why": (
                "no admissible case has every other dim above 1")})
            continue
        def env_for(v: int, base: dict = base, axis: str = axis) -> dict:
            return {**base, axis: v}
        smallest = next((v for v in range(1, 4097) if _admissible(sig, env_for(v), None)), None)
        if smallest is None:
            continue
        top = largest_admissible(sig, env_for, smallest, SEARCH_TOP) or smallest

        def fits(what: str, v: int, env_for=env_for) -> bool:
            need = bytes_at(env_for(v))
            if large or need <= budget:
                return True
            out.not_reached.append({"what": what, "size": v, "why": f"needs about {need / 2**20:.0f} MiB, over the "
                                    f"default corpus's {budget >> 20} MiB: run `scellis conform --large`"})
            return False
        for kind, spec in (("fold", contract.kernel), ("backward_fold", contract.backward_kernel)):
            if spec is None or len(spec_axes(spec)) == 3:
                continue
            if axis == primary and not spec_axes(spec) and kind in out.invocations:
                continue          # a 1-D launch along the swept size folds alike whatever the others: reached
            name = f"{'forward' if kind == 'fold' else 'backward'} 2-D launch fold along {axis}"
            v = fold_point(spec, env_for, limit, smallest, top)
            if v is None:
                grows = fold_point(spec, env_for, limit, smallest, SEARCH_TOP) is not None
                out.not_reached.append({"what": name, "size": None, "why": (
                    f"the signature admits {axis} up to {top:,}, below the fold" if grows else
                    f"the launch does not grow past {limit} workgroups with {axis}")})
            elif kind == "backward_fold" and out.sizes.get(f"fold@{axis}", 0) >= v:
                out.invocations[f"{kind}@{axis}"] = launch(spec, env_for(out.sizes[f"fold@{axis}"]), limit)
            elif fits(name, v):
                out.sizes[f"{kind}@{axis}"] = v
                out.invocations[f"{kind}@{axis}"] = launch(spec, env_for(v), limit)
        big = min(BIG_SIZE, top)
        if big > 4096 and not any(v >= big for k, v in out.sizes.items() if k.endswith(f"@{axis}")):
            if fits(f"{axis} near 10^6 with the other dims above 1", big):
                out.sizes[f"big@{axis}"] = big


def spec_axes(spec) -> tuple:
    return getattr(spec, "axes", ()) or ()


def plan(contract, env_for, smallest: int, limit: int, *, large: bool, budget: int = BUDGET_BYTES) -> SizePlan:
    """``env_for(v)``: the symbol environment (dims and params) of a case whose swept size is v."""
    sig = contract.signature
    out = SizePlan()
    top = largest_admissible(sig, env_for, smallest, SEARCH_TOP) or smallest
    per = sum(DTYPE_BYTES[t.dtype] for t in sig.inputs + sig.outputs) or 4

    def fits(what: str, v: int, per_element: int) -> bool:
        if large or v * per_element <= budget:
            return True
        out.not_reached.append({"what": what, "size": v,
                                "why": f"needs about {v * per_element / 2**20:.0f} MiB, over the default corpus's "
                                       f"{budget >> 20} MiB: run `scellis conform --large`"})
        return False

    for kind, spec, per_el in (("fold", contract.kernel, per), ("backward_fold", contract.backward_kernel, 2 * per)):
        if spec is None:
            continue
        name = "forward" if kind == "fold" else "backward"
        if len(spec_axes(spec)) == 3:
            out.not_reached.append({"what": f"{name} launch fold", "size": None, "why": (
                "a 3-D launch has no axis to fold into: a run past the per-axis limit is refused, so bound the "
                f"sizes in the signature (at most {limit:,} workgroups per axis)")})
            continue
        v = fold_point(spec, env_for, limit, smallest, top)
        if v is None:
            grows = fold_point(spec, env_for, limit, smallest, SEARCH_TOP) is not None
            out.not_reached.append({"what": f"{name} 2-D launch fold", "size": None, "why": (
                f"the signature admits sizes up to {top}, below the fold: no run can reach it" if grows else
                f"the {name} launch (invocations = {spec.invocations})"
                f" does not grow past {limit} workgroups with the size: no run folds it")})
        elif kind == "backward_fold" and out.sizes.get("fold", 0) >= v:
            out.invocations[kind] = launch(spec, env_for(out.sizes["fold"]), limit)   # the fold case folds both
        elif fits(f"{name} 2-D launch fold", v, per_el):
            out.sizes[kind] = v
            out.invocations[kind] = launch(spec, env_for(v), limit)
    big = min(BIG_SIZE, top)
    if big > 4096 and not any(v >= big for v in out.sizes.values()) and fits("a size near 10^6", big, per):
        out.sizes["big"] = big
    if top > max([*out.sizes.values(), 4096]) and top < SEARCH_TOP and large:
        if top * per <= 4 * budget:
            out.sizes["max"] = top                   # the signature's own cap, when it has one
    return out
