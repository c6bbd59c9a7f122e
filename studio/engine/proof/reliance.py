"""What a run relies on when it requires proof (``require_proof``, studio/engine/services/actions.py):

* a failing conformance run records its first failing case on the receipt (``failure_record``),
  and a ``failed`` receipt refuses every run, naming that case (``refusal``);
* a run whose integer parameter values the receipt's corpus never reached (coverage.py records
  them: ``params_reached``) proves at them first, like a run past the largest size (``outside``);
* a run that goes ahead says, in one line, which receipt it relied on: its file and sha256, its
  verdict, the GPU profile and what it covers (``relied_line``).

All pure functions of reports and receipt dicts; the receipt's own fields are shown through
``show`` (bounded), since a receipt is read from disk."""
from __future__ import annotations

from ..errors import StudioError
from ..records.reader import show
from . import coverage

DETAIL_CHARS = 240        # a recorded detail is cut here: the receipt says which case, the report says all


def failure_record(rep) -> dict | None:
    """The first failing case of a failing conformance report (``ConformanceReport``), as the receipt
    records it: direction, case, its sizes and parameters, the output, what went wrong, the values
    common to every failing case (``fails_when``) and the command that reproduces it. None on a pass."""
    if rep.ok:
        return None
    out: dict = {"direction": "forward", "failed_cases": rep.total - rep.passed}
    if rep.failures:
        f = rep.failures[0]
        out.update(case=f.case.index, shape_kind=f.case.shape_kind, value_kind=f.case.value_kind,
                   dims=dict(f.case.dims), params=dict(f.case.params), output=f.output, kind=f.kind,
                   detail=f.detail[:DETAIL_CHARS])
        if getattr(rep, "fails_when", None):
            out["fails_when"] = rep.fails_when
    elif rep.backward is not None and rep.backward.failures:
        f = rep.backward.failures[0]
        out.update(direction="backward", failed_cases=len(rep.backward.failures), case=f.case.index,
                   shape_kind=f.case.shape_kind, value_kind=f.case.value_kind, dims=dict(f.case.dims),
                   params=dict(f.case.params), output=f.gradient, kind=f.kind, detail=f.detail[:DETAIL_CHARS])
    elif rep.category_errors:
        out.update(direction="category", detail=rep.category_errors[0].message[:DETAIL_CHARS])
    else:
        out["detail"] = "no case passed"
    out["reproduce"] = rep.repro + (f" --case {out['case']}" if "case" in out else "")
    return out


def describe_failure(receipt: dict) -> str:
    """The failing case a ``failed`` receipt records, in one line (a receipt older than the record
    says only that it failed)."""
    f = receipt.get("failure") if isinstance(receipt, dict) else None
    cases = receipt.get("cases") if isinstance(receipt, dict) else None
    n = f"{cases.get('failed')} of {cases.get('total')} cases failed" if isinstance(cases, dict) else "it failed"
    if not isinstance(f, dict):
        return f"the receipt records a failing run ({n}) but not its case"
    at = {**(f.get("dims") or {}), **(f.get("params") or {})} if isinstance(f.get("dims", {}), dict) and \
        isinstance(f.get("params", {}), dict) else {}
    where = ", ".join(f"{k} = {show(v)}" for k, v in list(at.items())[:6])
    text = f"{n}; first: {'the backward, ' if f.get('direction') == 'backward' else ''}"
    if "case" in f:
        text += f"case {show(f.get('case'))} ({str(f.get('shape_kind'))[:20]}{'; ' + where if where else ''})"
        text += f": {str(f.get('output'))[:40]}: {str(f.get('detail'))[:DETAIL_CHARS]}"
    else:
        text += str(f.get("detail"))[:DETAIL_CHARS]
    if f.get("fails_when"):
        text += f"; failures only where {str(f['fails_when'])[:120]}"
    return text


def refusal(pkg, receipt: dict, path, *, file: str, field: str) -> StudioError:
    """The error a ``failed`` receipt raises: a failed receipt is never run past."""
    f = receipt.get("failure") if isinstance(receipt, dict) else None
    repro = str(f.get("reproduce"))[:300] if isinstance(f, dict) and f.get("reproduce") else f"scellis conform {pkg.root}"
    return StudioError(f"{pkg.id} is refused: its receipt on this GPU profile ({path.name}) records a failing "
                       f"conformance run: {describe_failure(receipt)}",
                       file=file, field=field, hint=f"fix the kernel (a changed kernel has no receipt yet); "
                                                    f"reproduce with `{repro}`")


# ------------------------------------------------------------------ parameters a receipt reached
def unreached_params(cov: dict, params: dict, ints: set[str]) -> dict[str, int]:
    """The run's values of the integer parameters ``ints`` that the coverage's ``params`` never
    reached (a coverage without that record, from before it was kept, says nothing about them)."""
    reached = cov.get("params") if isinstance(cov, dict) else None
    if not isinstance(reached, dict):
        return {}
    out = {}
    for name, v in params.items():
        vals = reached.get(name) if name in ints else None
        if isinstance(vals, dict):          # {"values": [...]}, the gradcheck coverage's form
            vals = vals.get("values")
        if isinstance(vals, list) and isinstance(v, int) and not isinstance(v, bool) and v not in vals:
            out[name] = v
    return out


class Shaped:
    """Stands for an input of this shape where only its shape is known (a workflow's plan)."""
    __slots__ = ("shape",)

    def __init__(self, shape):
        self.shape = tuple(shape)


def shaped(shapes: dict) -> dict:
    return {k: Shaped(v) for k, v in shapes.items()}


def outside(contract, receipt: dict, inputs: dict | None, params: dict, limit: int, *, judge_params: bool = True):
    """(why, geometry, unreached parameters): why a run with ``inputs`` (arrays, or anything with a
    ``shape``) and ``params`` is outside what ``receipt`` covers — a size past its largest, a launch
    fold it never reached, an integer parameter value it never ran — or None, with the run's
    geometry (coverage.run_geometry) and the parameter values to prove at. ``inputs`` None: a
    proof asked for without a run (a workflow's --prove of an op alone): nothing to judge.
    ``judge_params`` False: sizes and folds alone (a workflow's plan: see docs/verification.md)."""
    if inputs is None:
        return None, None, {}
    geo = coverage.run_geometry(contract, inputs, params, limit)
    cov = coverage.of_receipt(receipt)
    swept = (geo or {}).get("swept") or coverage.swept_symbol(contract.signature)   # judged by size, above
    ints = {p.name for p in contract.signature.params if p.dtype in ("u32", "i32") and p.name != swept}
    own = unreached_params(cov, params, ints) if judge_params else {}
    why = coverage.uncovered(cov, geo)
    if why is None and own:
        why = describe_unreached(cov, own)
    return why, geo, own


def describe_unreached(cov: dict, missing: dict[str, int]) -> str:
    def values(name):
        vals = (cov.get("params") or {}).get(name)
        vals = vals.get("values") if isinstance(vals, dict) else vals
        vals = vals if isinstance(vals, list) else []
        return ", ".join(map(str, vals[:8])) + (f", … ({len(vals)} values)" if len(vals) > 8 else "")
    return "; ".join(f"{k} = {v} is a value conformance never ran (it ran {k} = {values(k)})"
                     for k, v in missing.items())


# ------------------------------------------------------------------ the receipt a run relied on
def relied_line(op: str, path, sha256: str | None, receipt: dict, covers: str, *, earned: str = "") -> str:
    """One line for stderr: which receipt the run relies on, its verdict, GPU profile and coverage."""
    prof = receipt.get("gpu_profile") or {}
    dev = ((prof.get("adapter") or {}).get("device") if isinstance(prof.get("adapter"), dict) else None) or ""
    name = getattr(path, "name", None) or str(path or "(not written: a read-only user folder)")
    return (f"proof {op}: {earned}relies on receipt {name}" + (f" (sha256 {sha256[:16]})" if sha256 else "")
            + f": verdict {receipt.get('verdict')}, {receipt.get('cases', {}).get('total')} cases, GPU profile "
              f"{prof.get('id')}" + (f" ({str(dev)[:60]})" if dev else "") + f"; {covers}")
