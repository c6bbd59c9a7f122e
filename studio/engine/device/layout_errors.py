"""wgpu's errors about binding layouts, read in one place (``parse_layout_error``).

wgpu-native reports a pipeline whose layout disagrees with its shader only as text: its Rust error
chain, with Rust ``Debug`` renderings of its types (``ResourceBinding { group: 0, binding: 2 }``,
``Storage { access: StorageAccess(LOAD | STORE) }``); wgpu-py 0.32's ``GPUValidationError``
carries nothing but that message. A kernel whose element type differs from the descriptor's fails
earlier, in naga, whose message the device has already put at the author's line. Nothing else in
the product reads these texts: tests/device/test_layout_errors.py provokes every kind on the pinned wgpu
and keeps the texts it got as fixtures, so a release that words them differently fails there."""
from __future__ import annotations

import re
from dataclasses import dataclass

KINDS = ("binding_type", "missing_binding", "struct_size", "unavailable", "entry_point", "element_type")

_RESOURCE = re.compile(r"ResourceBinding \{ group: (\d+), binding: (\d+) \}")
_UNAVAILABLE = "is not available in the pipeline layout"
_TYPE = re.compile(r"Storage class (.+?) doesn't match the shader (.+)$")
_SIZE = re.compile(r"Buffer structure size (\d+),.*`min_binding_size`, which is (\d+)")
_ENTRY = re.compile(r"Unable to find entry point '([^']*)'|entry point '?([^' ]*)'? not found", re.IGNORECASE)
_GOT = re.compile(r"expected to be `([^`]+)`, but got `([^`]+)`")
# wgpu's Debug names of a binding's type, in the descriptor's words
_WORDS = [(re.compile(r"Storage \{ access: StorageAccess\(LOAD \| STORE\) \}"), "storage read_write"),
          (re.compile(r"Storage \{ access: StorageAccess\(LOAD\) \}"), "storage read"),
          (re.compile(r"^Uniform$"), "uniform")]


@dataclass(frozen=True)
class LayoutProblem:
    """One disagreement between a binding layout and a kernel, as wgpu reported it.

    kind: ``binding_type`` (the layout's buffer type or access is not the shader's: ``layout``,
    ``shader``), ``missing_binding`` (the shader uses a slot the layout lacks), ``struct_size``
    (the shader's struct is ``struct_size`` bytes, over the layout's ``min_binding_size``),
    ``unavailable`` (the slot is refused for a reason not read here: ``cause``), ``entry_point``
    (``entry`` is not in the module), ``element_type`` (naga: ``expected``, ``got``)."""
    kind: str
    group: int | None = None
    binding: int | None = None
    layout: str = ""                 # what the layout (the descriptor) has, in the descriptor's words
    shader: str = ""                 # what the kernel declares
    struct_size: int | None = None
    min_binding_size: int | None = None
    entry: str = ""
    expected: str = ""
    got: str = ""
    cause: str = ""                  # the last line of wgpu's chain, as wgpu wrote it

    @property
    def slot(self) -> str:
        return f"@group({self.group}) @binding({self.binding})" if self.group is not None else "a binding"


def _words(debug: str) -> str:
    for pat, word in _WORDS:
        if pat.search(debug):
            return pat.sub(word, debug)
    return debug


def parse_layout_error(text: str) -> LayoutProblem | None:
    """The problem wgpu's error ``text`` reports, or None when it is not about a binding layout."""
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    cause = lines[-1] if lines else ""
    m = _GOT.search(text)
    if m:
        return LayoutProblem("element_type", expected=m.group(1), got=m.group(2), cause=cause)
    m = _ENTRY.search(text)
    if m:
        return LayoutProblem("entry_point", entry=m.group(1) or m.group(2) or "", cause=cause)
    if _UNAVAILABLE not in text:
        return None
    r = _RESOURCE.search(text)
    where = {"group": int(r.group(1)), "binding": int(r.group(2))} if r else {}
    if (m := _TYPE.search(cause)):
        return LayoutProblem("binding_type", **where, layout=_words(m.group(1)), shader=_words(m.group(2)), cause=cause)
    if (m := _SIZE.search(cause)):
        return LayoutProblem("struct_size", **where, struct_size=int(m.group(1)), min_binding_size=int(m.group(2)),
                             cause=cause)
    if "missing from the pipeline layout" in cause:
        return LayoutProblem("missing_binding", **where, cause=cause)
    return LayoutProblem("unavailable", **where, cause=cause)
