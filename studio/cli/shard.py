"""`scellis shard-report`: the bf16 sharding report of the headless front end (issue 17).

    scellis shard-report FILE --replicas R [--json] [--allow-unverified]

FILE is a workflow (docs/workflows.md): every node is classified by its op's declared sharding
kind and verified on the workflow's own data on the device, the whole batch of R·N examples
against R shards of N. Or FILE is a learner (a learner.toml or its folder, docs/learner.md): it
trains with bf16 weight gradients on R replicas and on one, node by node (docs/bf16.md). The
work runs in the device worker. Exit 0 when every node claimed exact was exact, 1 when one was
not, 2 on an input error."""
from __future__ import annotations

import json
from pathlib import Path

from .args import EXIT_FAILED, EXIT_OK, whole
from .session import ops_path, worker


def cmd_shard_report(args) -> int:
    from ..engine.services.requests import Kind
    path = Path(args.file)
    with worker(args.timeout) as w:
        r = w.call(Kind.SHARD_REPORT, path=str(path.resolve()), replicas=args.replicas,
                        allow_unverified=args.allow_unverified, prove=args.prove, steps=args.steps, ops_path=ops_path(args))
    if args.json:
        print(json.dumps(r.to_json(), indent=2))
    else:
        print("\n".join(r.lines))
    return EXIT_OK if r.ok else EXIT_FAILED


def add_commands(sub) -> None:
    """Registers the sharding commands on the `scellis` subparsers."""
    p = sub.add_parser("shard-report", help="classify a workflow's nodes under data parallelism and measure them")
    p.add_argument("file", help="a workflow file (its nodes' ops declare [sharding] kinds), or a learner (docs/bf16.md)")
    p.add_argument("--replicas", type=whole(1, 4096, "the replica count"), required=True, metavar="R",
                   help="the replica count: the batch is split into R equal shards")
    p.add_argument("--json", action="store_true", help="the report as JSON")
    p.add_argument("--steps", type=whole(1, 4096, "the replica count"), metavar="N", help="a learner: the steps to train (default: its file's)")
    p.add_argument("--allow-unverified", action="store_true",
                   help="run ops without a conformance receipt on this GPU profile (the report says nothing of that)")
    p.add_argument("--prove", action="store_true",
                   help="earn the missing conformance receipts on this GPU profile first (a failing op stops the report)")
    p.add_argument("--timeout", type=float, default=600.0, metavar="S", help="the device worker's budget in seconds")
    p.set_defaults(fn=cmd_shard_report)
