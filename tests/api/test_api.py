"""The public API (scellis/, docs/api.md): an op as a Python callable down `scellis run`'s path, with
the CLI's messages, the receipt rule of `run --require-receipt` asked once per content and GPU
profile, device arrays that move once each way, and the typed reports."""
import numpy as np
import pytest

import scellis
from studio.engine.errors import StudioError
from studio.engine.services import actions

MEAN, CLIP = "core/reduce/mean@1", "core/signal/clip@1"
X = np.random.default_rng(3).normal(size=1000).astype(np.float32) * 3


@pytest.fixture(scope="module")
def proven(module_ctx):
    """A session whose mean is proven once (conformance here, about 2 s): the module's tests share it."""
    s = scellis.Session(context=module_ctx)
    mean = s.op(MEAN)
    first = mean(X)
    return s, mean, first


def test_a_call_is_scellis_run_bit_for_bit(ctx):
    clip = scellis.Session(context=ctx).op(CLIP, require_receipt=False)
    y = clip(X, lo=-1.0, hi=1.0)
    assert y.dtype == np.float32 and np.array_equal(y, np.clip(X, np.float32(-1), np.float32(1)))
    run = actions.run(ctx, actions.resolve(ctx, CLIP), inputs={"x": X}, params={"lo": -1.0, "hi": 1.0})["y"]
    assert np.array_equal(y, run)
    assert np.array_equal(clip(x=X, lo=-1.0, hi=1.0), y)          # the input by name


@pytest.mark.parametrize("name, args, kwargs", [
    (CLIP, (X.astype(np.complex64),), {"lo": -1.0, "hi": 1.0}),     # a dtype the signature does not admit
    (CLIP, (X,), {"lo": -1.0}),                                     # a missing parameter
    (CLIP, (X,), {"lo": 1.0, "hi": -1.0}),                          # a relation (lo <= hi) violated
    (CLIP, (X,), {"lo": -1.0, "hi": 1.0, "w": 3}),                  # a parameter the signature does not have
    (CLIP, (X.reshape(10, 100),), {"lo": -1.0, "hi": 1.0}),         # a shape of the wrong rank
    (MEAN, (np.where(np.arange(1000) == 7, np.inf, X).astype(np.float32),), {}),   # outside the input's domain
])
def test_refusals_carry_the_clis_messages(ctx, name, args, kwargs):
    """Each bad call is refused before anything runs, with exactly the message `scellis run` (the use
    case it calls) gives for the same inputs and parameters."""
    op = scellis.Session(context=ctx).op(name, require_receipt=False)
    with pytest.raises(scellis.Error) as ours:
        op(*args, **kwargs)
    with pytest.raises(StudioError) as cli:
        actions.run(ctx, actions.resolve(ctx, name), inputs={"x": args[0]}, params=kwargs)
    assert ours.value.format() == cli.value.format()


def test_positional_inputs_are_counted(ctx):
    clip = scellis.Session(context=ctx).op(CLIP, require_receipt=False)
    with pytest.raises(scellis.Error, match=r"core/signal/clip@1 takes 1 input\(s\); got 2"):
        clip(X, X, lo=-1.0, hi=1.0)


@pytest.mark.slow
def test_a_proven_op_verifies_its_receipt_once_per_session(proven, module_ctx):
    s, mean, first = proven
    assert first[0] == pytest.approx(X.mean(), rel=1e-5)
    before = s.gate.verifications
    for _ in range(3):
        assert np.array_equal(mean(X), first)
    assert s.gate.verifications == before == 1                   # no re-verification on later calls
    assert mean.receipt.status == "valid" and mean.receipt.ok
    mean(X[:500])                                                # another geometry: the rule is asked again
    assert s.gate.verifications == 2
    other = scellis.Session(context=module_ctx)                  # the control: another session asks again
    other.op(MEAN)(X)
    assert other.gate.verifications == 1


@pytest.mark.slow
def test_a_failing_kernel_refuses_the_call_and_fails_its_proof(ctx, pkg_copy):
    from conftest import BUILTINS
    bad = pkg_copy(BUILTINS / "mean", "bad_mean", forward__wgsl=[("y[0] = acc[0] / f32(p.n);",
                                                                   "y[0] = acc[0] / f32(p.n) * 1.5;")])
    s = scellis.Session(context=ctx)
    op = s.op(bad)
    with pytest.raises(scellis.Error) as e:
        op(X)
    assert "fails conformance on this GPU profile" in e.value.message and e.value.field == actions.PROOF_FAILED
    assert op.receipt.status == "failed" and not op.receipt.ok
    assert s.op(bad, require_receipt=False)(X)[0] == pytest.approx(X.mean() * 1.5, rel=1e-5)   # unproven: runs
    rep = op.prove()
    assert rep.verdict == "fail" and not rep.ok and rep.receipt is None
    assert any("first failure" in ln for ln in rep.lines())


@pytest.mark.slow
def test_the_reports_are_the_clis(proven):
    s, mean, _ = proven
    rep = mean.prove()
    assert rep.ok and rep.receipt and rep.lines()[:-1] == actions.report_lines(rep.report)
    g = mean.gradcheck()
    assert g.verdict == "pass" and g.lines()[:len(g.report.lines())] == g.report.lines()
    assert any("REJECTED" in ln for ln in g.lines())             # its negative controls ran
    card = mean.card()
    assert MEAN in card.text and card._repr_html_().lstrip().startswith("<")
    assert "valid" in str(mean.receipt)


def test_device_arrays_move_once_each_way(ctx):
    s = scellis.Session(context=ctx)
    clip, mean = s.op(CLIP, require_receipt=False), s.op(MEAN, require_receipt=False)
    a = scellis.device_array(X)
    y = mean(clip(clip(a, lo=-2.0, hi=2.0), lo=-1.0, hi=1.0))
    assert isinstance(y, scellis.DeviceArray) and y.on_device and y.shape == (1,)
    assert s.transfers == {"uploads": 1, "readbacks": 0}
    host = mean(clip(clip(X, lo=-2.0, hi=2.0), lo=-1.0, hi=1.0))   # the same chain through the host
    assert np.array_equal(y.numpy(), host) and np.array_equal(np.asarray(y), host)
    assert s.transfers == {"uploads": 1, "readbacks": 1}
    clip(a, lo=0.0, hi=1.0)                                           # `a` is on the device already
    assert s.transfers["uploads"] == 1


def test_a_device_array_stays_with_its_session(ctx):
    """The control: a tensor on one session's device is refused by another session's op, by name."""
    s, t = scellis.Session(context=ctx), scellis.Session(context=ctx)
    y = s.op(CLIP, require_receipt=False)(scellis.device_array(X), lo=-1.0, hi=1.0)
    with pytest.raises(scellis.Error, match="another session's device"):
        t.op(MEAN, require_receipt=False)(y)


def test_device_calls_judge_shapes_and_dtypes(ctx):
    s = scellis.Session(context=ctx)
    clip = s.op(CLIP, require_receipt=False)
    with pytest.raises(scellis.Error, match="lo = 1.0 violates 'lo <= hi'"):
        clip(scellis.device_array(X), lo=1.0, hi=-1.0)
    with pytest.raises(scellis.Error, match="not finite"):
        s.op(MEAN, require_receipt=False)(scellis.device_array(np.full(8, np.inf, np.float32)))
    assert s.transfers["uploads"] == 0          # refused before anything moved
