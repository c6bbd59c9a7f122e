"""Receipts only this machine can write: sealed with the user's key; a receipt
written by hand, edited, or made elsewhere never counts; every field is judged, not only hashes."""
import json
import os
import stat
import subprocess
import sys

import numpy as np
import pytest

from studio.engine.contract.package import load_package
from studio.engine.proof import receipts
from studio.engine.proof.conformance import conform
from studio.engine.records.seal import Seal as ReceiptSeal


def scellis(*args):
    return subprocess.run([sys.executable, "-m", "studio.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=300)


def earned(ctx, root):
    pkg = load_package(root)
    rep = conform(ctx, pkg)
    assert rep.ok
    return pkg, receipts.write_receipt(pkg, receipts.make_receipt(pkg, rep), ctx.seal)


def test_the_key_is_created_once_readable_only_by_the_user(ctx):
    key = ctx.seal.key()
    mode = stat.S_IMODE(os.stat(ctx.seal.path).st_mode)
    assert len(key) == 32 and mode == 0o600
    assert ReceiptSeal(ctx.seal.home).key() == key               # the same key next time
    os.chmod(ctx.seal.path, 0o644)
    import pytest
    from studio.engine.errors import StudioError
    with pytest.raises(StudioError, match="readable by others"):
        ReceiptSeal(ctx.seal.home).key()


def test_a_sealed_receipt_is_valid_and_any_edit_is_forged(ctx, pkg_copy):
    pkg, path = earned(ctx, pkg_copy())
    here = ctx.device.profile.id
    r = receipts.read_receipt(path)
    assert r["seal"]["alg"] == "HMAC-SHA256" and receipts.verify_receipt(pkg, r, here, ctx.seal).status == "valid"
    for field, value in (("op", "user/x/other@1"), ("tolerance", "ulp(4)"), ("seconds", 0.5),
                         ("created", "2000-01-01T00:00:00+00:00")):
        edited = {**r, field: value}
        assert receipts.verify_receipt(pkg, edited, here, ctx.seal).status == "forged", field
    edited = json.loads(json.dumps(r))
    edited["cases"]["failed"], edited["cases"]["passed"] = 1, edited["cases"]["passed"] - 1
    assert receipts.verify_receipt(pkg, edited, here, ctx.seal).status in ("forged", "malformed")


@pytest.mark.slow
def test_a_receipt_copied_onto_a_broken_kernel_with_recomputed_hashes_never_counts(ctx, pkg_copy):
    good, path = earned(ctx, pkg_copy(name="good"))
    bad_root = pkg_copy(name="bad", forward__wgsl=[("y[i] = win[p.w / 2u];", "y[i] = win[0u];")])
    bad = load_package(bad_root)
    forged = json.loads(path.read_text())
    forged["hashes"].update({**bad.part_hashes(), "corpus": forged["hashes"]["corpus"]})
    receipts.receipt_dir(bad, ctx.seal).mkdir(parents=True)
    (receipts.receipt_dir(bad, ctx.seal) / path.name).write_text(json.dumps(forged))
    assert receipts.local_status(bad, ctx.device.profile.id, ctx.seal) == "forged"
    res = scellis("receipts", bad_root)
    assert res.returncode == 1 and "forged" in res.stdout, res.stdout + res.stderr
    np.save(bad_root.parent / "x.npy", np.arange(16, dtype=np.float32))
    res = scellis("run", bad_root, "--param", "w=3", "--input", bad_root.parent / "x.npy")
    assert "no valid conformance receipt" in res.stderr and "forged" in res.stderr, res.stderr


@pytest.mark.slow
def test_a_receipt_from_another_user_folder_is_foreign(ctx, pkg_copy, tmp_path):
    pkg, path = earned(ctx, pkg_copy())
    theirs = ReceiptSeal(tmp_path / "elsewhere")
    r = theirs.seal(receipts.read_receipt(path))                  # a valid seal, of another machine's key
    v = receipts.verify_receipt(pkg, r, ctx.device.profile.id, ctx.seal)
    assert v.status == "foreign" and "from elsewhere" in v.problems[0]
    assert receipts.verify_receipt(pkg, r, ctx.device.profile.id, theirs).status == "valid"


@pytest.mark.slow
def test_fields_are_judged_even_under_a_good_seal(ctx, pkg_copy):
    """A receipt sealed here but naming another op, tolerance or corpus is stale, not valid."""
    pkg, path = earned(ctx, pkg_copy())
    r = receipts.read_receipt(path)
    here = ctx.device.profile.id
    for field, value in (("op", "user/x/other@1"), ("tolerance", "ulp(4)")):
        assert receipts.verify_receipt(pkg, ctx.seal.seal({**r, field: value}), here, ctx.seal).status == "stale"
    ident = {**r["corpus"], "seed": 5}
    assert receipts.verify_receipt(pkg, ctx.seal.seal({**r, "corpus": ident}), here, ctx.seal).status == "stale"
    no_backward = {k: v for k, v in r.items() if k != "backward"}
    v = receipts.verify_receipt(pkg, ctx.seal.seal(no_backward), here, ctx.seal)
    assert v.status == "stale" and "backward conformance" in v.problems[0]


@pytest.mark.slow
def test_a_hand_written_gradcheck_receipt_does_not_count(ctx, pkg_copy):
    pkg = load_package(pkg_copy())
    path = receipts.gradcheck_receipt_path(pkg)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"schema": receipts.GRADCHECK_SCHEMA, "hash": pkg.hash, "verdict": "pass"}))
    status, why = receipts.gradcheck_status(pkg, seal=ctx.seal)
    assert status == "foreign" and "never counts" in why
    from studio.engine.errors import StudioError
    from studio.engine.train.autodiff import Tape
    tape = Tape(ctx)
    x = tape.leaf(np.linspace(0, 1, 40, dtype=np.float32), trainable=True)
    y = tape.call(pkg, {"x": x}, {"w": 3})["y"]
    import pytest
    with pytest.raises(StudioError, match="has no valid gradcheck|never counts|foreign"):
        tape.backward(y)
