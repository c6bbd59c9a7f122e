"""What a conformance receipt covers, and the rules that follow from it (docs/verification.md,
"A receipt covers what was tested").

A receipt records its coverage: the largest swept size, each planned size with its launch
geometry, whether the forward's and the backward's 2-D launch fold were reached, what was not
reached and why, and the value bands. Three rules, all pure functions of receipt dicts and a
run's geometry:

* a run outside the coverage (a larger size, or a launch that folds where the corpus never did)
  proves at its own geometry first, or is refused (``uncovered``);
* a failing full run invalidates the receipt, whichever corpus it ran: a failure is a kernel
  wrong on a case, and a failing run of a stronger corpus must never leave a weaker pass "valid"
  (``decide``);
* a passing run of a weaker corpus never replaces a stronger receipt (``decide``).
"""
from __future__ import annotations

from ..contract.signature import Signature
from ..errors import StudioError
from .bands import BINADES_PER_CASE, PER_BINADE, band_groups, signs
from .corpus import swept_symbol
from .sizes import launch

VERSION = 1
MAX_LISTED = 24            # extremes and unreachable pairs listed per axis on the receipt (the rest counted)
DEFAULT_SMALL = 2000       # a receipt without a coverage record covers the corpus's small sizes only


def summarize(rep) -> dict:
    """The coverage of a conformance report, as plain JSON (it goes on the receipt)."""
    plan, corpus = rep.plan, rep.corpus
    sig = corpus.signature
    launches = dict(plan.invocations) if plan is not None else {}
    fold = {}
    for name in ("forward", "backward"):
        gs = [g for k, g in launches.items() if k.startswith("backward_fold") == (name == "backward")]
        missing = [m for m in (plan.not_reached if plan else []) if m["what"].startswith(name)]
        fold[name] = any(g["folded"] for g in gs) if gs or missing else None
    bands = {t.name: {"binades": [band_groups(t.domain)[0][0], band_groups(t.domain)[-1][1]],
                      "signs": ["+" if s > 0 else "-" for s in signs(t.domain)],
                      "per_binade": PER_BINADE, "binades_per_case": BINADES_PER_CASE, "kinks": True}
             for t in sig.inputs if t.dtype in ("f32", "bf16")}
    reach = getattr(corpus, "reach", None)
    return {"version": VERSION, "swept": swept_symbol(sig), "largest": rep.largest_size(),
            "max_invocations": max([g["invocations"] for g in launches.values()] + [0]),
            "sizes": dict(plan.sizes) if plan else {}, "launch": launches, "fold": fold,
            "not_reached": (list(plan.not_reached) if plan else []) + (list(reach.missing) if reach else []),
            "bands": bands, "large": bool(corpus.large), "params": params_reached(corpus, sig),
            "seeds": corpus.identity.get("seeds", [corpus.seed]), "axes": axes_reached(corpus),
            **({"pairs": {"covered": reach.pairs, "unreachable": reach.unreachable_pairs[:MAX_LISTED]}} if reach else {})}


def params_reached(corpus, sig) -> dict[str, list[int]]:
    """The integer parameter values the corpus's cases hold (a float parameter is swept across its
    domain: boundaries, tiny, huge and random values, so every value inside it counts as reached)."""
    ints = [p.name for p in sig.params if p.dtype in ("u32", "i32")]
    seen: dict[str, set] = {name: set() for name in ints}
    for c in corpus.cases:
        for name in ints:
            v = c.params.get(name)
            if isinstance(v, int) and not isinstance(v, bool):
                seen[name].add(v)
    return {name: sorted(vals) for name, vals in seen.items() if vals}


def axes_reached(corpus) -> dict:
    """Per dim and parameter: the smallest and largest value the cases reached, how many distinct
    values, and the domain's extremes reached (extremes.py), at most MAX_LISTED of them."""
    seen: dict[str, set] = {}
    for c in corpus.cases:
        for k, v in {**c.dims, **c.params}.items():
            seen.setdefault(k, set()).add(v)
    reach = getattr(corpus, "reach", None)
    out = {}
    for k, vals in seen.items():
        ext = sorted((reach.values.get(k) if reach else None) or ())
        out[k] = {"min": min(vals), "max": max(vals), "distinct": len(vals), "extremes": ext[:MAX_LISTED]}
    return out


def extremes_lines(corpus) -> list[str]:
    """The report's lines on the domain's extremes: per dim and parameter the extremes reached, the
    pairs met, and what was not reached and why."""
    reach = getattr(corpus, "reach", None)
    if reach is None or not reach.values:
        return []
    def shown(v):
        return f"{v:,}" if isinstance(v, int) else f"{v:g}"
    out = [f"  extremes  : {name}: {', '.join(map(shown, sorted(vals)[:MAX_LISTED]))}"
           for name, vals in reach.values.items()]
    out.append(f"  pairs     : {reach.pairs} pairs of extremes met" + (
        f"; {len(reach.unreachable_pairs)} the relations exclude ({', '.join(reach.unreachable_pairs[:4])}"
        f"{', ...' if len(reach.unreachable_pairs) > 4 else ''})" if reach.unreachable_pairs else ""))
    out += [f"  not reached: {m['what']}: {m['why']}" for m in reach.missing]
    return out


def of_receipt(receipt: dict) -> dict:
    """A receipt's coverage; for a receipt made before coverage was recorded, what its corpus
    identity implies (the small sizes, and the fold case if it had one)."""
    cov = receipt.get("coverage") if isinstance(receipt, dict) else None
    if isinstance(cov, dict) and isinstance(cov.get("largest"), int):
        return cov
    fold = (receipt.get("corpus") or {}).get("fold_size") if isinstance(receipt, dict) else None
    return {"version": 0, "largest": max(int(fold or 0), DEFAULT_SMALL), "max_invocations": int(fold or 0),
            "fold": {"forward": bool(fold), "backward": None}, "sizes": {}, "not_reached": [], "large": False}


def run_geometry(contract, inputs: dict, params: dict, limit: int) -> dict | None:
    """A run's swept size and the launch of each kernel (None: no kernel, or shapes that do not resolve)."""
    sig: Signature = contract.signature
    if contract.kernel is None:
        return None
    try:
        env = sig.resolve({t.name: tuple(getattr(inputs.get(t.name), "shape", ())) for t in sig.inputs}, dict(params))
        env = {**env, **params}
        sym = swept_symbol(sig)
        out = {"swept": sym, "n": int(env[sym]) if sym in env else None, "forward": launch(contract.kernel, env, limit)}
        if contract.backward_kernel is not None:
            out["backward"] = launch(contract.backward_kernel, env, limit)
        return out
    except (StudioError, KeyError, TypeError, ValueError):
        return None


def uncovered(cov: dict, geo: dict | None) -> str | None:
    """Why a run at ``geo`` is outside the coverage ``cov`` (None: covered)."""
    if geo is None:
        return None
    n, fwd = geo.get("n"), geo["forward"]
    if n is not None and n > cov.get("largest", 0):
        return (f"{geo['swept']} = {n:,} is past the largest size conformance ran ({cov.get('largest', 0):,})")
    if fwd["invocations"] > max(cov.get("max_invocations", 0), DEFAULT_SMALL) and n is None:
        return f"{fwd['invocations']:,} invocations, more than conformance launched ({cov.get('max_invocations', 0):,})"
    if fwd["folded"] and not (cov.get("fold") or {}).get("forward"):
        return (f"the launch folds into 2-D ({fwd['workgroups']:,} workgroups) and conformance never reached the "
                f"fold")
    return None


def stronger(a: dict, b: dict) -> bool:
    """Whether coverage ``a`` holds everything ``b`` does (sizes, each fold reached, --large)."""
    if a.get("largest", 0) < b.get("largest", 0) or (b.get("large") and not a.get("large")):
        return False
    fa, fb = a.get("fold") or {}, b.get("fold") or {}
    return all(fa.get(k) or not fb.get(k) for k in ("forward", "backward"))


def decide(old: dict | None, old_valid: bool, passed: bool, new_cov: dict, *, old_failed: bool = False) -> str:
    """What a full conformance run does to the receipt there: ``write`` (the new one), ``keep`` (the
    old, stronger one, or the old failure, which a weaker pass did not run again) or ``invalidate``
    (write the failing one over it, or where there was none: a failing run is recorded, and refuses)."""
    if not passed:
        return "invalidate"
    if old is not None and old_failed and not stronger(new_cov, of_receipt(old)):
        return "keep"
    if old is not None and old_valid:
        cov = of_receipt(old)
        if stronger(cov, new_cov) and not stronger(new_cov, cov):
            return "keep"
    return "write"


def describe(receipt: dict) -> list[str]:
    """What a receipt covers, in lines for `scellis receipts` and the card."""
    cov = of_receipt(receipt)
    if cov.get("version") == 0:
        return [f"covers: n up to {cov['largest']:,} (recorded before coverage was; a larger run proves first)"]
    fold = cov.get("fold") or {}
    says = {True: "reached", False: "NOT reached", None: "none"}
    out = [f"covers: {cov.get('swept') or 'n'} up to {cov['largest']:,}; 2-D fold: forward "
           f"{says[fold.get('forward')]}, backward {says[fold.get('backward')]}"]
    for name, a in (cov.get("axes") or {}).items():
        if isinstance(a, dict) and "min" in a:
            def shown(v):
                return f"{v:,}" if isinstance(v, int) else f"{v:g}"
            out.append(f"reached: {name} from {shown(a['min'])} to {shown(a['max'])} ({a['distinct']} values)"
                       + (f"; extremes {', '.join(map(shown, a['extremes']))}" if a.get("extremes") else ""))
    if isinstance(cov.get("pairs"), dict):
        p = cov["pairs"]
        out.append(f"pairs of extremes: {p.get('covered')} met" + (
            f"; never together (the relations exclude them): {', '.join(map(str, p['unreachable']))}"
            if p.get("unreachable") else ""))
    if cov.get("seeds"):
        out.append(f"seeds: {', '.join(map(str, cov['seeds']))}")
    out += [f"not reached: {m['what']}: {m['why']}" for m in cov.get("not_reached") or []]
    for name, b in (cov.get("bands") or {}).items():
        out.append(f"values: {name} in every band 2^{b['binades'][0]}..2^{b['binades'][1]} "
                   f"({'/'.join(b['signs'])}), kinks and domain edges")
    mut = receipt.get("mutation") if isinstance(receipt, dict) else None
    if isinstance(mut, dict) and "killed" in mut:
        for m, what in ((mut, "mutants"), (mut.get("backward"), "backward mutants")):
            if isinstance(m, dict) and "killed" in m:
                out.append(f"{what}: {m['killed']} of {m['total'] - len(m.get('acknowledged') or [])} killed"
                           + (f"; {len(m['survivors'])} survive: " + ", ".join(s['id'] for s in m["survivors"])
                              if m.get("survivors") else ""))
    return out
