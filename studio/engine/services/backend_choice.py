"""The user's choice of GPU backend: wgpu's OpenGL backend computes wrong results on some drivers
(docs/decisions.md), so it is used only when the user opts in (`scellis --allow-opengl`)."""
from __future__ import annotations

import os

from ..device.device import ALLOW_OPENGL_ENV


def allow_opengl() -> None:
    """Allow the OpenGL backend when no Vulkan, Metal or D3D12 adapter exists, in this process and
    in the device workers it starts (they inherit its environment); the GPU profile records the
    backend."""
    os.environ[ALLOW_OPENGL_ENV] = "1"
