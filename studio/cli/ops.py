"""`scellis ops list|show`, `run`, `demo` and `trust`: the catalog, running an op on the device, the
headless demo, and the user's trust in a package's exact content (docs/security.md)."""
from __future__ import annotations

import json
import sys


from ..engine.arrays import array_header, check_writable, load_input, save_array
from ..engine.contract.catalog import origin
from ..engine.errors import StudioError
from .args import EXIT_OK, add_timeout, byte_count, params, seconds
from .session import console, context, worker


def cmd_ops_list(args) -> int:
    from rich.markup import escape
    from rich.table import Table
    cat = context(args).catalog
    ops = cat.list()
    if args.json:
        print(json.dumps([{"id": p.id, "hash": p.hash, "summary": p.contract.summary,
                           "tolerance": str(p.contract.tolerance), "category": p.contract.tolerance.category,
                           "source": origin(p),
                           "path": str(p.root)} for p in ops], indent=2))
    else:
        t = Table("op", "tolerance", "category", "backward", "hash", "summary", box=None)
        for p in ops:
            c = p.contract
            t.add_row(*(escape(v) for v in (p.id, str(c.tolerance), c.tolerance.category, c.backward.kind, p.hash[:12], c.summary)))
        console().print(t)
    for e in cat.problems:
        print(f"warning: skipped a package: {e.format()}", file=sys.stderr)
    return EXIT_OK


def cmd_ops_show(args) -> int:
    p = context(args).catalog.resolve(args.id)
    c = p.contract
    info = {"id": p.id, "hash": p.hash, "path": str(p.root), "summary": c.summary, "license": c.license,
            "visibility": c.visibility, "source": origin(p),
            "signature": c.signature.text, "shape_class": c.signature.shape_class,
            "tolerance": str(c.tolerance), "category": c.tolerance.category,
            "justification": c.tolerance.justification, "precision": c.precision,
            "backward": c.backward.text.strip(), "subgradient": c.subgradient,
            "bindings": c.bindings.text.strip(), "parts": p.part_hashes()}
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        con = console()
        for k, v in info.items():
            if isinstance(v, dict):
                v = "\n".join(f"{a}: {b}" for a, b in v.items())
            if isinstance(v, str) and "\n" in v:
                con.print(f"[bold]{k}[/bold]:")
                for line in v.splitlines():
                    con.print(f"    {line}", markup=False)
            else:
                con.print(f"[bold]{k}[/bold]: ", end="")
                con.print(str(v), markup=False)
    return EXIT_OK


def cmd_run(args) -> int:
    from ..engine.services.requests import Kind
    pkg = context(args).catalog.resolve(args.id)
    sig = pkg.contract.signature
    given = params(args.param)
    files = _named(pkg, args.input or [], sig.inputs, "input")
    missing = [t.name for t in sig.inputs if t.name not in files]
    if missing:
        raise StudioError(f"{pkg.id} needs input(s) {', '.join(missing)}", field="--input",
                          hint="--input NAME=FILE.npy (or .csv), once per input")
    for name, path in files.items():          # the cheap refusals (no file, FIFO, .npz, strings) come first
        array_header(path, spec=sig.input(name))
    targets = {name: check_writable(path) for name, path in _named(pkg, args.out or [], sig.outputs, "output").items()}
    from ..engine.services.proof_budget import RUN_BASE_S, run_budget_s
    with worker(args.timeout or RUN_BASE_S) as w:   # inputs judged against the signature and the device first
        profile = w.call(Kind.PROFILE)
        inputs = {name: load_input(path, sig.input(name), limits=profile.limits, budget=args.budget)
                  for name, path in files.items()}
        budget = args.timeout or run_budget_s(sig, inputs, given)    # the default scales with the size
        rep = w.call(Kind.RUN, target=str(pkg.root), inputs=inputs, params=given, budget_bytes=args.budget,
                     require_receipt=args.require_receipt, budget_s=budget)
    for line in rep.notes():                  # the receipt relied on (or the warning), the tuned values: the report's
        print(line, file=sys.stderr)
    for name, path in targets.items():
        save_array(path, rep.outputs[name])
        print(f"wrote {path}  ({name}: {rep.outputs[name].shape} {rep.outputs[name].dtype})")
    for line in [] if targets else rep.output_lines():
        print(line)
    return EXIT_OK


def _named(pkg, given: list[str], specs, what: str) -> dict[str, str]:
    """--input or --out [NAME=]FILE: a bare FILE is for the next tensor in the signature's order."""
    named, flag = {}, "--input" if what == "input" else "--out"
    for i, g in enumerate(given):
        name, sep, path = g.partition("=")
        if not sep:
            if i >= len(specs):
                raise StudioError(f"{pkg.id} takes {len(specs)} {what}(s); got more", field=flag)
            name, path = specs[i].name, g
        if name not in {t.name for t in specs}:
            raise StudioError(f"{pkg.id} has no {what} named '{name}'", field=flag,
                              hint=f"its {what}s: " + ", ".join(t.name for t in specs))
        named[name] = path
    return named


def cmd_demo(args) -> int:
    from ..engine.services.requests import Kind
    check_writable(args.out)
    with worker(args.timeout) as w:
        r = w.call(Kind.DEMO, n=args.n, w=args.w, seed=args.seed)
    print("\n".join(r.lines()))
    x, y, wid = r.x, r.y, r.w
    from ..figures import export_plot, signal_plot
    shown = slice(0, min(len(y), 4000))
    plot = signal_plot([("input (spiky)", x[wid // 2:][shown], "#9aa5b1"), (f"windowed median, w = {wid}", y[shown], "#d1495b")],
                       f"spike removal: first {shown.stop} of {len(x)} samples")
    export_plot(plot, args.out)
    print(f"wrote {args.out}")
    return EXIT_OK


def cmd_trust(args) -> int:
    """Record the user's trust in a package's exact content (docs/security.md)."""
    ctx = context(args)
    store = ctx.trust
    if args.list:
        for h, e in sorted(store.entries().items(), key=lambda kv: kv[1].get("at") or ""):
            print(f"{e.get('kind', '?'):8s} {h[:16]}  {e.get('op') or '-'}  {e.get('path') or '-'}  {e.get('at') or ''}")
        return EXIT_OK
    if not args.targets:
        raise StudioError("name a package to trust", field="PATH", hint="scellis trust PATH (or --list)")
    for target in args.targets:
        pkg = ctx.catalog.resolve(target)
        if args.revoke:
            gone = store.revoke(pkg)
            print(f"{'revoked' if gone else 'was not trusted'}: {pkg.id}  ({pkg.hash[:16]})")
            continue
        before = store.status(pkg)
        if before.ok:
            print(f"{pkg.id} is already trusted ({before.level}: {before.reason})")
            continue
        store.trust(pkg)
        print(f"trusted {pkg.id}  content hash {pkg.hash}\n"
              f"  {pkg.reference_path} may now run (confined: docs/security.md); a change to any file of the\n"
              f"  package makes it untrusted again")
    return EXIT_OK


def add_commands(sub) -> None:
    """Registers `ops list|show`, `run`, `demo` and `trust` on the `scellis` subparsers."""
    ops = sub.add_parser("ops", help="the catalog").add_subparsers(dest="ops_command", required=True)
    p = ops.add_parser("list", help="list every op, builtin and user alike")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_ops_list)
    p = ops.add_parser("show", help="show one op's contract")
    p.add_argument("id")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_ops_show)
    p = sub.add_parser("run", help="run an op on the device")
    p.add_argument("id")
    p.add_argument("--param", action="append", metavar="NAME=VALUE")
    p.add_argument("--input", action="append", metavar="[NAME=]FILE")
    p.add_argument("--out", action="append", metavar="[NAME=]FILE")
    p.add_argument("--budget", type=byte_count, metavar="BYTES", help="refuse runs needing more memory")
    p.add_argument("--timeout", type=seconds, default=None, metavar="SECONDS",
                   help="stop a run that takes longer (default: 5 s plus 5 s per million elements of its inputs "
                        "and outputs); the kernel is killed with its worker. A proof that runs first has its own")
    p.add_argument("--require-receipt", action="store_true",
                   help="show a result only from an op proven here: a failed receipt refuses; without a valid "
                        "receipt for this GPU profile, or past what it covers, conformance runs first, and a "
                        "failing op stops the run; stderr names the receipt relied on")
    p.set_defaults(fn=cmd_run)
    p = sub.add_parser("demo", help="headless demo: spike removal on a synthetic signal, plot to PNG")
    add_timeout(p, 300)
    p.add_argument("--out", default="scellis-demo.png")
    p.add_argument("--n", type=int, default=1_000_000)
    p.add_argument("--w", type=int, default=7)
    p.add_argument("--seed", type=int, default=1)
    p.set_defaults(fn=cmd_demo)
    p = sub.add_parser("trust", help="allow the Python reference of a package you did not write here to run")
    p.add_argument("targets", nargs="*", metavar="PATH|ID")
    p.add_argument("--revoke", action="store_true", help="forget the trust instead")
    p.add_argument("--list", action="store_true", help="list trusted and authored content hashes")
    p.set_defaults(fn=cmd_trust)
