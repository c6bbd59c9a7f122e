"""The order the two workers take the test files in: the longest first.

``./test.sh`` runs each lane on two pytest-xdist workers with ``--dist loadscope`` (a file's tests
stay on one worker, so its module fixtures are built once) and ``--no-loadscope-reorder`` (the files
are handed out in the order collected, not by their number of tests). This plugin sorts the
collected files by their seconds in a recent whole run, longest first — the classic
longest-processing-time rule — so that the last files a worker starts are short ones and neither
worker idles long while the other finishes a long file. Within a file the order is unchanged.

The seconds are per lane (``tests/data/file_seconds.json``: ``{"fast": {file: s}, "slow": {…}}``),
written by a whole run with ``SCELLIS_FILE_SECONDS=tests/data/file_seconds.json ./test.sh`` (each
lane merges its own files in; tests/suite_budget.py). A file not in the record (a new one) is given
the lane's median, so it lands in the middle; the order is a speed-up only and never changes what
runs or what passes."""
from __future__ import annotations

import json
import statistics
from pathlib import Path

RECORD = Path(__file__).resolve().parent / "data" / "file_seconds.json"


def lane_seconds(record: dict, markexpr: str) -> dict[str, float]:
    """The seconds that apply to a run with this ``-m`` expression: one lane's, or both summed."""
    expr = " ".join(markexpr.split())
    lanes = {"not slow": ["fast"], "slow": ["slow"]}.get(expr, ["fast", "slow"])
    out: dict[str, float] = {}
    for lane in lanes:
        for f, s in record.get(lane, {}).items():
            out[f] = out.get(f, 0.0) + float(s)
    return out


def longest_first(files: list[str], seconds: dict[str, float]) -> list[str]:
    """``files`` (each once, in collection order) sorted by seconds, longest first; a file with no
    figure counts as the median; equal figures keep their collection order."""
    default = statistics.median(seconds.values()) if seconds else 0.0
    return sorted(files, key=lambda f: -seconds.get(f, default))     # sorted() is stable


def read_record(path: Path = RECORD) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


class LongestFirst:
    def __init__(self, config, record: Path = RECORD):
        self.config, self.record = config, record

    def pytest_collection_modifyitems(self, session, config, items):
        seconds = lane_seconds(read_record(self.record), getattr(config.option, "markexpr", "") or "")
        groups: dict[str, list] = {}
        for item in items:
            groups.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
        items[:] = [item for f in longest_first(list(groups), seconds) for item in groups[f]]
