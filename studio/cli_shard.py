"""`scellis shard-report`: the bf16 sharding report of the headless front end (issue 17)."""
from __future__ import annotations


def add_commands(sub) -> None:
    """Registers the sharding commands on the `scellis` subparsers."""
