"""Scellis Studio in your own Python: a proven op as a function on numpy arrays, on tensors that stay
on the device, in a PyTorch module (``scellis.torch``) or a JAX function (``scellis.jax``).
docs/api.md is the guide; ``studio`` is the implementation and not an API.

    import numpy as np, scellis
    median = scellis.op("user/demo/windowed_median@1")      # proven on this GPU profile at first call
    y = median(np.random.rand(1000).astype(np.float32), w=7)
"""
from __future__ import annotations

import importlib

from studio.engine.errors import StudioError as Error

from .arrays import DeviceArray
from .op import Op
from .session import Session

__all__ = ["DeviceArray", "Error", "Op", "Session", "device_array", "op"]


def op(target: str, *, session: Session | None = None, require_receipt: bool = True) -> Op:
    """The op ``target`` (an op id such as ``core/signal/clip@1``, or a package folder) as a callable.
    Without ``session`` it opens one of its own (``op.session``): ops chained on device arrays must
    come from one session (``Session.op``)."""
    return (session if session is not None else Session()).op(target, require_receipt=require_receipt)


def device_array(x) -> DeviceArray:
    """``x`` (an array of numbers) for ops to take on the device: uploaded once, by the first op that
    takes it; the ops' outputs stay on the device until ``.numpy()`` reads them back."""
    return DeviceArray.of(x)


def __getattr__(name: str):
    if name in ("torch", "jax"):         # the bridges load their framework only when asked for
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
