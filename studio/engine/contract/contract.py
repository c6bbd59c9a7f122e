"""The contract: what an op promises, read from its manifest into typed parts."""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import StudioError
from ..precision import PRECISIONS
from .backward import Backward, Composition, parse_backward
from .bindings import BindingDescriptor, parse_bindings
from .expr import Expr
from .fields import VISIBILITIES, read_fields  # noqa: F401 - VISIBILITIES: declared in fields.py, read from here
from .manifest import Manifest
from .opid import ID_RE, OpId  # noqa: F401 - ID_RE: read from here too
from .sharding import Sharding, read_sharding
from .signature import Signature, parse_signature
from .tolerance import Tolerance, parse_tolerance
from .toml_position import position

DEFAULT_KERNEL_FILE = "forward.wgsl"      # [kernel] file when the manifest names none
DEFAULT_REFERENCE_FILE = "reference.py"   # [reference] file when the manifest names none

@dataclass
class KernelSpec:
    file: str
    entry: str
    workgroup_size: int
    invocations: Expr
    written: Expr | None = None       # invocations as written, when it names a constant override (tunables.py)
    workgroup: tuple[int, ...] = ()   # per axis (`workgroup_size = [8, 8]`); () for a 1-D kernel
    axes: tuple[Expr, ...] = ()       # invocations per axis (x first); () for a 1-D kernel


@dataclass
class BackwardKernelSpec:
    """The device VJP ([backward] kernel, entry, workgroup_size, invocations, bindings): a WGSL
    kernel with its own launch geometry and binding descriptor, run by the same executor."""
    file: str
    entry: str
    workgroup_size: int
    invocations: Expr
    bindings: BindingDescriptor
    tolerance: Tolerance | None = None   # [backward] tolerance: the device VJP against the reference VJP


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
    kernel: KernelSpec | None          # None for a composite op: its steps' kernels run instead
    bindings: BindingDescriptor
    backward: Backward
    subgradient: str | None
    kinks: str | None = None
    gradient_tolerance: float | None = None        # [backward] gradient_tolerance (docs/gradients.md)
    backward_kernel: BackwardKernelSpec | None = None
    composite: Composition | None = None           # the steps after `composite` in [backward] text
    sharding: Sharding | None = None               # [sharding]: per_example or batch_contracting


def _embedded(m: Manifest, dotted: str, parse):
    text = m.get(dotted, str)
    line, col = m.position(dotted)
    return parse(text, file=m.file, line=line or 1, col=col or 1)


def build_contract(m: Manifest) -> Contract:
    from .expr import parse_expr  # local: expr grammar loads lazily
    field = read_fields(m)                      # id, summary, license, visibility, authors, [tolerance] (fields.py)
    op_id = OpId.parse(field["id"], file=m.file)
    precision = m.get("reference.precision", str, required=False, default="f64")
    if precision not in PRECISIONS:
        raise StudioError(f"reference.precision {precision!r} is not one of {', '.join(PRECISIONS)}",
                          file=m.file, field="reference.precision")
    from .workgroups import kernel_geometry
    workgroup, axes = kernel_geometry(m)          # 1-D: () and (); 2-D, 3-D: per axis (workgroups.py)
    wg = math.prod(workgroup) if workgroup else m.get("kernel.workgroup_size", int, required=False, default=64)
    if not 1 <= wg <= 256:
        raise StudioError(f"kernel.workgroup_size {wg} outside [1, 256]", file=m.file, field="kernel.workgroup_size")
    _no_composite_section(m)
    backward = _embedded(m, "backward.text", parse_backward)
    composite = backward.composition
    contract = Contract(
        id=op_id,
        summary=field["summary"],
        license=field["license"],
        visibility=field["visibility"],
        authors=list(field["authors"]),
        signature=_embedded(m, "signature", parse_signature),
        tolerance=parse_tolerance(field["tolerance.class"], field["tolerance.category"],
                                  field["tolerance.justification"], file=m.file),
        reference_file=_reference_file(m),
        reference_forward=m.get("reference.forward", str, required=False, default="forward"),
        precision=precision,
        kernel=None if composite else KernelSpec(
            file=m.get("kernel.file", str, required=False, default=DEFAULT_KERNEL_FILE),
            entry=m.get("kernel.entry", str, required=False, default="main"),
            workgroup_size=wg,
            invocations=_product(axes) if axes else _embedded(m, "kernel.invocations", parse_expr),
            workgroup=workgroup, axes=axes,
        ),
        bindings=BindingDescriptor((), "", m.file) if composite else _embedded(m, "bindings.text", parse_bindings),
        backward=backward,
        subgradient=m.get("backward.subgradient", str, required=False),
        kinks=m.get("backward.kinks", str, required=False),
        gradient_tolerance=_gradient_tolerance(m),
        backward_kernel=_backward_kernel(m, backward),
        composite=composite,
    )
    contract.sharding = read_sharding(m, contract.signature)     # [sharding] (docs/bf16.md)
    from .tunables import bind_invocations
    bind_invocations(contract)          # `cdiv(n, RUN)`: constant overrides bound (docs/performance.md)
    if contract.kernel is not None and contract.kernel.axes and contract.kernel.written is not None:
        raise StudioError("[kernel] invocations per axis cannot name an override constant", file=m.file,
                          field="kernel.invocations", line=m.position("kernel.invocations")[0],
                          hint='write each axis over the signature\'s symbols, e.g. ["p", "m"]')
    return contract


def _product(axes: tuple[Expr, ...]) -> Expr:
    """The total invocations of a launch declared per axis."""
    from .expr import BinOp
    out = axes[0]
    for e in axes[1:]:
        out = BinOp("*", out, e)
    return out


def _gradient_tolerance(m: Manifest) -> float | None:
    tol = m.get("backward.gradient_tolerance", (int, float), required=False)
    if tol is not None and not tol > 0:
        raise StudioError(f"backward.gradient_tolerance {tol} must be a positive number", file=m.file,
                          field="backward.gradient_tolerance", hint="e.g. gradient_tolerance = 1e-6")
    return None if tol is None else float(tol)


_BACKWARD_KERNEL_KEYS = ("kernel", "entry", "workgroup_size", "invocations", "bindings", "tolerance")


def _backward_kernel(m: Manifest, backward: Backward) -> BackwardKernelSpec | None:
    """[backward] kernel/entry/workgroup_size/invocations/bindings: the device VJP named by
    `on device("...")` in the vjp rules (one backward kernel per op)."""
    from .expr import parse_expr
    named = sorted({r.device_kernel for r in backward.rules if r.device_kernel})
    section = m.data.get("backward") if isinstance(m.data.get("backward"), dict) else {}
    given = [k for k in _BACKWARD_KERNEL_KEYS if k in section]
    if not named:
        if given:
            raise StudioError(f"[backward] {given[0]} is set but no vjp rule runs on the device", file=m.file,
                              field=f"backward.{given[0]}",
                              hint='name the kernel in a rule: vjp x: reference(vjp) on device("backward.wgsl")')
        return None
    if len(named) > 1:
        raise StudioError(f"the vjp rules name {len(named)} device kernels ({', '.join(named)}); an op has one",
                          file=m.file, field="backward.text",
                          hint="compute every device gradient in one backward kernel")
    file = m.get("backward.kernel", str, required=False, default=named[0])
    if file != named[0]:
        raise StudioError(f"[backward] kernel = {file!r} but the vjp rule runs on device({named[0]!r})",
                          file=m.file, field="backward.kernel", hint="name the same .wgsl file in both places")
    wg = m.get("backward.workgroup_size", int, required=False, default=64)
    if not 1 <= wg <= 256:
        raise StudioError(f"backward.workgroup_size {wg} outside [1, 256]", file=m.file, field="backward.workgroup_size")
    cls = m.get("backward.tolerance", str, required=False)
    if cls is None:
        raise StudioError("a device VJP needs the tolerance class it is checked under against the reference VJP",
                          file=m.file, field="backward.tolerance",
                          hint='add under [backward]: tolerance = "exact" (a gather in a fixed order, no '
                               'rounding differences), "ulp(K)" or "bound" (a sum of cotangents)')
    # a VJP sums cotangents: "bound" is judged as a reduction's standard forward-error bound
    try:
        tol = parse_tolerance(cls, "reduction", file=m.file)
    except StudioError as e:
        raise StudioError(f"backward.tolerance: {e.message}", file=m.file, field="backward.tolerance",
                          hint=e.hint) from None
    bindings = _embedded(m, "backward.bindings", parse_bindings)
    for b in bindings:
        if b.writes:       # the device VJP reads the forward's tensors and writes gradients of its own
            raise StudioError(f"'{b.name} -> {b.writes}': in-place bindings are for the forward kernel",
                              file=m.file, line=b.line, col=b.col, field="backward.bindings",
                              hint=f"bind the gradient to a buffer of its own: {b.writes} : storage read_write ...")
    return BackwardKernelSpec(file=file, entry=m.get("backward.entry", str, required=False, default="main"),
                              workgroup_size=wg, invocations=_embedded(m, "backward.invocations", parse_expr),
                              bindings=bindings, tolerance=tol)


def _reference_file(m: Manifest) -> str:
    """``[reference] file``: a Python file (``.py``) inside the package, named by a relative path
    with no ``..``, no hidden part and not under receipts/: the only file whose code the reference
    host loads, so trust and the reference cache (trust/code.py) cover exactly what runs."""
    rel = m.get("reference.file", str, required=False, default=DEFAULT_REFERENCE_FILE)
    parts = rel.split("/")
    if not rel.endswith(".py") or rel.startswith(("/", "~")) or any(c in rel for c in "\\\0:") \
            or any(p in ("", ".", "..") or p.startswith(".") for p in parts) \
            or any(p in ("receipts", "__pycache__") for p in parts[:-1]):
        line, col = m.position("reference.file")
        raise StudioError(f"[reference] file = {rel[:80]!r}: the reference must be a Python file (.py) inside the "
                          "package", file=m.file, line=line, col=col, field="reference.file",
                          hint='name a .py file of the package by its path relative to op.toml, e.g. '
                               'file = "reference.py" (no "..", no absolute path)')
    return rel


def _no_composite_section(m: Manifest) -> None:
    """A composite's steps live in its backward text; an old [composite] section is not read."""
    if "composite" in m.data:
        line, col = position(m.text, ("composite",), key=True)
        raise StudioError("a [composite] section: a composite op's steps go in [backward] text, after 'composite'",
                          file=m.file, line=line, col=col, field="composite",
                          hint='write text = """ then composite, then one step per line such as '
                               'u = core/shape/unfold@1(x; w = w), then """ under [backward]')
