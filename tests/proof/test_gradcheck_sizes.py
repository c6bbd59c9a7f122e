"""Gradcheck over sizes and parameter classes: probes at several n, one past
two workgroups of the op's kernel, and every other dim (a filter's length) at 1, 2, 3 and 4, so a
VJP wrong only for n > 64, or only for filter length 3, fails (studio/engine/proof/gradpoints.py)."""
from pathlib import Path

import pytest

from conftest import copy_package
from studio.engine.contract.package import load_package
from studio.engine.proof.gradcheck import gradcheck

OPS = Path(__file__).parents[1] / "data" / "ops23"
BACKWARD = [('text = "nondifferentiable"', 'text = "vjp x, w: reference(vjp)"\n'
             'subgradient = "none needed: y is linear in x and in w"')]
VJP = '''

def vjp(x, w, dy):
    k, m = w.shape[0], dy.shape[0]
    dx = np.zeros(x.shape[0])
    for j in range(k):
        dx[j:j + m] += w[j] * dy
    dw = np.array([np.dot(dy, x[j:j + m]) for j in range(k)])
    return {"x": dx, "w": dw}
'''
MUTANTS = {
    "wrong only for n > 64": ('    return {"x": dx, "w": dw}', '    return {"x": dx * (1.5 if x.shape[0] > 64 else 1.0), "w": dw}'),
    "wrong only for filter length 3": ('    return {"x": dx, "w": dw}', '    return {"x": dx, "w": -dw if k == 3 else dw}'),
}


def _op(tmp_path, name, edit=None):
    src = tmp_path / f"{name}-src"
    root = copy_package(OPS / "wsum", src, {"op.toml": BACKWARD})
    ref = root / "reference.py"
    ref.write_text(ref.read_text() + VJP.replace(*edit) if edit else ref.read_text() + VJP)
    return copy_package(src, tmp_path / name)


@pytest.mark.slow
def test_the_vjp_is_probed_past_two_workgroups_and_at_every_filter_length(ctx, tmp_path):
    rep = gradcheck(ctx, load_package(_op(tmp_path, "good")))
    assert rep.verdict == "pass", rep.why if hasattr(rep, "why") else rep
    sizes = {tuple(s["shapes"]["x"]) for s in rep.sites}
    lengths = {s["shapes"]["w"][0] for s in rep.sites}
    assert max(n for (n,) in sizes) > 2 * 64 and {1, 2, 3, 4} <= lengths


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_a_vjp_wrong_only_at_some_size_or_length_fails(ctx, tmp_path, name):
    rep = gradcheck(ctx, load_package(_op(tmp_path, "bad", MUTANTS[name])))
    assert rep.verdict == "fail"
