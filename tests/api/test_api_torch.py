"""scellis.torch (docs/api.md, "PyTorch"): an op as a torch.library custom operator with a fake
implementation from the signature and autograd from the declared backward. opcheck passes for the
shipped differentiable ops tested here; a small training loop gets the gradients the op's own
(passing) gradcheck vouches for; a nondifferentiable op refuses backward() with the engine's
message; a corrupted VJP is rejected (by the receipt gate inside opcheck's autograd test, and
numerically by torch.autograd.gradcheck)."""
import numpy as np
import pytest

import scellis
from api_samples import DOUBLED, SAMPLES, sample
from conftest import BUILTINS

pytestmark = pytest.mark.slow      # importing torch takes seconds: the whole module is the slow lane's
torch = st = None                  # imported by the fixture below, never at collection (the fast lane collects this file)


@pytest.fixture(autouse=True, scope="module")
def _torch():
    global torch, st
    torch = pytest.importorskip("torch")
    import scellis.torch as bridge
    st = bridge


def _args(name):
    xs, params = sample(name)
    return tuple(torch.from_numpy(x).requires_grad_() for x in xs), params


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_opcheck_passes(ctx, name):
    """Every shipped differentiable op (the examples' windowed medians included), and the
    gradients torch computes through it are the declared VJP's (the op's own, f32)."""
    op = scellis.Session(context=ctx).op(name, require_receipt=False)
    f = st.register(op)
    assert st.register(op) is f                                      # once per op
    args, params = _args(name)
    out = torch.library.opcheck(f, args, params)
    assert set(out.values()) == {"SUCCESS"}, out
    y = f(*args, **params)
    (y * torch.arange(y.numel(), dtype=torch.float32).reshape(y.shape)).sum().backward()
    arrays = {t.name: a.detach().numpy() for t, a in zip(op.signature.inputs, args)}
    want = op.vjp(arrays, params, {op.signature.outputs[0].name: np.arange(y.numel(), dtype=np.float32).reshape(tuple(y.shape))})
    for t, a in zip(op.signature.inputs, args):
        assert np.array_equal(a.grad.numpy(), want[t.name]), t.name


def test_the_fake_implementation_gives_the_signatures_shapes(ctx):
    from torch._subclasses.fake_tensor import FakeTensorMode
    op = scellis.Session(context=ctx).op("user/demo/windowed_median@1", require_receipt=False)
    f = st.register(op)
    with FakeTensorMode():
        y = f(torch.empty(100), w=7)
    assert tuple(y.shape) == (94,) and y.dtype == torch.float32     # n - w + 1, nothing ran
    with pytest.raises(scellis.Error, match="w = 8 violates 'odd'|odd"):
        with FakeTensorMode():
            f(torch.empty(100), w=8)
    other = st.register(scellis.Session(context=ctx).op("user/demo/windowed_median@1", require_receipt=False))
    assert other is not f and other._qualname != f._qualname           # each Op keeps its own operator


def test_a_training_loop_gets_the_gradients_gradcheck_vouches_for(ctx):
    s = scellis.Session(context=ctx)
    clip = st.register(s.op("core/signal/clip@1", require_receipt=False))
    mean_op = s.op("core/reduce/mean@1")                           # proven, and its VJP gradchecked, first
    mean = st.register(mean_op)

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = torch.nn.Parameter(torch.full((64,), 0.5))

        def forward(self, x):
            return mean((clip(self.scale * x, lo=-1.0, hi=1.0) - 0.3) ** 2)

    x = torch.linspace(-2.0, 2.0, 64)
    model = Model()
    opt = torch.optim.SGD(model.parameters(), lr=5.0)
    losses = []
    for _ in range(5):
        opt.zero_grad()
        loss = model(x)
        loss.backward()
        p = model.scale.detach().clone().requires_grad_()
        ((torch.clamp(p * x, -1.0, 1.0) - 0.3) ** 2).mean().backward()      # torch's own autograd: the same math
        assert torch.allclose(model.scale.grad, p.grad, rtol=1e-5, atol=1e-7)
        losses.append(loss.item())
        opt.step()
    assert losses[-1] < losses[0]
    assert mean_op.gradcheck().verdict == "pass" and s.gate.gradchecks == 1


def test_a_nondifferentiable_op_refuses_backward_with_the_engines_message(ctx):
    op = scellis.Session(context=ctx).op("core/sparse/spmv@1", require_receipt=False)
    assert not op.differentiable
    f = st.register(op)
    row_ptr, col = torch.tensor([0, 2, 3], dtype=torch.uint32), torch.tensor([0, 2, 1], dtype=torch.uint32)
    val, x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True), torch.tensor([1.0, 10.0, 100.0])
    y = f(row_ptr, col, val, x)
    assert y.tolist() == [201.0, 30.0]                               # the forward runs
    with pytest.raises(scellis.Error, match="core/sparse/spmv@1 is declared nondifferentiable: it has no VJP"):
        y.sum().backward()


def test_a_corrupted_vjp_is_rejected(ctx, pkg_copy):
    """A VJP doubled consistently in the reference and the kernel: conformance (kernel against
    reference) passes, gradcheck does not. Under the receipt rule opcheck's autograd test fails on it;
    without, opcheck (which tests the registration, not the numbers) passes and torch's numerical
    gradcheck rejects it; the control is the true mean, which both pass."""
    bad = pkg_copy(BUILTINS / "mean", "doubled", **{k.replace(".", "__"): v for k, v in DOUBLED.items()})
    s = scellis.Session(context=ctx)
    x = (torch.randn(16, dtype=torch.float32).requires_grad_(),)
    with pytest.raises(Exception, match="no passing gradcheck"):
        torch.library.opcheck(st.register(s.op(bad)), x, {})
    loose = st.register(s.op(bad, require_receipt=False), name="doubled_loose")
    assert set(torch.library.opcheck(loose, x, {}).values()) == {"SUCCESS"}
    kw = dict(eps=1e-2, atol=1e-3, rtol=1e-2, raise_exception=False)
    with pytest.warns(UserWarning):        # float32: torch recommends double, the op is f32
        assert not torch.autograd.gradcheck(loose, x, **kw)
        good = st.register(s.op(BUILTINS / "mean", require_receipt=False))
        assert torch.autograd.gradcheck(good, x, **kw)
