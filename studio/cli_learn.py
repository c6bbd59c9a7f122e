"""`scellis learn`: the data-parallel learner command of the headless front end (issue 16).

    scellis learn FILE [--owners N] [--scheduler tcp://HOST:PORT] [--checkpoint DIR] [--resume] [--steps N]

FILE is a learner.toml, its folder, or the name of a shipped learner (studio/resources/learners/).
A progress bar (on a terminal), one metric line per step, the owners' agreement per step, and at
the end the final parameter hash. A bf16 combine on an owner count that is not a power of two
prints the divisor warning (docs/learner.md "bf16 combine"). Exit 0 done, 1 the owners disagreed, 2 usage or input error."""
from __future__ import annotations

import sys
from pathlib import Path

from .cli_args import EXIT_FAILED, EXIT_OK, whole


def resolve(file: str) -> Path:
    """A path, or the name of a shipped learner."""
    from .engine.errors import StudioError
    from .engine.resources import ROOT
    p = Path(file)
    if p.exists():
        return p
    shipped = ROOT / "learners" / file
    if (shipped / "learner.toml").is_file():
        return shipped
    names = sorted(d.name for d in (ROOT / "learners").iterdir() if (d / "learner.toml").is_file())
    raise StudioError(f"no learner file or shipped learner named {file!r}", file=file,
                      hint="give a learner.toml or its folder, or one of: " + ", ".join(names))


def step_line(rec, total: int) -> str:
    agree = f"agree {rec.hashes[0][:12]}" if rec.agreed else "DISAGREE"
    shares = ",".join(map(str, rec.shares))
    return (f"step {rec.step:>4}/{total}  |mean contribution| {rec.metric:.6e}  owners {len(rec.owners)} "
            f"(shares {shares})  {agree}  {rec.seconds:.3f} s")


def cmd_learn(args) -> int:
    from .engine.learner.combine import contract_hash, order_text
    from .engine.learner.owners import Disagreement
    from .engine.learner.run import learn
    from .engine.learner.system import load_system
    from .engine.errors import StudioError
    from .engine.learner.limits import OWNERS_HINT, default_max_owners
    cap = args.max_owners or (None if args.scheduler else default_max_owners())
    system = load_system(resolve(args.file), max_owners=cap)      # refused before any process starts
    if args.owners and cap and args.owners > cap:
        raise StudioError(f"--owners {args.owners} is over the {cap} owners this run may start (one Dask worker "
                          f"process each)", field="--owners", hint=OWNERS_HINT)
    total = args.steps or system.steps
    print(f"learner {system.name}: k = {system.k}, s = {system.s}, m = {system.m}, {system.samples.shape[0]} samples, "
          f"rate {float(system.rate):g}")
    placed = system.evenly(args.owners) if args.owners else system      # a per-owner contract names this split
    print(f"combine {order_text(placed)}")
    print(f"contract {contract_hash(placed)}")
    if system.precision == "bf16":
        # a front end may use studio.engine.sharding, the layer above the learner
        from .engine.sharding.learner import learn_warning
        warning = learn_warning(system, args.owners)
        if warning:
            print(f"warning: {warning}", flush=True)
    bar = None
    if sys.stderr.isatty():
        from rich.console import Console
        from rich.progress import Progress
        bar = Progress(console=Console(stderr=True), transient=True)
        bar.start()
        task = bar.add_task("learning", total=total)

    def on_step(rec):
        line = step_line(rec, total)
        if bar is not None:
            bar.console.print(line, highlight=False)
            bar.update(task, completed=rec.step)
        else:
            print(line, flush=True)

    def on_event(text):
        print(f"note: {text}", flush=True)

    try:
        res = learn(system, owners=args.owners, scheduler=args.scheduler, checkpoint=args.checkpoint,
                    resume=args.resume, steps=total, on_step=on_step, on_event=on_event)
    except Disagreement as e:
        print("error: " + e.format(), file=sys.stderr)
        return EXIT_FAILED
    finally:
        if bar is not None:
            bar.stop()
    print(f"done: {res.step} steps on {len(res.system.owners)} owner(s), shares {res.system.shares}")
    print(f"final parameter hash {res.params_hash}")
    print(f"final parameter-and-state hash {res.replica_hash}")
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
    p.set_defaults(fn=cmd_learn)
