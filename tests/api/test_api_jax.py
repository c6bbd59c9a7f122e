"""scellis.jax (docs/api.md, "JAX"): an op as jax.custom_vjp over jax.pure_callback, shapes from the
signature. check_grads (reverse mode) passes for shipped differentiable ops, jax.jit works around
it, a corrupted VJP fails check_grads, and a nondifferentiable op refuses a gradient with the
engine's message."""
import numpy as np
import pytest

import scellis
from api_samples import DOUBLED, SAMPLES, sample
from conftest import BUILTINS

pytestmark = pytest.mark.slow      # importing jax takes seconds: the whole module is the slow lane's
jax = jnp = check_grads = sj = None    # imported by the fixture below, never at collection


@pytest.fixture(autouse=True, scope="module")
def _jax():
    global jax, jnp, check_grads, sj
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp_
    from jax.test_util import check_grads as check_grads_

    import scellis.jax as bridge
    jnp, check_grads, sj = jnp_, check_grads_, bridge

TOL = dict(order=1, modes=["rev"], eps=1e-2, atol=1e-2, rtol=1e-2)     # an f32 op: f32 finite differences


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_check_grads_passes_and_jit_works(ctx, name):
    """Every shipped differentiable op (the examples' windowed medians included)."""
    op = scellis.Session(context=ctx).op(name, require_receipt=False)
    f = sj.wrap(op)
    arrays, params = sample(name)
    def g(*a):
        return f(*a, **params)
    xs = [jnp.asarray(a) for a in arrays]
    eager = g(*xs)
    jitted = jax.jit(g)(*xs)
    assert np.array_equal(np.asarray(eager), np.asarray(jitted))
    assert jax.jit(g).lower(*xs) is not None                      # traced from the signature's shapes
    check_grads(g, xs, **TOL)


def test_a_corrupted_vjp_fails_check_grads(ctx, pkg_copy):
    bad = pkg_copy(BUILTINS / "mean", "doubled", **{k.replace(".", "__"): v for k, v in DOUBLED.items()})
    f = sj.wrap(scellis.Session(context=ctx).op(bad, require_receipt=False))
    xs = [jnp.asarray(np.linspace(-1, 1, 16, dtype=np.float32))]
    with pytest.raises(AssertionError):
        check_grads(f, xs, **TOL)
    assert float(jax.grad(lambda x: f(x)[0])(xs[0])[0]) == pytest.approx(2 / 16)      # doubled: 2/n, not 1/n


def test_a_nondifferentiable_op_refuses_a_gradient(ctx):
    f = sj.wrap(scellis.Session(context=ctx).op("core/sparse/spmv@1", require_receipt=False))
    row_ptr, col = jnp.asarray(np.array([0, 2, 3], np.uint32)), jnp.asarray(np.array([0, 2, 1], np.uint32))
    x = jnp.asarray(np.array([1.0, 10.0, 100.0], np.float32))
    val = jnp.asarray(np.array([1.0, 2.0, 3.0], np.float32))
    assert f(row_ptr, col, val, x).tolist() == [201.0, 30.0]
    with pytest.raises(scellis.Error, match="is declared nondifferentiable: it has no VJP"):
        jax.grad(lambda v: f(row_ptr, col, v, x).sum())(val)
