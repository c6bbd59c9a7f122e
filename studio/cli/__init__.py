"""`scellis`: the headless front end. Exit 0 ok, 1 a check failed, 2 a usage or input error, 3
inconclusive (gradcheck), 130 interrupted.

One module per command group (``ops``, ``proofs``, ``workflow``, ``publish``, ``learn``, ``shard``,
``tune``), each with its ``add_commands(sub)``; ``args`` is the one module of argument types and exit
codes; ``session`` opens the context and the device worker. ``main`` is the one error handler: a
StudioError or an OSError is one line on stderr and exit 2 (exit 1 when the error is a failed check,
its field ``proof``), never a traceback."""
from __future__ import annotations

import argparse
import sys

from ..engine.errors import StudioError, from_os_error
from . import learn, ops, proofs, publish, report, shard, tune, workflow
from .args import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE

FAILED_CHECK = "proof"      # the field of the error a failing proof raises (studio/engine/services/actions.py)
GROUPS = (ops, proofs, workflow, publish, learn, shard, tune, report)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="scellis", description="Author GPU compute ops as content and prove them right.")
    ap.add_argument("--ops-path", action="append", metavar="DIR", help="extra folder of op packages")
    ap.add_argument("--allow-opengl", action="store_true",
                    help="allow wgpu's OpenGL backend when no Vulkan/Metal/D3D12 adapter exists "
                         "(its compute results are not trustworthy; the GPU profile records the backend)")
    sub = ap.add_subparsers(dest="command", required=True)
    for group in GROUPS:
        group.add_commands(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)     # a usage error: argparse's message, exit 2
    try:
        if args.allow_opengl:                  # the worker process inherits it
            from ..engine.services.backend_choice import allow_opengl
            allow_opengl()
        return args.fn(args)
    except StudioError as e:
        print("error: " + e.format(), file=sys.stderr)
        return EXIT_FAILED if e.field == FAILED_CHECK else EXIT_USAGE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except OSError as e:     # the filesystem said no where no check named it first: one line, file and errno
        print("error: " + from_os_error(e, doing="failed").format(), file=sys.stderr)
        return EXIT_USAGE
