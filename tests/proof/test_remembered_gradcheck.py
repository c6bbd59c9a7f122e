"""A gradcheck is remembered by what it depends on (studio/engine/services/verdicts.py): the
reference's code hash, the contract and the settings. A kernel edit gets the remembered report,
re-addressed to the edited package; a reference edit, a contract edit or other settings run it
again. The runner here is a plain function counting its calls: what is under test is the memory."""
import dataclasses

from conftest import MEDIAN

from studio.engine.contract.package import load_package
from studio.engine.services.verdicts import gradcheck_key, remembered_gradcheck


@dataclasses.dataclass(frozen=True)
class Report:
    op: str
    hash: str
    verdict: str


def test_a_kernel_edit_reuses_the_report_and_a_reference_edit_runs_again(ctx, pkg_copy):
    runs = []

    def run(ctx, pkg, params, **settings):
        runs.append(pkg.hash)
        return Report(pkg.id, pkg.hash, "pass")

    first = load_package(pkg_copy(name="a"))
    kernel = load_package(pkg_copy(name="b", forward__wgsl=[("let", "let  ")]))      # WGSL only
    reference = load_package(pkg_copy(name="c", reference__py=[("import", "import math\nimport")]))
    settings = dict(params={"w": 5}, h=1e-3, seed=0, tolerance=None)

    assert remembered_gradcheck(ctx, first, run, **dict(settings)).hash == first.hash
    again = remembered_gradcheck(ctx, kernel, run, **dict(settings))
    assert runs == [first.hash] and again.hash == kernel.hash != first.hash          # re-addressed, not re-run
    remembered_gradcheck(ctx, reference, run, **dict(settings))
    remembered_gradcheck(ctx, first, run, **dict(settings, seed=1))
    assert runs == [first.hash, reference.hash, first.hash]                         # the control: each runs


def test_a_composite_is_never_remembered(ctx):
    composite = ctx.catalog.resolve("user/demo/windowed_median_composite@1")
    assert gradcheck_key(ctx, composite, params={"w": 5}) is None
    assert gradcheck_key(ctx, load_package(MEDIAN), params={"w": 5}) is not None
