"""`scellis workflow run|verify|show` and `scellis train`: the workflow commands of the headless front
end. The device work runs in the device worker (its request kinds: studio/engine/services/
requests.py); plots are drawn here, with studio/figures.py. Exit codes as in
studio/cli/__init__.py: 0 ok, 1 a check failed (a record that does not reproduce), 2 an input error (a
StudioError's message at its file, line, column or field, never a traceback)."""
from __future__ import annotations

import json
from pathlib import Path

from .args import EXIT_FAILED, EXIT_OK, absolute, seconds, step_op, whole
from .session import context, ops_path, with_progress, worker


def story_workflow() -> Path:
    """The README's main job: the story workflow shipped as package data (the default of `workflow run`)."""
    from ..engine.services.outline import story_workflow as story
    return story()


def _call(args, kind, what: str, **kw):
    """One request to the device worker (the workflow use cases' kinds), a progress bar on a terminal."""
    with worker(args.timeout) as w:
        return with_progress(w, kind, what, quiet=getattr(args, "json", False), ops_path=ops_path(args), **kw)


def _output_folder(path: Path, args) -> tuple[Path, str]:
    """Where the run writes (studio/engine/services/outputs.py): --out-dir, else beside --plot, else
    the current folder — never the install (a current folder inside it: the user's output folder)."""
    from ..engine.services.outline import outline
    from ..engine.services.outputs import choose_output_folder
    return choose_output_folder(outline(path, None, strict=False).name, out_dir=args.out_dir, plot=args.plot)


def _draw(plot: dict) -> None:
    from ..figures import COLOURS, export_plot, signal_plot
    series = [(s["label"], s["y"], COLOURS[k % len(COLOURS)], s["x0"]) for k, s in enumerate(plot["series"])]
    w = signal_plot(series, plot["title"], x_label=plot["x_label"], y_label=plot["y_label"])
    export_plot(w, plot["file"])


# ------------------------------------------------------------------ commands
def cmd_workflow_run(args) -> int:
    from ..engine.services.requests import Kind
    path = Path(args.file) if args.file else story_workflow()
    if args.plot:
        from ..engine.arrays import check_writable
        check_writable(args.plot)
    out, why = _output_folder(path, args)
    r = _call(args, Kind.WORKFLOW_RUN, f"workflow {path.name}", path=str(path.resolve()),
              out_dir=str(out), record=absolute(args.record),
              plot=str(Path(args.plot).resolve()) if args.plot else None, allow_unverified=args.allow_unverified,
              prove=args.prove, until=args.until)
    for plot in r.plots:
        _draw(plot)
    if args.json:
        print(json.dumps(r.to_json(out), indent=2))
        return EXIT_OK
    print(f"outputs   {out}: {why}")
    for line in r.text_lines() + ([r.in_all()] if r.in_all() else []):
        print(line)
    for f in r.files():
        print(f"wrote     {f}")
    return EXIT_OK


def cmd_workflow_verify(args) -> int:
    import msgspec

    from ..engine.services.requests import Kind
    r = _call(args, Kind.WORKFLOW_VERIFY, f"verify {Path(args.record).name}", record=str(Path(args.record).resolve()))
    if args.json:
        print(json.dumps(msgspec.to_builtins(r), indent=2))
    else:
        print("\n".join(r.lines))
    return EXIT_OK if r.ok else EXIT_FAILED


def cmd_workflow_show(args) -> int:
    """The workflow as the engine reads it: steps in order, each op, its hash and badge (no device)."""
    from ..engine.services.outline import outline
    with context(args) as ctx:
        print("\n".join(outline(args.file, ctx).lines()))
    return EXIT_OK


def cmd_train(args) -> int:
    path = Path(args.file)
    from ..engine.services.data_parallel import names_gradients
    if names_gradients(path):                     # [train] gradients: data-parallel, owners on Dask
        from .train import cmd_train_parallel
        return cmd_train_parallel(args, path)
    if args.owners or args.epochs:
        from ..engine.errors import StudioError
        raise StudioError("--owners and --epochs train a workflow that writes out its gradients", field="--owners",
                          hint="add [train] gradients (docs/workflows.md, \"Data-parallel training\")")
    if args.plot:
        from ..engine.arrays import check_writable
        check_writable(args.plot)
    from ..engine.services.requests import Kind
    swaps = dict(step_op(s, "--swap") for s in args.swap or [])
    compare = dict([step_op(args.compare, "--compare")]) if args.compare else None
    r = _call(args, Kind.TRAIN, f"train {path.name}", path=str(path.resolve()), steps=args.steps,
              optimizer=args.optimizer, learning_rate=args.lr, swaps=swaps, prove=args.prove,
              allow_unverified=args.allow_unverified, resume=absolute(args.resume),
              receipts=str(Path(args.gradcheck_receipts).resolve()) if args.gradcheck_receipts else None,
              checkpoint=absolute(args.checkpoint), record=absolute(args.record), out_dir=str(_output_folder(path, args)[0]),
              compare=compare)
    if args.plot:
        from ..figures import export_plot, signal_plot
        w = signal_plot([(f"loss ({r.optimizer})", r.losses, "#d1495b", 1)],
                        f"{r.workflow}: MSE against the clean signal, {len(r.losses)} steps",
                        x_label="step", y_label="loss (log scale)", log_y=True, width=900, height=450)
        export_plot(w, args.plot)
    if args.json:
        print(json.dumps(r.to_json(), indent=2))
        return EXIT_OK
    print("\n".join(r.text_lines() + ([f"wrote      {args.plot}"] if args.plot else [])))
    return EXIT_OK


# ------------------------------------------------------------------ the parser
def add_commands(sub) -> None:
    """Add `workflow run|verify|show` and `train` to scellis's subparsers (studio/cli/__init__.py build_parser)."""
    wf = sub.add_parser("workflow", help="run workflows of ops; verify their provenance records")
    wsub = wf.add_subparsers(dest="workflow_command", required=True)
    p = wsub.add_parser("run", help="run a workflow file on the device; writes its sinks and provenance record")
    p.add_argument("file", nargs="?", help="the workflow .toml (default: the story's, spike_removal.toml)")
    p.add_argument("--plot", metavar="FILE.png|.svg", help="write the workflow's (first) plot here")
    p.add_argument("--record", metavar="FILE.json", help="the provenance record (default: [workflow] record)")
    p.add_argument("--out-dir", metavar="DIR", help="where the sinks and the record go (default: beside --plot, "
                   "else the current folder; never the install)")
    p.add_argument("--allow-unverified", action="store_true",
                   help="run ops without a valid conformance receipt on this GPU profile (the record says so)")
    p.add_argument("--prove", action="store_true", help="run conformance first for ops without a receipt here")
    p.add_argument("--until", metavar="STEP", help="run only up to this step (and what it needs)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--timeout", type=seconds, default=300.0, metavar="SECONDS",
                   help="stop the device work if it shows no progress for this long (default 300)")
    p.set_defaults(fn=cmd_workflow_run)
    p = wsub.add_parser("verify", help="run a recorded workflow again; say per step whether every output reproduces")
    p.add_argument("record", metavar="RECORD.json")
    p.add_argument("--json", action="store_true")
    p.add_argument("--timeout", type=seconds, default=300.0, metavar="SECONDS")
    p.set_defaults(fn=cmd_workflow_verify)
    p = wsub.add_parser("show", help="the workflow's steps in order, each op with its hash and badge")
    p.add_argument("file")
    p.set_defaults(fn=cmd_workflow_show)
    p = sub.add_parser("train", help="train a workflow's trainable sources through its ops' VJPs on the device")
    p.add_argument("file", help="a workflow .toml with a [train] section")
    p.add_argument("--steps", type=whole(1, 1_000_000, "a count"), metavar="N", help="the step to reach, counting a resumed checkpoint's steps, as for `learn` (default: [train] steps)")
    p.add_argument("--optimizer", choices=("sgd", "momentum", "adam"))
    p.add_argument("--lr", type=float, metavar="RATE", help="learning rate (default: [train] learning_rate)")
    p.add_argument("--swap", action="append", metavar="STEP=OP", help="run STEP with another op (e.g. the composite)")
    p.add_argument("--compare", metavar="STEP=OP", help="also compare STEP's gradients and memory with OP's")
    p.add_argument("--prove", action="store_true",
                   help="earn missing receipts first: conformance, and gradcheck for the declared VJPs used")
    p.add_argument("--allow-unverified", action="store_true", help="run ops without a conformance receipt here")
    p.add_argument("--gradcheck-receipts", metavar="DIR",
                   help="look gradcheck receipts up (and write them, with --prove) here instead of in each package")
    p.add_argument("--resume", metavar="CHECKPOINT.json", help="continue from a checkpoint (hash-verified)")
    p.add_argument("--checkpoint", metavar="FILE.json", help="where the checkpoint goes (default: [train] checkpoint)")
    p.add_argument("--record", metavar="FILE.json", help="the training record (default: [workflow] record)")
    p.add_argument("--plot", metavar="FILE.png|.svg", help="plot the loss curve")
    p.add_argument("--out-dir", metavar="DIR", help="where the checkpoint and the record go (default: beside "
                   "--plot, else the current folder; never the install)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--timeout", type=seconds, default=600.0, metavar="SECONDS")
    p.add_argument("--owners", type=whole(1, 256, "a count"), metavar="N",
                   help="data-parallel: N owners on Dask holding the file's replicas (default: one per replica)")
    p.add_argument("--precision", choices=("bf16", "f32"), default=None,
                   help="data-parallel: the precision the workflow's ops compute in, checked against them "
                        "(default: the ops' own)")
    p.add_argument("--epochs", type=whole(1, 10_000, "a count"), metavar="N", help="data-parallel: epochs (default: [train] epochs)")
    p.add_argument("--scheduler", metavar="tcp://HOST:PORT", help="data-parallel: use this Dask cluster")
    p.add_argument("--every", type=whole(1, 1_000_000, "a count"), default=10, metavar="K",
                   help="data-parallel: print every K-th step (default 10)")
    p.set_defaults(fn=cmd_train)
