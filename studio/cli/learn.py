"""`scellis learn`: the data-parallel learner command of the headless front end (issue 16).

    scellis learn FILE [--owners N] [--scheduler tcp://HOST:PORT] [--checkpoint DIR] [--resume] [--steps N]
                       [--owner-device cpu|gpu|auto]

FILE is a learner.toml, its folder, or the name of a shipped learner (resources/learners/).
A progress bar (on a terminal), one metric line per step, the owners' agreement per step, and at
the end the final parameter hash. A bf16 combine on an owner count that is not a power of two
prints the divisor warning (docs/learner.md "bf16 combine"). Exit 0 done, 1 the owners disagreed, 2 usage or input error."""
from __future__ import annotations

import sys

from .args import EXIT_FAILED, EXIT_OK, whole


def cmd_learn(args) -> int:
    from ..engine.services import learning
    system = learning.open_learner(args.file, owners=args.owners, max_owners=args.max_owners,
                                   scheduler=args.scheduler)          # refused before any process starts
    total = args.steps or system.steps
    placement = learning.place(system, args.owners)                    # a per-owner contract names this split
    print("\n".join(placement.lines()))
    if placement.warning:
        print(f"warning: {placement.warning}", flush=True)
    bar = None
    if sys.stderr.isatty():
        from rich.console import Console
        from rich.progress import Progress
        bar = Progress(console=Console(stderr=True), transient=True)
        bar.start()
        task = bar.add_task("learning", total=total)

    said = []

    def on_step(rec):
        line = learning.step_line(rec, total)
        if rec.paths and rec.paths != said:             # the owners' paths, once (and again if they change)
            said[:] = rec.paths
            line = "\n".join(f"owner {o}: {p}" for o, p in enumerate(rec.paths)) + "\n" + line
        if bar is not None:
            bar.console.print(line, highlight=False)
            bar.update(task, completed=rec.step)
        else:
            print(line, flush=True)

    def on_event(text):
        print(f"note: {text}", flush=True)

    try:
        out = learning.run(system, owners=args.owners, scheduler=args.scheduler, checkpoint=args.checkpoint,
                           resume=args.resume, steps=total, on_step=on_step, on_event=on_event,
                           owner_device=args.owner_device)
    finally:
        if bar is not None:
            bar.stop()
    if out.disagreement is not None:
        print("error: " + out.disagreement.format(), file=sys.stderr)
        return EXIT_FAILED
    print("\n".join(learning.result_lines(out.result)))
    return EXIT_OK


def add_commands(sub) -> None:
    """Registers the learner commands on the `scellis` subparsers."""
    p = sub.add_parser("learn", help="train a data-parallel learner: owners on Dask, an ordered combine tree")
    p.add_argument("file", help="a learner.toml, its folder, or a shipped learner's name (docs/learner.md)")
    p.add_argument("--owners", type=whole(1, 1_000_000, "a count"), metavar="N",
                   help="N owners in contiguous shares as equal as possible (default: the file's owners)")
    p.add_argument("--max-owners", type=whole(1, 4096, "a count"), metavar="N",
                   help="allow up to N owners (default: 2 per CPU core, at least 8, for a local cluster)")
    p.add_argument("--scheduler", metavar="tcp://HOST:PORT",
                   help="use this Dask cluster (default: start a local one with one worker process per owner)")
    p.add_argument("--checkpoint", metavar="DIR", help="write a checkpoint here after every step")
    p.add_argument("--resume", action="store_true", help="continue from the checkpoint in --checkpoint DIR")
    p.add_argument("--steps", type=whole(1, 1_000_000, "a count"), metavar="N", help="the step to reach (default: [learner] steps)")
    p.add_argument("--owner-device", choices=("cpu", "gpu", "auto"), default="cpu",
                   help="where each owner computes its contributions and blocks of the tree: cpu (numpy, the "
                        "default), gpu (its worker's device; refused where none) or auto (the device where one "
                        "opens, else numpy); each step says which (docs/learner.md \"Owners on a device\")")
    p.set_defaults(fn=cmd_learn)
