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
DEFAULT_SMALL = 2000       # a receipt without a coverage record covers the corpus's small sizes only


def summarize(rep) -> dict:
    """The coverage of a conformance report, as plain JSON (it goes on the receipt)."""
    plan, corpus = rep.plan, rep.corpus
    sig = corpus.signature
    launches = dict(plan.invocations) if plan is not None else {}
    fold = {}
    for name in ("forward", "backward"):
        gs = [g for k, g in launches.items() if (k == "backward_fold") == (name == "backward")]
        missing = [m for m in (plan.not_reached if plan else []) if m["what"].startswith(name)]
        fold[name] = any(g["folded"] for g in gs) if gs or missing else None
    bands = {t.name: {"binades": [band_groups(t.domain)[0][0], band_groups(t.domain)[-1][1]],
                      "signs": ["+" if s > 0 else "-" for s in signs(t.domain)],
                      "per_binade": PER_BINADE, "binades_per_case": BINADES_PER_CASE, "kinks": True}
             for t in sig.inputs if t.dtype in ("f32", "bf16")}
    return {"version": VERSION, "swept": swept_symbol(sig), "largest": rep.largest_size(),
            "max_invocations": max([g["invocations"] for g in launches.values()] + [0]),
            "sizes": dict(plan.sizes) if plan else {}, "launch": launches, "fold": fold,
            "not_reached": list(plan.not_reached) if plan else [], "bands": bands, "large": bool(corpus.large)}


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


def decide(old: dict | None, old_valid: bool, passed: bool, new_cov: dict) -> str:
    """What a full conformance run does to the receipt there: ``write`` (the new one), ``keep`` (the
    old, stronger one) or ``invalidate`` (write the failing one over it)."""
    if not passed:
        return "invalidate" if old is not None else "none"
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
    out += [f"not reached: {m['what']}: {m['why']}" for m in cov.get("not_reached") or []]
    for name, b in (cov.get("bands") or {}).items():
        out.append(f"values: {name} in every band 2^{b['binades'][0]}..2^{b['binades'][1]} "
                   f"({'/'.join(b['signs'])}), kinks and domain edges")
    mut = receipt.get("mutation") if isinstance(receipt, dict) else None
    if isinstance(mut, dict) and "killed" in mut:
        out.append(f"mutants: {mut['killed']} of {mut['total'] - len(mut.get('acknowledged') or [])} killed"
                   + (f"; {len(mut['survivors'])} survive: " + ", ".join(s['id'] for s in mut["survivors"])
                      if mut.get("survivors") else ""))
    return out
