"""`scellis tune`: choose an op's tunable overrides for this GPU profile, every candidate proven first.

    scellis tune OP [--param NAME=VALUE ...] [--size N ...] [--repeats K] [--only NAME=V1,V2] [--json]

Every candidate of the op's ``tune [..]`` overrides (docs/package-format.md) runs the conformance
corpus first; one that fails is shown with its first failing case and is never timed or chosen.
The proven ones are timed at each size, and the fastest is written to a sealed tuning record in
the user folder (docs/performance.md, "Tuning"). Later runs on this GPU profile use it. The work
runs in the device worker. Exit 0 when a winner is recorded, 1 when no candidate passes, 2 on an
input error."""
from __future__ import annotations

import json

from .args import EXIT_FAILED, EXIT_OK, candidates, params, seconds, whole
from .session import worker


def cmd_tune(args) -> int:
    from ..engine.services.requests import Kind
    with worker(args.timeout) as w:
        r = w.call(Kind.TUNE, target=args.op, params=params(args.param), sizes=args.size or None, repeats=args.repeats,
                        seed=args.seed, only=candidates(args.only or []) or None, record=not args.no_record)
    print(json.dumps(r.to_json(), indent=2) if args.json else "\n".join(r.lines()))
    return EXIT_OK if r.winner is not None else EXIT_FAILED


def add_commands(sub) -> None:
    """Registers `scellis tune` on the `scellis` subparsers."""
    p = sub.add_parser("tune", help="prove, then time, every candidate of an op's tunable overrides on this GPU")
    p.add_argument("op", help="an op id (user/demo/windowed_median_fast@1) or a package folder")
    p.add_argument("--param", action="append", metavar="NAME=VALUE",
                   help="the parameter class to tune for (e.g. w=7); without it: class '*'")
    p.add_argument("--size", action="append", type=whole(1, 1 << 28, "a timing size"), metavar="N",
                   help="a representative size of the swept dimension (repeatable; default 65536 and 1048576)")
    p.add_argument("--repeats", type=whole(1, 1000, "the repeat count"), default=None, metavar="K",
                   help="timed calls per size and candidate, the median counts (default 5)")
    p.add_argument("--only", action="append", metavar="NAME=V1,V2",
                   help="tune only these candidates of one override (each is still proven first)")
    p.add_argument("--seed", type=int, default=0, help="the conformance corpus's seed")
    p.add_argument("--no-record", action="store_true", help="report only: write no tuning record")
    p.add_argument("--json", action="store_true", help="the result as JSON")
    p.add_argument("--timeout", type=seconds, default=1800.0, metavar="S", help="the device worker's budget in seconds")
    p.set_defaults(fn=cmd_tune)
