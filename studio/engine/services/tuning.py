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

from typing import Any

import msgspec

from ..context import Context
from ..contract.package import OpPackage
from ..errors import StudioError
from ..proof import tuning as proof_tuning
from ..proof.tuning_record import (SCHEMA, class_key, read_tuning, record_path, tuned_for,
                                   values_text)
from ..records.writer import write_record
from .jsonable import as_dict



class TuneCandidate(msgspec.Struct, kw_only=True):
    """One candidate of the tunable overrides: proven (then timed, median seconds per size) or not."""
    values: dict[str, Any]
    proven: bool = False
    cases: int = 0
    failure: str | None = None          # the first failing case of a candidate that failed
    seconds: list[float] = msgspec.field(default_factory=list)

    def line(self, winner: dict | None, default: dict) -> str:
        if not self.proven:
            return f"  {values_text(self.values):<14} FAILS conformance: never timed, never chosen: {self.failure}"
        ms = " + ".join(f"{s * 1e3:.2f}" for s in self.seconds)
        mark = "  <- winner" if self.values == winner else ""
        mark += "  (declared default)" if self.values == default else ""
        return f"  {values_text(self.values):<14} proven ({self.cases} cases)  {ms} ms{mark}"


class TuneReport(msgspec.Struct, kw_only=True, omit_defaults=True):
    """``tune``'s report (`scellis tune`, the Studio's Tune panel); ``to_json`` is `scellis tune --json`."""
    op: str
    hash: str
    params: dict[str, Any]
    sizes: list[int]
    default: dict[str, Any]
    winner: dict[str, Any] | None
    candidates: list[TuneCandidate]
    profile: str
    klass: str = msgspec.field(name="class")    # the parameter class it was timed for (``*``: none given)
    repeats: int
    record: str | None = None           # the tuning record written (None: none)

    def to_json(self) -> dict:
        return as_dict(self)

    def lines(self) -> list[str]:
        """What `scellis tune` prints, and the Tune panel's text."""
        lines = [f"tune {self.op} ({self.hash[:16]}) on GPU profile {self.profile}: class {self.klass}, "
                 f"sizes {', '.join(map(str, self.sizes))}, median of {self.repeats} calls"]
        lines += [c.line(self.winner, self.default) for c in self.candidates]
        totals = {values_text(c.values): sum(c.seconds) for c in self.candidates if c.proven and c.seconds}
        if self.winner is None:
            lines.append("no candidate passes conformance: nothing recorded; the declared default still runs unproven")
            return lines
        w, d = totals[values_text(self.winner)], totals.get(values_text(self.default))
        ratio = f" (declared {values_text(self.default)}: {d * 1e3:.2f} ms; tuned/declared {w / d:.2f})" if d else ""
        lines.append(f"winner: {values_text(self.winner)}: {w * 1e3:.2f} ms{ratio}")
        if self.record:
            lines.append(f"record: {self.record}")
        return lines


def tune(ctx: Context, pkg: OpPackage, *, params: dict | None = None, sizes=None, repeats: int | None = None,
         seed: int = 0, only: dict | None = None, record: bool = True, progress=None) -> TuneReport:
    sizes = list(sizes or proof_tuning.DEFAULT_SIZES)
    repeats = repeats or proof_tuning.DEFAULT_REPEATS
    res = proof_tuning.tune(ctx, pkg, params=params, sizes=sizes, repeats=repeats, seed=seed, only=only,
                            progress=progress)
    body = res.to_json()
    out = TuneReport(**{k: body[k] for k in ("op", "hash", "params", "sizes", "default", "winner")},
                     candidates=[TuneCandidate(**c) for c in body["candidates"]], profile=ctx.device.profile.id,
                     klass=class_key(res.params), repeats=repeats)
    winner = res.winner
    if record and winner is not None:
        try:
            old = read_tuning(pkg, ctx.device.profile.id, ctx.seal)
        except StudioError:                   # a refused record is replaced, never merged
            old = None
        classes = dict(old["classes"]) if old else {}
        classes[out.klass] = {"params": res.params, "sizes": res.sizes, "repeats": repeats,
                              "winner": dict(winner.values), "candidates": [c.to_json() for c in res.candidates]}
        body = {"schema": SCHEMA, "op": pkg.id, "package_hash": pkg.hash, "profile": ctx.device.profile.id,
                "classes": classes}
        out.record = str(write_record(record_path(pkg, ctx.device.profile.id, ctx.seal), body, ctx.seal,
                                      what="the tuning record"))
    return out


def tuned(ctx: Context, pkg: OpPackage, params: dict | None = None) -> tuple[OpPackage, dict]:
    """The package with the tuned values for ``ctx``'s GPU profile and ``params``'s class, and what
    runs: ``{"values", "source": "tuned" | "declared", "proven", "why"}``. Without a tunable, the
    package as it is; without a record, or with one refused, the declared default."""
    return tuned_for(pkg, ctx.device.profile.id, ctx.seal, params)
