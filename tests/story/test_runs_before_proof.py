"""Runs before proof (studio/engine/services/trial.py; the Run cell, docs/studio.md): with no receipt
in the user folder, a run of the story op's kernel says plainly that it is not proven and why; its
reference runs alone in the confined host and matches the median written here; nothing is vouched
for; and what the window says once an op is published (studio/app/publish/published.py). The Studio's own
tests (test_app_run_unproven.py) run the same through the window and the worker."""
import numpy as np
from conftest import MEDIAN

from studio.app.publish.published import confirmation_text
from studio.engine.contract.package import load_package
from studio.engine.services import trial


def test_a_run_with_no_receipt_is_not_proven_and_says_why(ctx):
    pkg = load_package(MEDIAN)
    x = np.arange(40, dtype=np.float32)[::-1].copy()
    proof = trial.proof_of_run(ctx, pkg, {"x": x}, {"w": 5})
    assert proof == trial.RunProof(proven=False, why="no conformance receipt for this content on this GPU profile")
    assert proof.title() == "not proven: no conformance receipt for this content on this GPU profile"
    assert trial.vouched_kinds(pkg, ctx.device.profile.id, ctx.seal) == set()


def test_the_reference_runs_alone_and_is_never_called_proven(ctx):
    pkg = load_package(MEDIAN)
    x = np.random.default_rng(4).normal(size=33).astype(np.float32)
    out = trial.run_reference(ctx, pkg, inputs={"x": x}, params={"w": 5})
    want = np.array([np.median(x[i:i + 5]) for i in range(33 - 5 + 1)], np.float32)
    assert isinstance(out, trial.TryReport) and np.array_equal(out.outputs["y"], want)
    assert out.proof.proven is False and "reference" in out.proof.why


def test_the_publish_confirmation_names_what_changed():
    head, details = confirmation_text(["published user/demo/windowed_median@1 as public (Apache-2.0)",
                                       "  proof: conformance here, receipt valid", ""])
    assert head.startswith("Published: published user/demo/windowed_median@1 as public")
    assert "Conformance ran again for the new op.toml" in head and details == "proof: conformance here, receipt valid"
    assert confirmation_text([]) == ("Published.", "")
