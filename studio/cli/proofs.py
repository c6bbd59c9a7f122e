"""`scellis check`, `conform`, `receipts`, `gradcheck` and `profile`: the proofs of the headless front
end, each one request to the device worker (studio/engine/services/actions.py). Exit 0 pass, 1 a
check failed, 3 inconclusive (gradcheck)."""
from __future__ import annotations

import json
import sys

from .args import EXIT_FAILED, EXIT_OK, add_timeout, finite, params, seconds
from .session import ops_path, worker, worker_for


def cmd_check(args) -> int:
    from ..engine.services.requests import Kind
    with worker_for(args.target, args.timeout) as w:   # kernels compile in the worker: a compiler crash is its;
        rep = w.call(Kind.CHECK, target=args.target, ops_path=ops_path(args))   # the op looked up there, once
    print(json.dumps(rep.to_json(), indent=2) if args.json else "\n".join(rep.lines()))
    return EXIT_OK if rep.ok else EXIT_FAILED


def _first_failure(note: dict) -> None:
    """Printed the moment the worker judges the first failing case, before the whole verdict (the
    other verdicts the worker tells as they land come with the report)."""
    if note.get("kind", "first_failure") != "first_failure":
        return
    print(f"first failure (the rest of the corpus runs on): {note.get('text', '')}", file=sys.stderr, flush=True)


def cmd_conform(args) -> int:
    """One ``conform`` request: the op is looked up once, in the worker (with --ops-path)."""
    from ..engine.services.requests import Kind
    request = dict(target=args.target, ops_path=ops_path(args), seed=args.seed, large=args.large, case=args.case,
                   receipt=not args.no_receipt, **({"seeds": args.seeds} if args.seeds is not None else {}))
    with worker_for(args.target, args.timeout) as w:
        if args.json or not sys.stderr.isatty():
            out = w.call(Kind.CONFORM, budget_s=args.timeout, on_note=None if args.json else _first_failure, **request)
        else:
            from rich.progress import Progress
            with Progress(transient=True) as bar:
                task = bar.add_task(f"conformance {args.target}", total=None)
                out = w.call(Kind.CONFORM, budget_s=args.timeout,
                             progress=lambda done, total: bar.update(task, completed=done, total=total),
                             on_note=_first_failure, **request)
    if out.older_receipts:
        print(out.older_receipts, file=sys.stderr)
    print(json.dumps(out.to_json(), indent=2) if args.json else "\n".join(out.text()))
    return EXIT_OK if out.ok else EXIT_FAILED


def cmd_receipts(args) -> int:
    """One ``receipts`` request: the op is looked up once, in the worker (with --ops-path)."""
    from ..engine.services.requests import Kind
    with worker_for(args.target, args.timeout) as w:
        rep = w.call(Kind.RECEIPTS, target=args.target, ops_path=ops_path(args))
    if rep.older:                             # an older version left receipts in the package folder (ignored)
        print(rep.older, file=sys.stderr)
    print("\n".join(rep.lines()))
    return EXIT_OK if rep.ok else EXIT_FAILED


def cmd_profile(args) -> int:
    from ..engine.services.requests import Kind
    with worker(args.timeout) as w:
        print(json.dumps(w.call(Kind.PROFILE).to_json(), indent=2))
    return EXIT_OK


def cmd_gradcheck(args) -> int:
    """Exit 0 pass, 1 fail, 3 inconclusive (a check that cannot fail certifies nothing)."""
    from ..engine.services.requests import Kind
    with worker_for(args.target, args.timeout) as w:   # an op id looked up once, in the worker
        out = w.call(Kind.GRADCHECK, target=args.target, ops_path=ops_path(args), params=params(args.param),
                     h=args.h, seed=args.seed, tolerance=args.tolerance, receipt=not args.no_receipt)
    print(json.dumps(out.to_json(), indent=2) if args.json else "\n".join(out.text()))
    return int(out.exit_code)


def add_commands(sub) -> None:
    """Registers `check`, `conform`, `receipts`, `profile` and `gradcheck` on the `scellis` subparsers."""
    p = sub.add_parser("check", help="the checker's static report for a package path or op id")
    add_timeout(p, 60)
    p.add_argument("target")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_check)
    p = sub.add_parser("conform", help="run the engine's conformance corpus; writes a receipt")
    p.add_argument("target", metavar="PATH|ID")
    p.add_argument("--large", action="store_true", help="add the >= 1e6-element case")
    p.add_argument("--json", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--seeds", type=int, metavar="N", help="make the small and extreme cases for N seeds from "
                   "--seed (default 3, the least a receipt is earned over); the large cases run once")
    p.add_argument("--case", type=int, help="run only this case of the corpus (to reproduce a failure)")
    p.add_argument("--no-receipt", action="store_true", help="do not write a receipt")
    p.add_argument("--timeout", type=seconds, default=120.0, metavar="SECONDS",
                   help="kill the device work if it shows no progress for this long (default 120)")
    p.set_defaults(fn=cmd_conform)
    p = sub.add_parser("receipts", help="verify an op's receipts against its content and this GPU profile")
    add_timeout(p, 60)
    p.add_argument("target", metavar="PATH|ID")
    p.set_defaults(fn=cmd_receipts)
    p = sub.add_parser("profile", help="print this machine's GPU profile")
    add_timeout(p, 60)
    p.set_defaults(fn=cmd_profile)
    p = sub.add_parser("gradcheck", help="check a declared backward by finite differences (exit 3: inconclusive)")
    add_timeout(p, 300)
    p.add_argument("target", metavar="PATH|ID")
    p.add_argument("--param", action="append", metavar="NAME=VALUE")
    p.add_argument("--json", action="store_true", help="the report with every probe, for plotting")
    p.add_argument("--h", type=finite, help="central-difference step (default 1e-3)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tolerance", type=finite, help="override the declared gradient tolerance (writes no receipt)")
    p.add_argument("--no-receipt", action="store_true", help="do not write receipts/gradcheck/<hash>.json")
    p.set_defaults(fn=cmd_gradcheck)
