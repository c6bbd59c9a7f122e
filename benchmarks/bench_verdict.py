"""Edit -> verdict in a warm session (issue 25), for the story op and the fast median: after an edit
of one kernel (a changed kernel, so nothing compiled is reused), the time to the verdicts the
Studio's Conformance cell shows — conformance (forward corpus, category check, backward
conformance, the mutation score) and gradcheck — as the engine runs them for the cell: the real
``services.actions.conform`` and ``services.actions.gradcheck`` (reference results and remembered
verdicts included; no receipt written).

Rows, each the minimum of the repeats with the median beside it and the per-phase split of the
minimum run (corpus, category, dispatch, compare, backward, gradcheck; ``cached`` names the phases
answered from a cache):

- forward-only edit, first verdict: the forward corpus judged (target 0.5 s);
- forward-only edit, full receipt: conformance and gradcheck (target 1.5 s);
- VJP edit (the backward kernel), full receipt (target 1.5 s): the backward conformance re-runs;
- the story's first draft, first failure (target 0.3 s): streamed before the corpus ends.

"Warm": the device, the confined reference host, the parsers and the op's reference results are
there (one edit is verified before the timed ones), as in a Studio session."""
from __future__ import annotations

import shutil
import statistics
import time
from pathlib import Path

from .timing import row

STORY = "user/demo/windowed_median@1"
FAST = "user/demo/windowed_median_fast@1"
FIRST_VERDICT_S, RECEIPT_S, FIRST_FAILURE_S = 0.5, 1.5, 0.3
BASELINE = 25.0          # ratio limit under --quick is this times the margin (a regression of several times)
FIRST_DRAFT = Path(__file__).resolve().parents[1] / "examples" / "windowed_median_first_draft"


def _edited_copy(ctx, src, k: int, *, which: str = "kernel"):
    from studio.engine.contract.package import folder_hash, load_package
    dst = ctx.trust.home / f"edit-{src.id.split('/')[-1].replace('@', '-')}-{which}-{k}"
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src.root, dst, ignore=shutil.ignore_patterns("receipts", "__pycache__"))
    c = src.contract
    rel = c.kernel.file if which == "kernel" else c.backward_kernel.file
    kernel = dst / rel
    kernel.write_text(f"// edit {k} (the benchmark's {which} edit)\n" + kernel.read_text())
    ctx.trust.record_authored(folder_hash(dst), path=dst.resolve())   # as the Studio's save does
    return load_package(dst)


def verdicts(ctx, pkg) -> dict:
    """One edit's verdicts, as the Conformance cell gets them; raises unless both pass."""
    from studio.engine.services import actions
    rep = actions.conform(ctx, pkg, receipt=False)            # the cell's request: mutants included
    assert rep["verdict"] == "pass", rep["failures"][:1]
    s = time.perf_counter()
    g = actions.gradcheck(ctx, pkg, receipt=False)
    gradcheck_s = time.perf_counter() - s
    assert g["verdict"] == "pass", g.get("why")
    t = rep["timing"]
    split = {**t["phases"], "gradcheck": round(gradcheck_s, 4)}
    cached = list(t["cached"]) + (["gradcheck"] if gradcheck_s < 0.05 else [])
    return {"first": t["forward_verdict_s"], "receipt": t["total_s"] + gradcheck_s, "split": split, "cached": cached}


def _stats(runs: list[dict], key: str) -> tuple[float, float, dict]:
    best = min(runs, key=lambda r: r[key])
    return best[key], statistics.median(r[key] for r in runs), best


def rows(engine, quick: bool, margin: float) -> list[dict]:
    from studio.engine.contract.package import load_package
    from studio.engine.proof.conformance import conform
    ctx = engine.scratch()
    repeats = 1 if quick else 3
    out = []
    for op_id, name in ((STORY, "story op"), (FAST, "fast median")):
        src = engine.op(op_id)
        verdicts(ctx, _edited_copy(ctx, src, 0))                # warm: host, parsers, device, reference results
        fwd = [verdicts(ctx, _edited_copy(ctx, src, k)) for k in range(1, 1 + repeats)]
        vjp = [verdicts(ctx, _edited_copy(ctx, src, k, which="backward")) for k in range(1, 1 + repeats)]
        for runs, edit, key, target, what in ((fwd, "forward-only edit", "first", FIRST_VERDICT_S, "first verdict"),
                                              (fwd, "forward-only edit", "receipt", RECEIPT_S, "full receipt"),
                                              (vjp, "VJP edit", "receipt", RECEIPT_S, "full receipt")):
            t, med, best = _stats(runs, key)
            out.append(row(f"edit->verdict {name}: {edit}, {what}", f"issue target {target} s", t, target,
                           engine.adapter, limit=round(BASELINE * margin, 3), target=1.0, median_s=round(med, 4),
                           split=best["split"], cached=best["cached"], repeats=len(runs)))
    # the story's first draft: its first failure streams before the corpus ends
    draft = load_package(FIRST_DRAFT)
    ctx.trust.record_authored(draft.hash, path=draft.root.resolve())
    conform(ctx, draft, stop_after=1)                             # warm: its kernel compiled
    firsts, splits = [], []
    for _ in range(repeats + 2):
        rep = conform(ctx, draft)
        assert not rep.ok and rep.timing.first_failure is not None
        firsts.append(rep.timing.first_failure)
        splits.append(rep.timing.to_json())
    best = min(range(len(firsts)), key=firsts.__getitem__)
    out.append(row("edit->verdict story first draft: first failure", f"issue target {FIRST_FAILURE_S} s",
                   firsts[best], FIRST_FAILURE_S, engine.adapter, limit=round(BASELINE * margin, 3), target=1.0,
                   median_s=round(statistics.median(firsts), 4), split=splits[best]["phases"],
                   full_verdict_s=splits[best]["total_s"], repeats=len(firsts)))
    return out
