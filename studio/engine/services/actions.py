"""The use cases: check, conform, gradcheck, run, receipts, trust, save. The device worker's
handlers and the CLI both call these, so each rule exists once — above all "a pass earns a
receipt": a full conformance corpus that passes, or a gradcheck under the declared tolerance.
Results are shown only from proven ops when asked (``require_proof``): a valid receipt for this
GPU profile, or conformance first; an op that fails stops the job with its failing case."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..arrays import check_input
from ..context import Context
from ..contract.domains import check_values
from ..contract.package import MANIFEST, OpPackage, load_package, write_package
from ..errors import StudioError
from ..grad.run import run_op
from ..proof import coverage, gradcoverage, receipts
from ..proof import mutants as mutation
from ..proof.checker import check_package
from ..proof.conformance import ConformanceReport, report_lines
from ..proof.conformance import conform as run_conformance
from ..proof.gradcheck import DEFAULT_H, GradcheckReport
from ..proof.gradcheck import gradcheck as run_gradcheck
from .proof_budget import ProofBudget
from .verdicts import remembered_gradcheck

PROOF_FAILED = "proof"     # the field of the error a failing proof raises: the CLI exits 1 on it (a failed check)


def resolve(ctx: Context, target: str) -> OpPackage:
    """An op id or a package path → a freshly loaded package (edits on disk are seen)."""
    p = Path(target)
    if (p / MANIFEST).is_file() or p.name == MANIFEST:
        return load_package(p)
    return load_package(ctx.catalog.resolve(target).root)


# ------------------------------------------------------------------ what a pass earns
def earn_conformance_receipt(pkg: OpPackage, rep: ConformanceReport, *, full_corpus: bool,
                             seal=None) -> Path | None:
    """A receipt is what a pass of the whole corpus earns (never a single case, never a failure)."""
    if not full_corpus:
        return None
    # a weaker pass never replaces a stronger receipt; a failing full run invalidates it (proof/coverage.py)
    old = [(p, v) for p, v in receipts.judge_receipts(pkg, rep.profile["id"], seal)
           if p.stem == rep.profile["id"] and v.receipt is not None]
    what = coverage.decide(old[0][1].receipt if old else None, bool(old) and old[0][1].status == "valid", rep.ok,
                           rep.coverage or {})
    if what == "keep":
        return old[0][0]
    if what not in ("write", "invalidate"):
        return None
    path = receipts.write_receipt(pkg, receipts.make_receipt(pkg, rep), seal)
    return path if what == "write" else None          # an invalidating failure earns nothing


def earn_gradcheck_receipt(pkg: OpPackage, rep: GradcheckReport, *, seal=None) -> Path | None:
    """A verdict under the contract's own tolerance is recorded (pass, fail or inconclusive: training
    reads it); one under a tolerance given on the command line certifies nothing and is not. A pass
    never replaces a passing receipt that covers more (`scellis gradcheck --param w=29` after the
    full sweep keeps the sweep's receipt)."""
    if rep.tolerance_source == "override":
        return None
    if rep.verdict == "pass" and receipts.gradcheck_status(pkg, seal=seal)[0] == "pass":
        old = gradcoverage.recorded(pkg, seal=seal)
        new = rep.to_json().get("coverage") or {}
        if old is not None and _covers(old, new):
            return receipts.gradcheck_receipt_path(pkg, seal=seal)
    return receipts.write_gradcheck_receipt(pkg, rep, seal=seal)


def _covers(old: dict, new: dict) -> bool:
    """Whether coverage ``old`` holds every parameter value ``new`` does."""
    have, want = old.get("params") or {}, new.get("params") or {}
    try:
        return all(set(map(float, (want[k] or {}).get("values", []))) <= set(map(float, (have.get(k) or {}).get("values", [])))
                   for k in want)
    except (TypeError, ValueError, AttributeError):
        return False


# ------------------------------------------------------------------ the use cases
def check(ctx: Context, pkg: OpPackage) -> dict:
    return check_package(ctx, pkg).to_json()


def conform(ctx: Context, pkg: OpPackage, *, seed: int = 0, large: bool = False, case: int | None = None,
            receipt: bool = True, progress=None, mutants: int | None = None, on_failure=None) -> dict:
    """``on_failure(failure)``: called the moment the first failing case is judged (the rest run on)."""
    mutants = (mutation.DEFAULT_COUNT if case is None else 0) if mutants is None else mutants
    rep = run_conformance(ctx, pkg, seed=seed, large=large, only_case=case, progress=progress, mutants=mutants,
                          on_failure=on_failure)
    out = rep.to_json()
    if receipt:
        path = earn_conformance_receipt(pkg, rep, full_corpus=case is None, seal=ctx.seal)
        if path is not None:
            out["receipt"] = str(path)
    out["lines"] = report_lines(rep)
    return out


def gradcheck(ctx: Context, pkg: OpPackage, *, params: dict | None = None, h: float | None = None, seed: int = 0,
              tolerance: float | None = None, receipt: bool = True) -> dict:
    rep = remembered_gradcheck(ctx, pkg, run_gradcheck, params=params, h=h or DEFAULT_H, seed=seed,
                               tolerance=tolerance)       # a kernel edit reuses it (verdicts.py)
    out = rep.to_json()
    if receipt:
        path = earn_gradcheck_receipt(pkg, rep, seal=ctx.seal)
        if path is not None:
            out["receipt"] = str(path)
    return out


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


def require_proof(ctx: Context, pkg: OpPackage, *, progress=None, inputs: dict | None = None,
                  params: dict | None = None) -> Proof:
    """The op's receipt for ``ctx``'s GPU profile, or conformance now; raises on a failing op. A run
    (``inputs``, ``params``) outside the receipt's coverage proves at its own size first (coverage.py)."""
    found = receipts.judge_receipts(pkg, ctx.device.profile.id, ctx.seal, corpora=ctx.corpora)
    status = receipts.summarize(found)
    extra, why = None, None
    if status == "valid":
        valid = [v.receipt for _, v in found if v.status == "valid"]
        geo = coverage.run_geometry(pkg.contract, inputs or {}, params or {},
                                    ctx.device.profile.limits.get("max-compute-workgroups-per-dimension", 65535))
        why = coverage.uncovered(coverage.of_receipt(valid[0]), geo) if valid and inputs is not None else None
        if why is None:
            return Proof(pkg.id, "valid")
        if geo.get("n") is None:
            raise StudioError(f"{pkg.id}: this run is outside what its receipt covers ({why}), and no corpus size "
                              f"matches it", file=str(pkg.root / MANIFEST), hint=f"run `scellis conform {pkg.root} --large`")
        extra, status = {"run": geo["n"]}, f"valid, but {why}"
    with ProofBudget(progress) as beat:      # the proof's own budget, not the run's (proof_budget.py)
        rep = run_conformance(ctx, pkg, progress=beat.progress if progress else None, extra_sizes=extra)
    if not rep.ok:
        try:
            earn_conformance_receipt(pkg, rep, full_corpus=True, seal=ctx.seal)    # invalidates a receipt there
        except OSError:
            pass
        raise StudioError(
            f"{pkg.id} fails conformance on this GPU profile (receipt: {status}), so no result of it is shown\n"
            + "\n".join(report_lines(rep)),
            file=str(pkg.root / MANIFEST), field=PROOF_FAILED,
            hint=f"fix the kernel; reproduce with `scellis conform {pkg.root}`")
    try:
        path = earn_conformance_receipt(pkg, rep, full_corpus=True, seal=ctx.seal)
    except OSError:   # a read-only install: the proof still holds for this run
        path = None
    return Proof(pkg.id, "earned", rep.total, rep.seconds, str(path) if path else None)


def run(ctx: Context, pkg: OpPackage, *, inputs: dict | None = None, params: dict | None = None,
        budget_bytes: int | None = None, require_receipt: bool = False, progress=None) -> dict:
    """One op on the device. Inputs are checked against the signature first (dtype, domain: NaN
    for a `finite` input is refused; an index outside its range or a broken CSR row pointer, at
    these shapes and params), whoever calls: the CLI, the Studio, a workflow."""
    for t in pkg.contract.signature.inputs:
        if inputs and t.name in inputs:
            check_input(np.asarray(inputs[t.name]), t)
    check_values(pkg.contract.signature, inputs or {}, params or {})
    if require_receipt:
        require_proof(ctx, pkg, progress=progress, inputs=inputs or {}, params=params or {})
    from .tuning import tuned       # a sealed tuning record's proven winner for this GPU profile, else the default
    pkg, _ = tuned(ctx, pkg, params)
    return run_op(ctx, pkg, inputs or {}, params or {}, budget_bytes=budget_bytes)


def verify_receipts(ctx: Context, pkg: OpPackage) -> list[dict]:
    """Every receipt file of the package, judged for this GPU profile: path, status, problems."""
    return [{"path": str(path), "status": v.status, "problems": list(v.problems),
             **({"coverage": coverage.describe(v.receipt)} if isinstance(v.receipt, dict) else {})}
            for path, v in receipts.judge_receipts(pkg, ctx.device.profile.id, ctx.seal)]


def profile(ctx: Context) -> dict:
    """The GPU profile, and what confines a reference host on this kernel (docs/security.md)."""
    from ..trust.kernel import confinement
    return {**ctx.device.profile.to_json(), "reference_host": confinement()}


def save_package(ctx: Context, path: str | Path, files: dict[str, bytes | str], *, op: str | None = None) -> str:
    """Write an authored package crash-safely and record its content hash as authored here."""
    root = Path(path)
    h = write_package(root, files)
    ctx.trust.record_authored(h, op=op, path=root.resolve())
    return h
