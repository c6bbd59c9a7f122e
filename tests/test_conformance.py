"""Conformance on the story: the median passes and earns a receipt; the first draft and
five other broken kernels are rejected; receipts are bound by hash and scoped to the profile."""
import json
import subprocess
import sys

import numpy as np
import pytest
from conftest import EXAMPLES, MEDIAN, copy_package

from studio.engine.contract.package import load_package
from studio.engine.proof.conformance import conform, report_lines
from studio.engine.proof.corpus import generate
from studio.engine.proof.receipts import (
    local_status,
    make_receipt,
    verify_receipt,
    write_receipt,
)

BROKEN = ["wrong_middle", "shifted_read", "write_past_end", "tie_mishandled", "no_guard"]


def test_story_op_passes_and_gets_a_receipt(ctx, tmp_path, device):
    root = copy_package(MEDIAN, tmp_path / "median")
    pkg = load_package(root)
    rep = conform(ctx, pkg)
    assert rep.ok and rep.passed == rep.total >= 100
    path = write_receipt(pkg, make_receipt(pkg, rep))
    receipt = json.loads(path.read_text())
    assert receipt["verdict"] == "pass" and receipt["gpu_profile"]["id"] == device.profile.id
    assert receipt["hashes"]["kernel"] == pkg.part_hashes()["kernel"]
    assert local_status(pkg, device.profile.id) == "valid"


def test_first_draft_fails_at_the_minimum_input(ctx, device):
    rep = conform(ctx, load_package(EXAMPLES / "windowed_median_first_draft"))
    assert not rep.ok
    first = rep.failures[0]
    assert first.case.shape_kind == "minimum" and first.kind == "unwritten"
    assert first.case.dims["n"] == first.case.params["w"]
    assert "n = w" in first.case.tight
    text = "\n".join(report_lines(rep))
    assert "minimum (n = w)" in text and "never written" in text and "--case 0" in text
    # every minimum case fails, each with exactly one output element and nothing written
    mins = [f for f in rep.failures if f.case.shape_kind == "minimum"]
    assert len(mins) == 16 and all(f.kind == "unwritten" for f in mins)


def test_n7_w7_is_in_the_corpus_and_fails(ctx):
    corpus = generate(load_package(MEDIAN).contract.signature)
    case = next(c for c in corpus.cases if c.shape_kind == "minimum" and c.params["w"] == 7)
    assert case.dims == {"n": 7}
    rep = conform(ctx, load_package(EXAMPLES / "windowed_median_first_draft"), only_case=case.index)
    assert rep.total == 1 and rep.failures[0].kind == "unwritten"


@pytest.mark.parametrize("name", BROKEN)
def test_broken_medians_are_rejected(ctx, name, device):
    rep = conform(ctx, load_package(EXAMPLES / "broken_medians" / name))
    assert not rep.ok and rep.failures


def test_each_kind_of_breakage_is_caught_by_the_right_guard(ctx, device):
    kinds = {n: {f.kind for f in conform(ctx, load_package(EXAMPLES / "broken_medians" / n)).failures}
             for n in ("write_past_end", "wrong_middle", "tie_mishandled")}
    assert "out_of_range_write" in kinds["write_past_end"]
    assert kinds["wrong_middle"] == {"mismatch"}
    assert kinds["tie_mishandled"] == {"mismatch"}


def test_tie_bug_is_caught_only_by_signed_zeros(ctx):
    rep = conform(ctx, load_package(EXAMPLES / "broken_medians" / "tie_mishandled"))
    assert {f.case.value_kind for f in rep.failures} <= {"signed_zeros", "huge"}
    m = rep.failures[0].mismatch
    assert {m.expected_bits, m.got_bits} == {0x00000000, 0x80000000}


def test_corpus_is_deterministic_and_seeded():
    sig = load_package(MEDIAN).contract.signature
    a, b, c = generate(sig, seed=0), generate(sig, seed=0), generate(sig, seed=1)
    assert a.hash == b.hash != c.hash
    ws = sorted({case.params["w"] for case in a.cases})
    assert ws == list(range(1, 32, 2))        # every admissible w
    sizes = {case.dims["n"] for case in a.cases}
    assert {63, 64, 65, 255, 256, 257} <= sizes
    kinds = {case.value_kind for case in a.cases}
    assert {"constant", "signed_zeros", "subnormal", "huge", "ascending", "descending", "spikes"} <= kinds
    assert "nan" not in kinds and "inf" not in kinds   # the domain says finite
    assert all(np.isfinite(x).all() for case in a.cases for x in case.inputs.values())


def test_large_case_is_behind_the_flag():
    sig = load_package(MEDIAN).contract.signature
    assert max(c.dims["n"] for c in generate(sig).cases) < 10_000
    assert max(c.dims["n"] for c in generate(sig, large=True).cases) >= 1_000_000


def test_category_verification_rejects_a_reference_that_breaks_it(ctx, pkg_copy, device):
    # a "median" whose reference averages: no longer a selection
    root = pkg_copy(reference__py=[('[:, w // 2]\n    return y', '[:, w // 2]\n    return y * 0.5 + 0.25')])
    rep = conform(ctx, load_package(root))
    assert rep.category_errors and "selection" in rep.category_errors[0].message


def test_elementwise_category_is_verified_by_perturbation(ctx, pkg_copy, device):
    root = pkg_copy(op__toml=[('class = "exact"\ncategory = "selection"', 'class = "ulp(1)"\ncategory = "elementwise"')])
    rep = conform(ctx, load_package(root))
    assert rep.category_errors and "perturbing" in rep.category_errors[0].message


def test_tampering_invalidates_the_receipt(ctx, tmp_path, device):
    root = copy_package(MEDIAN, tmp_path / "m")
    pkg = load_package(root)
    receipt = ctx.seal.seal(make_receipt(pkg, conform(ctx, pkg)))
    assert verify_receipt(pkg, receipt, device.profile.id).status == "valid"
    for rel in ("forward.wgsl", "reference.py", "op.toml"):
        data = (root / rel).read_bytes()
        (root / rel).write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
        v = verify_receipt(pkg, receipt, device.profile.id)
        assert v.status == "stale" and any(rel.split(".")[0] in p or "package" in p for p in v.problems)
        (root / rel).write_bytes(data)
    assert verify_receipt(pkg, receipt, device.profile.id).status == "valid"


def test_a_receipt_from_another_gpu_profile_is_foreign(ctx, tmp_path, device):
    root = copy_package(MEDIAN, tmp_path / "m")
    pkg = load_package(root)
    receipt = make_receipt(pkg, conform(ctx, pkg))
    receipt["gpu_profile"] = dict(receipt["gpu_profile"], id="0123456789abcdef")
    write_receipt(pkg, receipt)
    assert local_status(pkg, device.profile.id) == "foreign"


def test_unproven_kernel_still_runs_with_a_warning(tmp_path):
    root = copy_package(MEDIAN, tmp_path / "m")
    x = tmp_path / "x.npy"
    np.save(x, np.arange(20, dtype=np.float32)[::-1].copy())
    res = subprocess.run([sys.executable, "-m", "studio.cli", "run", str(root), "--param", "w=5",
                          "--input", str(x), "--out", str(tmp_path / "y.npy")], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert "no valid conformance receipt" in res.stderr
    assert np.load(tmp_path / "y.npy").tolist() == list(np.arange(17, 1, -1, dtype=np.float32) - 0)


def test_cli_conform_writes_a_receipt_and_exits_by_verdict(tmp_path):
    root = copy_package(MEDIAN, tmp_path / "m")
    res = subprocess.run([sys.executable, "-m", "studio.cli", "conform", str(root), "--json"],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["verdict"] == "pass" and (tmp_path / "m" / "receipts").is_dir()
    draft = copy_package(EXAMPLES / "windowed_median_first_draft", tmp_path / "d")
    res = subprocess.run([sys.executable, "-m", "studio.cli", "conform", str(draft)], capture_output=True, text=True)
    assert res.returncode == 1 and "minimum (n = w)" in res.stdout
    assert not (draft / "receipts").exists()     # a failing run earns no receipt
