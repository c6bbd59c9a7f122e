"""Results are shown only from proven ops: a valid conformance receipt for this GPU profile, or a
conformance run first that earns one. An op that fails here stops the job with its failing case."""
from __future__ import annotations

from dataclasses import dataclass

from ..proof.conformance import conform, report_lines
from ..errors import StudioError
from ..contract.package import OpPackage
from ..proof.receipts import local_status, make_receipt, write_receipt


@dataclass(frozen=True)
class Proof:
    op: str
    status: str          # "valid" (a receipt was there) or "earned" (conformance ran here, now)
    cases: int = 0
    seconds: float = 0.0
    receipt: str | None = None

    def line(self) -> str:
        if self.status == "valid":
            return f"proof {self.op}: valid conformance receipt on this GPU profile"
        return (f"proof {self.op}: no receipt here, so conformance ran first: {self.cases} cases pass "
                f"in {self.seconds:.2f} s" + (f"; receipt {self.receipt}" if self.receipt else ""))


def require_proof(pkg: OpPackage, device, *, progress=None) -> Proof:
    """The op's receipt for ``device``'s profile, or conformance now; raises on a failing op."""
    status = local_status(pkg, device.profile.id)
    if status == "valid":
        return Proof(pkg.id, "valid")
    rep = conform(pkg, device=device, progress=progress)
    if not rep.ok:
        raise StudioError(
            f"{pkg.id} fails conformance on this GPU profile (receipt: {status}), so no result of it is shown\n"
            + "\n".join(report_lines(rep)),
            file=str(pkg.root / "op.toml"),
            hint=f"fix the kernel; reproduce with `scellis conform {pkg.root}`")
    try:
        path = str(write_receipt(pkg, make_receipt(pkg, rep)))
    except OSError:   # a read-only install: the proof still holds for this run
        path = None
    return Proof(pkg.id, "earned", rep.total, rep.seconds, path)
