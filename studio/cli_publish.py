"""`scellis publish|card|fork|ring`: the publishing commands of the headless front end (issue 15)."""
from __future__ import annotations


def add_commands(sub) -> None:
    """Registers the publishing commands on the `scellis` subparsers."""
