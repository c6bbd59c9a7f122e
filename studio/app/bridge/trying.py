"""Runs before proof: the Run cell's parameters. Its worker requests (``try_run``,
``try_reference``, ``op_output``) are the engine's (studio/engine/services/trying.py, in the
request table studio/engine/services/requests.py)."""
from __future__ import annotations

from ...engine.services.trying import SPIKY, param_specs

__all__ = ["SPIKY", "param_specs"]
