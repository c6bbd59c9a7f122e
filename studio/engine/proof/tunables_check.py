"""The checker's rules for tune candidates (``override RUN: u32 = 512 tune [..]``), each error at the
candidate's line:col in op.toml. The grammar already refused what is wrong on its face (not a
constant, not the dtype, listed twice, a default not listed: studio/engine/contract/tunables.py);
here each candidate is judged against the launch and the adapter:

- the launch it makes (``invocations`` with the candidate bound) evaluates at the corpus's smallest
  and at a large size (no division by zero) and fits the adapter's limit on workgroups (a 2-D launch
  folds at most ``max-compute-workgroups-per-dimension`` squared);
- with a device, the kernel's pipeline is created with the candidate's value, so wgpu's validator
  judges it as a run would (an array sized by the override, a workgroup memory limit)."""
from __future__ import annotations

from ..contract.package import OpPackage
from ..contract.tunables import tunables, variant
from ..device.layout import layout_groups
from ..device.overrides import check_constants
from ..errors import StudioError
from .corpus import swept_env

LARGE = 1 << 24


def check_candidates(pkg: OpPackage, limits: dict, device=None) -> list[StudioError]:
    c = pkg.contract
    errors: list[StudioError] = []
    env_for, smallest = swept_env(c.signature)
    envs = [env_for(v) for v in sorted({smallest or 1, LARGE})]
    per_dim = int(limits.get("max-compute-workgroups-per-dimension", 65535))
    for o in tunables(c):
        for v, (line, col) in zip(o.candidates, o.candidates_at):
            def err(msg: str, hint: str, o=o, v=v, line=line, col=col) -> StudioError:
                return StudioError(f"tune candidate {o.name} = {v}: {msg}", file=pkg.manifest_path, line=line,
                                   col=col, field=f"override {o.name}", hint=hint)
            vc = variant(c, {o.name: v})
            try:
                for env in envs:
                    groups = -(-int(vc.kernel.invocations.eval(env)) // vc.kernel.workgroup_size)
                    if groups > per_dim * per_dim:
                        errors.append(err(f"launches {groups:,} workgroups at {env}, more than this adapter can "
                                          f"(max-compute-workgroups-per-dimension {per_dim}, squared)",
                                          "drop this candidate, or give each invocation more work"))
                        break
            except StudioError as e:
                errors.append(err(f"the launch '{c.kernel.written or c.kernel.invocations}' fails: {e.message}",
                                  "drop this candidate: it cannot launch"))
                continue
            if device is None:
                continue
            constants = {**check_constants(pkg.kernel_source, vc.bindings), o.name: v}
            try:
                device.pipeline(pkg.kernel_source, c.kernel.entry, layout_groups(vc.bindings),
                                file=pkg.kernel_path, user_lines=pkg.kernel_source.count("\n") + 1,
                                constants=constants)
            except StudioError as e:
                errors.append(err(f"wgpu refuses the kernel with this value: {e.message}",
                                  "drop this candidate, or fix the kernel for it"))
            except Exception as e:       # noqa: BLE001 (wgpu's own validation error, as check_layout meets it)
                errors.append(err(f"wgpu refuses the kernel with this value: {str(e).strip().splitlines()[0]}",
                                  "drop this candidate, or fix the kernel for it"))
    return errors
