"""The use cases: check, conform, gradcheck, run, receipts, trust, save. The device worker's
handlers and the CLI both call these, so each rule exists once — above all "a pass earns a
receipt": a full conformance corpus that passes, or a gradcheck under the declared tolerance.
Results are shown only from proven ops when asked (``require_proof``): a valid receipt for this
GPU profile, or conformance first; an op that fails stops the job with its failing case."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from ..arrays import check_input
from ..context import Context
from ..contract.domains import check_values
from ..contract.package import MANIFEST, OpPackage, load_package, write_package
from ..errors import StudioError
from ..grad.run import run_op
from ..proof import coverage, gradcoverage, receipts, reliance
from ..proof import mutants as mutation
from ..proof.checker import check_package
from ..proof.conformance import ConformanceReport, report_lines
from ..proof.conformance import conform as run_conformance
from ..proof.corpus import MAX_SEEDS, SEEDS
from ..proof.gradcheck import DEFAULT_H, GradcheckReport
from ..proof.gradcheck import gradcheck as run_gradcheck
from ..proof.progressive import Stream
from ..proof.tuning_record import tuning_line
from ..records.reader import read_regular
from .jsonable import as_dict
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
    """A receipt is what a pass of the whole corpus earns (never a single case); a failing full run
    writes a ``failed`` receipt recording its first failing case, which refuses every run after it."""
    if not full_corpus:
        return None
    # a weaker pass never replaces a stronger receipt, nor a failure it did not run again; a failing
    # full run invalidates it (proof/coverage.py)
    old = [(p, v) for p, v in receipts.judge_receipts(pkg, rep.profile["id"], seal)
           if p.stem == rep.profile["id"] and v.receipt is not None]
    failed = bool(old) and old[0][1].status == "failed"
    what = coverage.decide(old[0][1].receipt if old else None, bool(old) and old[0][1].status == "valid", rep.ok,
                           rep.coverage or {}, old_failed=failed)
    if what == "keep":
        return None if failed else old[0][0]
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
def conformance_text(lines: list[str], receipt: str | None) -> list[str]:
    """A conformance run's lines, and the receipt it earned where it earned one."""
    return [*lines, f"  receipt   : {receipt}"] if receipt else list(lines)


def gradcheck_text(lines: list[str], receipt: str | None) -> list[str]:
    """A gradcheck's lines, and the receipt it earned where it earned one."""
    return [*lines, f"  receipt  : {receipt}"] if receipt else list(lines)


class CheckedReport(msgspec.Struct, kw_only=True):
    """``check``'s report (`scellis check`, the Studio's live checks): the checker's verdict, its errors
    and warnings as ``StudioError.to_dict`` gives them (``StudioError.from_dict`` reads them back)."""
    op: str
    hash: str
    ok: bool
    passed: list[str]
    errors: list[dict[str, Any]]
    warnings: list[dict[str, Any]]

    def to_json(self) -> dict:
        """`scellis check --json`."""
        return as_dict(self)

    def lines(self) -> list[str]:
        """What `scellis check` prints."""
        def shown(d: dict) -> str:
            return StudioError.from_dict(d).format().replace("\n", "\n        ")
        return [f"check  {self.op}  ({self.hash[:16]})", *(f"  ok    {s}" for s in self.passed),
                *(f"  FAIL  {shown(e)}" for e in self.errors), *(f"  warn  {shown(w)}" for w in self.warnings),
                "verdict: " + ("pass" if self.ok else f"FAIL ({len(self.errors)} error(s))")]


def check(ctx: Context, pkg: OpPackage) -> CheckedReport:
    return CheckedReport(**check_package(ctx, pkg).to_json())


class ConformReport(msgspec.Struct, kw_only=True, omit_defaults=True):
    """``conform``'s report (`scellis conform`, the Studio's Conformance cell): the conformance report's
    fields as ``ConformanceReport.to_json`` names them (``to_json`` is `scellis conform --json`), its
    lines, and the receipt a pass earned (with the receipt itself, so the Studio shows it without
    reading it back)."""
    op: str
    package_hash: str
    tolerance: str
    corpus: dict[str, Any]
    gpu_profile: str
    passed: int
    failed: int
    failing_classes: dict[str, Any]
    failures: list[dict[str, Any]]
    fails_when: Any = None
    category_errors: list[str]
    seconds: float
    verdict: str                       # pass | fail
    reproduce: Any
    backward: Any
    fold: Any
    sizes: Any
    coverage: Any
    mutation: Any
    timing: Any
    races: Any
    overrides: Any = None
    receipt: str | None = None         # the receipt a pass earned (None: none)
    lines: list[str]                   # report_lines, and what a failed receipt says
    mutation_lines: list[str] = msgspec.field(default_factory=list)   # the mutation score's own lines (mutants.lines)
    older_receipts: str | None = None  # receipts an older version left in the package folder (ignored)
    receipt_doc: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return self.verdict == "pass"

    def to_json(self) -> dict:
        """`scellis conform --json`: the conformance report and the receipt it earned."""
        return as_dict(self, drop=("lines", "mutation_lines", "older_receipts", "receipt_doc"))

    def text(self) -> list[str]:
        """What `scellis conform` prints (the public API's ``Conformance.lines`` too)."""
        return conformance_text(self.lines, self.receipt)


def conform(ctx: Context, pkg: OpPackage, *, seed: int = 0, large: bool = False, case: int | None = None,
            receipt: bool = True, progress=None, mutants: int | None = None, on_failure=None,
            seeds: int = SEEDS, note=None) -> ConformReport:
    """``on_failure(failure)``: called the moment the first failing case is judged (the rest run on).
    ``note(event)``: the verdicts told as they land (progressive.Stream: the worker's ``conform``).
    ``seeds``: at least SEEDS (a receipt is earned over that many; corpus.py)."""
    if not SEEDS <= seeds <= MAX_SEEDS:
        raise StudioError(f"--seeds {seeds}: a receipt is earned over {SEEDS} to {MAX_SEEDS} seeds", field="--seeds",
                          hint=f"pass --seeds {SEEDS} (the default) or more")
    mutants = (mutation.DEFAULT_COUNT if case is None else 0) if mutants is None else mutants
    with Stream(note, progress) as stream:
        rep = run_conformance(ctx, pkg, seed=seed, large=large, only_case=case, progress=stream.progress,
                              mutants=mutants, on_failure=on_failure or stream.on_failure, seeds=seeds)
    out = ConformReport(**rep.to_json(), lines=report_lines(rep), older_receipts=receipts.legacy_note(pkg),
                        mutation_lines=mutation.lines(rep.mutation) if isinstance(rep.mutation, dict) else [])
    if receipt:
        path = earn_conformance_receipt(pkg, rep, full_corpus=case is None, seal=ctx.seal)
        if path is not None:      # the receipt with the report: the Studio shows it without reading it back
            out.receipt, out.receipt_doc = str(path), receipts.read_receipt(Path(path))
        elif case is None:
            out.lines += _failed_note(ctx, pkg, rep.ok)
    return out


def _failed_note(ctx: Context, pkg: OpPackage, passed: bool) -> list[str]:
    """What a full run left of a ``failed`` receipt: the failure it recorded, or the failure a weaker
    pass did not run again (coverage.decide keeps it)."""
    found = [(p, v) for p, v in receipts.judge_receipts(pkg, ctx.device.profile.id, ctx.seal, corpora=ctx.corpora)
             if v.status == "failed"]
    if not found:
        return []
    path, v = found[0]
    if passed:
        return [f"  receipt   : {path.name} stays failed: it records a failure on a corpus this run did not hold "
                f"({reliance.describe_failure(v.receipt)}); `scellis run --require-receipt` refuses the op"]
    return [f"  receipt   : failed, recorded in {path}: `scellis run --require-receipt` refuses the op until "
            f"its kernel changes"]


class GradcheckResult(msgspec.Struct, kw_only=True, omit_defaults=True):
    """``gradcheck``'s report (`scellis gradcheck`, the Studio's Gradcheck cell): the gradcheck
    report's fields as ``GradcheckReport.to_json`` names them (``to_json`` is `scellis gradcheck
    --json`), and the receipt it earned."""
    op: str
    hash: str
    params: Any
    shapes: Any
    path: str
    precision: str
    h: Any
    seed: Any
    forward: Any
    vjp: Any
    subgradient: Any
    tolerance: Any
    tolerance_source: str
    error_measure: str
    kink_detection: Any
    points: Any
    counted: Any
    skipped: Any
    max_error: Any
    negative_controls: list[dict[str, Any]]
    verdict: str                       # pass | fail | inconclusive
    why: str
    exit_code: int
    sites: Any
    ties: Any
    coverage: Any
    lines: list[str]
    probes: list[dict[str, Any]]
    receipt: str | None = None         # the receipt it earned (None: none)

    def to_json(self) -> dict:
        """`scellis gradcheck --json`: the report with every probe, and the receipt."""
        return as_dict(self)

    def text(self) -> list[str]:
        """What `scellis gradcheck` prints (the public API's ``Gradcheck.lines`` too)."""
        return gradcheck_text(self.lines, self.receipt)


def gradcheck(ctx: Context, pkg: OpPackage, *, params: dict | None = None, h: float | None = None, seed: int = 0,
              tolerance: float | None = None, receipt: bool = True) -> GradcheckResult:
    rep = remembered_gradcheck(ctx, pkg, run_gradcheck, params=params, h=h or DEFAULT_H, seed=seed,
                               tolerance=tolerance)       # a kernel edit reuses it (verdicts.py)
    out = GradcheckResult(**rep.to_json())
    if receipt:
        path = earn_gradcheck_receipt(pkg, rep, seal=ctx.seal)
        if path is not None:
            out.receipt = str(path)
    return out


@dataclass(frozen=True)
class Proof:
    op: str
    status: str          # "valid" (a receipt was there) or "earned" (conformance ran here, now)
    cases: int = 0
    seconds: float = 0.0
    receipt: str | None = None
    relied: str = ""     # which receipt the run relies on, in one line (reliance.relied_line)

    def line(self) -> str:
        if self.relied:
            return self.relied
        if self.status == "valid":
            return f"proof {self.op}: valid conformance receipt on this GPU profile"
        return (f"proof {self.op}: no receipt here, so conformance ran first: {self.cases} cases pass "
                f"in {self.seconds:.2f} s" + (f"; receipt {self.receipt}" if self.receipt else ""))


def _relied(pkg: OpPackage, path: Path | None, receipt: dict, earned: str = "") -> str:
    try:
        sha = hashlib.sha256(read_regular(path, receipts.MAX_RECEIPT_BYTES, what="receipt", file=str(path))
                             ).hexdigest() if path is not None else None
    except (OSError, StudioError):
        sha = None
    return reliance.relied_line(pkg.id, path, sha, receipt, (coverage.describe(receipt) or ["covers: ?"])[0],
                                earned=earned)


def require_proof(ctx: Context, pkg: OpPackage, *, progress=None, inputs: dict | None = None,
                  params: dict | None = None) -> Proof:
    """The op's receipt for ``ctx``'s GPU profile, or conformance now; raises on a failing op. A
    ``failed`` receipt refuses, always, naming its failing case. A run (``inputs``, ``params``)
    outside the receipt's coverage (a size past it, a launch fold it never reached, an integer
    parameter value it never ran) proves at its own size and parameters first (coverage.py,
    reliance.py). The Proof's line names the receipt the run relies on. All of it, the receipts'
    verification included, runs on the proof's own budget, never the run's (proof_budget.py)."""
    with ProofBudget(progress) as beat:
        return _require_proof(ctx, pkg, progress=beat.progress if progress else None, inputs=inputs, params=params)


def _require_proof(ctx: Context, pkg: OpPackage, *, progress, inputs: dict | None, params: dict | None) -> Proof:
    found = receipts.judge_receipts(pkg, ctx.device.profile.id, ctx.seal, corpora=ctx.corpora)
    status = receipts.summarize(found)
    if status == "failed":                   # a failed receipt is never run past
        path, v = next((p, v) for p, v in found if v.status == "failed")
        raise reliance.refusal(pkg, v.receipt, path, file=str(pkg.root / MANIFEST), field=PROOF_FAILED)
    extra, why, own = None, None, {}
    if status == "valid":
        path, valid = next((p, v.receipt) for p, v in found if v.status == "valid")
        why, geo, own = reliance.outside(pkg.contract, valid, inputs, params or {},
                                         ctx.device.profile.limits.get("max-compute-workgroups-per-dimension", 65535))
        if why is None:
            return Proof(pkg.id, "valid", receipt=str(path), relied=_relied(pkg, path, valid))
        if geo is None or geo.get("n") is None:
            raise StudioError(f"{pkg.id}: this run is outside what its receipt covers ({why}), and no corpus size "
                              f"matches it", file=str(pkg.root / MANIFEST), hint=f"run `scellis conform {pkg.root} --large`")
        extra, status = {"run": geo["n"]}, f"valid, but {why}"
    rep = run_conformance(ctx, pkg, progress=progress, extra_sizes=extra,
                          run_params={p.name: (params or {})[p.name] for p in pkg.contract.signature.params
                                      if p.name in (params or {})} if own else None)
    if not rep.ok:
        try:
            earn_conformance_receipt(pkg, rep, full_corpus=True, seal=ctx.seal)    # a failed receipt: it refuses from now on
        except OSError:
            pass
        raise StudioError(
            f"{pkg.id} fails conformance on this GPU profile (receipt: {status}), so no result of it is shown\n"
            + "\n".join(report_lines(rep)),
            file=str(pkg.root / MANIFEST), field=PROOF_FAILED,
            hint=f"fix the kernel; reproduce with `scellis conform {pkg.root}`")
    still = reliance.unreached_params(rep.coverage or {}, own, set(own))
    if still:                                # the corpus could not hold a case at the run's own values
        raise StudioError(f"{pkg.id}: this run is outside what its receipt covers ({why}), and conformance could "
                          f"not build a case at {', '.join(f'{k} = {v}' for k, v in still.items())}",
                          file=str(pkg.root / MANIFEST),
                          hint="run it at a parameter value the receipt covers (`scellis receipts` lists them)")
    try:
        path = earn_conformance_receipt(pkg, rep, full_corpus=True, seal=ctx.seal)
    except OSError:   # a read-only install: the proof still holds for this run
        path = None
    made = receipts.make_receipt(pkg, rep)
    return Proof(pkg.id, "earned", rep.total, rep.seconds, str(path) if path else None,
                 relied=_relied(pkg, path, made, earned=(
                     "no receipt here" if status == "none" else f"receipt {status}") + f", so conformance ran first: "
                     f"{rep.total} cases pass in {rep.seconds:.2f} s; "))


def run(ctx: Context, pkg: OpPackage, *, inputs: dict | None = None, params: dict | None = None,
        budget_bytes: int | None = None, require_receipt: bool = False, progress=None, on_proof=None) -> dict:
    """One op on the device: its outputs. Inputs are checked against the signature first (dtype, domain:
    NaN for a `finite` input is refused; an index outside its range or a broken CSR row pointer, at
    these shapes and params), whoever calls: the CLI, the Studio, a workflow. ``on_proof(proof)``:
    told, with ``require_receipt``, which receipt the run relies on."""
    outs, proof, _tuning = _run(ctx, pkg, inputs or {}, params or {}, budget_bytes, require_receipt, progress)
    if proof is not None and on_proof is not None:
        on_proof(proof)
    return outs


def _run(ctx: Context, pkg: OpPackage, inputs: dict, params: dict, budget_bytes: int | None,
         require_receipt: bool, progress) -> tuple[dict, Proof | None, dict]:
    """The outputs, the Proof relied on (``require_receipt``, else None) and what ran of the tunable
    overrides (``tuning.tuned``)."""
    for t in pkg.contract.signature.inputs:
        if t.name in inputs:
            check_input(np.asarray(inputs[t.name]), t)
    check_values(pkg.contract.signature, inputs, params)
    proof = require_proof(ctx, pkg, progress=progress, inputs=inputs, params=params) if require_receipt else None
    from .tuning import tuned       # a sealed tuning record's proven winner for this GPU profile, else the default
    variant, tuning = tuned(ctx, pkg, params)
    return run_op(ctx, variant, inputs, params, budget_bytes=budget_bytes), proof, tuning


class RunReport(msgspec.Struct, kw_only=True):
    """``run``'s report (services/requests.py): the outputs, and what `scellis run` tells of them on
    stderr, judged in the worker — the receipt the run relied on (``require_receipt``) or, without it,
    the receipts' standing on this GPU profile (anything but ``valid`` earns a warning), and which
    values of the op's tunable overrides ran (``tuning_record.tuned_for``'s account; {} without any)."""
    op: str
    outputs: dict[str, Any]
    receipt: str                       # "valid", or why not: none, stale, failed, forged, foreign, malformed
    relied: str | None = None          # with require_receipt: the Proof's line (the receipt relied on)
    tuning: dict[str, Any] = msgspec.field(default_factory=dict)

    def notes(self) -> list[str]:
        """The lines `scellis run` prints on stderr: the receipt relied on, or the warning of an unproven
        kernel; the tunable values that ran."""
        out = [self.relied] if self.relied else []
        if self.relied is None and self.receipt != "valid":
            out.append(f"warning: {self.op} has no valid conformance receipt on this GPU profile ({self.receipt}); "
                       f"running anyway — `scellis conform {self.op}` proves it")
        line = tuning_line(self.op, self.tuning)
        return out + ([line] if line else [])

    def output_lines(self) -> list[str]:
        """Each output's shape, dtype and first values (`scellis run` without --out)."""
        return [f"{name}: shape {a.shape} {a.dtype}  {np.array2string(a.reshape(-1)[:8], precision=6)}"
                + (" ..." if a.size > 8 else "") for name, a in self.outputs.items()]


def run_report(ctx: Context, pkg: OpPackage, *, inputs: dict | None = None, params: dict | None = None,
               budget_bytes: int | None = None, require_receipt: bool = False, progress=None) -> RunReport:
    """The worker's ``run`` (`scellis run`, the Studio's signal source): ``run`` with its report."""
    outs, proof, tuning = _run(ctx, pkg, inputs or {}, params or {}, budget_bytes, require_receipt, progress)
    status = "valid" if proof is not None else receipts.local_status(pkg, ctx.device.profile.id, ctx.seal,
                                                                      corpora=ctx.corpora)
    return RunReport(op=pkg.id, outputs=outs, receipt=status, relied=proof.line() if proof else None,
                     tuning=tuning)


class ReceiptFound(msgspec.Struct, kw_only=True, frozen=True):
    """One receipt file of an op, judged for this GPU profile."""
    path: str
    status: str                        # valid, failed, stale, forged, foreign, malformed
    problems: list[str] = msgspec.field(default_factory=list)
    coverage: list[str] = msgspec.field(default_factory=list)    # what it covers, in lines (coverage.describe)

    def line(self) -> str:
        return (f"{self.status:9s} {self.path}" + "".join(f"\n          - {p}" for p in self.problems)
                + "".join(f"\n          {c}" for c in self.coverage))


class ReceiptsReport(msgspec.Struct, kw_only=True):
    """``receipts``' report (`scellis receipts`): every receipt file of the op, judged here, and the
    note of receipts an older version left in the package folder (they are ignored)."""
    op: str
    status: str                        # the best of them (receipts.summarize): valid first, none for none
    found: list[ReceiptFound]
    older: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "valid"

    def lines(self) -> list[str]:
        if not self.found:
            return [f"{self.op}: no receipts (run `scellis conform {self.op}`)"]
        return [r.line() for r in self.found]


def verify_receipts(ctx: Context, pkg: OpPackage) -> ReceiptsReport:
    """Every receipt file of the package, judged for this GPU profile: path, status, problems (a
    malformed one says why it does not read), what it covers."""
    judged = receipts.judge_receipts(pkg, ctx.device.profile.id, ctx.seal, corpora=ctx.corpora)
    return ReceiptsReport(op=pkg.id, status=receipts.summarize(judged), older=receipts.legacy_note(pkg), found=[
        ReceiptFound(path=str(path), status=v.status, problems=list(v.problems) or _unreadable(path, v.status),
                     coverage=coverage.describe(v.receipt) if isinstance(v.receipt, dict) else [])
        for path, v in judged])


def _unreadable(path: Path, status: str) -> list[str]:
    """Why a malformed receipt file is not one ([] when it reads)."""
    from .standing import why_unreadable
    return why_unreadable(path) if status == "malformed" else []


class ProfileReport(msgspec.Struct, kw_only=True):
    """``profile``'s report (`scellis profile`, the Studio's GPU label): the GPU profile as
    ``GpuProfile.to_json`` names it, and what confines a reference host on this kernel."""
    id: str
    backend: str
    trusted_backend: bool
    adapter: dict[str, Any]
    wgpu_version: str
    limits: dict[str, Any]
    reference_host: dict[str, Any]

    def to_json(self) -> dict:
        """`scellis profile`."""
        return as_dict(self)

    def label(self) -> str:
        """The Studio's status-bar line."""
        a = self.adapter
        return f"GPU: {a.get('device', '?')} [{a.get('backend_type', '')}] · profile {self.id}"


def profile(ctx: Context) -> ProfileReport:
    """The GPU profile, and what confines a reference host on this kernel (docs/security.md)."""
    from ..trust.kernel import confinement
    return ProfileReport(**ctx.device.profile.to_json(), reference_host=confinement())


def save_package(ctx: Context, path: str | Path, files: dict[str, bytes | str], *, op: str | None = None) -> str:
    """Write an authored package crash-safely and record its content hash as authored here."""
    root = Path(path)
    h = write_package(root, files)
    ctx.trust.record_authored(h, op=op, path=root.resolve())
    return h
