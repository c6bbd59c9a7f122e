"""Runs before proof (the Studio's Run cell, docs/studio.md): an op's kernel run whether or not it
has earned a receipt, with a plain answer to "is this result proven?"; its reference run alone
(before any kernel exists); and which proofs the receipts on disk vouch for a package's content.
None of them proves anything or writes a receipt."""
from __future__ import annotations

from typing import Any

import msgspec
import numpy as np

from ..arrays import check_input
from ..context import Context
from ..contract.domains import check_values
from ..contract.package import OpPackage
from ..errors import StudioError
from ..proof import receipts, reliance
from . import actions


NOT_PROVEN = "not proven"


class RunProof(msgspec.Struct, kw_only=True, frozen=True):
    """Whether a run's result is proven, and why (or why not)."""
    proven: bool
    why: str

    def title(self) -> str:
        """What a result says of itself: "" when proven, else "not proven: <why>" (the Run cell's plot)."""
        return "" if self.proven else f"{NOT_PROVEN}: {self.why}" if self.why else NOT_PROVEN


class TryReport(msgspec.Struct, kw_only=True):
    """The report of ``try_run``, ``try_reference`` and ``op_output`` (services/requests.py): the
    outputs, by name, and whether they are proven."""
    outputs: dict[str, Any]
    proof: RunProof


def proof_of_run(ctx: Context, pkg: OpPackage, inputs: dict, params: dict) -> RunProof:
    """Whether a valid conformance receipt for this GPU profile covers a run of ``pkg`` on ``inputs``
    and ``params`` (its sizes, folds and parameter values), and why (not)."""
    found = receipts.judge_receipts(pkg, ctx.device.profile.id, ctx.seal, corpora=ctx.corpora)
    status = receipts.summarize(found)
    if status == "failed":
        return RunProof(proven=False, why="its receipt records a conformance failure")
    if status != "valid":
        return RunProof(proven=False, why="no conformance receipt for this content on this GPU profile"
                        if status == "none" else f"its receipt is {status}")
    receipt = next(v.receipt for _, v in found if v.status == "valid")
    why, _geo, _own = reliance.outside(pkg.contract, receipt, inputs, params,
                                       ctx.device.profile.limits.get("max-compute-workgroups-per-dimension", 65535))
    if why is not None:
        return RunProof(proven=False, why=f"outside what its receipt covers ({why})")
    return RunProof(proven=True, why="a valid conformance receipt covers this run")


def run_unproven(ctx: Context, pkg: OpPackage, *, inputs: dict, params: dict, budget_bytes: int | None = None,
                 progress=None) -> TryReport:
    """The kernel on the device, proven or not, and ``proof_of_run``'s answer."""
    if pkg.contract.kernel is None:
        raise StudioError(f"{pkg.id} has no kernel", field="kernel", hint="run its reference instead")
    out = actions.run(ctx, pkg, inputs=inputs, params=params, budget_bytes=budget_bytes, require_receipt=False,
                      progress=progress)
    return TryReport(outputs=out, proof=proof_of_run(ctx, pkg, inputs, params))


def run_reference(ctx: Context, pkg: OpPackage, *, inputs: dict, params: dict) -> TryReport:
    """The reference alone, in its confined host (trusted code only), its inputs checked against the
    signature as a kernel's are; never proven."""
    inputs = {k: np.asarray(v) for k, v in inputs.items()}
    for t in pkg.contract.signature.inputs:
        if t.name in inputs:
            check_input(inputs[t.name], t)
    check_values(pkg.contract.signature, inputs, params)
    ctx.trust.require_trusted(pkg)
    return TryReport(outputs=ctx.references.forward(pkg, inputs, params),
                     proof=RunProof(proven=False, why="the reference, not a kernel: nothing ran on the device"))


def vouched_kinds(pkg: OpPackage, profile_id: str, seal=None) -> set[str]:
    """The proofs the receipts on disk vouch for ``pkg``'s exact content: ``conformance`` (a valid
    receipt for ``profile_id``), ``gradcheck`` (a passing, sealed gradcheck receipt). Reads only."""
    kinds = {"conformance"} if receipts.local_status(pkg, profile_id, seal) == "valid" else set()
    if receipts.gradcheck_status(pkg, seal=seal)[0] == "pass":
        kinds.add("gradcheck")
    return kinds
