"""`scellis learn`: the data-parallel learner command of the headless front end (issue 16)."""
from __future__ import annotations


def add_commands(sub) -> None:
    """Registers the learner commands on the `scellis` subparsers."""
