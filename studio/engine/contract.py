"""The contract: what an op promises, read from its manifest into typed parts."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from .backward import Backward, parse_backward
from .bindings import BindingDescriptor, parse_bindings
from .errors import StudioError
from .expr import Expr
from .manifest import Manifest
from .signature import Signature, parse_signature
from .tolerance import Tolerance, parse_tolerance

ID_RE = re.compile(r"^(?P<ns>[a-z][a-z0-9_-]*)/(?P<author>[a-z0-9][a-z0-9_.-]*)/(?P<name>[a-z][a-z0-9_]*)@(?P<version>[1-9][0-9]*)$")
VISIBILITIES = ("private", "workspace", "public")
PRECISIONS = ("f64", "f32")


@dataclass(frozen=True)
class OpId:
    namespace: str
    author: str
    name: str
    version: int

    @classmethod
    def parse(cls, text: str, *, file: str | None = None, field: str = "id") -> "OpId":
        m = ID_RE.match(text or "")
        if not m:
            raise StudioError(f"bad op id {text!r}", file=file, field=field,
                              hint="write namespace/author/name@version, e.g. user/demo/windowed_median@1")
        return cls(m["ns"], m["author"], m["name"], int(m["version"]))

    @property
    def unversioned(self) -> str:
        return f"{self.namespace}/{self.author}/{self.name}"

    def __str__(self) -> str:
        return f"{self.unversioned}@{self.version}"


@dataclass
class KernelSpec:
    file: str
    entry: str
    workgroup_size: int
    invocations: Expr


@dataclass
class Contract:
    id: OpId
    summary: str
    license: str | None
    visibility: str
    authors: list[str]
    signature: Signature
    tolerance: Tolerance
    reference_file: str
    reference_forward: str
    precision: str
    kernel: KernelSpec
    bindings: BindingDescriptor
    backward: Backward
    subgradient: str | None
    kinks: str | None = None
    extra: dict = field(default_factory=dict)


def _embedded(m: Manifest, dotted: str, parse):
    text = m.get(dotted, str)
    line, col = m.position(dotted)
    return parse(text, file=m.file, line=line or 1, col=col or 1)


def build_contract(m: Manifest) -> Contract:
    from .expr import parse_expr  # local: expr grammar loads lazily
    op_id = OpId.parse(m.get("id", str), file=m.file)
    visibility = m.get("visibility", str, required=False, default="private")
    if visibility not in VISIBILITIES:
        raise StudioError(f"visibility {visibility!r} is not one of {', '.join(VISIBILITIES)}",
                          file=m.file, field="visibility")
    precision = m.get("reference.precision", str, required=False, default="f64")
    if precision not in PRECISIONS:
        raise StudioError(f"reference.precision {precision!r} is not one of {', '.join(PRECISIONS)}",
                          file=m.file, field="reference.precision")
    wg = m.get("kernel.workgroup_size", int, required=False, default=64)
    if not 1 <= wg <= 256:
        raise StudioError(f"kernel.workgroup_size {wg} outside [1, 256]", file=m.file, field="kernel.workgroup_size")
    authors = m.get("authors", list, required=False, default=[])
    if not all(isinstance(a, str) for a in authors):
        raise StudioError("authors must be a list of strings", file=m.file, field="authors")
    license_ = m.get("license", str, required=False)
    return Contract(
        id=op_id,
        summary=m.get("summary", str, max_len=400),
        license=license_,
        visibility=visibility,
        authors=authors,
        signature=_embedded(m, "signature", parse_signature),
        tolerance=parse_tolerance(m.get("tolerance.class", str), m.get("tolerance.category", str),
                                  m.get("tolerance.justification", str, required=False, default=""), file=m.file),
        reference_file=m.get("reference.file", str, required=False, default="reference.py"),
        reference_forward=m.get("reference.forward", str, required=False, default="forward"),
        precision=precision,
        kernel=KernelSpec(
            file=m.get("kernel.file", str, required=False, default="forward.wgsl"),
            entry=m.get("kernel.entry", str, required=False, default="main"),
            workgroup_size=wg,
            invocations=_embedded(m, "kernel.invocations", parse_expr),
        ),
        bindings=_embedded(m, "bindings.text", parse_bindings),
        backward=_embedded(m, "backward.text", parse_backward),
        subgradient=m.get("backward.subgradient", str, required=False),
        kinks=m.get("backward.kinks", str, required=False),
    )
