"""The live import of a document's reference: the worker's ``reference`` request (services/
requests.py) loads the package's ``reference.py`` in its confined host (studio/engine/trust: only
trusted content, the host's limits) and reports what is wrong with it *before* conformance runs —
a failure at import (``NameError`` at line 3), a missing forward, a missing VJP, kink or
route-index function — each with the file, line and field the engine gives."""
from __future__ import annotations

import msgspec

from ..errors import StudioError
from . import actions


class ReferenceReport(msgspec.Struct, kw_only=True):
    """What the import found: ``errors`` (StudioError dicts), the ``functions`` reference.py
    defines, and ``skipped`` (why) when the package does not load at all (the checker says why)."""
    errors: list[dict] = msgspec.field(default_factory=list)
    functions: list[str] = msgspec.field(default_factory=list)
    skipped: str | None = None


def named_functions(contract) -> list[tuple[str, str]]:
    """(function, manifest field) of every reference function the contract names."""
    out = [(contract.reference_forward, "reference.forward")]
    for r in getattr(contract.backward, "rules", ()) or ():
        if r.form == "route" and r.index:
            out.append((r.index, "backward.text"))
        elif r.form == "reference" and r.function:
            out.append((r.function, "backward.text"))
    if contract.kinks:
        out.append((contract.kinks, "backward.kinks"))
    return out


def load(ctx, *, target: str) -> ReferenceReport:
    try:
        pkg = actions.resolve(ctx, target)
    except StudioError as e:
        return ReferenceReport(skipped=e.message)
    try:
        module = ctx.references.load(pkg)
    except StudioError as e:
        return ReferenceReport(errors=[e.to_dict()])
    errors = [StudioError(f"reference.py defines no function '{name}'", file=pkg.reference_path, field=field,
                          hint=f"define `def {name}(...)` in {pkg.contract.reference_file}").to_dict()
              for name, field in named_functions(pkg.contract) if name not in module.functions]
    return ReferenceReport(errors=errors, functions=sorted(module.functions))
