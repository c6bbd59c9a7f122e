"""The tuning use case (`scellis tune OP`, the Studio's Tune panel) and what a run reads of it.

``tune`` proves every candidate of a package's tunable overrides by conformance, times the proven
ones (studio/engine/proof/tuning.py) and writes the winner for the parameter class into a sealed
tuning record in the user folder: ``tuning/<package content hash>/<GPU profile id>.json``
(studio/engine/records/places.py). A kernel edit changes the content hash, so an old record is
never found for the new content; a record that was edited or written elsewhere is refused (the
seal), and then the declared default runs. What a run reads of it: studio/engine/proof/tuning_record.py.

The parameter class of a tuning is the parameters it was timed with (``w=7``), or ``*`` when none
were given; a run uses its own class's winner, else ``*``'s, else the declared default."""
from __future__ import annotations

from ..context import Context
from ..contract.package import OpPackage
from ..errors import StudioError
from ..proof import tuning as proof_tuning
from ..proof.tuning_record import (SCHEMA, class_key, read_tuning, record_path, tuned_for,
                                   tuning_line, values_text)
from ..records.seal import Seal
from ..records.writer import write_record



def tune(ctx: Context, pkg: OpPackage, *, params: dict | None = None, sizes=None, repeats: int | None = None,
         seed: int = 0, only: dict | None = None, record: bool = True, progress=None) -> dict:
    sizes = list(sizes or proof_tuning.DEFAULT_SIZES)
    repeats = repeats or proof_tuning.DEFAULT_REPEATS
    res = proof_tuning.tune(ctx, pkg, params=params, sizes=sizes, repeats=repeats, seed=seed, only=only,
                            progress=progress)
    out = res.to_json() | {"profile": ctx.device.profile.id, "class": class_key(res.params), "repeats": repeats}
    winner = res.winner
    if record and winner is not None:
        try:
            old = read_tuning(pkg, ctx.device.profile.id, ctx.seal)
        except StudioError:                   # a refused record is replaced, never merged
            old = None
        classes = dict(old["classes"]) if old else {}
        classes[out["class"]] = {"params": res.params, "sizes": res.sizes, "repeats": repeats,
                                 "winner": dict(winner.values), "candidates": [c.to_json() for c in res.candidates]}
        body = {"schema": SCHEMA, "op": pkg.id, "package_hash": pkg.hash, "profile": ctx.device.profile.id,
                "classes": classes}
        out["record"] = str(write_record(record_path(pkg, ctx.device.profile.id, ctx.seal), body, ctx.seal,
                                         what="the tuning record"))
    out["lines"] = tune_lines(out)
    return out


def tune_lines(out: dict) -> list[str]:
    lines = [f"tune {out['op']} ({out['hash'][:16]}) on GPU profile {out['profile']}: class {out['class']}, "
             f"sizes {', '.join(map(str, out['sizes']))}, median of {out['repeats']} calls"]
    for c in out["candidates"]:
        if c["proven"]:
            ms = " + ".join(f"{s * 1e3:.2f}" for s in c["seconds"])
            mark = "  <- winner" if c["values"] == out["winner"] else ""
            mark += "  (declared default)" if c["values"] == out["default"] else ""
            lines.append(f"  {values_text(c['values']):<14} proven ({c['cases']} cases)  {ms} ms{mark}")
        else:
            lines.append(f"  {values_text(c['values']):<14} FAILS conformance: never timed, never chosen: {c['failure']}")
    totals = {values_text(c["values"]): sum(c["seconds"]) for c in out["candidates"] if c["proven"] and c["seconds"]}
    if out["winner"] is None:
        lines.append("no candidate passes conformance: nothing recorded; the declared default still runs unproven")
        return lines
    w, d = totals[values_text(out["winner"])], totals.get(values_text(out["default"]))
    ratio = f" (declared {values_text(out['default'])}: {d * 1e3:.2f} ms; tuned/declared {w / d:.2f})" if d else ""
    lines.append(f"winner: {values_text(out['winner'])}: {w * 1e3:.2f} ms{ratio}")
    if out.get("record"):
        lines.append(f"record: {out['record']}")
    return lines


def tuned(ctx: Context, pkg: OpPackage, params: dict | None = None) -> tuple[OpPackage, dict]:
    """The package with the tuned values for ``ctx``'s GPU profile and ``params``'s class, and what
    runs: ``{"values", "source": "tuned" | "declared", "proven", "why"}``. Without a tunable, the
    package as it is; without a record, or with one refused, the declared default."""
    return tuned_for(pkg, ctx.device.profile.id, ctx.seal, params)


def run_tuning_line(pkg: OpPackage, profile_id: str, params: dict | None = None) -> str | None:
    """What `scellis run` says of the values it ran (the user folder's seal; no device needed)."""
    from ..home import studio_home
    return tuning_line(pkg.id, tuned_for(pkg, profile_id, Seal(studio_home()), params)[1])
