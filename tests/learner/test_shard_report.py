"""The sharding report on real data (studio/engine/sharding/report.py; docs/bf16.md): the six bf16
node kinds of the shipped workflow, each run on the whole batch and on R shards on the device.
Per-example nodes match their shards bit for bit; the bf16 weight gradients differ from the
whole-batch node by a reported, non-zero amount; at rnd = id that difference is exactly zero.
Negative controls: a per-example op that looks at another example, and an unproven op."""
import contextlib
import json
import shutil

import pytest
from proof_store import proven as proven_once
from conftest import BUILTINS, REPO, copy_package

from studio.engine.contract.package import load_package
from studio.engine.errors import StudioError
from studio.engine.proof.receipts import judge_receipts, receipt_dir, summarize
from studio.engine.sharding.kinds import EXACT, ROUNDED
from studio.engine.sharding.report import report_lines, shard_report

pytestmark = pytest.mark.slow           # proves six bf16 ops for the module (minutes on 2 cores): not in the fast lane

SIX = ["conv1d_bf16", "conv1d_bf16_strided", "conv1d_bf16_input_vjp", "conv1d_bf16_input_vjp_strided",
       "conv1d_bf16_weight_grad", "conv1d_bf16_weight_grad_strided"]
SHIPPED = REPO / "resources" / "workflows" / "bf16_conv.toml"


@pytest.fixture(scope="module")
def workflow_root(tmp_path_factory):
    """The folder the shipped workflow is copied into, beside copies of its six ops."""
    root = tmp_path_factory.mktemp("bf16wf")
    for name in SIX:
        shutil.copytree(BUILTINS / name, root / "ops" / name, ignore=shutil.ignore_patterns("receipts", "__pycache__"))
    return root


def earn_receipt(ctx, root, name, store):
    """The conformance of the copy of op ``name`` on this machine's device (run here, or by the test
    of the run that proved the builtin first: proof_store.py), its receipt written here."""
    dst = root / "ops" / name
    ctx.trust.trust(load_package(dst))
    pkg = load_package(dst)
    entry = proven_once(store, ctx, pkg)
    assert entry["verdict"] == "pass", "\n".join(entry["lines"])
    return pkg


@pytest.mark.parametrize("name", SIX)
def test_each_op_of_the_workflow_earns_its_receipt_here(module_ctx, workflow_root, name, proof_store):
    """The six proofs the report needs, one test each (each op's whole corpus, here or in the test of
    the run that proved the builtin first), before the report's tests: the module's fixture below
    then finds the receipts valid here and proves nothing itself."""
    pkg = earn_receipt(module_ctx, workflow_root, name, proof_store)
    found = judge_receipts(pkg, module_ctx.device.profile.id, module_ctx.seal, corpora=module_ctx.corpora)
    assert summarize(found) == "valid", [v.problems for _, v in found]


@pytest.fixture(scope="module")
def proven(module_ctx, workflow_root, proof_store):
    """The shipped workflow beside copies of its six ops, each with a receipt earned here (by the
    tests above, or now for those that did not run: a selection of one test)."""
    text = SHIPPED.read_text()
    for name in SIX:
        pkg = load_package(workflow_root / "ops" / name)
        if summarize(judge_receipts(pkg, module_ctx.device.profile.id, module_ctx.seal,
                                    corpora=module_ctx.corpora)) != "valid":
            earn_receipt(module_ctx, workflow_root, name, proof_store)
        text = text.replace(f'op = "core/nn/{name}@1"', f'op = "./ops/{name}"')
    shutil.copytree(SHIPPED.parent / "bf16_conv", workflow_root / "bf16_conv")
    (workflow_root / "bf16_conv.toml").write_text(text)
    return workflow_root


@contextlib.contextmanager
def unproven(ctx, op_dir):
    """The op's receipts (kept in the user folder by content hash) set aside for the block."""
    d = receipt_dir(load_package(op_dir), ctx.seal)
    kept = d.with_name(d.name + ".kept")
    d.rename(kept)
    try:
        yield
    finally:
        shutil.rmtree(d, ignore_errors=True)
        kept.rename(d)


def nodes(rep):
    return {n.name: n for n in rep.nodes}


@pytest.mark.slow
@pytest.mark.parametrize("replicas", [2, 3, 4])
def test_the_six_kinds_classified_and_measured(module_ctx, proven, replicas):
    rep = shard_report(module_ctx, proven / "bf16_conv.toml", replicas)
    print("\n".join(report_lines(rep)))
    by = nodes(rep)
    for name in ("conv", "conv_s2", "dx", "dx_s2"):
        n = by[name]
        assert n.kind.label == EXACT and n.verified
        (out,) = n.outputs.values()
        assert out["replica_equals_shard"] == [True] * replicas
        assert out["difference"]["max"] == 0.0 and out["difference"]["nonzero"] == 0
    for name in ("dw", "dw_s2"):
        n = by[name]
        assert n.kind.label == ROUNDED and n.verified
        out = n.outputs["dw"]
        assert out["den_f32"]["max"] == 0.0 and out["den_f32"]["nonzero"] == 0     # rnd = id: zero, exactly
        assert out["den"]["nonzero"] > 0 and out["device"]["nonzero"] > 0          # bf16: not zero
        assert 0 < out["device"]["mean_ulps"] < out["device"]["max_ulps"]
        assert 0 < out["device"]["max_rel"] < 1
    assert rep.ok


def test_on_one_replica_nothing_differs(module_ctx, proven):
    rep = shard_report(module_ctx, proven / "bf16_conv.toml", 1)
    for n in rep.nodes:
        for out in n.outputs.values():
            for key in ("difference", "device", "den", "den_f32"):
                if key in out:
                    assert out[key]["max"] == 0.0
    assert rep.warnings == []


def test_a_replica_count_that_is_no_power_of_two_warns_and_names_the_nodes(module_ctx, proven):
    rep = shard_report(module_ctx, proven / "bf16_conv.toml", 3)
    (w,) = rep.warnings
    assert "3 replicas is not a power of two" in w and "node(s) dx, dx_s2, dw, dw_s2 that the scaled" in w
    assert "conv" not in w and "LEARNER" not in w          # forward nodes carry no cotangent
    assert nodes(rep)["conv"].divisor == {} and nodes(rep)["dw"].divisor["dw"]["elements"] == 72
    fails = nodes(rep)["dx"].divisor["dx"]
    assert fails["scale"] == 3 and 0 < fails["fails"] <= fails["elements"]
    assert shard_report(module_ctx, proven / "bf16_conv.toml", 4).warnings == []
    assert nodes(shard_report(module_ctx, proven / "bf16_conv.toml", 2))["dx"].divisor == {}


def test_a_batch_that_does_not_split_is_refused(module_ctx, proven):
    with pytest.raises(StudioError, match="does not split into 5 equal shards"):
        shard_report(module_ctx, proven / "bf16_conv.toml", 5)


def test_an_unproven_op_is_refused(module_ctx, proven, tmp_path):
    shutil.copytree(proven, tmp_path / "wf")
    with unproven(module_ctx, tmp_path / "wf" / "ops" / "conv1d_bf16"), \
            pytest.raises(StudioError, match="no valid conformance receipt"):
        shard_report(module_ctx, tmp_path / "wf" / "bf16_conv.toml", 2)


def test_a_per_example_op_that_reads_another_example_is_caught(module_ctx, proven, tmp_path):
    """It declares per_example, yet adds example 0's first sample to every output: on shard r its
    example 0 is another one than the whole batch's, so the replicas differ from their shards."""
    shutil.copytree(proven, tmp_path / "wf")
    bad = tmp_path / "wf" / "ops" / "conv1d_bf16"
    shutil.rmtree(bad)
    copy_package(BUILTINS / "conv1d_bf16", bad, {"forward.wgsl": [
        ("y[i] = bf16_round(acc);", "y[i] = bf16_round(acc + x[0]);")]})
    module_ctx.trust.trust(load_package(bad))
    rep = shard_report(module_ctx, tmp_path / "wf" / "bf16_conv.toml", 2, allow_unverified=True)
    conv = nodes(rep)["conv"]
    assert conv.verified is False and conv.outputs["y"]["replica_equals_shard"] == [True, False]
    assert not rep.ok and any("DIFFERS" in line for line in report_lines(rep))


def test_the_cli_prints_the_report_and_its_json(module_ctx, proven, monkeypatch, capsys):
    from studio.cli import main
    monkeypatch.setenv("SCELLIS_HOME", str(module_ctx.trust.home))
    assert main(["shard-report", str(proven / "bf16_conv.toml"), "--replicas", "3"]) == 0
    out = capsys.readouterr().out
    assert "exact under sharding" in out and "rounded per replica" in out and "warning: 3 replicas" in out
    assert main(["shard-report", str(proven / "bf16_conv.toml"), "--replicas", "2", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] and data["replicas"] == 2 and len(data["nodes"]) == 6
    assert main(["shard-report", str(proven / "bf16_conv.toml"), "--replicas", "5"]) == 2
    assert "does not split" in capsys.readouterr().err


@pytest.mark.slow
def test_prove_earns_the_missing_receipt_first(module_ctx, proven, tmp_path, monkeypatch, capsys):
    """Without --prove an op with no receipt here stops the report; with it, conformance runs
    first (and its line is printed), then the report."""
    from studio.cli import main
    monkeypatch.setenv("SCELLIS_HOME", str(module_ctx.trust.home))
    shutil.copytree(proven, tmp_path / "wf")
    wf = str(tmp_path / "wf" / "bf16_conv.toml")
    with unproven(module_ctx, tmp_path / "wf" / "ops" / "conv1d_bf16"):
        assert main(["shard-report", wf, "--replicas", "2"]) == 2
        assert "no valid conformance receipt" in capsys.readouterr().err
        assert main(["shard-report", wf, "--replicas", "2", "--prove"]) == 0
        out = capsys.readouterr().out
        assert "proof core/nn/conv1d_bf16@1: no receipt here, so conformance ran first" in out
        assert "rounded per replica" in out
