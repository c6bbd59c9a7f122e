"""The run's shared builtin proofs (tests/proof_store.py) and their isolation check: an entry reads
back as written; one whose bytes a test changed fails the next reader, naming the file; an entry is
written once, by whichever worker holds the lock."""
import json

import pytest
from proof_store import StoreChanged, read_entry, store_folder, write_entry


def test_an_entry_reads_back_and_a_changed_one_is_refused(tmp_path):
    folder = store_folder(tmp_path)
    assert read_entry(folder, "ab" * 32) is None
    write_entry(folder, "ab" * 32, {"verdict": "pass", "lines": ["conformance  x  PASS"], "receipt": {"op": "x"}})
    assert read_entry(folder, "ab" * 32)["receipt"] == {"op": "x"}
    path = folder / f"{'ab' * 32}.json"
    data = json.loads(path.read_text())
    data["verdict"] = "fail"                       # a test that changed the shared proofs
    path.write_text(json.dumps(data, sort_keys=True))
    with pytest.raises(StoreChanged, match=str(path)):
        read_entry(folder, "ab" * 32)


def test_the_folder_is_shared_by_the_workers_of_a_run(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    assert store_folder(tmp_path / "popen-gw1") == tmp_path / "proven-builtins"
    monkeypatch.delenv("PYTEST_XDIST_WORKER")
    (tmp_path / "solo").mkdir()
    assert store_folder(tmp_path / "solo") == tmp_path / "solo" / "proven-builtins"
