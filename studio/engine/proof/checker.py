"""The checker, static part: everything that can be judged before a kernel runs."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..context import Context
from ..contract import backward as backward_mod
from ..contract import bindings as bindings_mod
from ..contract.expr import unknown_symbols
from ..contract.package import OpPackage
from ..contract.tolerance import check_category_fits_signature, class_rule
from ..device.layout import check_layout
from ..device.overrides import check_constants, check_overrides
from ..errors import StudioError
from ..grad.composite import check_composition
from ..grad.vjp import check_backward_kernel
from .geometry import check_workgroup_size
from .array_bounds import check_array_bounds
from .kernel_flow import check_kernel_flow


@dataclass
class CheckReport:
    op: str
    hash: str
    passed: list[str] = field(default_factory=list)
    errors: list[StudioError] = field(default_factory=list)
    warnings: list[StudioError] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def to_json(self) -> dict:
        return {"op": self.op, "hash": self.hash, "ok": self.ok, "passed": self.passed,
                "errors": [x.to_dict() for x in self.errors], "warnings": [x.to_dict() for x in self.warnings]}


def check_license(expr: str, *, file: str) -> list[StudioError]:
    from license_expression import ExpressionError, get_spdx_licensing
    licensing = get_spdx_licensing()
    try:
        info = licensing.validate(expr, strict=True)
    except (ExpressionError, AttributeError) as e:
        # license-expression raises AttributeError on a dangling operator ("MIT OR")
        why = str(e) if isinstance(e, ExpressionError) else "it ends with an operator or is incomplete"
        return [StudioError(f"license {expr!r} is not a valid SPDX expression: {why}", file=file, field="license",
                            hint="use an SPDX identifier such as Apache-2.0, or join them with AND / OR")]
    if info.errors:
        return [StudioError(f"license {expr!r}: {'; '.join(info.errors)}", file=file, field="license",
                            hint="use an SPDX identifier such as Apache-2.0, MIT or GPL-3.0-or-later")]
    return []


def check_package(ctx: Context, pkg: OpPackage, *, compile_kernel: bool = True) -> CheckReport:
    """Every static check; with ``compile_kernel``, the kernels are compiled on ``ctx``'s device."""
    c = pkg.contract
    mf = pkg.manifest_path
    rep = CheckReport(pkg.id, pkg.hash)

    def step(name: str, errs: list[StudioError]):
        if errs:
            rep.errors.extend(errs)
        else:
            rep.passed.append(name)

    rep.passed.append(f"signature well-formed (shape class {c.signature.shape_class})")
    if c.composite is not None:          # no kernel or bindings of its own: its steps are checked instead
        step(f"composition resolves and wires its steps ({c.composite.chain()})",
             check_composition(pkg, ctx.catalog))
    else:
        step("bindings carry the signature's tensors", [e.shifted(file=mf) if e.file is None else e for e in
                                                        bindings_mod.check_against_signature(c.bindings, c.signature)])
        step("kernel invocations use signature symbols",
             unknown_symbols(c.kernel.invocations, _symbols(c), "[kernel] invocations", mf, "kernel.invocations"))
    geometry_errors = []
    for spec, source, path, fld in ((c.kernel, pkg.kernel_source, pkg.kernel_path, "kernel.workgroup_size"),
                                      (c.backward_kernel, pkg.backward_source, pkg.backward_path,
                                       "backward.workgroup_size")):
        if spec is not None and source:
            errs, warns = check_workgroup_size(source, spec.entry, getattr(spec, "workgroup", ()) or spec.workgroup_size,
                                               kernel_file=path,
                                               field=fld, manifest_file=mf)
            geometry_errors += errs
            rep.warnings += warns
    if c.kernel is not None:
        step("@workgroup_size agrees with the declared workgroup_size", geometry_errors)
    flow_errors = []                     # barriers in uniform control flow; reads behind a bounds guard
    for spec, source, path in ((c.kernel, pkg.kernel_source, pkg.kernel_path),
                               (c.backward_kernel, pkg.backward_source, pkg.backward_path)):
        if spec is not None and source:
            errs, warns = check_kernel_flow(source, spec.entry, kernel_file=path)
            flow_errors += errs
            rep.warnings += warns
    if c.kernel is not None:
        step("every barrier is reached in uniform control flow (WGSL's uniformity rule)", flow_errors)
        step("fixed-size arrays hold every index the contract's ranges allow",
             [e for spec, source, path in ((c.kernel, pkg.kernel_source, pkg.kernel_path),
                                           (c.backward_kernel, pkg.backward_source, pkg.backward_path))
              if spec is not None and source
              for e in check_array_bounds(source, c.signature, getattr(spec, "bindings", None) or c.bindings,
                                          kernel_file=path)])
    # the one rule conformance applies too (tolerance.class_rule): never "ok" here and refused there
    rule = class_rule(c, pkg.reference_source, file=mf)
    step(f"tolerance class {c.tolerance} fits category '{c.tolerance.category}' (verified on the reference path "
         f"at conformance)", [e for e in rule if e.field != "backward.tolerance"])
    if c.backward_kernel is not None and c.backward_kernel.tolerance is not None:
        step(f"backward class {c.backward_kernel.tolerance} is capped like a forward class (exact, ulp(K <= 4), "
             f"bound(C <= 1, ...))", [e for e in rule if e.field == "backward.tolerance"])
    step(f"category '{c.tolerance.category}' fits the signature and the reference's precision",
         check_category_fits_signature(c.tolerance, c.signature, c.precision, file=mf))
    step("backward declaration names signature inputs", backward_mod.check_against_signature(c.backward, c.signature))
    if c.license is not None:
        step(f"license {c.license} is valid SPDX", check_license(c.license, file=mf))
    elif c.visibility != "private":
        rep.errors.append(StudioError(f"visibility '{c.visibility}' needs a license", file=mf, field="license",
                                      hint='add license = "Apache-2.0" (or another SPDX expression)'))
    if c.backward_kernel is not None:
        step("backward kernel bindings carry the VJP's tensors", check_backward_kernel(pkg))
    if c.kernel is not None and pkg.kernel_source and (c.bindings.overrides or "override" in pkg.kernel_source):
        step("overrides name the kernel's WGSL overrides with their types",
             check_overrides(pkg.kernel_source, c.bindings, kernel_file=pkg.kernel_path, descriptor_file=mf))
    if compile_kernel and not rep.errors and c.kernel is not None:
        dev = ctx.device
        try:
            errs = check_layout(dev, pkg.kernel_source, c.bindings, entry=c.kernel.entry,
                                kernel_file=pkg.kernel_path, descriptor_file=mf,
                                constants=check_constants(pkg.kernel_source, c.bindings))
        except StudioError as e:          # the kernel itself does not compile
            errs = [e]
        step("kernel compiles and its bindings agree with the descriptor (judged by wgpu's validator)", errs)
        if c.backward_kernel is not None and not errs:
            step("backward kernel compiles and its bindings agree with [backward] bindings (wgpu's validator)",
                 check_backward_kernel(pkg, device=dev))
    if c.kernel is not None and any(o.tunable for o in c.bindings.overrides):
        from .tunables_check import check_candidates
        dev = ctx.device if compile_kernel and not rep.errors else None
        step("tune candidates launch within the adapter's limits" + (" and compile" if dev else ""),
             check_candidates(pkg, dev.profile.limits if dev else {}, dev))
    return rep


def _symbols(c) -> set[str]:
    sig = c.signature
    names = {p.name for p in sig.params}
    for t in sig.inputs:
        for d in t.dims:
            names |= set(getattr(d, "symbols", lambda: set())())
    return names
