"""What every `scellis` command shares: the exit codes and the argument types, so that a number
on the command line is judged the same way by every command (argparse prints the message and
exits 2, never a traceback)."""
from __future__ import annotations

import argparse

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2   # ok · a check failed · a usage or input error


def positive(upper: float, what: str):
    """An argparse type: a finite number in (0, upper] (nan, inf, 0 and negatives: exit 2, a message)."""
    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if not 0 < v <= upper:          # also false for nan
            raise argparse.ArgumentTypeError(f"{text!r} is not {what} in (0, {upper:g}]")
        return v
    return parse


seconds = positive(1e6, "a number of seconds")      # longer waits overflow the platform's poll timeout


def whole(lo: int, hi: int, what: str = "a whole number"):
    """An argparse type: a whole number in [lo, hi], the message naming ``what``."""
    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if not lo <= n <= hi:
            raise argparse.ArgumentTypeError(f"{n} is not in [{lo}, {hi}]: {what} is a whole number in that range")
        return n
    return parse


byte_count = whole(1, 1 << 62, "a number of bytes")     # --budget: a memory budget of 0 or less is no budget


def param_value(text: str) -> tuple[str, int | float]:
    """``--param NAME=VALUE``: the name and the value as an int, else a float; a clear error otherwise."""
    from .engine.errors import StudioError
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise StudioError(f"--param {text!r} is not NAME=VALUE", field="--param", hint="e.g. --param w=7")
    try:
        return name, int(value)
    except ValueError:
        try:
            return name, float(value)
        except ValueError:
            raise StudioError(f"--param {name}: {value!r} is not a number", field="--param",
                              hint="e.g. --param w=7") from None
