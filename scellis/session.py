"""``Session``: what the calls of one script share: the catalog, the user's trust store and
receipts, the device (opened at the first call that needs it), the proof gate that remembers the
receipt rule's answer per call geometry, and the device tensors of chained calls. Nothing is kept
in a module: two sessions share nothing but the user folder."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from studio.engine.context import Context
from studio.engine.services import calls
from studio.engine.services.actions import resolve

from .arrays import DeviceArray
from .op import Op


class Session:
    """``Session(ops_path=(), home=None)``: the catalog (builtins, the shipped examples, the user's ops
    and ``ops_path``) and the user folder ``home`` (default: the user's, or ``SCELLIS_HOME``).
    ``context``: an engine Context to use instead (it is not closed with the session)."""

    def __init__(self, ops_path: Sequence[str | Path] = (), *, home: str | Path | None = None,
                 context: Context | None = None):
        self._owned = context is None
        self.context = context if context is not None else Context.open(ops_path, home=Path(home) if home else None)
        self.gate = calls.ProofGate()
        self.calls = calls.DeviceCalls(self.context)

    def op(self, target: str | Path, *, require_receipt: bool = True) -> Op:
        """The op ``target`` (an op id or a package folder), loaded now: the call runs this content."""
        return Op(self, resolve(self.context, str(target)), require_receipt=require_receipt)

    def device_array(self, x) -> DeviceArray:
        return DeviceArray.of(x)

    @property
    def transfers(self) -> dict[str, int]:
        """Uploads and read-backs of device arrays so far (single host calls not counted)."""
        return {"uploads": self.calls.uploads, "readbacks": self.calls.readbacks}

    @property
    def profile(self) -> dict:
        """This machine's GPU profile (id, summary, adapter, backend, limits): what receipts are scoped to."""
        prof = self.context.device.profile
        return {**prof.to_json(), "summary": prof.summary}

    def close(self) -> None:
        if self._owned:
            self.context.close()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
