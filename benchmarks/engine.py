"""The engine as the benchmarks use it: one Context on the user's data folder (SCELLIS_HOME when
set), as a session of the CLI or the Studio holds, its device opened once, ops looked up in the
catalog. Rows that write packages of their own (the edit -> verdict row) use ``scratch()``: a
context on a temporary user folder sharing this device and host pool, so the user's trust store
is untouched."""
from __future__ import annotations

import tempfile
from functools import cached_property
from pathlib import Path


class Engine:
    def __init__(self):
        from studio.engine.context import Context
        self.ctx = Context.open()
        self._tmp = tempfile.TemporaryDirectory(prefix="scellis-bench-")

    @property
    def tmp(self) -> Path:
        return Path(self._tmp.name)

    def scratch(self):
        from studio.engine.context import Context
        home = self.tmp / "home"
        home.mkdir(exist_ok=True)
        return Context.open(home=home, device=self.ctx.device, hosts=self.ctx.hosts)

    @cached_property
    def adapter(self) -> str:
        return self.ctx.device.profile.summary

    def op(self, op_id: str):
        return self.ctx.catalog.resolve(op_id)

    def run(self, pkg, inputs: dict, params: dict) -> dict:
        from studio.engine.grad.run import run_op
        return run_op(self.ctx, pkg, inputs, params)

    def close(self) -> None:
        self.ctx.close()
        self._tmp.cleanup()
