"""A stranger's ring index entry may not make ``scellis ring fetch`` spend what it likes.

The attack: an entry whose corpus identity names ``fold_size = 10**11`` crashed the fetch with a
745 GiB allocation error and a traceback; one naming every size kind at the largest allowed
(2^28) took 7.4 GB in 31 s — the corpus was regenerated before anything else was judged. Now the
sizes are judged first (publish/entry_limits.py): by type and range before any file of the package
is read, then what its large cases would hold (at most RING_CORPUS_BYTES) before any is generated."""
from __future__ import annotations

import json
import resource
import shutil

import pytest
from conftest import MEDIAN

from studio.engine.contract.package import load_package
from studio.engine.errors import StudioError
from studio.engine.publish.entry_limits import RING_CORPUS_BYTES, corpus_bytes
from studio.engine.publish.metadata import part_digests
from studio.engine.services import publishing

ID = "user/demo/windowed_median@1"


def _ring(ctx, tmp_path, corpus: dict):
    """A directory ring holding the story op (shared) under an index entry with ``corpus``."""
    src = tmp_path / "src"
    shutil.copytree(MEDIAN, src, ignore=shutil.ignore_patterns("receipts", "__pycache__"))
    toml = src / "op.toml"
    toml.write_text(toml.read_text().replace('visibility = "private"', 'visibility = "workspace"'))
    pkg = load_package(src)
    c = pkg.contract
    ring = tmp_path / "ring"
    for rel, data in pkg.files.items():
        (ring / "packages" / pkg.hash / "op" / rel).parent.mkdir(parents=True, exist_ok=True)
        (ring / "packages" / pkg.hash / "op" / rel).write_bytes(data)
    entry = {"id": pkg.id, "version": c.id.version, "hash": pkg.hash, "license": c.license,
             "visibility": c.visibility, "summary": c.summary, "tolerance": str(c.tolerance),
             "category": c.tolerance.category, "files": part_digests(pkg), "receipts": {},
             "corpus": {"generator": "scellis-corpus", "seed": 0, "large": False, "signature": c.signature.text,
                        **corpus, "hash": "0" * 64}}
    (ring / "index.json").write_text(json.dumps({"schema": "scellis-ring/1", "packages": {pkg.hash: entry}}))
    publishing.ring_add(ctx, "stranger", str(ring))
    return tmp_path / "fetched"


def _fetch_refused(ctx, dest) -> StudioError:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(StudioError) as info:
        publishing.ring_fetch(ctx, ID, ring="stranger", to=dest)
    grew_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grew_mib < 64, f"the refusal cost {grew_mib:.0f} MiB"        # refused before any allocation
    assert not dest.exists()
    return info.value


def test_a_fold_size_of_10_11_is_refused_by_its_field_before_anything_is_read(ctx, tmp_path):
    dest = _ring(ctx, tmp_path, {"fold_size": 10**11})
    e = _fetch_refused(ctx, dest)
    assert e.field == "corpus.fold_size" and "100000000000" in e.message and str(1 << 28) in e.message
    assert "\n" not in e.message


def test_every_size_at_the_largest_allowed_is_refused_by_what_it_would_hold(ctx, tmp_path):
    sizes = {k: 1 << 28 for k in ("fold", "backward_fold", "big", "max", "run")}
    dest = _ring(ctx, tmp_path, {"fold_size": 1 << 28, "sizes": sizes})
    e = _fetch_refused(ctx, dest)
    assert e.field == "corpus.sizes" and f"{RING_CORPUS_BYTES >> 20} MiB" in e.message and "GiB" in e.message
    assert "\n" not in e.message


@pytest.mark.parametrize("corpus, field", [({"fold_size": "big"}, "corpus.fold_size"),
                                           ({"fold_size": -1}, "corpus.fold_size"),
                                           ({"sizes": {"fold": 2.5}}, "corpus.sizes.fold"),
                                           ({"seed": -3}, "corpus.seed"),
                                           ({"large": "yes"}, "corpus.large")])
def test_malformed_corpus_fields_are_refused_by_name(ctx, tmp_path, corpus, field):
    dest = _ring(ctx, tmp_path, corpus)
    assert _fetch_refused(ctx, dest).field == field


def test_an_honest_corpus_is_within_the_limit(ctx):
    """The control: the sizes a real corpus of the story op holds (its fold near 4.2 M samples, a
    size near 10^6) are far inside the limit, and the bound grows with what the sizes would hold."""
    sig = load_package(MEDIAN).contract.signature
    honest = corpus_bytes(sig, {"seed": 0, "large": True, "sizes": {"fold": 4_194_497, "big": 1_000_003}})
    assert 0 < honest < RING_CORPUS_BYTES // 8
    assert corpus_bytes(sig, {"seed": 0, "large": False, "fold_size": 1 << 28}) > RING_CORPUS_BYTES
