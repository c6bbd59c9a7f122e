"""`scellis report`: one proof report to share (studio/engine/services/proof_report.py).

    scellis report OP -o op.html       # the card, the receipt, the conformance summary, the gradcheck plot
    scellis report --check op.html     # re-verify it: its page, its seal (when it is this folder's), its hashes

The work runs in the device worker. Exit 0 written or verified, 1 a check failed, 2 an input error."""
from __future__ import annotations

from pathlib import Path

from ..engine.arrays import check_writable
from ..engine.atomic import write_bytes
from ..engine.errors import StudioError
from .args import EXIT_FAILED, EXIT_OK, add_timeout
from .session import worker


def cmd_report(args) -> int:
    from ..engine.services.requests import Kind
    if args.check:
        with worker(args.timeout) as w:
            r = w.call(Kind.REPORT_CHECK, path=str(Path(args.check).absolute()))
        print("\n".join(r.text_lines()))
        return EXIT_OK if r.ok else EXIT_FAILED
    if not args.target or not args.out:
        raise StudioError("name an op and the file to write", field="OP", hint="scellis report OP -o op.html "
                          "(or scellis report --check op.html)")
    out = check_writable(args.out)
    with worker(args.timeout) as w:
        r = w.call(Kind.REPORT, target=args.target)
    write_bytes(out, r.html.encode())
    print(r.wrote(out))
    return EXIT_OK


def add_commands(sub) -> None:
    """Registers `report` on the `scellis` subparsers."""
    p = sub.add_parser("report", help="one self-contained HTML proof report to share; --check re-verifies one")
    add_timeout(p, 300)
    p.add_argument("target", nargs="?", metavar="OP")
    p.add_argument("-o", "--out", metavar="FILE.html")
    p.add_argument("--check", metavar="FILE.html", help="re-verify a report instead of writing one")
    p.set_defaults(fn=cmd_report)
