"""`scellis train FILE --owners N`: data-parallel training of a workflow that writes out its gradients
(docs/workflows.md, "Data-parallel training"). The driver runs here (the learner's way: its own
device measures the batch-contracting steps), the owners on Dask; one line per step with its loss,
its time split and its worst per-replica rounding, one line per epoch with the held-out accuracy,
then the divisor check and what was written. Exit 0 done, 2 an input error."""
from __future__ import annotations

import json
from pathlib import Path

from .args import EXIT_OK
from .session import context


def cmd_train_parallel(args, path: Path) -> int:
    from ..engine.services import data_parallel as dp
    if args.plot:
        from ..engine.arrays import check_writable
        check_writable(args.plot)
    quiet = args.json

    def on_step(rec):
        if not quiet and (rec.step == 1 or rec.step % args.every == 0):
            print(dp.step_line(rec), flush=True)

    def on_epoch(ep):
        if not quiet:
            print(dp.epoch_line(ep), flush=True)

    def on_note(note):
        if quiet:
            return
        if note["kind"] == "proving":
            print(f"proving   {note['op']}" + (f" (step {note['step']})" if note.get("step") else ""), flush=True)
        elif note["kind"] == "owners":
            print(f"owners    {note['owners']} on Dask, holding {note['replicas']} replicas", flush=True)

    with context(args) as ctx:
        r = dp.train(path, owners=args.owners, scheduler=args.scheduler, epochs=args.epochs, steps=args.steps,
                     precision=args.precision,
                     prove=args.prove, allow_unverified=args.allow_unverified, out_dir=args.out_dir,
                     record=args.record, ctx=ctx, on_step=on_step, on_epoch=on_epoch, on_note=on_note)
    rec, res = r["record"], r["result"]
    if args.plot:
        from ..figures import export_plot, signal_plot
        epochs = [e["epoch"] for e in rec["epochs"]]
        w = signal_plot([("training loss (epoch mean)", [e["loss"] for e in rec["epochs"]], "#d1495b", epochs[0]),
                         ("held-out accuracy", [e["accuracy"] for e in rec["epochs"]], "#00798c", epochs[0])],
                        f"{rec['workflow']}: {rec['owners']} owners, {rec['replicas']} replicas of "
                        f"{rec['batch'] // rec['replicas']}, {rec['precision']}", x_label="epoch", y_label="loss, accuracy",
                        width=900, height=450)
        export_plot(w, args.plot)
    if args.json:
        print(json.dumps(rec | {"record_path": r["record_path"]}, indent=1))
        return EXIT_OK
    print(rec["divisor"])
    if rec["warning"]:
        print(f"warning: {rec['warning']}")
    last = rec["epochs"][-1] if rec["epochs"] else None
    if last:
        print(f"final     held-out accuracy {last['accuracy'] * 100:.1f} % after {len(rec['epochs'])} epochs, "
              f"{len(rec['steps'])} steps, {res.seconds:.1f} s")
    print(f"params    sha256 {rec['params_sha256']}")
    print(f"wrote     {r['record_path']}" + (f"\nwrote     {args.plot}" if args.plot else ""))
    return EXIT_OK
