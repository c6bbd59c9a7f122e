"""`python -m benchmarks [--quick] [--margin M] [--only NAME ...]`: every figure beside its peer,
one table, results/latest.json. With --quick (CI), the smaller set, and exit status 1 when a row's
ratio is past its limit (the ratio measured on lavapipe times the margin, default 5: a
regression of several times fails; the margin can be set by --margin or SCELLIS_BENCH_MARGIN)."""
from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import sys
import time
import traceback
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
GROUPS = ("median", "overhead", "api", "workflow", "verdict", "window_verdict", "startup", "restore", "learner",
          "tuning", "resnet")   # tuning: ~1 min; window_verdict: ~1 min; full only
QUICK_GROUPS = ("median", "overhead", "api", "workflow", "startup", "learner")   # verdict: ~10 s a run; full only


def _group_rows(name: str, engine, quick: bool, margin: float) -> list[dict]:
    if name == "learner":
        # the learner helper's module (benchmarks/bench_learner.py): rows(quick) -> rows of the same schema
        try:
            mod = importlib.import_module("benchmarks.bench_learner")
        except ImportError as e:
            if getattr(e, "name", "") not in ("benchmarks.bench_learner",):
                raise
            return []
        out = mod.rows(quick)
        for r in out:
            r.setdefault("adapter", engine.adapter)
        return out
    mod = importlib.import_module(f"benchmarks.bench_{name}")
    return mod.rows(engine, quick, margin)


def check(rows: list[dict]) -> list[str]:
    """The rows whose ratio is past their limit."""
    return [f"{r['figure']}: ratio {r['ratio']} > limit {r['limit']}" for r in rows
            if r.get("limit") is not None and not r["ratio"] <= r["limit"]]


def table(rows: list[dict]) -> str:
    head = ("figure", "peer", "ours s", "peer s", "ratio", "target", "limit")
    body = [(r["figure"], r["peer"], f"{r['time_s']:.4f}", f"{r['peer_s']:.6f}", f"{r['ratio']:.3f}",
             "" if r.get("target") is None else str(r["target"]), "" if r.get("limit") is None else str(r["limit"]))
            for r in rows]
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(head)]
    def fmt(cells):
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths))
    return "\n".join([fmt(head), fmt(["-" * w for w in widths])] + [fmt(b) for b in body])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the CI set; fail when a ratio is past its limit")
    ap.add_argument("--margin", type=float, default=float(os.environ.get("SCELLIS_BENCH_MARGIN", "5")),
                    help="limit = measured lavapipe ratio x margin (default 5, or SCELLIS_BENCH_MARGIN)")
    ap.add_argument("--only", nargs="*", choices=GROUPS, help="run only these groups")
    ap.add_argument("--out", type=Path, default=RESULTS / "latest.json", help="where to write the results")
    args = ap.parse_args(argv)
    groups = args.only or (QUICK_GROUPS if args.quick else GROUPS)
    from .engine import Engine
    engine = Engine()
    rows, errors, t0 = [], [], time.perf_counter()
    try:
        for g in groups:
            t = time.perf_counter()
            try:
                got = _group_rows(g, engine, args.quick, args.margin)
            except Exception as e:          # noqa: BLE001 (a failed group is reported and fails the run; the rest still run)
                errors.append(f"{g}: {type(e).__name__}: {e}")
                traceback.print_exc()
                continue
            for r in got:
                r["group"] = g
            rows += got
            print(f"[{g}: {len(got)} rows in {time.perf_counter() - t:.1f} s]", file=sys.stderr, flush=True)
        adapter = engine.adapter
    finally:
        engine.close()
    over = check(rows) if args.quick else []
    report = {"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "quick": args.quick,
              "margin": args.margin, "adapter": adapter, "machine": {"cpus": os.cpu_count(),
                                                                     "python": platform.python_version(),
                                                                     "platform": platform.platform()},
              "seconds": round(time.perf_counter() - t0, 2), "rows": rows, "errors": errors, "over_limit": over}
    from studio.engine.atomic import write_text
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_text(args.out, json.dumps(report, indent=1) + "\n")
    print(f"adapter: {adapter}")
    print(table(rows))
    print(f"ratio = ours / peer (below 1: faster than the peer); results: {args.out}")
    for e in errors:
        print(f"ERROR {e}")
    for o in over:
        print(f"OVER LIMIT {o}")
    return 1 if errors or over else 0


if __name__ == "__main__":
    sys.exit(main())
