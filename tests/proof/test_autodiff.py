"""Reverse mode over op calls and the differentiability ladder: composite ops derive their
backward, declared VJPs must have passed gradcheck, nondifferentiable ops are refused by name."""
import re

import numpy as np
import pytest
from conftest import BUILTINS, EXAMPLES, MEDIAN, _authored, copy_package
from proof_store import proven

from studio.engine.contract.catalog import Catalog
from studio.engine.contract.package import load_package
from studio.engine.errors import StudioError
from studio.engine.grad.composite import memory_plan
from studio.engine.grad.run import run_op
from studio.engine.grad.vjp import forward64, reference_vjp
from studio.engine.proof.gradcheck import gradcheck
from studio.engine.proof.receipts import write_gradcheck_receipt as write_receipt
from studio.engine.train.autodiff import Tape

COMPOSITE = EXAMPLES / "windowed_median_composite"


@pytest.fixture(scope="module")
def catalog():
    return Catalog.default()


@pytest.fixture(scope="module")
def checked(module_ctx, catalog):
    """Gradchecks of the ops the pipelines use (once per module: they take seconds)."""
    out = []
    for op in ("core/signal/fir@1", "user/demo/windowed_median@1", "core/reduce/mse@1", "core/signal/affine@1",
               "core/shape/unfold@1", "core/reduce/median_rows@1"):
        pkg = catalog.resolve(op)
        rep = gradcheck(module_ctx, pkg)
        assert rep.verdict == "pass"
        out.append((pkg, rep))
    return out


@pytest.fixture
def ledger(ctx, checked, tmp_path, proof_store):
    """Their receipts, sealed with this test's user key and kept outside the repository; and the
    conformance receipts of the device VJPs in this test's user folder, from the run's one proof of
    each (proof_store.py), so the tape finds them valid instead of proving each again here."""
    root = tmp_path / "gradcheck"
    for pkg, rep in checked:
        write_receipt(pkg, rep, root, seal=ctx.seal)
        if pkg.contract.backward_kernel is not None:
            assert proven(proof_store, ctx, pkg)["verdict"] == "pass", pkg.id
    return root


@pytest.mark.slow
def test_composite_median_matches_the_declared_one_in_value_and_gradient(ctx, device, catalog, ledger):
    rng = np.random.default_rng(5)
    x = rng.standard_normal(2001).astype(np.float32)
    x[::17] = x[1::17]                                        # ties too
    dy = rng.standard_normal(2001 - 7 + 1).astype(np.float32)
    got = {}
    for op in ("user/demo/windowed_median@1", "user/demo/windowed_median_composite@1"):
        tape = Tape(ctx, receipts=ledger)
        xv = tape.leaf(x, trainable=True)
        y = tape.call(op, {"x": xv}, {"w": 7})["y"]
        got[op] = (y.array, tape.backward(y, seed=dy)[xv], [n.pkg.id for n in tape.nodes],
                   [n.vjp_place for n in tape.nodes])
    (y1, g1, ops1, places1), (y2, g2, ops2, places2) = got.values()
    assert np.array_equal(y1.view(np.uint32), y2.view(np.uint32))
    assert np.array_equal(g1.view(np.uint32), g2.view(np.uint32))
    assert ops1 == ["user/demo/windowed_median@1"]
    assert ops2 == ["core/shape/unfold@1", "core/reduce/median_rows@1"]          # the composite is its steps
    assert places1 == ["device"] and places2 == ["device", "device"]
    # and on the reference path, in f64
    pkg_d, pkg_c = load_package(MEDIAN), load_package(COMPOSITE)
    x64 = {"x": x.astype(np.float64)}
    assert np.array_equal(forward64(ctx, pkg_d, x64, {"w": 7})["y"], forward64(ctx, pkg_c, x64, {"w": 7})["y"])
    np.testing.assert_array_equal(reference_vjp(ctx, pkg_d, x64, {"w": 7}, {"dy": dy})["x"],
                                  reference_vjp(ctx, pkg_c, x64, {"w": 7}, {"dy": dy})["x"])


def test_the_composite_needs_about_w_times_the_memory(ctx, catalog):
    n, w = 1_000_000, 7
    plan = memory_plan(load_package(COMPOSITE), {"x": (n,)}, {"w": w}, catalog=ctx.catalog)
    declared = load_package(MEDIAN).contract.signature
    env = declared.resolve({"x": (n,)}, {"w": w})
    roles = {name: (role, b) for name, role, _, b in plan.tensors}
    m = n - w + 1
    assert roles["u"] == ("intermediate", 4 * m * w)                # the n x w intermediate: w times the input
    assert roles["u"][1] / roles["x"][1] == pytest.approx(w, rel=1e-4)
    declared_out = 4 * m
    assert plan.allocated == declared_out * (w + 1)                  # allocates w + 1 times what the op does
    assert plan.total / declared.memory_bytes(env) == pytest.approx((w + 2) / 2, rel=1e-4)
    assert plan.lines()[0].startswith(f"memory  user/demo/windowed_median_composite@1: {plan.total} bytes")


def test_a_composite_runs_through_run_op_and_its_budget(ctx, device, catalog):
    pkg = load_package(COMPOSITE)
    x = np.random.default_rng(1).standard_normal(100).astype(np.float32)
    y = run_op(ctx, pkg, {"x": x}, {"w": 5})["y"]
    assert np.array_equal(y, run_op(ctx, load_package(MEDIAN), {"x": x}, {"w": 5})["y"])
    with pytest.raises(StudioError, match="materializes"):
        run_op(ctx, pkg, {"x": x}, {"w": 5}, budget_bytes=2000)
    run_op(ctx, load_package(MEDIAN), {"x": x}, {"w": 5}, budget_bytes=2000)   # the declared op fits


@pytest.mark.slow
def test_training_through_the_median_lowers_the_loss(ctx, device, catalog, ledger):
    """The story's pipeline: spiky signal -> trainable FIR -> windowed median -> mse; every VJP on the device."""
    n, w = 4000, 7
    want = np.array([0.1, 0.3, 0.2, 0.3, 0.1], np.float32)
    taps = np.array([0.5, 0.0, 0.0, 0.0, 0.1], np.float32)
    losses = []
    for _ in range(5):
        tape = Tape(ctx, receipts=ledger)
        x = tape.call("core/signal/spiky_signal@1", {}, {"n": n, "seed": 3})["y"]
        target = tape.call("user/demo/windowed_median@1", {"x": tape.call("core/signal/fir@1", {"x": x, "taps": want})["y"]},
                           {"w": w})["y"]
        t = tape.leaf(taps, name="taps", trainable=True)
        y = tape.call("user/demo/windowed_median@1", {"x": tape.call("core/signal/fir@1", {"x": x, "taps": t})["y"]},
                      {"w": w})["y"]
        loss = tape.call("core/reduce/mse@1", {"a": y, "b": target})["y"]
        g = tape.backward(loss)[t]
        losses.append(float(loss.array[0]))
        taps = taps - 0.2 * g
    assert losses[-1] < 0.05 * losses[0] and losses == sorted(losses, reverse=True)
    assert all(n.vjp_place == "device" for n in tape.nodes if n.vjp_place)
    lines = tape.ladder(loss)
    assert lines[0].startswith("core/signal/fir@1: declared vjp, gradcheck passed, runs on the device")
    assert "subgradient: at ties the cotangent goes to the element the forward selected" in lines[1]


@pytest.mark.slow
def test_gradients_agree_with_the_reference_path(ctx, device, catalog, ledger):
    rng = np.random.default_rng(2)
    x, taps = rng.standard_normal(300).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    grads = {}
    for place in ("device", "reference"):
        tape = Tape(ctx, receipts=ledger, place=place)
        xv, tv = tape.leaf(x, trainable=True), tape.leaf(taps, trainable=True)
        y = tape.call("core/signal/affine@1", {"x": tape.call("core/signal/fir@1", {"x": xv, "taps": tv})["y"]},
                      {"scale": 1.5, "offset": 0.25})["y"]
        out = tape.backward(y, seed=np.ones(y.shape, np.float32))
        grads[place] = (out[xv], out[tv])
        assert {n.vjp_place for n in tape.nodes} == {place}
    for a, b in zip(grads["device"], grads["reference"]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def _without_backward_kernel(src, dst, text: str, edits=()):
    """The package's [backward] with `text` and without its device kernel's keys (invocations,
    tolerance; the bindings parked under a key nothing reads)."""
    copy_package(src, dst, {"op.toml": [
        ("text = 'vjp x: reference(vjp) on device(\"backward.wgsl\")'", f"text = {text}"), *edits]})
    p = dst / "op.toml"
    head, back = p.read_text().split("[backward]", 1)
    back = re.sub(r'^(invocations|tolerance) = "[^"\n]*"\n', "", back, flags=re.MULTILINE).replace('bindings = """', 'unused = """')
    p.write_text(head + "[backward]" + back)
    _authored(dst)
    return dst


def _nondifferentiable_round(root):
    return load_package(_without_backward_kernel(BUILTINS / "affine", root, '"nondifferentiable"',
                                                 [('id = "core/signal/affine@1"', 'id = "user/test/quantize@1"')]))


@pytest.mark.slow
def test_training_through_a_nondifferentiable_op_is_refused_naming_it(ctx, device, catalog, ledger, tmp_path):
    quantize = _nondifferentiable_round(tmp_path / "quantize")
    tape = Tape(ctx, receipts=ledger)
    t = tape.leaf(np.ones(8, np.float32), trainable=True)
    q = tape.call(quantize, {"x": tape.call("core/signal/affine@1", {"x": t}, {"scale": 2.0, "offset": 0.0})["y"]},
                  {"scale": 1.0, "offset": 0.5})["y"]
    loss = tape.call("core/reduce/mse@1", {"a": q, "b": np.zeros(8, np.float32)})["y"]
    with pytest.raises(StudioError, match=r"user/test/quantize@1 is declared nondifferentiable: training cannot pass"):
        tape.backward(loss)
    assert all(n.vjp_place is None for n in tape.nodes)                 # refused before anything ran backward


@pytest.mark.slow
def test_a_nondifferentiable_source_outside_the_gradient_path_is_fine(ctx, device, catalog, ledger):
    tape = Tape(ctx, receipts=ledger)
    x = tape.call("core/signal/spiky_signal@1", {}, {"n": 64, "seed": 1})["y"]     # nothing flows through it
    t = tape.leaf(np.full(3, 0.3, np.float32), trainable=True)
    y = tape.call("core/signal/fir@1", {"x": x, "taps": t})["y"]
    assert tape.backward(tape.call("core/reduce/mse@1", {"a": y, "b": np.zeros(62, np.float32)})["y"])[t].shape == (3,)


def test_an_unchecked_declared_vjp_is_refused(ctx, device, catalog, tmp_path):
    tape = Tape(ctx, receipts=tmp_path / "empty")
    t = tape.leaf(np.ones(9, np.float32), trainable=True)
    y = tape.call("user/demo/windowed_median@1", {"x": t}, {"w": 3})["y"]
    with pytest.raises(StudioError, match=r"user/demo/windowed_median@1: its declared VJP has not been checked") as e:
        tape.backward(y)
    assert "scellis gradcheck" in e.value.hint


@pytest.mark.slow
def test_a_failing_or_stale_gradcheck_is_refused(ctx, device, catalog, pkg_copy, tmp_path):
    root = pkg_copy(reference__py=[("np.add.at(dx, np.arange(k.shape[0]) + k, dy)",
                                    "np.add.at(dx, np.arange(k.shape[0]) + k, 2 * dy)")])
    bad = load_package(root)
    write_receipt(bad, gradcheck(ctx, bad, {"w": 3}))
    tape = Tape(ctx)
    t = tape.leaf(np.ones(9, np.float32), trainable=True)
    with pytest.raises(StudioError, match="its declared VJP failed gradcheck"):
        tape.backward(tape.call(bad, {"x": t}, {"w": 3})["y"])
    fixed = copy_package(MEDIAN, tmp_path / "fixed")
    write_receipt(load_package(fixed), gradcheck(ctx, load_package(fixed), {"w": 3}))
    with open(fixed / "reference.py", "a") as f:
        f.write("\n# changed after the check\n")
    _authored(fixed)
    tape = Tape(ctx)
    with pytest.raises(StudioError, match="has not been checked"):
        tape.backward(tape.call(load_package(fixed), {"x": tape.leaf(np.ones(9), trainable=True)}, {"w": 3})["y"])


def _line_of(root, start: str) -> int:
    return next(n for n, raw in enumerate((root / "op.toml").read_text().splitlines(), 1) if raw.startswith(start))


def test_composition_errors_point_at_the_step(ctx, tmp_path, catalog):
    bad = copy_package(COMPOSITE, tmp_path / "syntax", {"op.toml": [("(x; w = w)", "(x; w = )")]})
    with pytest.raises(StudioError) as e:
        load_package(bad)
    at = (_line_of(bad, "u = core/shape/unfold@1"), len("u = core/shape/unfold@1(x; w = ") + 1)
    assert (e.value.file.endswith("op.toml"), (e.value.line, e.value.col)) == (True, at), e.value.format()
    from studio.engine.proof.checker import check_package
    for old, new, needle in [
        ("y = core/reduce/median_rows@1(u)", "y = core/reduce/median_rowz@1(u)", "no op 'core/reduce/median_rowz@1'"),
        ("y = core/reduce/median_rows@1(u)", "y = core/reduce/median_rows@1(v)", "'v' is not an input"),
        ("u = core/shape/unfold@1(x; w = w)", "u = core/shape/unfold@1(x)", "needs param(s) w"),
        ("y = core/reduce/median_rows@1(u)", "z = core/reduce/median_rows@1(u)", "no step produces the output 'y'"),
    ]:
        root = copy_package(COMPOSITE, tmp_path / f"c{abs(hash(new))}", {"op.toml": [(old, new)]})
        rep = check_package(ctx, load_package(root), compile_kernel=False)
        assert not rep.ok and needle in rep.errors[0].message, rep.errors[0].format()
        e = rep.errors[0]
        assert (e.file.endswith("op.toml"), e.line, e.col, e.field) == (True, _line_of(root, new[:2]), 1,
                                                                       "backward.text"), e.format()


def test_composite_backward_needs_its_steps(tmp_path):
    root = _without_backward_kernel(MEDIAN, tmp_path / "m", '"composite"')
    with pytest.raises(StudioError, match=r"'composite' without steps") as e:
        load_package(root)
    assert (e.value.line, e.value.col) == (_line_of(root, 'text = "composite"'), len('text = "') + 1)
    assert "u = core/shape/unfold@1(x; w = w)" in e.value.hint


def test_an_old_composite_section_is_refused(tmp_path):
    root = copy_package(COMPOSITE, tmp_path / "old", {"op.toml": [
        ('[backward]\ntext = """\ncomposite\nu = core/shape/unfold@1(x; w = w)\ny = core/reduce/median_rows@1(u)\n"""',
         '[composite]\nsteps = """\nu = core/shape/unfold@1(x; w = w)\ny = core/reduce/median_rows@1(u)\n"""\n\n'
         '[backward]\ntext = "composite"')]})
    with pytest.raises(StudioError, match=r"a \[composite\] section") as e:
        load_package(root)
    assert (e.value.line, e.value.col, e.value.field) == (_line_of(root, "[composite]"), 1, "composite")
    assert "after 'composite'" in e.value.message
