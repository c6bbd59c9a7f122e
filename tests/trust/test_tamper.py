"""Tamper evidence: flipping any single byte of a small op package —
manifest, reference or kernel — changes its content hash and its receipt no longer verifies.
The receipt is made once by a real conformance run; each position is then checked with
receipt.verify_receipt on the stored receipt (no conformance re-run per position)."""
from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest

from studio.engine.contract.package import content_hash, load_package
from studio.engine.errors import StudioError
from studio.engine.proof.conformance import conform
from studio.engine.proof.receipts import (
    make_receipt,
    read_receipt,
    verify_receipt,
    write_receipt,
)
from studio.engine.services.actions import save_package

FILL = Path(__file__).resolve().parents[1] / "data" / "reliability" / "fill"


@pytest.fixture
def proven(ctx, tmp_path, device):
    root = tmp_path / "fill"
    save_package(ctx, root, {p.name: p.read_bytes() for p in FILL.iterdir() if p.is_file()})
    pkg = load_package(root)
    rep = conform(ctx, pkg)
    assert rep.ok
    path = write_receipt(pkg, make_receipt(pkg, rep))
    return root, read_receipt(path), device.profile.id


@pytest.mark.slow
def test_every_single_byte_flip_changes_the_hash_and_voids_the_receipt(proven):
    root, receipt, profile = proven
    pkg = load_package(root)
    assert verify_receipt(pkg, receipt, profile).status == "valid"       # the check can pass
    original = dict(pkg.files)
    assert set(original) == {"op.toml", "reference.py", "forward.wgsl"}
    outcomes: Counter = Counter()
    t0 = time.perf_counter()
    for rel, data in sorted(original.items()):
        path = root / rel
        for i in range(len(data)):
            flipped = data[:i] + bytes([data[i] ^ 0x01]) + data[i + 1:]
            assert content_hash({**original, rel: flipped}) != pkg.hash, f"{rel} byte {i}: same hash"
            path.write_bytes(flipped)
            try:
                tampered = load_package(root)
            except StudioError as e:               # the flip broke the file: nothing can verify
                assert e.file and (e.line or e.field), e.format()
                outcomes[(rel, "refused at load")] += 1
            else:
                assert tampered.hash != pkg.hash
                v = verify_receipt(tampered, receipt, profile)
                assert v.status != "valid", f"{rel} byte {i} ({data[i:i + 1]!r}): the receipt still verifies"
                assert v.problems
                outcomes[(rel, v.status)] += 1
            path.write_bytes(data)
    seconds = time.perf_counter() - t0
    assert verify_receipt(load_package(root), receipt, profile).status == "valid"   # restored: valid again
    total = sum(outcomes.values())
    assert total == sum(len(d) for d in original.values())
    print(f"\ntamper: {total} single-byte flips in {seconds:.1f} s, 0 undetected: "
          + ", ".join(f"{rel} {what}: {n}" for (rel, what), n in sorted(outcomes.items())))


def test_a_tampered_receipt_does_not_verify_either(proven):
    root, receipt, profile = proven
    pkg = load_package(root)
    for key, value in [("hashes", {**receipt["hashes"], "kernel": "0" * 64}),
                       ("corpus", {**receipt["corpus"], "seed": 1}),
                       ("verdict", "fail"),
                       ("gpu_profile", {**receipt["gpu_profile"], "id": "elsewhere"})]:
        assert verify_receipt(pkg, {**receipt, key: value}, profile).status != "valid", key
