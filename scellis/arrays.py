"""``DeviceArray``: an array that ops take and give on the device, so a chain of ops moves its data
once each way (the workflow executor's rule, docs/workflows.md "Intermediates stay on the device").
Made from host data it is uploaded by the first op that takes it (judged against that op's input
first) and kept there; an op's output is born on the device, and ``numpy()`` reads it back once."""
from __future__ import annotations

import numpy as np

from studio.engine.errors import StudioError
from studio.engine.precision import numpy_dtype


class DeviceArray:
    """Host data waiting for its upload, or a tensor on one session's device."""

    def __init__(self, *, host: np.ndarray | None = None, tensor=None, session=None):
        self._host, self._tensor, self._session = host, tensor, session

    @classmethod
    def of(cls, x) -> "DeviceArray":
        if isinstance(x, DeviceArray):
            return x
        a = np.asarray(x)
        if a.dtype.kind not in "fiu":
            raise StudioError(f"a device array holds numbers, not {a.dtype}", field="x",
                              hint="convert it first, e.g. a.astype(np.float32)")
        return cls(host=a)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._tensor.shape) if self._tensor is not None else tuple(self._host.shape)

    @property
    def dtype(self) -> np.dtype:
        return numpy_dtype(self._tensor.dtype) if self._tensor is not None else self._host.dtype

    @property
    def on_device(self) -> bool:
        return self._tensor is not None

    def tensor_for(self, session, spec):
        """The device tensor for ``session``'s op input ``spec``: uploaded now if this is host data
        not yet there (once: a second op of the session takes the same buffer)."""
        if self._tensor is not None:
            if self._session is not session:
                raise StudioError("this device array lives on another session's device", field=spec.name,
                                  hint="make the ops of one chain from one session: s = scellis.Session(); "
                                       "s.op(...), or pass scellis.op(..., session=s)")
            return self._tensor
        self._tensor, self._session = session.calls.upload(self._host, spec, spec.name), session
        return self._tensor

    def numpy(self) -> np.ndarray:
        """The values on the host (read back from the device once, then kept)."""
        if self._host is None:
            self._host = self._session.calls.read([self._tensor])[0]
        return self._host

    def __array__(self, dtype=None, copy=None):
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def __repr__(self) -> str:
        where = "on the device" if self._tensor is not None else "on the host, not uploaded yet"
        return f"DeviceArray(shape={self.shape}, dtype={self.dtype}, {where})"
