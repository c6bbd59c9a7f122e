"""`scellis publish|card|fork|ring`: the publishing commands of the headless front end (issue 15,
docs/publishing.md). Work that needs the GPU profile or re-runs proofs (publish, card, ring
verify) runs in the device worker (studio/engine/services/publishing.py, its kinds in services/requests.py); fork and
the ring's bookkeeping run here. Exit codes as in studio/cli/__init__.py: 0 ok, 2 an input error or a
refusal (a StudioError's message at its file and field, never a traceback)."""
from __future__ import annotations

import json

from ..engine.errors import StudioError
from .args import EXIT_OK, seconds
from .session import context
from .session import ops_path, worker


def _target(args, target: str) -> str:
    """An op id or a package path → the package folder (the worker loads it afresh)."""
    return str(context(args).catalog.resolve(target).root)


def _call(args, kind, **kw):
    with worker(args.timeout) as w:
        return w.call(kind, budget_s=args.timeout, ops_path=ops_path(args), **kw)


# ------------------------------------------------------------------ commands
def cmd_publish(args) -> int:
    from ..engine.services import publishing
    from ..engine.services.requests import Kind
    target = _target(args, args.path)
    if args.ring:
        publishing.rings(context(args)).open(args.ring)       # an unknown ring is refused before anything
        if args.visibility == "private":
            raise StudioError("a ring holds only workspace or public packages", field="--visibility",
                              hint=f"scellis publish {args.path} --visibility workspace --ring {args.ring}")
    out = _call(args, Kind.PUBLISH, target=target, visibility=args.visibility, license=args.license)
    lines = list(out.lines)
    if args.ring:
        ctx = context(args)
        from ..engine.contract.package import load_package
        lines += publishing.publish_to_ring(ctx, load_package(out.path), args.ring)["lines"]
    print("\n".join(lines))
    return EXIT_OK


def cmd_card(args) -> int:
    from ..engine.services.requests import Kind
    card = _call(args, Kind.CARD, target=_target(args, args.target))
    if args.json:
        print(json.dumps(card.facts, indent=2))
    else:
        print(card.show(as_html=args.html))
    return EXIT_OK


def cmd_fork(args) -> int:
    from ..engine.services import publishing
    ctx = context(args)
    pkg = publishing.fork(ctx, ctx.catalog.resolve(args.target), args.new_id, to=args.to, visibility=args.visibility)
    src = ctx.catalog.resolve(args.target)
    print(f"forked {src.id} ({src.hash[:16]}) → {pkg.id} at {pkg.root}\n"
          f"  forked_from = {{ id = {src.id}, hash = {src.hash[:16]}… }}, license {pkg.contract.license or '(none)'}, "
          f"visibility {pkg.contract.visibility}\n"
          f"  reference: {ctx.trust.status(pkg).level}")
    return EXIT_OK


def cmd_ring_add(args) -> int:
    from ..engine.services import publishing
    spec = publishing.ring_add(context(args), args.name, args.url)
    print(f"ring {args.name}: {spec['kind']} ring at {spec['url']}")
    return EXIT_OK


def cmd_ring_list(args) -> int:
    from ..engine.services import publishing
    rows = publishing.ring_list(context(args), args.query)
    if args.json:
        print(json.dumps(rows, indent=2))
        return EXIT_OK
    if not rows:
        print("no package" + (f" matches {args.query!r}" if args.query else " in any ring"))
    for r in rows:
        print(f"{r['ring']:10s} {r['id']:40s} {str(r['hash'])[:16]}  {r['license'] or '-':14s} "
              f"{r['visibility']:9s} [{r['tolerance']}] {r['summary']}")
    return EXIT_OK


def cmd_ring_fetch(args) -> int:
    from ..engine.services import publishing
    out = publishing.ring_fetch(context(args), args.ref, ring=args.ring, to=args.to)
    print("\n".join(out["lines"]))
    return EXIT_OK


def cmd_ring_verify(args) -> int:
    from ..engine.services.requests import Kind
    out = _call(args, Kind.VERIFY_HERE, target=_target(args, args.target))
    print("\n".join(out.text_lines()))
    return EXIT_OK


def add_commands(sub) -> None:
    """Registers the publishing commands on the `scellis` subparsers."""
    p = sub.add_parser("publish", help="change an op's visibility (and license); optionally put it in a ring")
    p.add_argument("path", metavar="PATH|ID")
    p.add_argument("--visibility", required=True, choices=("private", "workspace", "public"))
    p.add_argument("--license", metavar="EXPR", help="an SPDX license expression, e.g. Apache-2.0")
    p.add_argument("--ring", metavar="NAME", help="also publish into this exchange ring (scellis ring add)")
    p.add_argument("--timeout", type=seconds, default=300.0, metavar="SECONDS")
    p.set_defaults(fn=cmd_publish)
    p = sub.add_parser("card", help="an op's card: source, trust, tolerance badge, receipts, license, lineage")
    p.add_argument("target", metavar="ID|PATH")
    p.add_argument("--html", action="store_true", help="the card as HTML (as the Studio shows it)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--timeout", type=seconds, default=60.0, metavar="SECONDS")
    p.set_defaults(fn=cmd_card)
    p = sub.add_parser("fork", help="copy an op under a new id, recording its lineage (forked_from)")
    p.add_argument("target", metavar="ID|PATH")
    p.add_argument("new_id", metavar="NEW_ID")
    p.add_argument("--to", metavar="DIR", help="where (default: your ops folder)")
    p.add_argument("--visibility", default="private", choices=("private", "workspace", "public"))
    p.set_defaults(fn=cmd_fork)
    ring = sub.add_parser("ring", help="exchange rings: shared, freely licensed packages")
    rsub = ring.add_subparsers(dest="ring_command", required=True)
    p = rsub.add_parser("add", help="remember a ring: a directory, or a git repository (any git remote)")
    p.add_argument("name")
    p.add_argument("url", metavar="URL|PATH")
    p.set_defaults(fn=cmd_ring_add)
    p = rsub.add_parser("list", help="the packages of every known ring")
    p.add_argument("query", nargs="?")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_ring_list)
    p = rsub.add_parser("fetch", help="fetch and verify a package from a ring (it stays untrusted)")
    p.add_argument("ref", metavar="ID[@HASH]")
    p.add_argument("--ring", metavar="NAME")
    p.add_argument("--to", metavar="DIR", help="where (default: your ops folder, ops/fetched/...)")
    p.set_defaults(fn=cmd_ring_fetch)
    p = rsub.add_parser("verify", help="re-run conformance (and gradcheck) here for a fetched op")
    p.add_argument("target", metavar="PATH|ID")
    p.add_argument("--timeout", type=seconds, default=300.0, metavar="SECONDS")
    p.set_defaults(fn=cmd_ring_verify)
