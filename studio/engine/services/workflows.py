"""The workflow use cases: run a workflow file, verify a record, train. The CLI calls them through
the device worker (services/requests.py; the Studio will too), so each rule is written once:

- a step runs only with a valid conformance receipt for this GPU profile, unless the user allows
  unverified ops for this run (the record says so); ``prove`` earns the missing receipts first
  (conformance here, as the main job does: actions.require_proof), and for training also the
  missing gradcheck receipts of the declared VJPs on the way to the loss (a pass earns one);
- every run writes its provenance record (atomically), and its data sinks; plots are the front
  end's (Qt): the result carries each plot's series, already cut to its window and aligned."""
from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import msgspec
import numpy as np

from ..arrays import check_writable, save_array
from ..context import Context
from ..errors import StudioError
from ..grad.composite import bind
from ..proof import receipts as receipt_store
from ..proof.gradcheck import gradcheck as run_gradcheck
from ..proof.reliance import shaped
from ..workflow import checkpoint as ckpt
from ..workflow.optim import Optimizer
from ..workflow.plan import make_plan, verify_op
from ..workflow.provenance import make_record, read_record, verify_record, write_record
from ..workflow.report import offset_of, report_lines, spike_report
from ..records.canonical import array_digest
from ..workflow.run import run_workflow as run_wf
from ..workflow.spec import Sink, Wire, Workflow, load_workflow
from ..workflow.train import Trainer, swapped
from ..workflow.train_record import compare_rungs, training_record
from ..workflow.wavio import write_wav
from .actions import earn_gradcheck_receipt, require_proof
from .outputs import refuse_install

# the device worker's requests workflow_run, workflow_verify and train: services/requests.py


# ------------------------------------------------------------------ the worker's reports
class WorkflowRunReport(msgspec.Struct, kw_only=True):
    """The worker's ``workflow_run`` request (``run_workflow``'s result): the record written and where,
    the proofs earned first, the wall time (``total``, ``proving``, ``steps``), each plot's series
    (already cut to its window: the front end draws them), the data sinks written, the spike report
    and its lines, and, with ``all_outputs``, every wire's array."""
    workflow: str
    status: str
    record_path: str
    record: dict
    proofs: list[str]
    wall_seconds: dict
    plots: list[dict]
    written: list[str]
    report: dict | None
    report_lines: list[str]
    lines: list[str]
    arrays: dict | None = None

    def text_lines(self) -> list[str]:
        """The run as text (the CLI prints it; the Studio's provenance view shows it)."""
        return self.proofs + self.lines + self.report_lines

    def in_all(self) -> str | None:
        """The wall time with the proving in it, where there was proving (the run's own time leaves it out)."""
        w = self.wall_seconds
        if not w.get("proving"):
            return None
        return f"in all    {w['total']:.1f} s: proving missing receipts {w['proving']:.1f} s, the run {w['steps']:.2f} s"

    def files(self) -> list[str]:
        return self.written + [p["file"] for p in self.plots] + [self.record_path]

    def to_json(self, out_dir) -> dict:
        """What `scellis workflow run --json` prints (the plots by file; the arrays stay out)."""
        return {"workflow": self.workflow, "status": self.status, "record_path": self.record_path, "report": self.report,
                "written": self.written, "lines": self.lines, "plots": [p["file"] for p in self.plots],
                "out_dir": str(out_dir)}


class VerifyResult(msgspec.Struct, kw_only=True):
    """The worker's ``workflow_verify`` request (workflow/provenance.py's VerifyReport.to_json): whether
    every step reproduces, the notes and problems, each step's recorded and present hashes, and ``lines``
    (what the CLI prints and the Studio shows)."""
    workflow: str
    ok: bool
    notes: list[str]
    problems: list[str]
    steps: list[dict]
    lines: list[str]


class TrainReport(msgspec.Struct, kw_only=True):
    """The worker's ``train`` request (``train``'s result): the losses, the parameters learned (arrays),
    the ladder of rungs, the memory, the comparison of two rungs (``compare``), the checkpoint and the
    record written, and ``lines`` (the proofs earned first)."""
    workflow: str
    status: str
    losses: list[float]
    final_loss: float
    fall: float
    params: dict
    ladder: list
    memory: list
    comparison: dict | None
    checkpoint: str
    record_path: str
    seconds: float
    lines: list[str]
    optimizer: str

    def to_json(self) -> dict:
        """What `scellis train --json` prints (the parameters as lists)."""
        out = {k: v for k, v in msgspec.structs.asdict(self).items() if k != "params"}
        return out | {"params": {k: np.asarray(v).tolist() for k, v in self.params.items()}}

    def text_lines(self) -> list[str]:
        """The training as text: the proofs earned, the ladder, the loss curve every tenth, the final loss,
        the parameters, the comparison and the files written (the CLI prints it; the Studio shows it)."""
        losses = self.losses
        every = max(1, len(losses) // 10)
        out = self.lines + ["ladder"] + [f"  {line}" for line in self.ladder]
        out += [f"  {ln}" for m in self.memory if m["rung"] == "composite" for ln in m["lines"]]
        out += [f"step {k + 1:5d}  loss {losses[k]:.6g}" for k in range(0, len(losses), every)]
        out.append(f"final      loss {self.final_loss:.6g}: fell {self.fall:.1f}x from {losses[0]:.6g} in "
                   f"{len(losses)} steps ({self.seconds:.1f} s)" if losses else "final      (no step ran)")
        out.append("params     " + "; ".join(f"{k} = {[round(float(v), 4) for v in np.asarray(a).reshape(-1)]}"
                                             for k, a in self.params.items()))
        return out + self.comparison_lines() + [f"checkpoint {self.checkpoint}", f"record     {self.record_path}"]

    def comparison_lines(self) -> list[str]:
        c = self.comparison
        if not c:
            return []
        ops = " vs ".join(x["op"] for x in c["rungs"])
        out = [f"compare    {ops}: gradients {'bit for bit equal' if c['bitwise_equal'] else 'differ'} "
               f"(max |difference| {max(c['max_abs_difference'].values()):.3g}); memory {c['memory_ratio_bytes']:.2f}x "
               f"in all, {c['memory_ratio_allocated']:.2f}x allocated beyond the inputs"]
        return out + [f"  {ln}" for rung in c["rungs"] if rung["memory"] for ln in rung["memory"]["lines"]]


def _target(out_dir: Path, path: str | Path) -> Path:
    """A path typed on the command line (absolute, as the CLI resolves them) or one below out_dir."""
    p = Path(path).expanduser()
    return p if p.is_absolute() else out_dir / p


def _inside(out_dir: Path, wf: Workflow, at: tuple[str, ...], rel: str) -> Path:
    """A file the workflow file names (its record, a sink, a checkpoint): beneath the output
    folder, also once every symlink on the way is followed (the text itself was judged relative
    and without '..' by spec.output_path); anything else is refused at its line:col."""
    target = Path(out_dir) / rel
    base = Path(out_dir).resolve()
    if not target.resolve().is_relative_to(base):
        raise wf.error(at, f"'{rel}' leaves the output folder {base} through a symlink "
                           f"(it leads to {target.resolve()})",
                       hint="a workflow file writes only beneath the folder of the run; remove the symlink, "
                            "or pass the path on the command line")
    return target


# ------------------------------------------------------------------ proving first
def _unproven(ctx: Context, pkg) -> list:
    """The kernel ops behind ``pkg`` without a valid receipt here (a composite: its steps' ops)."""
    if pkg.contract.composite is None:
        return [] if verify_op(ctx, pkg).status == "valid" else [pkg]
    return [p for bs in bind(pkg, ctx.catalog) for p in _unproven(ctx, bs.pkg)]


def prove_ops(ctx: Context, pkgs: list, *, progress=None, plan=None, on_note=None,
              names: dict[str, str] | None = None) -> list[str]:
    """Conformance for each op without a valid receipt on this GPU profile (earning one); raises with
    the failing case when an op fails here, or refuses an op whose receipt records a failure. Each
    step of ``plan`` whose receipt does not cover its run (``uncovered``) proves at its own input
    shapes and parameters first (actions.require_proof). ``on_note`` hears of each proof as it
    starts ({"kind": "proving", "op", "step", "index", "total"}: the front end names it); ``names``
    gives a package hash its step's name."""
    names = dict(names or {})
    todo, seen = [], set()           # (step name, package, keywords for require_proof)
    for s in (plan.steps.values() if plan is not None else ()):
        if s.verification.status == "uncovered":
            shapes = {k: plan.values[plan.key(w)].shape for k, w in s.inputs.items()}
            todo.append((s.name, s.pkg, {"inputs": shaped(shapes), "params": dict(s.params)}))
    for top in pkgs:
        for pkg in _unproven(ctx, top):
            if pkg.hash in seen:
                continue
            seen.add(pkg.hash)
            todo.append((names.get(top.hash), pkg, {}))
    lines = []
    for k, (step, pkg, kw) in enumerate(todo):
        if on_note is not None:
            on_note({"kind": "proving", "op": pkg.id, "step": step, "index": k, "total": len(todo)})
        lines.append(require_proof(ctx, pkg, progress=progress, **kw).line())
    return lines


def prove_gradients(ctx: Context, trainer: Trainer, *, receipts=None) -> list[str]:
    """Gradcheck for each declared VJP on the way to the loss that has no passing receipt yet (at the
    contract's own tolerance, so its verdict is recorded: actions.earn_gradcheck_receipt's rule)."""
    lines, todo = [], []
    for _, pkg, _ in trainer.differentiated():
        todo += [bs.pkg for bs in bind(pkg, ctx.catalog)] if pkg.contract.composite is not None else [pkg]
    for pkg in {p.hash: p for p in todo}.values():
        if pkg.contract.backward.kind != "vjp" or \
                receipt_store.gradcheck_status(pkg, receipts, seal=ctx.seal)[0] == "pass":
            continue
        rep = run_gradcheck(ctx, pkg)
        if receipts is None:
            earn_gradcheck_receipt(pkg, rep, seal=ctx.seal)
        else:                                   # the caller's receipt folder (Tape(receipts=...))
            receipt_store.write_gradcheck_receipt(pkg, rep, receipts, seal=ctx.seal)
        lines.append(f"gradcheck {pkg.id}: {rep.verdict.upper()}" + (f" ({rep.why})" if rep.why else ""))
        if rep.verdict != "pass":
            raise StudioError(f"{pkg.id}: gradcheck gives {rep.verdict.upper()}: {rep.why}; training will not use "
                              "its declared VJP", file=pkg.manifest_path, field="backward.text",
                              hint=f"see the report: `scellis gradcheck {pkg.root}`")
    return lines


# ------------------------------------------------------------------ run
def _plot_request(sink: Sink, res, file: Path) -> dict:
    arrays = [(w, res.value(w.text)) for w in sink.series]
    longest = max((a for _, a in arrays), key=lambda a: a.size)
    series = []
    for k, (w, a) in enumerate(arrays):
        a = np.asarray(a).reshape(-1)
        x0 = offset_of(a, longest)
        if sink.window is not None:
            lo, hi = sink.window
            a, x0 = a[max(0, lo - x0):max(0, hi - x0)], max(lo, x0)
        series.append({"label": sink.labels[k] if sink.labels else w.text, "wire": w.text, "x0": int(x0),
                       "y": np.ascontiguousarray(a, dtype=np.float32)})
    return {"name": sink.name, "file": str(file), "title": sink.title or f"{res.plan.wf.name}: {sink.name}",
            "x_label": sink.x_label, "y_label": sink.y_label, "series": series}


def _default_plot(wf: Workflow, res) -> Sink:
    if wf.report is not None:
        wires = [wf.report.raw, wf.report.cleaned]
    else:
        ran = set(res.steps)
        leaves = [n for n in ran if not any(w.node == n for m in ran for w in wf.steps[m].inputs.values())]
        wires = [Wire(n, n, None, ("steps", n)) for n in leaves]
    return Sink("plot", "plot", "plot.png", wires)          # the whole series (drawn as a min/max envelope)


def run_workflow(ctx: Context, path: str | Path, *, out_dir: str | Path | None = None, record: str | Path | None = None,
                 plot: str | Path | None = None, allow_unverified: bool = False, prove: bool = False,
                 until: str | None = None, all_outputs: bool = False, progress=None, on_event=None,
                 stop=None, on_note=None) -> dict:
    t0 = time.perf_counter()
    wf = load_workflow(path)
    out = refuse_install(out_dir if out_dir is not None else Path.cwd())      # never into the install
    rec_path = check_writable(_target(out, record) if record else _inside(out, wf, ("workflow", "record"), wf.record))
    refuse_install(rec_path.parent, field="record")
    sinks = list(wf.sinks.values())
    plots = [s for s in sinks if s.kind == "plot"]
    if plot is not None:
        check_writable(plot)
        refuse_install(Path(plot).parent, field="plot")
    sink_paths = {s.name: check_writable(_inside(out, wf, ("sinks", s.name, "file"), s.path)) for s in sinks}
    proofs = []
    if prove:
        plan = make_plan(ctx, wf, until=until)
        proofs = prove_ops(ctx, [s.pkg for s in plan.unverified], progress=progress, plan=plan, on_note=on_note,
                           names={s.pkg.hash: s.name for s in plan.unverified})
    proving = time.perf_counter() - t0 if proofs else 0.0
    if on_note is not None:
        on_note({"kind": "running", "proved": len(proofs), "proving_s": proving})

    def event(e):
        if on_event is not None:
            on_event(e)
        if progress is not None and e.kind == "done":
            progress(e.index + 1, e.total)
    res = run_wf(ctx, wf, until=until, allow_unverified=allow_unverified, on_event=event, stop=stop)
    rec = make_record(ctx, res, options={"until": until, "allow_unverified": allow_unverified, "prove": prove})
    written, requests = [], []
    for s in sinks:
        if s.kind != "data" or res.plan.key(s.series[0]) not in res.arrays:
            continue
        target = sink_paths[s.name]
        a = res.value(s.series[0].text)
        entry = {"file": str(target), "kind": "data", "series": s.series[0].text, **array_digest(a)}
        if target.suffix.lower() == ".wav":
            entry["clipped"] = write_wav(target, a, s.sample_rate)
        else:
            save_array(target, a)
        rec["sinks"][s.name] = entry
        written.append(str(target))
    if plot is not None and not plots and res.status == "done":
        plots = [_default_plot(wf, res)]
    for k, s in enumerate(plots):
        if not all(res.plan.key(w) in res.arrays for w in s.series):
            continue
        target = Path(plot) if (plot is not None and k == 0) else sink_paths.get(s.name) or _target(out, s.path)
        requests.append(_plot_request(s, res, target))
        rec["sinks"][s.name] = {"file": str(target), "kind": "plot",
                                "series": {w.text: res.digests[res.plan.key(w)] for w in s.series}}
    rep = None
    if wf.report is not None and all(res.plan.key(w) in res.arrays for w in (wf.report.raw, wf.report.cleaned,
                                                                            wf.report.clean)):
        rep = spike_report(res.value(wf.report.raw.text), res.value(wf.report.cleaned.text),
                           res.value(wf.report.clean.text))
        rec["report"] = rep
    write_record(rec_path, rec, ctx.seal)
    # the whole request's wall time, proving included: what the user waited for
    wall = {"total": time.perf_counter() - t0, "proving": proving,
            "steps": float(rec["seconds"].get("total", 0.0))}
    result = {"workflow": wf.name, "status": res.status, "record_path": str(rec_path), "record": rec,
              "proofs": proofs, "wall_seconds": wall, "plots": requests, "written": written, "report": rep,
              "report_lines": report_lines(rep) if rep else [], "lines": run_lines(rec)}
    if all_outputs:
        result["arrays"] = dict(res.arrays)
    return result


def run_lines(rec: dict) -> list[str]:
    prof = rec["gpu_profile"]
    out = [f"workflow  {rec['workflow']['name']}  (sha256 {rec['workflow']['sha256'][:16]})",
           f"gpu       {prof['adapter'].get('device')} [{prof['backend']}] ({prof['id']})"]
    if rec["run"]["allow_unverified"]:
        out.append("unverified ops allowed for this run: " + (", ".join(rec["run"]["unverified_steps"]) or "none needed"))
    for s in rec["steps"]:
        r = s["receipt"]
        rid = r.get("receipt") or ("via its steps" if r.get("parts") else "-")
        sec = s["seconds"]
        outs = ", ".join(f"{k} {v['sha256'][:12]}" for k, v in s["outputs"].items())
        out.append(f"step      {s['name']:10s} {s['op']:34s} {s['package_hash'][:12]}  receipt {r['status']} ({rid})  "
                   f"{1e3 * (sec['compile'] + sec['run']):7.1f} ms  → {outs}")
    sec, tr = rec["seconds"], rec["transfers"]
    out.append(f"time      {1e3 * sec.get('total', 0):.0f} ms end to end: plan and verify {1e3 * sec.get('plan', 0):.0f} ms, "
               f"steps {1e3 * sec['run']:.0f} ms, read back {1e3 * sec['read']:.0f} ms, hash {1e3 * sec['hash']:.0f} ms")
    out.append(f"device    {tr['dispatches']} dispatches, {tr['uploads']} upload(s) ({tr['upload_bytes']} bytes), "
               f"{tr['readbacks']} read-back(s) after the last step; nothing moved between steps")
    return out


def verify(ctx: Context, record_path: str | Path, *, progress=None, on_event=None, stop=None) -> dict:
    sealed = read_record(record_path, ctx.seal)
    rec = sealed.doc
    if rec.get("kind") == "train":
        raise StudioError("this is a training record: verify re-runs workflow runs", file=str(record_path),
                          field="kind", hint="retrain with `scellis train` and compare its loss curve")

    def event(e):
        if on_event is not None:
            on_event(e)
        if progress is not None and e.kind == "done":
            progress(e.index + 1, e.total)
    return verify_record(ctx, rec, origin=sealed.seal.status, on_event=event, stop=stop).to_json()


# ------------------------------------------------------------------ train
def train(ctx: Context, path: str | Path, *, steps: int | None = None, optimizer: str | None = None,
          learning_rate: float | None = None, swaps: dict[str, str] | None = None, prove: bool = False,
          allow_unverified: bool = False, receipts: str | Path | None = None, resume: str | Path | None = None,
          checkpoint: str | Path | None = None, record: str | Path | None = None, out_dir: str | Path | None = None,
          compare: dict[str, str] | None = None, progress=None, on_step=None, stop=None) -> dict:
    wf = load_workflow(path)
    if wf.train is None:
        raise wf.error(("train",), "the workflow has no [train] section", hint="docs/workflows.md, \"Training\"")
    if swaps:
        wf = swapped(wf, swaps)
    changes = {k: v for k, v in (("optimizer", optimizer), ("learning_rate", learning_rate)) if v is not None}
    if changes:
        wf = replace(wf, train=replace(wf.train, **changes))
    out = refuse_install(out_dir if out_dir is not None else Path.cwd())      # never into the install
    stem = Path(wf.record).name.removesuffix(".record.json")
    ck_default = wf.train.checkpoint or f"{stem}.checkpoint.json"
    ck_path = check_writable(_target(out, checkpoint) if checkpoint else
                             _inside(out, wf, ("train", "checkpoint"), ck_default))
    rec_path = check_writable(_target(out, record) if record else _inside(out, wf, ("workflow", "record"), wf.record))
    start, before, opt = None, [], None
    if resume is not None:
        d = ckpt.read_checkpoint(resume, ctx.seal)
        if d["workflow_sha256"] != wf.hash:
            raise StudioError("the checkpoint was written by another version of this workflow", file=str(resume),
                              field="workflow_sha256", hint="resume with the workflow file that wrote it")
        start, before = ckpt.checkpoint_params(d, file=str(resume)), list(d["losses"])
    lines = []
    tr = Trainer(ctx, wf, receipts=receipts, allow_unverified=allow_unverified, params=start, check=False)
    if resume is not None:
        opt = Optimizer.from_json(d["optimizer"], {n: a.shape for n, a in tr.params.items()})
        tr.optimizer = opt
    if prove:
        lines += prove_ops(ctx, [s.pkg for s in tr.plan.unverified] + [tr.loss_pkg], progress=progress, plan=tr.plan)
        tr.reverify()
        lines += prove_gradients(ctx, tr, receipts=receipts)
    if prove and compare:                       # the other rung's ops too (a composite: its parts)
        other = Trainer(ctx, swapped(wf, dict([next(iter(compare.items()))])), receipts=receipts,
                        allow_unverified=allow_unverified, check=False)
        lines += prove_ops(ctx, [s.pkg for s in other.plan.unverified], progress=progress, plan=other.plan)
        other.reverify()
        lines += prove_gradients(ctx, other, receipts=receipts)
    tr.check()
    ladder = tr.ladder()
    comparison = compare_rungs(ctx, wf, *next(iter(compare.items())), receipts=receipts,
                               allow_unverified=allow_unverified) if compare else None
    total = int(steps or wf.train.steps)        # the step to reach, counting a resumed checkpoint's (as `learn`)
    if len(before) >= total:
        raise StudioError(f"the checkpoint is already at step {len(before)}, and --steps {total} is the step to reach",
                          file=str(resume), field="--steps",
                          hint=f"pass --steps greater than {len(before)} (e.g. --steps {len(before) + total})")
    more = total - len(before)

    def step(s):
        if on_step is not None:
            on_step(s)
        if progress is not None:
            progress(len(before) + s.step, total, float(s.loss))   # the loss travels with the progress: a live curve
    res = tr.run(more, on_step=step, stop=stop)
    res.ladder = ladder
    ck = ckpt.make_checkpoint(workflow_sha256=wf.hash, step=len(before) + len(res.losses), params=res.params,
                              optimizer=tr.optimizer.to_json(), losses=before + res.losses)
    ck_file, ck_sha = ckpt.write_checkpoint(ck_path, ck, ctx.seal)
    options = {"steps": total, "optimizer": wf.train.optimizer, "learning_rate": wf.train.learning_rate,
               "swaps": dict(swaps or {}), "resume": str(resume) if resume else None, "prove": prove,
               "receipts": str(receipts) if receipts else None}
    rec = training_record(ctx, tr, res, options=options, checkpoint={"file": str(ck_file), "sha256": ck_sha},
                          losses_before=before)
    if comparison:
        rec["training"]["comparison"] = comparison
    write_record(rec_path, rec, ctx.seal)
    t = rec["training"]
    return {"workflow": wf.name, "status": res.status, "losses": t["losses"], "final_loss": res.final_loss,
            "fall": t["fall"], "params": {n: a for n, a in res.params.items()}, "ladder": ladder,
            "memory": t["memory"], "comparison": comparison, "checkpoint": str(ck_file), "record_path": str(rec_path),
            "seconds": t["seconds"], "lines": lines, "optimizer": wf.train.optimizer}


# ------------------------------------------------------------------ the device worker's request kinds
def _announcing(req):
    def on_event(e):
        if e.kind == "start" and e.pkg is not None:
            req.announce(e.pkg)
    return on_event


def handle_run(req, *, path: str, **kw) -> WorkflowRunReport:
    return WorkflowRunReport(**run_workflow(req.ctx, path, progress=req.progress, on_event=_announcing(req),
                                            on_note=req.note, **kw))


def handle_verify(req, *, record: str) -> VerifyResult:
    return VerifyResult(**verify(req.ctx, record, progress=req.progress, on_event=_announcing(req)))


def handle_train(req, *, path: str, **kw) -> TrainReport:
    return TrainReport(**train(req.ctx, path, progress=req.progress, **kw))
