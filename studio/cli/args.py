"""The one argument-type module of `scellis`: the exit codes and every type a command-line value is
judged by (numbers, seconds, byte budgets, ``NAME=VALUE`` parameters, ``STEP=OP`` pairs, paths), so
that a value is judged the same way by every command. argparse types raise ArgumentTypeError
(argparse prints the message and exits 2); the ``NAME=VALUE`` parsers raise a StudioError with the
flag as its field (one line, exit 2, never a traceback)."""
from __future__ import annotations

import argparse
from pathlib import Path

from ..engine.errors import StudioError

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2   # ok · a check failed · a usage or input error
EXIT_INTERRUPTED = 130


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
finite = positive(1e300, "a finite number")


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


def add_timeout(p, default: float, help: str | None = None) -> None:
    """``--timeout SECONDS``: the device worker's budget."""
    p.add_argument("--timeout", type=seconds, default=default, metavar="SECONDS",
                   help=help or f"stop the device work if it shows no progress for this long (default {default:g} s)")


def param_value(text: str) -> tuple[str, int | float]:
    """``--param NAME=VALUE``: the name and the value as an int, else a float; a clear error otherwise."""
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


def params(texts: list[str] | None) -> dict[str, int | float]:
    """Every ``--param NAME=VALUE`` given."""
    return dict(param_value(t) for t in texts or [])


def step_op(text: str, flag: str) -> tuple[str, str]:
    """``--swap``/``--compare STEP=OP``."""
    name, sep, value = text.partition("=")
    if not sep or not name or not value:
        raise StudioError(f"{flag} {text!r} is not STEP=OP", field=flag,
                          hint=f"e.g. {flag} median=user/demo/windowed_median_composite@1")
    return name, value


def candidates(texts: list[str]) -> dict[str, list[int]]:
    """``--only NAME=V1,V2``: the candidates of one tunable override."""
    out: dict[str, list] = {}
    for t in texts:
        name, sep, vals = t.partition("=")
        try:
            out[name] = [int(v) for v in vals.split(",")]
        except ValueError:
            raise StudioError(f"--only {t!r} is not NAME=V1,V2,...", field="--only",
                              hint="e.g. --only RUN=256,512") from None
        if not sep or not name:
            raise StudioError(f"--only {t!r} is not NAME=V1,V2,...", field="--only", hint="e.g. --only RUN=256,512")
    return out


def absolute(path: str | None) -> str | None:
    """A path given on the command line is relative to the current folder (not to --out-dir); the
    device worker gets it absolute."""
    return str(Path(path).resolve()) if path else None
