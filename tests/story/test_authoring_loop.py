"""The authoring loop: a kernel edit never asks the reference again (reference results
cached by reference hash and case, sealed in the user folder), a forward-only edit re-runs neither
the category check nor the backward conformance while a backward kernel edit does, trust follows
the Python code only, and a tampered cache entry is refused. Real wgpu, real confined hosts."""
import json

import numpy as np
import pytest
from conftest import EXAMPLES, MEDIAN

from studio.engine.context import Context
from studio.engine.contract.package import load_package
from studio.engine.errors import StudioError
from studio.engine.proof.conformance import conform
from studio.engine.trust.code import code_hash

FIRST_DRAFT = EXAMPLES / "windowed_median_first_draft"
KERNEL_EDIT = [("let i = gid.x", "// an edit of the kernel only\n    let i = gid.x")]


@pytest.mark.slow
def test_a_kernel_edit_never_calls_the_reference_again(ctx, pkg_copy, device):
    first = conform(ctx, load_package(pkg_copy(MEDIAN, "a")))
    assert first.ok and ctx.references.host_calls > 0
    edited = load_package(pkg_copy(MEDIAN, "b", forward__wgsl=KERNEL_EDIT))
    before = ctx.references.host_calls
    again = conform(ctx, edited)
    assert again.ok and again.passed == first.passed
    assert ctx.references.host_calls == before            # every reference result came from the cache
    assert {"category", "backward"} <= set(again.timing.cached)


@pytest.mark.slow
def test_a_reference_edit_runs_the_reference_again(ctx, pkg_copy, device):
    assert conform(ctx, load_package(pkg_copy(MEDIAN, "a"))).ok
    before = ctx.references.host_calls
    edited = load_package(pkg_copy(MEDIAN, "b", reference__py=[("import numpy as np", "import numpy as np  # edit")]))
    rep = conform(ctx, edited)
    assert rep.ok and ctx.references.host_calls > before + rep.total
    assert "backward" not in rep.timing.cached and "category" not in rep.timing.cached


@pytest.mark.slow
def test_a_backward_kernel_edit_reruns_backward_conformance_only(ctx, pkg_copy, device):
    assert conform(ctx, load_package(pkg_copy(MEDIAN, "a"))).ok
    vjp_edit = [("var acc = 0.0;", "var acc = 0.0;  // an edit of the VJP kernel")]
    rep = conform(ctx, load_package(pkg_copy(MEDIAN, "b", backward__wgsl=vjp_edit)))
    assert rep.ok and rep.backward is not None and rep.backward.ok
    assert "backward" not in rep.timing.cached and "category" in rep.timing.cached
    broken = [("acc = acc + dy[i];", "acc = acc + 2.0 * dy[i];")]
    rep = conform(ctx, load_package(pkg_copy(MEDIAN, "c", backward__wgsl=broken)))
    assert not rep.ok and rep.backward.failures            # the broken VJP is judged, not remembered


@pytest.mark.slow
def test_a_forward_edit_keeps_the_device_vjps_mutation_score_and_a_backward_edit_reruns_it(ctx, pkg_copy, device):
    """The backward mutants depend on what backward conformance depends on: after a forward-only
    edit their score is remembered (named in the timing line), after a VJP edit it is run again."""
    first = conform(ctx, load_package(pkg_copy(MEDIAN, "a")), mutants=4)
    assert first.ok and first.mutation["backward"]["total"] > 0
    again = conform(ctx, load_package(pkg_copy(MEDIAN, "b", forward__wgsl=KERNEL_EDIT)), mutants=4)
    assert "backward mutants" in again.timing.cached and again.mutation["backward"] == first.mutation["backward"]
    vjp_edit = [("var acc = 0.0;", "var acc = 0.0;  // an edit of the VJP kernel")]
    rerun = conform(ctx, load_package(pkg_copy(MEDIAN, "c", backward__wgsl=vjp_edit)), mutants=4)
    assert rerun.ok and "backward mutants" not in rerun.timing.cached


@pytest.mark.slow
def test_the_first_failure_streams_before_the_whole_corpus(ctx, device):
    seen = []
    rep = conform(ctx, load_package(FIRST_DRAFT), on_failure=lambda f: seen.append((f, ctx.references.host_calls)))
    assert not rep.ok and seen and seen[0][0].kind == "unwritten"
    t = rep.timing
    assert t.first_failure is not None and t.first_failure <= t.forward <= t.total
    assert rep.failures[0].case.shape_kind == "minimum"     # the report keeps the corpus order
    assert set(t.phases) >= {"corpus", "category", "dispatch", "compare"}
    assert "time      :" in "\n".join(__import__("studio.engine.proof.conformance", fromlist=["x"]).report_lines(rep))


# ------------------------------------------------------------------ trust follows the Python only
def _plain_copy(root, python_edit="\n# written by someone else\n"):
    """A package copied in with plain writes: nothing recorded it as authored here."""
    root.mkdir()
    for p in MEDIAN.iterdir():
        if p.is_file():
            (root / p.name).write_bytes(p.read_bytes())
    with open(root / "reference.py", "a") as f:
        f.write(python_edit)
    return root


def test_editing_wgsl_keeps_trust_and_editing_the_reference_asks_again(ctx, tmp_path, device):
    root = _plain_copy(tmp_path / "foreign")
    assert ctx.trust.status(load_package(root)).level == "untrusted"
    ctx.trust.trust(load_package(root))
    for rel, edit in (("forward.wgsl", "\n// a kernel edit\n"), ("op.toml", "\n# a comment in the manifest\n")):
        with open(root / rel, "a") as f:
            f.write(edit)
        pkg = load_package(root)
        st = ctx.trust.status(pkg)
        assert st.level == "trusted" and "non-code" in st.reason, (rel, st)
        ctx.references.forward(pkg, {"x": np.arange(9, dtype=np.float32)}, {"w": 3})   # it runs
    with open(root / "reference.py", "a") as f:
        f.write("\n# one more byte of Python\n")
    pkg = load_package(root)
    assert ctx.trust.status(pkg).level == "untrusted"
    with pytest.raises(StudioError, match="not trusted"):
        ctx.references.forward(pkg, {"x": np.arange(9, dtype=np.float32)}, {"w": 3})


def test_product_trust_stays_by_whole_content(ctx, tmp_path):
    """A package from elsewhere is untrusted until trusted here, even when its Python is a shipped
    package's (the exchange ring's rule); only this user's own decisions carry over a kernel edit."""
    root = _plain_copy(tmp_path / "k", python_edit="")
    assert ctx.trust.status(load_package(root)).level == "product"       # byte for byte the shipped one
    (root / "forward.wgsl").write_text((root / "forward.wgsl").read_text() + "\n// mine\n")
    assert ctx.trust.status(load_package(root)).level == "untrusted"


def test_the_reference_hash_covers_every_file_the_reference_can_read():
    files = {"op.toml": b"a", "forward.wgsl": b"b", "reference.py": b"c", "helper.py": b"d", "data.npy": b"e",
             "README.md": b"f"}
    base = code_hash(files)
    assert code_hash({**files, "forward.wgsl": b"B", "op.toml": b"A", "README.md": b"F"}) == base
    for rel in ("reference.py", "helper.py", "data.npy"):
        assert code_hash({**files, rel: b"changed"}) != base, rel


def test_revoking_forgets_the_python_too(ctx, tmp_path):
    root = _plain_copy(tmp_path / "r")
    pkg = load_package(root)
    ctx.trust.trust(pkg)
    (root / "forward.wgsl").write_text((root / "forward.wgsl").read_text() + "\n// edit\n")
    assert ctx.trust.status(load_package(root)).ok
    assert ctx.trust.revoke(pkg)
    assert ctx.trust.status(load_package(root)).level == "untrusted"


# ------------------------------------------------------------------ the sealed cache on disk
def _fresh(ctx):
    """Another process on the same user folder: nothing in memory, the disk cache only."""
    return Context.open(home=ctx.trust.home, device=ctx.device, hosts=ctx.hosts)


@pytest.mark.slow
def test_cached_results_survive_the_process_and_a_tampered_entry_is_refused(ctx, pkg_copy, device):
    pkg = load_package(pkg_copy(MEDIAN, "a"))
    assert conform(ctx, pkg).ok
    folder = ctx.trust.home / "cache" / "reference" / ctx.references.code_hash(pkg)
    packs = sorted(folder.glob("*.npz"))
    assert packs and sorted(folder.glob("*.json"))
    later = _fresh(ctx)
    assert conform(later, load_package(pkg_copy(MEDIAN, "b", forward__wgsl=KERNEL_EDIT))).ok
    assert later.references.host_calls == 0 and later.references.results.disk_hits > 0
    # one array's bytes changed on disk: the entry does not match its sealed digest
    with np.load(packs[0]) as z:
        arrays = {k: z[k] for k in z.files}
    name = max(arrays, key=lambda k: arrays[k].size)
    arrays[name] = arrays[name].copy()
    arrays[name].reshape(-1)[0] = 12345.0
    np.savez(packs[0], **arrays)
    tampered = _fresh(ctx)
    rep = conform(tampered, load_package(pkg_copy(MEDIAN, "c", forward__wgsl=KERNEL_EDIT)))
    assert rep.ok                                  # the reference ran again instead: still the right verdict
    assert tampered.references.results.refused and tampered.references.host_calls > 0
    assert "sealed digest" in tampered.references.results.refused[0]


@pytest.mark.slow
def test_an_index_not_sealed_here_is_refused(ctx, pkg_copy, device):
    pkg = load_package(pkg_copy(MEDIAN, "a"))
    assert conform(ctx, pkg).ok
    folder = ctx.trust.home / "cache" / "reference" / ctx.references.code_hash(pkg)
    index = sorted(folder.glob("*.json"))[0]
    doc = json.loads(index.read_text())
    doc["seal"]["mac"] = "0" * 64
    index.write_text(json.dumps(doc))
    other = _fresh(ctx)
    assert conform(other, load_package(pkg_copy(MEDIAN, "b", forward__wgsl=KERNEL_EDIT))).ok
    assert other.references.results.refused and not index.exists()


def test_a_generator_check_is_never_answered_from_the_cache(ctx, pkg_copy):
    """The category check calls the reference twice on purpose: outside ``caching`` it really does."""
    pkg = load_package(pkg_copy(MEDIAN, "a"))
    x = {"x": np.arange(9, dtype=np.float32)}
    ctx.references.forward(pkg, x, {"w": 3})
    n = ctx.references.host_calls
    ctx.references.forward(pkg, x, {"w": 3})
    assert ctx.references.host_calls == n + 1
    with ctx.references.caching():
        ctx.references.forward(pkg, x, {"w": 3})
        ctx.references.forward(pkg, x, {"w": 3})
    assert ctx.references.host_calls == n + 2


# ------------------------------------------------------------------ the Conformance cell shows the split
def test_the_conformance_cell_shows_the_phase_split(qtbot):
    from studio.app.panels.conformance import ConformancePanel, timing_line
    from studio.engine.proof.progressive import Timing, timing_text
    timing = Timing(phases={"corpus": 0.01, "category": 0.0, "dispatch": 0.31, "compare": 0.12, "backward": 0.0},
                    first_failure=0.05, forward=0.44, total=0.45, cached=["category", "backward"]).to_json()
    line = timing_line(timing)
    assert line == "time — " + timing_text(timing)          # one presenter: the CLI's report line too
    assert "dispatch 0.31 s" in line and "backward cached" in line and "first failure at 0.05 s" in line
    assert timing_line(None) == ""
    p = ConformancePanel(8)
    qtbot.addWidget(p)
    report = {"verdict": "pass", "passed": 3, "failed": 0, "corpus": {"cases": 3, "seed": 0, "hash": "ab"},
              "failures": [], "timing": timing, "tolerance": "exact", "gpu_profile": "p"}
    p.show_report(report)
    assert "dispatch 0.31 s" in p.summary.text() and "category cached" in p.summary.text()
    p.show_report({**report, "timing": None})
    assert "dispatch" not in p.summary.text()


# ------------------------------------------------------------------ the proof's own budget
def test_the_proof_budget_beats_until_its_own_budget_ends():
    import time

    from studio.engine.services.proof_budget import ProofBudget
    seen = []
    with ProofBudget(lambda *a: seen.append(a), budget_s=0.3, every_s=0.02) as beat:
        beat.progress(3, 10)
        time.sleep(0.6)
        after_budget = len(seen)
        time.sleep(0.2)
        assert len(seen) == after_budget                  # past its budget: no more signs of life
    assert seen[0] == (0, 1) and (3, 10) in seen and 5 <= after_budget
    with ProofBudget(None) as beat:                       # nothing times the call: nothing runs
        beat.progress(1, 2)
        assert beat._thread is None


def test_the_studio_keeps_trust_for_a_kernel_edit_of_a_trusted_package(ctx, tmp_path, qtbot):
    """The Studio judges a document's current content by its Python too (studio/app/bridge/session.py)."""
    from studio.app.notebook.model import FILE, OpDocument
    from studio.app.bridge.session import trust_status
    root = _plain_copy(tmp_path / "doc")
    files = {p.name: p.read_text() for p in root.iterdir() if p.is_file()}
    doc = OpDocument(files, root)
    assert not trust_status(doc, ctx.trust).ok
    ctx.trust.trust(load_package(root))
    kernel = doc.kernel_file
    doc.set(FILE + kernel, files[kernel] + "\n// typed in the Studio\n")
    assert doc.content_hash() != load_package(root).hash and trust_status(doc, ctx.trust).ok
    doc.set(FILE + doc.reference_file, files["reference.py"] + "\n# typed Python\n")
    assert not trust_status(doc, ctx.trust).ok


# ------------------------------------------------------------------ the first failure reaches the Studio at once
@pytest.mark.slow
def test_the_first_failure_reaches_the_front_end_before_the_result_through_the_worker(qtbot):
    """The worker sends the first failing case as a note the moment it is judged, then the forward
    verdict when the corpus is judged; the Studio's Conformance cell shows the failure while the rest
    of the corpus still runs; a passing op sends no failure, and its forward PASS."""
    import time

    from studio.app.panels.conformance import ConformancePanel
    from studio.app.bridge.worker_bridge import DeviceWorkers

    workers = DeviceWorkers()
    panel = ConformancePanel(8)
    qtbot.addWidget(panel)
    panel.started()                                          # as the controller does
    notes, shown = [], []
    try:
        job = workers.submit("proof", "conform", target=str(FIRST_DRAFT), receipt=False)
        job.note.connect(lambda d: (notes.append((time.perf_counter(), d)), panel.on_note(d),
                                    shown.append(panel.summary.text())))
        done = []
        job.succeeded.connect(lambda rep: done.append((time.perf_counter(), rep)))
        qtbot.waitUntil(lambda: bool(done), timeout=180_000)
        assert done[0][1].verdict == "fail"
        assert notes[0][1]["kind"] == "first_failure" and "never written" in notes[0][1]["text"]
        kinds = [d["kind"] for _, d in notes]
        assert kinds.count("first_failure") == 1 and set(kinds) <= {"first_failure", "forward_verdict", "backward_verdict"}
        assert next(d for _, d in notes if d["kind"] == "forward_verdict")["verdict"] == "fail"
        assert notes[0][0] < done[0][0]                      # shown before the whole corpus finished
        assert shown[0].startswith("first failure (the rest of the corpus is still running)")
        assert panel.chip.text() == "FAIL…"
        good = workers.submit("proof", "conform", target=str(MEDIAN), receipt=False)
        later = []
        good.note.connect(later.append)
        ok = []
        good.succeeded.connect(ok.append)
        qtbot.waitUntil(lambda: bool(ok), timeout=300_000)
        assert ok[0].verdict == "pass"                       # negative control: no failure to stream
        assert [d["verdict"] for d in later if d["kind"] == "forward_verdict"] == ["pass"]
        assert not any(d["kind"] == "first_failure" for d in later)
    finally:
        workers.close()


@pytest.mark.slow
def test_the_cli_prints_the_first_failure_before_the_report(tmp_path):
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-m", "studio.cli", "conform", str(FIRST_DRAFT), "--no-receipt"],
                       capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert r.returncode == 1 and r.stderr.startswith("first failure (the rest of the corpus runs on): case 0"), r.stderr
    assert "FAIL" in r.stdout
