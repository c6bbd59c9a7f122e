"""The learner's device path (docs/learner.md "Owners on a device", docs/assignment-programs.md "The
staged path"): programs run one invocation per slot (update) and per sample x slot (contribution),
bitwise the numpy path on every shipped example; an owner's blocks of the canonical tree as a
fixed-shape device reduction, bitwise the CPU tree and the independent tree; owners on their own
worker's device train to the bits of tests/learner_reference.py and of the CPU path on the owner
counts of test_learner_owners.py, and each record says which path each owner ran. Real wgpu on
lavapipe, real Dask."""
import dataclasses

import numpy as np
import pytest
from learner_reference import bits, independent_run, independent_tree
from test_learner_owners import placements             # the owner counts of the CPU path's tests

from studio.engine.device.device import Device
from studio.engine.errors import StudioError
from studio.engine.learner import combine, device_tree, owner_device
from studio.engine.learner.combine import Block
from studio.engine.learner.evaluate import evaluate
from studio.engine.learner.owner_device import OwnerPath
from studio.engine.learner.program import check_program
from studio.engine.learner.staged import compile_staged, run_staged
from studio.engine.learner.system import load_system
from studio.engine.resources import ROOT

EXAMPLES = ("least_squares_momentum", "logistic_adam", "online_mean", "kmeans_pull", "perceptron")


@pytest.fixture(scope="module")
def device():
    return Device()


def frames(system, rng):
    k, s, m = system.k, system.s, system.m
    c = np.zeros((system.samples.shape[0], 2 * k + s), np.float32)
    c[:, :k], c[:, k:k + s] = rng.standard_normal(k).astype(np.float32), system.samples
    u = rng.standard_normal((1, 2 * k + m + 1)).astype(np.float32)
    u[0, k:k + m] = np.abs(u[0, k:k + m])             # Adam's second moments and beta powers: positive
    u[0, 2 * k + m] = system.rate
    return c, u


@pytest.mark.parametrize("name", EXAMPLES)
def test_the_staged_programs_are_the_numpy_path_bit_for_bit(device, name):
    system = load_system(ROOT / "learners" / name)
    rng = np.random.default_rng(len(name))
    for rule, frame in zip((system.contribution, system.update), frames(system, rng)):
        staged = compile_staged(rule.bound)
        for st in staged.stages:                       # one invocation per row and slot written (a let: per row)
            assert st.points == (1 if st.kind == "let" else st.slots.size)
        got = run_staged(staged, frame.copy(), device=device)
        assert (bits(got) == bits(evaluate(rule.bound, frame))).all()
    if name == "logistic_adam":                        # / and exp, / and sqrt: those statements on the host
        assert "on the host (numpy: /, exp)" in compile_staged(system.contribution.bound).describe()
        assert "on the host (numpy: /, sqrt)" in compile_staged(system.update.bound).describe()
    else:
        assert "host" not in compile_staged(system.contribution.bound).describe()


def test_one_invocation_per_slot_and_per_sample_and_slot(device):
    """The update of 10^5 slots is 10^5 invocations (not one looping over all of them); a
    contribution is one per sample x slot, its let one per sample."""
    lsm = load_system(ROOT / "learners" / "least_squares_momentum")
    k = 100_000
    upd = compile_staged(check_program(lsm.update.program, role="update", k=k, s=k + 1, m=k))
    assert [(st.kind, st.points, st.iterations) for st in upd.stages] == [("assign", k, 0), ("assign", k, 0)]
    con = compile_staged(check_program(lsm.contribution.program, role="contribution", k=k, s=k + 1, m=k))
    let, assign = con.stages
    assert (let.kind, let.points, assign.kind, assign.points) == ("let", 1, "assign", k)
    assert let.unroll == 4 and let.iterations == k // 4 <= 60_000    # the loop cap, by unrolling
    rng = np.random.default_rng(3)
    frame = np.zeros((1, 3 * k + 1), np.float32)
    frame[0] = rng.standard_normal(3 * k + 1).astype(np.float32)
    frame[0, 2 * k + k] = 0.1
    want = evaluate(upd.bound, frame)
    assert (bits(run_staged(upd, frame.copy(), device=device)) == bits(want)).all()


def test_a_reduction_past_the_loop_cap_is_refused_and_a_changed_kernel_is_caught(device):
    lsm = load_system(ROOT / "learners" / "least_squares_momentum")
    bound = check_program(lsm.contribution.program, role="contribution", k=70_000, s=70_001, m=0)
    with pytest.raises(StudioError, match="loop iterations per invocation even unrolled"):
        compile_staged(bound, loop_budget=100)
    system = load_system(ROOT / "learners" / "perceptron")
    frame, _ = frames(system, np.random.default_rng(0))
    staged = compile_staged(system.contribution.bound)
    good = run_staged(staged, frame.copy(), device=device)
    assert (bits(good) == bits(evaluate(system.contribution.bound, frame))).all()
    last = staged.stages[-1]                           # one ulp off in the device's product: caught
    off = dataclasses.replace(last, source=last.source.replace("out[t] = ", "out[t] = 1.0000001f * "))
    bad = run_staged(dataclasses.replace(staged, stages=staged.stages[:-1] + (off,)), frame.copy(), device=device)
    assert (bits(bad) != bits(good)).any()


def test_the_device_tree_is_the_cpu_tree_and_the_independent_tree(device, monkeypatch):
    rng = np.random.default_rng(7)
    for n, k in ((1, 4), (2, 3), (5, 3), (7, 2), (96, 3), (100, 257)):
        c = (rng.standard_normal((n, k)) * 10.0 ** rng.integers(-20, 20, (n, k))).astype(np.float32)
        c[0, 0], c[-1, -1] = np.float32(1e-39), np.float32(-3e-39)      # subnormals kept, not flushed
        blocks = [Block(0, 0, n)] + ([Block(0, 0, n // 2), Block(0, n // 2, n - n // 2)] if n > 1 else [])
        got = device_tree.block_sums(c, blocks, device=device, guard=True)
        assert all((bits(g) == bits(w)).all() for g, w in zip(got, combine.block_sums(c, blocks)))
        assert (bits(got[0]) == bits(independent_tree(c, 0, n))).all()
    tiny = np.array([[1e-39, -2e-39], [2e-39, 1e-39], [-5e-40, 3e-45]], np.float32)   # subnormal sums
    got = device_tree.block_sums(tiny, [Block(0, 0, 3)], device=device, guard=True)[0]
    assert (bits(got) == bits(independent_tree(tiny, 0, 3))).all() and (got != 0).all()    # not flushed
    c = rng.standard_normal((9, 50)).astype(np.float32)              # in column chunks: the same bits
    blocks = [Block(0, 0, 9), Block(0, 2, 5)]
    whole = device_tree.block_sums(c, blocks, device=device)
    monkeypatch.setattr(device_tree, "CHUNK_WORDS", 9 * 7)
    assert all((bits(a) == bits(b)).all() for a, b in zip(whole, device_tree.block_sums(c, blocks, device=device)))
    assert all((bits(a) == bits(b)).all() for a, b in zip(whole, combine.block_sums(c, blocks)))
    levels, roots = device_tree.schedule([Block(0, 0, 7)])
    assert [len(x) for x in levels] == [3, 2, 1] and roots == [(3, 0)]      # (4 pairwise) + ((2) + 1)


def test_a_device_reduction_in_another_order_is_caught(device, monkeypatch):
    """The test's teeth: the device performing the same additions in another shape (left to right,
    split n - 1) gives other bits than the canonical tree, and the comparison sees it."""
    c = np.array([[1e8, 1.0], [1.0, 1e8], [-1e8, -1e8], [1.0, 1.0], [0.5, 3.0]], np.float32)
    want = independent_tree(c, 0, 5)
    assert (bits(device_tree.block_sums(c, [Block(0, 0, 5)], device=device)[0]) == bits(want)).all()
    monkeypatch.setattr(device_tree, "split_point", lambda n: n - 1)
    assert (bits(device_tree.block_sums(c, [Block(0, 0, 5)], device=device)[0]) != bits(want)).any()


def test_the_owner_path_is_chosen_and_auto_falls_back(monkeypatch):
    system = load_system(ROOT / "learners" / "least_squares_momentum")
    assert OwnerPath("cpu", system.contribution, 3, 4).describe == "cpu (numpy)"
    with pytest.raises(StudioError, match="is not a path"):
        OwnerPath("tpu", system.contribution, 3, 4)
    monkeypatch.setattr(owner_device, "DEVICE_CONTEXT", {"error": "RuntimeError: no adapter"})   # this process
    assert OwnerPath("auto", system.contribution, 3, 4).describe == "cpu (numpy) (auto: no device for this " \
                                                                      "owner: RuntimeError: no adapter)"
    with pytest.raises(StudioError, match="no device for this owner"):
        OwnerPath("gpu", system.contribution, 3, 4)


class PlainRule:
    """A contribution that is a rule object, not a program (as a workflow's gradient is)."""
    hash = "plain"

    def contributions(self, params, samples):
        return np.asarray(samples[:, :params.size] - params, np.float32)


def test_a_process_opens_its_device_once_for_all_its_owners(monkeypatch):
    monkeypatch.setattr(owner_device, "DEVICE_CONTEXT", {})              # a fresh process's cache
    system = load_system(ROOT / "learners" / "online_mean")
    a, b = (OwnerPath("gpu", system.contribution, system.k, system.s) for _ in range(2))
    assert a.device is b.device is owner_device.DEVICE_CONTEXT["device"]


def test_a_rule_that_is_not_a_program_stays_on_the_cpu(device, monkeypatch):
    monkeypatch.setattr(owner_device, "DEVICE_CONTEXT", {"device": device})
    assert OwnerPath("auto", PlainRule(), 2, 2).describe.startswith("cpu (numpy) (auto: the device path runs "
                                                                     "contribution programs")
    with pytest.raises(StudioError, match="the device path runs contribution programs"):
        OwnerPath("gpu", PlainRule(), 2, 2)


def test_an_owner_path_on_the_device_gives_the_cpu_block_sums(device, monkeypatch):
    monkeypatch.setattr(owner_device, "DEVICE_CONTEXT", {"device": device})
    for name in EXAMPLES + ("least_squares_bf16",):
        system = load_system(ROOT / "learners" / name)
        path = OwnerPath("gpu", system.contribution, system.k, system.s)
        assert path.describe.startswith("device (llvmpipe")
        root, blocks = combine.plan(system)
        for o, bl in blocks.items():
            if not bl:
                continue
            shard = system.samples[combine.owner_order(system, o)]
            want = combine.block_sums(system.contribution.contributions(system.params, shard), bl, system.precision)
            got = path.block_sums(system.contribution, system.params, shard, bl, system.precision)
            assert all((bits(g) == bits(w)).all() for g, w in zip(got, want)), name


# ------------------------------------------------------------------ owners on Dask, each on its worker's device
@pytest.fixture(scope="module")
def client():
    from studio.engine.learner.owners import start_cluster
    cluster, client = start_cluster(7, memory_limit="512MiB")
    yield client
    client.close()
    cluster.close()


@pytest.mark.slow
@pytest.mark.parametrize("name", EXAMPLES)
def test_owners_on_their_devices_train_to_the_reference_bits(client, name):
    from studio.engine.learner.run import learn
    system = load_system(ROOT / "learners" / name)
    steps = 3
    want_p, want_s = independent_run(system, steps)
    cpu = learn(system, client=client, steps=steps, owner_device="cpu")
    assert (bits(cpu.params) == bits(want_p)).all()
    rng = np.random.default_rng(len(name))
    for label, owners in placements(system.samples.shape[0], rng):
        res = learn(system.with_owners(owners), client=client, steps=steps, owner_device="gpu")
        assert (bits(res.params) == bits(want_p)).all() and (bits(res.state) == bits(want_s)).all(), label
        assert (bits(res.params) == bits(cpu.params)).all(), label
        paths = res.records[-1].paths
        assert len(paths) == len(owners) and all(p.startswith("device (llvmpipe") for p in paths), paths
        assert all(r.agreed for r in res.records)


@pytest.mark.slow
def test_owners_choose_their_path_per_run_and_the_records_say_so(client):
    from studio.engine.learner.run import learn
    system = load_system(ROOT / "learners" / "online_mean")
    auto = learn(system, client=client, steps=2, owner_device="auto")
    cpu = learn(system, client=client, steps=2)
    assert all(p.startswith("device (") for p in auto.records[-1].paths)
    assert cpu.records[-1].paths == ["cpu (numpy)"] * len(system.owners)
    assert (bits(auto.params) == bits(cpu.params)).all()
    with pytest.raises(StudioError, match="is not a path"):
        learn(system, client=client, steps=1, owner_device="fpga")


@pytest.mark.slow
def test_the_command_line_chooses_the_owners_path(capsys):
    """`scellis learn --owner-device`: each owner's path printed before the first step, the same
    final parameter hash as the CPU path; a path that does not exist is a usage error (exit 2)."""
    import re

    from studio.cli import main
    from studio.engine.learner.fingerprint import array_hash
    system = load_system(ROOT / "learners" / "online_mean")
    want, _ = independent_run(system, 2)
    assert main(["learn", "online_mean", "--owners", "2", "--steps", "2", "--owner-device", "gpu"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^owner 0: device \(llvmpipe", out, re.M) and re.search(r"^owner 1: device \(", out, re.M)
    assert re.search(r"final parameter hash ([0-9a-f]{64})", out).group(1) == array_hash(want)
    assert main(["learn", "online_mean", "--steps", "1"]) == 0
    assert "owner 0: cpu (numpy)" in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:
        main(["learn", "online_mean", "--owner-device", "fpga"])
    assert e.value.code == 2
