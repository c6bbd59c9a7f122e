"""The live import of a document's reference: the worker's ``reference`` request loads the
package's ``reference.py`` in its confined host (studio/engine/trust: only trusted content, the
host's limits) and reports what is wrong with it *before* conformance runs — a failure at import
(``NameError`` at line 3), a missing forward, a missing VJP, kink or route-index function — each
with the file, line and field the engine gives. Qt-free on purpose: it runs in the device worker
process, like the catalog scan (studio/app/catalog_scan.py)."""
from __future__ import annotations


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


def load(ctx, target: str) -> dict:
    """``{"errors": [...], "functions": [...]}``; ``skipped`` when the package does not load at all
    (the checker reports why)."""
    from ..engine.errors import StudioError
    from ..engine.services import actions
    try:
        pkg = actions.resolve(ctx, target)
    except StudioError as e:
        return {"errors": [], "functions": [], "skipped": e.message}
    try:
        module = ctx.references.load(pkg)
    except StudioError as e:
        return {"errors": [e.to_dict()], "functions": []}
    functions = sorted(module.functions)
    errors = []
    for name, field in named_functions(pkg.contract):
        if name not in module.functions:
            errors.append(StudioError(f"reference.py defines no function '{name}'", file=pkg.reference_path,
                                      field=field, hint=f"define `def {name}(...)` in {pkg.contract.reference_file}"
                                      ).to_dict())
    return {"errors": errors, "functions": functions}


def handler(req, *, target: str) -> dict:
    """The worker's ``reference`` request (``req``: studio/engine/worker/child.py's Request)."""
    return load(req.ctx, target)


HANDLERS = {"reference": handler}          # the child imports it by name (module:function)
BUDGETS = {"reference": 30.0}
