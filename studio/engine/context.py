"""The per-process context: the catalog, the device, the trust store and the confined reference
hosts one process works with, held in one object and passed explicitly down the run path — no
module-level caches. The CLI and the Studio make one each; the device worker makes one in its
child; every learner owner (a process of its own) will make its own."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .contract.catalog import Catalog
from .device.device import Device
from .home import studio_home
from .records.seal import Seal
from .trust.pool import HostPool
from .trust.reference import References
from .trust.store import TrustStore


@dataclass
class Context:
    catalog: Catalog
    trust: TrustStore
    hosts: HostPool
    device_factory: Callable[[], Device] = Device
    _device: Device | None = None
    references: References = field(init=False)
    seal: Seal = field(init=False)
    proven: dict = field(default_factory=dict)   # conformance verdicts earned in this process, by (hash, profile)
    corpora: dict = field(default_factory=dict)  # regenerated corpora's (identity, hash), for receipt checks

    def __post_init__(self):
        self.references = References(self.trust, self.hosts)
        self.seal = Seal(self.trust.home)           # every record is sealed with the same user folder's key

    @classmethod
    def open(cls, ops_path: Sequence[str | Path] = (), *, home: Path | None = None, device: Device | None = None,
             hosts: HostPool | None = None) -> "Context":
        """Builtins, the shipped examples, the user's ops and ``ops_path``; the user's trust store
        (``home``, default the user data folder). ``device`` and ``hosts`` may be shared (tests)."""
        home = Path(home) if home is not None else studio_home()
        return cls(Catalog.default([Path(p) for p in ops_path], home=home), TrustStore(home), hosts if hosts is not None else HostPool(),
                   _device=device)

    @property
    def device(self) -> Device:
        """Started on first use: commands that never touch the GPU never ask wgpu for an adapter."""
        if self._device is None:
            self._device = self.device_factory()
        return self._device

    @property
    def has_device(self) -> bool:
        return self._device is not None

    def close(self) -> None:
        self.hosts.shutdown()

    def __enter__(self) -> "Context":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
