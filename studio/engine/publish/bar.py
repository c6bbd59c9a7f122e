"""The public bar: the one list of what an op must carry to be ``public``, written once and
enforced the same way for the builtins and for a user's op (docs/publishing.md). Nothing here
asks where an op came from. ``shortfalls`` lists every missing or failing field at once.

The fields: summary, description, license (a valid SPDX expression), authors, version,
documented signature (each input, parameter and output named in the summary or description),
tolerance justification, category, backward, subgradient convention (for a differentiable op),
reference (the forward, and each VJP function the rules name, defined in the reference file),
at least one example input that fits the signature, a valid local conformance receipt and, for
a declared VJP, a passing local gradcheck receipt (both sealed here, for this content)."""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from ..contract.package import OpPackage
from ..errors import StudioError
from ..proof import receipts
from .license import Licenses
from .metadata import read_fields

FIELDS = ("summary", "description", "license", "authors", "version", "signature", "tolerance.justification",
          "tolerance.category", "backward", "backward.subgradient", "reference", "examples",
          "conformance receipt", "gradcheck receipt")


@dataclass(frozen=True)
class Shortfall:
    field: str
    why: str

    def __str__(self) -> str:
        return f"{self.field}: {self.why}"


@dataclass(frozen=True)
class ProofState:
    """What this machine has proven about the package's exact content."""
    conformance: str            # valid | none | stale | foreign | forged | failed | malformed
    gradcheck: str | None       # pass | fail | inconclusive | none | foreign | ... ; None: no declared VJP
    gradcheck_why: str = ""

    @property
    def earned(self) -> bool:
        return self.conformance == "valid" and self.gradcheck in (None, "pass")


def proof_state(pkg: OpPackage, profile_id: str, seal) -> ProofState:
    conf = receipts.local_status(pkg, profile_id, seal)
    if pkg.contract.backward.kind != "vjp":
        return ProofState(conf, None)
    status, why = receipts.gradcheck_status(pkg, seal=seal)
    return ProofState(conf, status, why)


def metadata_shortfalls(pkg: OpPackage, licenses: Licenses) -> list[Shortfall]:
    """Every field of the bar that the content itself must carry (no device, nothing runs)."""
    c = pkg.contract
    out: list[Shortfall] = []
    try:
        pf = read_fields(pkg)
    except StudioError as e:
        return [Shortfall("op.toml", e.message)]
    out += [Shortfall(f, why) for f, why in pf.problems]
    if not c.summary.strip():
        out.append(Shortfall("summary", "empty: one line saying what the op does"))
    if not pf.description:
        out.append(Shortfall("description", "missing: add description = \"...\" to op.toml (or a module "
                                            "docstring to the reference)"))
    lic = licenses.check(c.license)
    if not lic.ok:
        out.append(Shortfall("license", lic.summary() if c.license else "missing: an SPDX expression, e.g. Apache-2.0"))
    if not any(a.strip() for a in c.authors):
        out.append(Shortfall("authors", "missing: authors = [\"Your Name\"]"))
    undocumented = _undocumented(pkg, f"{c.summary}\n{pf.description}")
    if undocumented:
        out.append(Shortfall("signature", "not documented: the summary or description never names "
                                          + ", ".join(undocumented)))
    if not c.tolerance.justification.strip():
        out.append(Shortfall("tolerance.justification", f"missing: why {c.tolerance} holds for this op"))
    if not (c.tolerance.category or "").strip():
        out.append(Shortfall("tolerance.category", "missing"))
    if not c.backward.text.strip():
        out.append(Shortfall("backward", "missing: composite, a vjp rule, or nondifferentiable"))
    if c.backward.kind != "nondifferentiable" and not (c.subgradient or "").strip():
        out.append(Shortfall("backward.subgradient", "missing: the convention at kinks and ties, or why the op "
                                                     "has none (e.g. \"none needed: linear in x\")"))
    out += _reference(pkg)
    if not pf.examples and not any(f.startswith("examples") for f, _ in pf.problems):
        out.append(Shortfall("examples", "missing: at least one [[examples]] with inputs = {...} and params = {...} "
                                         "that fit the signature"))
    return out


def proof_shortfalls(pkg: OpPackage, proof: ProofState) -> list[Shortfall]:
    out = []
    if proof.conformance != "valid":
        out.append(Shortfall("conformance receipt", f"{proof.conformance}: no valid receipt of this machine for "
                                                    f"this content and GPU profile (run `scellis conform {pkg.root}`)"))
    if proof.gradcheck not in (None, "pass"):
        out.append(Shortfall("gradcheck receipt", f"{proof.gradcheck}: the declared VJP has no passing gradcheck "
                                                  f"receipt of this machine (run `scellis gradcheck {pkg.root}`)"))
    return out


def shortfalls(pkg: OpPackage, proof: ProofState, licenses: Licenses) -> list[Shortfall]:
    """The whole bar, every missing or failing field at once (empty: the op clears it)."""
    return metadata_shortfalls(pkg, licenses) + proof_shortfalls(pkg, proof)


def require_public(pkg: OpPackage, found: list[Shortfall]) -> None:
    if found:
        raise StudioError(f"{pkg.id} does not clear the public bar ({len(found)} field(s)):\n"
                          + "\n".join(f"  - {s}" for s in found),
                          file=pkg.manifest_path, field=found[0].field.split(" ")[0],
                          hint="the bar is the builtins' bar (docs/publishing.md); `workspace` asks only a license")


def _undocumented(pkg: OpPackage, text: str) -> list[str]:
    sig = pkg.contract.signature
    names = [t.name for t in sig.inputs] + [p.name for p in sig.params] + [t.name for t in sig.outputs]
    return [n for n in names if not re.search(rf"(?<![A-Za-z0-9_]){re.escape(n)}(?![A-Za-z0-9_])", text)]


def _reference(pkg: OpPackage) -> list[Shortfall]:
    c = pkg.contract
    try:
        tree = ast.parse(pkg.reference_source)
    except (SyntaxError, ValueError) as e:
        return [Shortfall("reference", f"{c.reference_file} does not parse: {e}")]
    defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    wanted = [c.reference_forward] + [r.function for r in c.backward.rules if r.function]
    missing = [f for f in dict.fromkeys(wanted) if f not in defined]
    return [Shortfall("reference", f"{c.reference_file} defines no function {f}()") for f in missing]
