"""What one gradcheck covers, and whether a training call falls inside it (docs/gradients.md).

`summarize(rep, ...)` is the report's ``coverage``: per param, the values checked at a *measured*
point (one with at least SITE_MIN probes left after skipping kinks) and the rule that chose them;
per input, the shapes measured; what the rule chose but no measured point holds, and why; the
tie check's reach. It is part of the report's JSON, so of its receipt (receipts.py writes
``rep.to_json()`` without the probes and lines).

`recorded(pkg, root)` reads the coverage a package's gradcheck receipt records; a receipt from
before coverage was recorded covers the one parameter set it names. `outside(coverage, sig,
params)` says why a call's params are not covered (nothing: covered). A call is covered when
each of its param values is one of the values checked for that param (floats compared as the
f32 the kernel sees). Sizes are recorded, not required: the check ran at the smallest size the
signature admits, one above it and 24 above it, and training accepts other sizes."""
from __future__ import annotations

import math

import numpy as np

from . import receipts

SITE_MIN = 2              # probes left after skipping, for a point to count as measured
COVERAGE_VERSION = 1


def _key(v):
    return int(v) if isinstance(v, (int, np.integer)) and not isinstance(v, bool) else float(np.float32(v))


def summarize(rep, values: dict, given: dict) -> dict:
    """values: {param: (candidate values, rule)} as gradpoints.param_values gives (empty when the
    check ran at given inputs); given: the params fixed by the caller."""
    counted = [sum(not p.skipped for p in rep.site_probes(i)) for i in range(len(rep.sites))]
    measured = [i for i, n in enumerate(counted) if n >= SITE_MIN]
    params, sizes = {}, {}
    for name in rep.params:
        vals = sorted({_key(rep.sites[i]["params"][name]) for i in measured})
        rule = "given" if name in given else values[name][1] if name in values else "the one point checked"
        params[name] = {"values": vals, "rule": rule}
    for i in measured:
        for k, shape in rep.sites[i]["shapes"].items():
            if list(shape) not in sizes.setdefault(k, []):
                sizes[k].append(list(shape))
    missing = []
    for name, (cands, _) in values.items():
        for v in cands:
            if _key(v) in params[name]["values"]:
                continue
            at = [i for i, s in enumerate(rep.sites) if _key(s["params"][name]) == _key(v)]
            why = next((p.reason for i in at for p in rep.site_probes(i) if p.skipped), None)
            missing.append(f"{name} = {v:g}: " + (f"not measured, every probe there skipped ({why})" if at else
                                                  "no parameter set and size the signature admits holds it"))
    return {"version": COVERAGE_VERSION, "params": params, "sizes": {k: sorted(v) for k, v in sizes.items()},
            "points": len(measured), "not_covered": missing,
            "ties": {"cases": len(rep.ties), "reached": sum(t["reached"] for t in rep.ties)}}


def recorded(pkg, root=None, *, seal=None) -> dict | None:
    """The coverage in the package's gradcheck receipt (None: no receipt sealed here)."""
    data = receipts.gradcheck_receipt(pkg, root, seal=seal)
    if not isinstance(data, dict):
        return None
    cov = data.get("coverage")
    if isinstance(cov, dict) and isinstance(cov.get("params"), dict):
        return cov
    if isinstance(data.get("params"), dict):           # an older receipt: its one point
        return {"version": 0, "params": {k: {"values": [v], "rule": "the one point an older receipt names"}
                                         for k, v in data["params"].items()}, "sizes": {}}
    return None


def outside(coverage: dict | None, sig, params: dict) -> list[str]:
    """Why a call with these params is not covered by ``coverage`` (empty: it is)."""
    if coverage is None:
        return ["the receipt records no coverage that can be read"]
    have = coverage.get("params") if isinstance(coverage, dict) else None
    reasons = []
    for p in sig.params:
        v = params.get(p.name)
        entry = have.get(p.name) if isinstance(have, dict) else None
        vals = entry.get("values") if isinstance(entry, dict) else None
        if not isinstance(vals, list):
            reasons.append(f"the receipt records no values of {p.name}")
            continue
        try:
            ok = v is not None and any(isinstance(h, (int, float)) and not isinstance(h, bool) and math.isfinite(h)
                                       and _key(h) == _key(v) for h in vals)
        except (TypeError, ValueError, OverflowError):
            ok = False
        if not ok:
            shown = ", ".join(f"{h:g}" if isinstance(h, (int, float)) else "?" for h in vals[:8])
            reasons.append(f"{p.name} = {_num(v)} was not checked (the receipt covers {p.name} = {shown}"
                           f"{', ...' if len(vals) > 8 else ''})")
    return reasons


def _num(v) -> str:
    return f"{v:g}" if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) else repr(v)


def param_args(params: dict) -> str:
    """The command-line form of a parameter set: --param w=29 --param t=0.5."""
    return " ".join(f"--param {k}={v!r}" if isinstance(v, float) else f"--param {k}={v}" for k, v in params.items())
