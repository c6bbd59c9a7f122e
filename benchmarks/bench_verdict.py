"""Edit -> verdict for the story op in a warm session: after a kernel edit (a changed kernel, so
nothing compiled is reused), the time to the conformance verdict and to the gradcheck verdict,
split into compile (the checker: the kernel, its probes and the whole-layout pipeline), corpus
(generating it), dispatch (every batch on the device), compare (the reference on every case,
the tolerance and honesty checks, the category check), backward (the device VJP against the
reference VJP on the passing cases) and gradcheck. The phases are the same calls conform()
makes, in its order; the real conform() is timed too, as a cross-check. "Warm": the device,
the confined reference host and the parsers are up (one edit is verified before the timed one).
The peer is the issue's target, 0.5 s: the ratio is time / 0.5 s."""
from __future__ import annotations

import shutil
import time

from .timing import row

STORY = "user/demo/windowed_median@1"
TARGET_S = 0.5
BASELINE = 25.0          # measured ratio on lavapipe (docs/performance.md), times the margin in --quick


def _edited_copy(ctx, src, k: int):
    from studio.engine.contract.package import folder_hash, load_package
    dst = ctx.trust.home / f"edit{k}"
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src.root, dst, ignore=shutil.ignore_patterns("receipts", "__pycache__"))
    kernel = dst / src.contract.kernel.file
    kernel.write_text(f"// edit {k} (the benchmark's kernel edit)\n" + kernel.read_text())
    ctx.trust.record_authored(folder_hash(dst), path=dst.resolve())   # as the Studio's save does
    return load_package(dst)


def phases(ctx, pkg) -> dict:
    """One edit's verdicts, timed per phase; raises if a verdict is not a pass."""
    from studio.engine.device.execution import Case, run_cases
    from studio.engine.proof.backward_conformance import conform_backward
    from studio.engine.proof.category import verify_category
    from studio.engine.proof.checker import check_package
    from studio.engine.proof.conformance import BATCH, _fold_size, judge
    from studio.engine.proof.corpus import generate
    from studio.engine.proof.gradcheck import gradcheck
    t = {}
    s = time.perf_counter()
    rep = check_package(ctx, pkg)
    assert rep.ok, [e.format() for e in rep.errors]
    t["compile"] = time.perf_counter() - s
    s = time.perf_counter()
    corpus = generate(pkg.contract.signature, seed=0, fold_size=_fold_size(pkg, ctx.device, False))
    t["corpus"] = time.perf_counter() - s
    t["dispatch"] = t["compare"] = 0.0
    s = time.perf_counter()
    assert not verify_category(ctx.references, pkg, corpus.cases[:24])
    t["compare"] += time.perf_counter() - s
    passing = []
    for start in range(0, len(corpus.cases), BATCH):
        batch = corpus.cases[start:start + BATCH]
        s = time.perf_counter()
        results = run_cases(pkg, [Case(c.inputs, c.params) for c in batch], device=ctx.device, guard=True)
        t["dispatch"] += time.perf_counter() - s
        s = time.perf_counter()
        for case, res in zip(batch, results):
            fails = judge(ctx.references, pkg, case, res)
            assert not fails, fails[0].describe()
            passing.append((case, res.outputs))
        t["compare"] += time.perf_counter() - s
    s = time.perf_counter()
    assert conform_backward(ctx, pkg, passing).ok
    t["backward"] = time.perf_counter() - s
    s = time.perf_counter()
    g = gradcheck(ctx, pkg)
    assert g.verdict == "pass", g.why
    t["gradcheck"] = time.perf_counter() - s
    return t


def rows(engine, quick: bool, margin: float) -> list[dict]:
    from studio.engine.proof.checker import check_package
    from studio.engine.proof.conformance import conform
    ctx = engine.scratch()
    story = engine.op(STORY)
    phases(ctx, _edited_copy(ctx, story, 0))          # warm: host, parsers, device
    best_t = None
    for k in range(1, 2 if quick else 4):
        t = phases(ctx, _edited_copy(ctx, story, k))
        if best_t is None or sum(t.values()) < sum(best_t.values()):
            best_t = t
    pkg = _edited_copy(ctx, story, 99)
    check_package(ctx, pkg)
    s = time.perf_counter()
    rep = conform(ctx, pkg)
    conform_s = time.perf_counter() - s
    assert rep.ok
    total = sum(best_t.values())
    split = {k: round(v, 4) for k, v in best_t.items()}
    out = [row("edit->verdict story op (conformance + gradcheck)", f"issue target {TARGET_S} s", total, TARGET_S,
               engine.adapter, limit=round(BASELINE * margin, 3), target=1.0, split=split,
               conform_s=round(conform_s, 4), cases=rep.total)]
    for k, v in best_t.items():
        out.append(row(f"edit->verdict phase: {k}", f"issue target {TARGET_S} s (whole)", v, TARGET_S, engine.adapter))
    return out
