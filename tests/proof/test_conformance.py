"""Conformance on the story: the median passes and earns a receipt; the first draft and
five other broken kernels are rejected; receipts are bound by hash and scoped to the profile."""
import json
import subprocess
import sys
from pathlib import Path

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
    # every minimum case fails, each with exactly one output element and nothing written: the first
    # seed's 16 (one per w), and the further seeds' (the first 4 w each; corpus.py)
    mins = [f for f in rep.failures if f.case.shape_kind == "minimum"]
    assert len(mins) == 16 + 2 * 4 and all(f.kind == "unwritten" for f in mins)
    assert {f.case.seed for f in mins} == {None, 1, 2} and "; seed 2" in mins[-1].case.describe()


def test_n7_w7_is_in_the_corpus_and_fails(ctx):
    corpus = generate(load_package(MEDIAN).contract.signature)
    case = next(c for c in corpus.cases if c.shape_kind == "minimum" and c.params["w"] == 7)
    assert case.dims == {"n": 7}
    rep = conform(ctx, load_package(EXAMPLES / "windowed_median_first_draft"), only_case=case.index)
    assert rep.total == 1 and rep.failures[0].kind == "unwritten"


@pytest.mark.slow
@pytest.mark.parametrize("name", BROKEN)
def test_broken_medians_are_rejected(ctx, name, device):
    rep = conform(ctx, load_package(EXAMPLES / "broken_medians" / name))
    assert not rep.ok and rep.failures


@pytest.mark.slow
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


@pytest.mark.slow
def test_category_verification_rejects_a_reference_that_breaks_it(ctx, pkg_copy, device):
    # a "median" whose reference averages: no longer a selection
    root = pkg_copy(reference__py=[('[:, w // 2]\n    return y', '[:, w // 2]\n    return y * 0.5 + 0.25')])
    rep = conform(ctx, load_package(root))
    assert rep.category_errors and "selection" in rep.category_errors[0].message


@pytest.mark.slow
def test_elementwise_category_is_verified_by_perturbation(ctx, pkg_copy, device):
    root = pkg_copy(op__toml=[('class = "exact"\ncategory = "selection"', 'class = "ulp(1)"\ncategory = "elementwise"')])
    rep = conform(ctx, load_package(root))
    assert rep.category_errors and "perturbing" in rep.category_errors[0].message


@pytest.mark.slow
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


@pytest.mark.slow
def test_a_receipt_just_made_is_checked_from_the_conformance_corpus_and_its_tampered_corpus_hash_caught(
        ctx, tmp_path, device, monkeypatch):
    """Conformance leaves its corpus in the context's memo under the key a receipt on disk (its maps
    in sorted order) is looked up by, so checking the receipt generates nothing; a receipt whose corpus
    hash was changed (and sealed again) is still stale by the memo's hash."""
    from studio.engine.proof import receipts as receipts_mod
    pkg = load_package(copy_package(MEDIAN, tmp_path / "m"))
    path = write_receipt(pkg, make_receipt(pkg, conform(ctx, pkg)), ctx.seal)
    made = []
    monkeypatch.setattr(receipts_mod, "regenerate", lambda *a: made.append(a) or pytest.fail("regenerated"))
    receipt = json.loads(path.read_text())
    assert list(receipt["corpus"]["sizes"]) == sorted(receipt["corpus"]["sizes"])
    assert verify_receipt(pkg, receipt, device.profile.id, ctx.seal, corpora=ctx.corpora).status == "valid"
    forged = dict(receipt, hashes=dict(receipt["hashes"], corpus="0" * 64))
    forged.pop("seal", None)
    v = verify_receipt(pkg, ctx.seal.seal(forged), device.profile.id, ctx.seal, corpora=ctx.corpora)
    assert v.status == "stale" and "corpus hash differs" in " ".join(v.problems) and made == []


@pytest.mark.slow
def test_a_receipt_from_another_gpu_profile_is_foreign(ctx, tmp_path, device):
    root = copy_package(MEDIAN, tmp_path / "m")
    pkg = load_package(root)
    receipt = make_receipt(pkg, conform(ctx, pkg))
    receipt["gpu_profile"] = dict(receipt["gpu_profile"], id="0123456789abcdef")
    write_receipt(pkg, receipt)
    assert local_status(pkg, device.profile.id) == "foreign"


@pytest.mark.slow
def test_unproven_kernel_still_runs_with_a_warning(tmp_path):
    root = copy_package(MEDIAN, tmp_path / "m")
    x = tmp_path / "x.npy"
    np.save(x, np.arange(20, dtype=np.float32)[::-1].copy())
    res = subprocess.run([sys.executable, "-m", "studio.cli", "run", str(root), "--param", "w=5",
                          "--input", str(x), "--out", str(tmp_path / "y.npy")], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert "no valid conformance receipt" in res.stderr
    assert np.load(tmp_path / "y.npy").tolist() == list(np.arange(17, 1, -1, dtype=np.float32) - 0)


@pytest.mark.slow
def test_cli_conform_writes_a_receipt_and_exits_by_verdict(tmp_path):
    root = copy_package(MEDIAN, tmp_path / "m")
    res = subprocess.run([sys.executable, "-m", "studio.cli", "conform", str(root), "--json"],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["verdict"] == "pass" and Path(out["receipt"]).is_file()     # in the user folder's receipts
    draft = copy_package(EXAMPLES / "windowed_median_first_draft", tmp_path / "d")
    res = subprocess.run([sys.executable, "-m", "studio.cli", "conform", str(draft)], capture_output=True, text=True)
    assert res.returncode == 1 and "minimum (n = w)" in res.stdout
    assert not (draft / "receipts").exists()     # a failing run earns no receipt


# ------------------------------------------------------------------ value bands, categories, hints
OPS23 = Path(__file__).parents[1] / "data" / "ops23"


def test_every_float_input_is_swept_over_every_binade_and_its_kinks():
    from studio.engine.proof.bands import band_groups
    sig = load_package(OPS23 / "wsum").contract.signature
    bands = [c for c in generate(sig).cases if c.shape_kind == "band"]
    for name in ("x", "w"):
        mine = [c for c in bands if c.value_kind.startswith(f"{name}: ")]
        lows = {int(c.value_kind.split("2^")[1].split(".")[0]) for c in mine if "band" in c.value_kind}
        assert lows == {lo for lo, _ in band_groups(sig.inputs[0].domain)}          # -149 ... up to 1e15
        vals = np.concatenate([c.inputs[name] for c in mine])
        assert (vals < 0).any() and (vals > 0).any() and np.min(np.abs(vals[vals != 0])) < 1e-44
        assert np.max(np.abs(vals)) == np.float32(1e15)                              # the domain's edge
        assert any(c.value_kind.endswith("kinks") for c in mine)


@pytest.mark.slow
def test_a_kernel_wrong_on_a_narrow_band_fails(ctx, tmp_path):
    bad = copy_package(OPS23 / "half", tmp_path / "h", {"forward.wgsl": [
        ("    y[i] = r;", "    if (v > -87.0 && v < -80.0) { r = 0.0; }\n    y[i] = r;")]})
    rep = conform(ctx, load_package(bad))
    assert not rep.ok and {f.case.shape_kind for f in rep.failures} == {"band"}, "\n".join(report_lines(rep))


@pytest.mark.slow
def test_a_window_sum_dropping_taps_below_1e_30_fails(ctx, tmp_path):
    bad = copy_package(OPS23 / "wsum", tmp_path / "w", {"forward.wgsl": [
        ("acc = acc + w[j] * x[i + j];", "if (abs(w[j]) >= 1e-30) { acc = acc + w[j] * x[i + j]; }")]})
    rep = conform(ctx, load_package(bad))
    assert not rep.ok and all(f.case.value_kind.startswith("w: ") for f in rep.failures), "\n".join(report_lines(rep))


@pytest.mark.slow
def test_a_generator_with_inputs_is_refused_on_the_reference_path_too(ctx, tmp_path):
    lie = copy_package(OPS23 / "half", tmp_path / "g", {"op.toml": [('category = "elementwise"', 'category = "generator"')]})
    rep = conform(ctx, load_package(lie))
    assert not rep.ok and "a generator has no array inputs" in rep.category_errors[0].message


@pytest.mark.slow
def test_the_fold_hint_names_the_fold_and_its_two_fixes(ctx, tmp_path):
    root = copy_package(MEDIAN, tmp_path / "m", {"forward.wgsl": [("let i = gid.x + gid.y * nwg.x * 64u;",
                                                                    "let i = gid.x;")]})
    text = "\n".join(report_lines(conform(ctx, load_package(root))))
    assert "folds it into 2-D" in text and "gid.y * nwg.x * 64u + gid.x" in text and "n <= 4194240" in text
    assert "NaN" not in text.split("hint:")[1].split("\n")[0]                 # not the NaN-comparison hint


def test_hints_for_the_poison_and_for_an_f32_overflow():
    from studio.engine.contract.tolerance import Mismatch
    from studio.engine.proof import hints
    from studio.engine.proof.corpus import CorpusCase
    case = CorpusCase(0, "minimum", "normal", {"n": 4}, {}, {"x": np.ones(4, np.float32)})
    poison = Mismatch(1, 2.0, float("nan"), 0x40000000, 0x7FBADBAD, "equal")
    assert "poison" in hints.hint(case, "unwritten", poison) and "NaN handling" in hints.hint(case, "unwritten", poison)
    huge = CorpusCase(0, "random", "extreme", {"n": 4}, {}, {"x": np.full(4, 3e30, np.float32)})
    over = Mismatch(0, 1e30, float("inf"), 0x7149F2CA, 0x7F800000, "ulp")
    assert "overflowed" in hints.hint(huge, "mismatch", over)
    nan = Mismatch(0, float("nan"), 1.0, 0x7FC00000, 0x3F800000, "ulp")
    assert "bitcast<u32>" in hints.hint(case, "mismatch", nan)
