"""`scellis`: the headless front end. Exit 0 ok, 1 check failed, 2 usage or input error, 3 inconclusive (gradcheck)."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from .cli_args import EXIT_FAILED, EXIT_OK, EXIT_USAGE, byte_count, param_value, positive, seconds
from .engine.arrays import array_header, check_writable, load_input, save_array
from .engine.errors import StudioError


def _console():
    from rich.console import Console
    return Console(highlight=False, width=None if sys.stdout.isatty() else 200)


def _context(args):
    """This process's context: the catalog (with --ops-path) and the user's trust store. Device work
    never runs here: it runs in the device worker (``_worker``), which has its own context."""
    from .engine.context import Context
    return Context.open(getattr(args, "ops_path", None) or [])


def _catalog(args):
    return _context(args).catalog


def _worker(budget_s: float):
    """The device worker: a kernel that never finishes is killed at its budget and reported
    (exit 2), never a hung terminal (docs/reliability.md). Every device-touching command uses it."""
    from .engine.worker.client import WorkerClient
    return WorkerClient(budget_s=budget_s)


# ------------------------------------------------------------------ commands

def cmd_ops_list(args) -> int:
    from rich.markup import escape
    from rich.table import Table

    from .engine.contract.catalog import origin
    cat = _catalog(args)
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
        _console().print(t)
    for e in cat.problems:
        print(f"warning: skipped a package: {e.format()}", file=sys.stderr)
    return EXIT_OK


def cmd_ops_show(args) -> int:
    from .engine.contract.catalog import origin
    p = _catalog(args).resolve(args.id)
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
        con = _console()
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


def cmd_check(args) -> int:
    pkg = _catalog(args).resolve(args.target)
    with _worker(args.timeout) as worker:     # kernels compile in the worker: a compiler crash is its
        rep = worker.call("check", target=str(pkg.root))
    if args.json:
        print(json.dumps(rep, indent=2))
        return EXIT_OK if rep["ok"] else EXIT_FAILED
    print(f"check  {rep['op']}  ({rep['hash'][:16]})")
    for s in rep["passed"]:
        print(f"  ok    {s}")
    for e in rep["errors"]:
        print("  FAIL  " + StudioError.from_dict(e).format().replace("\n", "\n        "))
    print("verdict: " + ("pass" if rep["ok"] else f"FAIL ({len(rep['errors'])} error(s))"))
    return EXIT_OK if rep["ok"] else EXIT_FAILED


def cmd_run(args) -> int:
    pkg = _catalog(args).resolve(args.id)
    sig = pkg.contract.signature
    params = dict(param_value(p) for p in args.param or [])
    files = _named(pkg, args.input or [], sig.inputs, "input")
    missing = [t.name for t in sig.inputs if t.name not in files]
    if missing:
        raise StudioError(f"{pkg.id} needs input(s) {', '.join(missing)}", field="--input",
                          hint="--input NAME=FILE.npy (or .csv), once per input")
    for name, path in files.items():          # the cheap refusals (no file, FIFO, .npz, strings) come first
        array_header(path, spec=sig.input(name))
    targets = {name: check_writable(path) for name, path in _named(pkg, args.out or [], sig.outputs, "output").items()}
    with _worker(args.timeout) as worker:     # inputs judged against the signature and the device first
        profile = worker.call("profile")
        inputs = {name: load_input(path, sig.input(name), limits=profile.get("limits"), budget=args.budget)
                  for name, path in files.items()}
        if not args.require_receipt:
            _warn_unproven(pkg, profile["id"])
        outs = worker.call("run", target=str(pkg.root), inputs=inputs, params=params, budget_bytes=args.budget,
                           require_receipt=args.require_receipt)
    from .cli_tune import say_tuning; say_tuning(pkg, profile["id"], params)   # noqa: E702 - which tunable values ran
    for name, path in targets.items():
        save_array(path, outs[name])
        print(f"wrote {path}  ({name}: {outs[name].shape} {outs[name].dtype})")
    if not targets:
        for name, a in outs.items():
            print(f"{name}: shape {a.shape} {a.dtype}  {np.array2string(a.reshape(-1)[:8], precision=6)}"
                  + (" ..." if a.size > 8 else ""))
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


def _warn_unproven(pkg, profile_id: str) -> None:
    """Without --require-receipt a run is not gated on a receipt; an unproven kernel earns a warning."""
    from .engine.proof.receipts import local_status
    status = local_status(pkg, profile_id)
    if status != "valid":
        print(f"warning: {pkg.id} has no valid conformance receipt on this GPU profile ({status}); "
              f"running anyway — `scellis conform {pkg.id}` proves it", file=sys.stderr)


def cmd_demo(args) -> int:
    check_writable(args.out)
    with _worker(args.timeout) as worker:
        r = worker.call("demo", n=args.n, w=args.w, seed=args.seed)
    x, y, w = r["x"], r["y"], r["w"]
    for line in r["proofs"]:
        print(line)
    print(f"gpu   {r['profile']['summary']} ({r['profile']['id']})")
    for op, h in r["ops"]:
        print(f"op    {op}  hash {h[:16]}")
    spikes = int(np.sum(np.abs(x[w // 2: len(x) - w // 2] - y) > 2.0))
    print(f"ran   n = {len(x)}, w = {w}: source {r['seconds'][0] * 1e3:.0f} ms, median {r['seconds'][1] * 1e3:.0f} ms")
    print(f"saw   {spikes} samples where the median departs from the input by > 2 (the removed spikes)")
    from .figures import export_plot, signal_plot
    shown = slice(0, min(len(y), 4000))
    plot = signal_plot([("input (spiky)", x[w // 2:][shown], "#9aa5b1"), (f"windowed median, w = {w}", y[shown], "#d1495b")],
                       f"spike removal: first {shown.stop} of {len(x)} samples")
    export_plot(plot, args.out)
    print(f"wrote {args.out}")
    return EXIT_OK


def _legacy_receipts(pkg) -> None:
    """One line when an older version left receipts in the package folder (they are ignored)."""
    from .engine.proof.receipts import legacy_note
    note = legacy_note(pkg)
    if note:
        print(note, file=sys.stderr)


def _first_failure(note: dict) -> None:
    """Printed the moment the worker judges the first failing case, before the whole verdict."""
    print(f"first failure (the rest of the corpus runs on): {note.get('text', '')}", file=sys.stderr, flush=True)


def cmd_conform(args) -> int:
    pkg = _catalog(args).resolve(args.target)
    _legacy_receipts(pkg)
    request = dict(target=str(pkg.root), seed=args.seed, large=args.large, case=args.case,
                   receipt=not args.no_receipt)
    with _worker(args.timeout) as worker:
        if args.json or not sys.stderr.isatty():
            out = worker.call("conform", budget_s=args.timeout, on_note=None if args.json else _first_failure, **request)
        else:
            from rich.progress import Progress
            with Progress(transient=True) as bar:
                task = bar.add_task(f"conformance {pkg.id}", total=None)
                out = worker.call("conform", budget_s=args.timeout,
                                  progress=lambda done, total: bar.update(task, completed=done, total=total),
                                  on_note=_first_failure, **request)
    if args.json:
        print(json.dumps({k: v for k, v in out.items() if k != "lines"}, indent=2))
    else:
        print("\n".join(out["lines"]))
        if "receipt" in out:
            print(f"  receipt   : {out['receipt']}")
    return EXIT_OK if out["verdict"] == "pass" else EXIT_FAILED


def cmd_receipts(args) -> int:
    pkg = _catalog(args).resolve(args.target)
    _legacy_receipts(pkg)
    with _worker(args.timeout) as worker:
        found = worker.call("receipts", target=str(pkg.root))
    if not found:
        print(f"{pkg.id}: no receipts (run `scellis conform {pkg.id}`)")
        return EXIT_FAILED
    for r in found:
        problems = r["problems"] or (_why_unreadable(r["path"]) if r["status"] == "malformed" else [])
        print(f"{r['status']:9s} {r['path']}" + "".join(f"\n          - {p}" for p in problems)
              + "".join(f"\n          {c}" for c in r.get("coverage", [])))
    return EXIT_OK if any(r["status"] == "valid" for r in found) else EXIT_FAILED


def _why_unreadable(path: str) -> list[str]:
    """Why a receipt file is not one (the worker's report has the status only): read here again,
    bounded and never blocking (studio/engine/proof/receipts.py)."""
    from .engine.proof.receipts import read_receipt
    try:
        read_receipt(Path(path))
    except StudioError as e:
        return [e.message + (f" (line {e.line}, column {e.col})" if e.line else "")]
    return []


def cmd_profile(args) -> int:
    with _worker(args.timeout) as worker:
        print(json.dumps(worker.call("profile"), indent=2))
    return EXIT_OK


def cmd_gradcheck(args) -> int:
    """Exit 0 pass, 1 fail, 3 inconclusive (a check that cannot fail certifies nothing)."""
    pkg = _catalog(args).resolve(args.target)
    params = dict(param_value(p) for p in args.param or [])
    with _worker(args.timeout) as worker:
        out = worker.call("gradcheck", target=str(pkg.root), params=params, h=args.h, seed=args.seed,
                          tolerance=args.tolerance, receipt=not args.no_receipt)
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print("\n".join(out["lines"]))
        if "receipt" in out:
            print(f"  receipt  : {out['receipt']}")
    return int(out["exit_code"])


def cmd_trust(args) -> int:
    """Record the user's trust in a package's exact content (docs/security.md)."""
    ctx = _context(args)
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


_seconds = seconds
_positive = positive(1e300, "a finite number")


def _timeout(p, default: float) -> None:
    p.add_argument("--timeout", type=_seconds, default=default, metavar="SECONDS",
                   help=f"stop the device work if it shows no progress for this long (default {default:g} s)")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="scellis", description="Author GPU compute ops as content and prove them right.")
    ap.add_argument("--ops-path", action="append", metavar="DIR", help="extra folder of op packages")
    ap.add_argument("--allow-opengl", action="store_true",
                    help="allow wgpu's OpenGL backend when no Vulkan/Metal/D3D12 adapter exists "
                         "(its compute results are not trustworthy; the GPU profile records the backend)")
    sub = ap.add_subparsers(dest="command", required=True)
    ops = sub.add_parser("ops", help="the catalog").add_subparsers(dest="ops_command", required=True)
    p = ops.add_parser("list", help="list every op, builtin and user alike")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_ops_list)
    p = ops.add_parser("show", help="show one op's contract")
    p.add_argument("id")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_ops_show)
    p = sub.add_parser("check", help="the checker's static report for a package path or op id")
    _timeout(p, 60)
    p.add_argument("target")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_check)
    p = sub.add_parser("run", help="run an op on the device")
    p.add_argument("id")
    p.add_argument("--param", action="append", metavar="NAME=VALUE")
    p.add_argument("--input", action="append", metavar="[NAME=]FILE")
    p.add_argument("--out", action="append", metavar="[NAME=]FILE")
    p.add_argument("--budget", type=byte_count, metavar="BYTES", help="refuse runs needing more memory")
    p.add_argument("--timeout", type=_seconds, default=5.0, metavar="SECONDS",
                   help="stop a run that takes longer (default 5 s); the kernel is killed with its worker")
    p.add_argument("--require-receipt", action="store_true",
                   help="show a result only from an op proven here: without a valid receipt for this GPU "
                        "profile, conformance runs first, and a failing op stops the run")
    p.set_defaults(fn=cmd_run)
    p = sub.add_parser("demo", help="headless demo: spike removal on a synthetic signal, plot to PNG")
    _timeout(p, 300)
    p.add_argument("--out", default="scellis-demo.png")
    p.add_argument("--n", type=int, default=1_000_000)
    p.add_argument("--w", type=int, default=7)
    p.add_argument("--seed", type=int, default=1)
    p.set_defaults(fn=cmd_demo)
    p = sub.add_parser("conform", help="run the engine's conformance corpus; writes a receipt")
    p.add_argument("target", metavar="PATH|ID")
    p.add_argument("--large", action="store_true", help="add the >= 1e6-element case")
    p.add_argument("--json", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--case", type=int, help="run only this case of the corpus (to reproduce a failure)")
    p.add_argument("--no-receipt", action="store_true", help="do not write a receipt")
    p.add_argument("--timeout", type=_seconds, default=120.0, metavar="SECONDS",
                   help="kill the device work if it shows no progress for this long (default 120)")
    p.set_defaults(fn=cmd_conform)
    p = sub.add_parser("receipts", help="verify an op's receipts against its content and this GPU profile")
    _timeout(p, 60)
    p.add_argument("target", metavar="PATH|ID")
    p.set_defaults(fn=cmd_receipts)
    p = sub.add_parser("profile", help="print this machine's GPU profile")
    _timeout(p, 60)
    p.set_defaults(fn=cmd_profile)
    p = sub.add_parser("trust", help="allow the Python reference of a package you did not write here to run")
    p.add_argument("targets", nargs="*", metavar="PATH|ID")
    p.add_argument("--revoke", action="store_true", help="forget the trust instead")
    p.add_argument("--list", action="store_true", help="list trusted and authored content hashes")
    p.set_defaults(fn=cmd_trust)
    p = sub.add_parser("gradcheck", help="check a declared backward by finite differences (exit 3: inconclusive)")
    _timeout(p, 300)
    p.add_argument("target", metavar="PATH|ID")
    p.add_argument("--param", action="append", metavar="NAME=VALUE")
    p.add_argument("--json", action="store_true", help="the report with every probe, for plotting")
    p.add_argument("--h", type=_positive, help="central-difference step (default 1e-3)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tolerance", type=_positive, help="override the declared gradient tolerance (writes no receipt)")
    p.add_argument("--no-receipt", action="store_true", help="do not write receipts/gradcheck/<hash>.json")
    p.set_defaults(fn=cmd_gradcheck)
    from . import cli_learn, cli_publish, cli_shard, cli_tune, cli_workflow
    for front in (cli_workflow, cli_publish, cli_learn, cli_shard, cli_tune):   # workflow/train, publish/card/fork/ring, learn, shard-report, tune
        front.add_commands(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    if args.allow_opengl:   # the worker process inherits it
        import os

        from .engine.device.device import ALLOW_OPENGL_ENV
        os.environ[ALLOW_OPENGL_ENV] = "1"
    try:
        return args.fn(args)
    except StudioError as e:
        print("error: " + e.format(), file=sys.stderr)
        return EXIT_FAILED if e.field == "proof" else EXIT_USAGE    # "proof": a failed check (services.actions)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except OSError as e:     # the filesystem said no where no check named it first: one line, file and errno
        from .engine.errors import from_os_error
        print("error: " + from_os_error(e, doing="failed").format(), file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
