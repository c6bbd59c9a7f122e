"""The device layer: one wgpu adapter and device, its GPU profile, compiling WGSL with
errors mapped onto the author's own lines, a pipeline cache keyed by kernel hash and override
values, and the
isolation of one package's kernels from the next one's (workgroup memory, ``Device.isolate``)."""
from __future__ import annotations

import hashlib
import json
import os
import re
import struct
import time
from dataclasses import dataclass

from ..errors import StudioError
from ..resources import SHADERS

os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")  # Mesa's Vulkan loader warns without it
# With no thread of its own (one CPU, or LP_NUM_THREADS=0) llvmpipe frees and re-allocates
# workgroup memory around every dispatch, so a kernel reads heap leftovers no clearing kernel can
# reach; with one executor thread its memory persists and Device.isolate clears it.
if os.environ.get("LP_NUM_THREADS", "").strip() == "0" or \
        ("LP_NUM_THREADS" not in os.environ and (os.cpu_count() or 1) <= 1):
    os.environ["LP_NUM_THREADS"] = "1"

_SPAN = re.compile(r"(?:wgsl)?:(\d+):(\d+)")
PROFILE_LIMITS = ("max-storage-buffer-binding-size", "max-buffer-size", "max-compute-workgroup-size-x",
                  "max-compute-invocations-per-workgroup", "max-compute-workgroups-per-dimension",
                  "max-compute-workgroup-storage-size", "max-bind-groups", "max-uniform-buffer-binding-size")


def wgpu_module():
    try:
        import wgpu
    except ImportError as e:  # pragma: no cover - install problem, not user input
        raise StudioError(f"wgpu is not installed ({e})", hint="run the README's setup command") from None
    return wgpu


@dataclass(frozen=True)
class GpuProfile:
    """The envelope a proof ran in: which adapter, backend, driver, wgpu version and limits."""
    adapter: dict
    wgpu_version: str
    limits: dict

    @property
    def id(self) -> str:
        key = {k: self.adapter.get(k) for k in ("vendor", "device", "description", "backend_type",
                                                  "adapter_type", "vendor_id", "device_id")}
        key["wgpu"] = self.wgpu_version
        return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]

    @property
    def backend(self) -> str:
        return str(self.adapter.get("backend_type"))

    @property
    def trusted(self) -> bool:
        return self.backend in TRUSTED_BACKENDS

    @property
    def summary(self) -> str:
        a = self.adapter
        return f"{a.get('device')} [{a.get('backend_type')}, {a.get('adapter_type')}] {a.get('description')}"

    def to_json(self) -> dict:
        return {"id": self.id, "backend": self.backend, "trusted_backend": self.trusted, "adapter": self.adapter,
                "wgpu_version": self.wgpu_version, "limits": self.limits}


def compile_error(exc: Exception, *, file: str, user_lines: int | None = None) -> StudioError:
    """Turn a wgpu/naga validation error into a StudioError at the author's line:col."""
    text = str(exc)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    # naga's headline: "Shader '' parsing error: expected `;`, found "if"" or a validation cause chain
    head = next((ln for ln in lines if "error" in ln.lower() and "Validation Error" not in ln
                 and not ln.startswith("In ")), lines[-1] if lines else "compile error")
    head = re.sub(r"^Shader '[^']*' ", "", head)
    detail = [ln for ln in lines if ln.startswith("│") or ln.startswith("=")]
    m = _SPAN.search(text)
    line, col = (int(m.group(1)), int(m.group(2))) if m else (None, None)
    if line is not None and user_lines is not None and line > user_lines:
        line = col = None  # inside engine-generated code: no user position to show
    msg = head + ("" if not detail else " — " + " ".join(d.strip("│= ").strip() for d in detail if d.strip("│= ")))
    return StudioError(msg, file=file, line=line, col=col,
                       hint="fix the kernel at this position; the compiler is naga (wgpu's WGSL front end)")


# Compute on these backends is trusted. wgpu's OpenGL (GLES) backend is not: on Mesa's llvmpipe
# it computes wrong results for ordinary kernels (the story's median: 1,890 wrong outputs of
# 10^6), so it is used only when the user opts in explicitly (docs/decisions.md).
TRUSTED_BACKENDS = ("Vulkan", "Metal", "D3D12")
ALLOW_OPENGL_ENV = "SCELLIS_ALLOW_OPENGL"
VULKAN_INSTALL = "sudo apt-get install mesa-vulkan-drivers"
_TYPE_RANK = {"DiscreteGPU": 0, "IntegratedGPU": 1, "VirtualGPU": 2, "CPU": 3}


def opengl_allowed() -> bool:
    return os.environ.get(ALLOW_OPENGL_ENV, "").strip().lower() in ("1", "yes", "true")


def _describe(info: dict) -> str:
    return f"{info.get('device') or '?'} [{info.get('backend_type')}, {info.get('adapter_type')}]"


def choose_adapter(wgpu, *, allow_opengl: bool | None = None):
    """The best adapter on a trusted backend; an OpenGL one only when the user opted in.
    ``WGPU_BACKEND_TYPE`` (wgpu's own variable) narrows the choice to that backend."""
    if allow_opengl is None:
        allow_opengl = opengl_allowed()
    adapters = list(wgpu.gpu.enumerate_adapters_sync())
    forced = os.environ.get("WGPU_BACKEND_TYPE", "").strip().lower()
    if forced:
        adapters = [a for a in adapters if str(a.info.get("backend_type", "")).lower() == forced]

    def best(cands):
        return min(cands, key=lambda a: _TYPE_RANK.get(a.info.get("adapter_type"), 9)) if cands else None

    good = best([a for a in adapters if a.info.get("backend_type") in TRUSTED_BACKENDS])
    if good is not None:
        return good
    gl = best([a for a in adapters if a.info.get("backend_type") == "OpenGL"])
    if gl is not None and allow_opengl:
        return gl
    found = ", ".join(_describe(dict(a.info)) for a in adapters) or "none"
    if gl is not None:
        raise StudioError(
            f"wgpu found only an OpenGL adapter ({found}); compute results on wgpu's OpenGL backend are "
            f"not trustworthy (on Mesa's llvmpipe it computes wrong results), so no device work runs on it",
            field="GPU adapter",
            hint=f"install the Vulkan driver: `{VULKAN_INSTALL}` (other systems: docs/install.md); "
                 f"or, knowing results may be wrong, set {ALLOW_OPENGL_ENV}=1 (`scellis --allow-opengl`)")
    raise StudioError(
        f"wgpu found no GPU adapter{' for WGPU_BACKEND_TYPE=' + forced if forced else ''} (found: {found})",
        field="GPU adapter", hint=f"install Mesa's Vulkan software driver: `{VULKAN_INSTALL}` (lavapipe)")


CLEAR_SHADER = "clear_workgroup.wgsl"
SPARE_BYTES = 64 << 20          # buffers kept for reuse (Device.give_back), per device
CLEAR_PATIENCE = (2_000, 8_000) + (60_000,) * 6     # laps of 32 polls (~1 us a lap on lavapipe)


def zeroes_workgroup_memory(profile: GpuProfile) -> bool:
    """Whether the driver keeps WebGPU's promise that workgroup memory starts zeroed. Mesa's
    llvmpipe/lavapipe (22.3) does not: measured, a kernel reads the previous kernel's values."""
    return "llvmpipe" not in str(profile.adapter.get("device", "")).lower()


def thread_names() -> list[str]:
    """The names of this process's threads, from /proc/self/task/*/comm (Linux; psutil lists
    threads without their names); [] elsewhere."""
    names = []
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return names
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                names.append(f.read().strip())
        except OSError:
            continue
    return names


def llvmpipe_executors() -> int:
    """How many threads llvmpipe runs workgroups on: it starts one rasterizer thread per
    executor, named llvmpipe-0, llvmpipe-1, ... (Linux shows them in /proc); elsewhere Mesa's
    own rule (LP_NUM_THREADS, else the CPU count, at most 16)."""
    found = max([int(n[9:]) for n in thread_names() if n.startswith("llvmpipe-") and n[9:].isdigit()] + [-1])
    if found >= 0:
        return found + 1
    env = os.environ.get("LP_NUM_THREADS", "").strip()
    return max(1, min(int(env) if env.isdigit() else (os.cpu_count() or 1), 16))


class Device:
    """wgpu adapter + device. Tests and the worker use the same class: no mocks."""

    def __init__(self, *, allow_opengl: bool | None = None, isolate_workgroups: bool | None = None):
        """``isolate_workgroups``: clear workgroup memory between packages (``isolate``); by
        default only where the driver does not zero it itself. False exists for the test that
        shows the leak."""
        wgpu = wgpu_module()
        self.wgpu = wgpu
        adapter = choose_adapter(wgpu, allow_opengl=allow_opengl)
        self.adapter = adapter
        self.device = adapter.request_device_sync(required_limits={
            k: adapter.limits[k] for k in ("max-storage-buffer-binding-size", "max-buffer-size")})
        info = {k: v for k, v in dict(adapter.info).items()}
        limits = {k: int(self.device.limits[k]) for k in PROFILE_LIMITS if k in self.device.limits}
        self.profile = GpuProfile(info, wgpu.__version__, limits)
        self._modules: dict[str, object] = {}
        self._pipelines: dict[tuple, object] = {}
        self._spare: dict[tuple[int, int], list] = {}   # buffers given back, by (size, usage)
        self._spare_bytes = 0
        if isolate_workgroups is None:
            isolate_workgroups = not zeroes_workgroup_memory(self.profile)
        self.isolates_workgroups = bool(isolate_workgroups)
        self.executors = llvmpipe_executors() if self.isolates_workgroups else 0
        self.workgroup_clears = 0           # clears done (each proven to have reached every executor)
        self._clear = None                  # (pipeline, layout, groups), built on first use
        self._owner: str | None = None      # whose kernel ran last; None: nobody's yet (heap leftovers),
                                            # "": nobody's since a clear

    @property
    def pipeline_count(self) -> int:
        return len(self._pipelines)

    # -------------------------------------------------------------- compile
    def compile(self, source: str, *, file: str, user_lines: int | None = None):
        key = hashlib.sha256(source.encode()).hexdigest()
        mod = self._modules.get(key)
        if mod is None:
            try:
                mod = self.device.create_shader_module(label=os.path.basename(file), code=source)
            except Exception as e:  # noqa: BLE001 (wgpu raises GPUValidationError with naga's report)
                raise compile_error(e, file=file, user_lines=user_lines) from None
            self._modules[key] = mod
        return mod

    def bind_group_layouts(self, groups: dict[int, list[dict]]):
        """Explicit layouts from descriptor entries (``{binding, kind, access, min_size}``)."""
        wgpu = self.wgpu
        n = max(groups) + 1 if groups else 0
        layouts = []
        for g in range(n):
            entries = []
            for e in groups.get(g, []):
                if e["kind"] == "uniform":
                    btype = wgpu.BufferBindingType.uniform
                elif e["access"] == "read":
                    btype = wgpu.BufferBindingType.read_only_storage
                else:
                    btype = wgpu.BufferBindingType.storage
                buf = {"type": btype}
                if e.get("min_size"):
                    buf["min_binding_size"] = e["min_size"]
                entries.append({"binding": e["binding"], "visibility": wgpu.ShaderStage.COMPUTE, "buffer": buf})
            layouts.append(self.device.create_bind_group_layout(entries=entries))
        return layouts

    def pipeline(self, source: str, entry: str, groups: dict[int, list[dict]], *, file: str,
                 user_lines: int | None = None, constants: dict[str, int | float] | None = None):
        """A compute pipeline with the layout built from the descriptor; cached by kernel hash,
        entry point, layout and the values of its WGSL ``override`` constants (one pipeline per
        specialisation). Layout/shader disagreements raise wgpu's own validation error; a
        constant wgpu refuses (unknown name, a value that does not fit) raises a StudioError."""
        constants = dict(constants or {})
        key = (hashlib.sha256(source.encode()).hexdigest(), entry,
               json.dumps({str(k): v for k, v in sorted(groups.items())}, sort_keys=True),
               json.dumps(constants, sort_keys=True))
        hit = self._pipelines.get(key)
        if hit is not None:
            return hit
        module = self.compile(source, file=file, user_lines=user_lines)
        layouts = self.bind_group_layouts(groups)
        stage = {"module": module, "entry_point": entry}
        if constants:
            stage["constants"] = constants
        try:
            pipe = self.device.create_compute_pipeline(
                layout=self.device.create_pipeline_layout(bind_group_layouts=layouts), compute=stage)
        except Exception as e:
            if not constants or "constant" not in str(e).lower():
                raise
            why = [ln.strip() for ln in str(e).splitlines() if ln.strip()][-1]
            raise StudioError(f"the kernel does not compile with its overrides "
                              f"{', '.join(f'{k} = {v}' for k, v in sorted(constants.items()))}: {why}",
                              file=file, field="overrides",
                              hint="declare each override in the kernel (`override W: u32;`) with the "
                                   "descriptor's type") from None
        hit = self._pipelines[key] = (pipe, layouts)
        return hit

    # -------------------------------------------------------------- buffers
    def buffer(self, size: int, usage):
        """A buffer of ``size`` bytes and ``usage``: one given back by an earlier call when there is
        one, else a new one. A reused buffer holds what it held: the caller overwrites all of it
        (the executor writes inputs whole and clears outputs), so nothing of one call reaches the
        next. Fresh device memory costs page faults (2-3 ms for 4 MB on lavapipe); reuse does not."""
        spares = self._spare.get((size, int(usage)))
        if spares:
            self._spare_bytes -= size
            return spares.pop()
        return self.device.create_buffer(size=size, usage=usage)

    def give_back(self, buffers) -> None:
        """Buffers whose work is complete (their results were read), for ``buffer`` to reuse; past
        SPARE_BYTES in all they are destroyed instead."""
        for b in buffers:
            if self._spare_bytes + b.size > SPARE_BYTES:
                b.destroy()
                continue
            self._spare.setdefault((b.size, int(b.usage)), []).append(b)
            self._spare_bytes += b.size

    # -------------------------------------------------------------- isolation
    def isolate(self, owner: str) -> None:
        """Call before a kernel of ``owner`` (a package: id and content hash) is dispatched. If the
        last kernel on this device was someone else's, or none ran yet, workgroup memory is
        cleared first (on drivers that do not zero it), so no kernel reads another package's
        values out of it. Kernels of one package in a row pay nothing."""
        if owner != self._owner and self._owner != "" and self.isolates_workgroups:
            self.clear_workgroup_memory()
        self._owner = owner

    def clear_workgroup_memory(self) -> int:
        """Zero the workgroup memory of every executor thread (shaders/
        clear_workgroup.wgsl); returns the attempts it took. Each attempt is accepted only when
        all its workgroups met, i.e. ran at once on that many distinct executors; a StudioError
        when they could not be made to meet."""
        if self._clear is None:
            self._clear = self._clear_pipeline()
        wgpu, dev = self.wgpu, self.device
        pipe, layout, groups = self._clear
        for attempt, patience in enumerate(CLEAR_PATIENCE, 1):
            meet = dev.create_buffer_with_data(data=struct.pack("<4I", 0, 0, 0, patience),
                                               usage=wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC)
            enc = dev.create_command_encoder()
            cp = enc.begin_compute_pass()
            cp.set_pipeline(pipe)
            cp.set_bind_group(0, dev.create_bind_group(layout=layout, entries=[
                {"binding": 0, "resource": {"buffer": meet, "offset": 0, "size": 16}}]))
            cp.dispatch_workgroups(groups)
            cp.end()
            dev.queue.submit([enc.finish()])
            _, met, dirty, _ = struct.unpack("<4I", bytes(dev.queue.read_buffer(meet))[:16])
            if met == groups and not dirty:
                self.workgroup_clears += 1
                self._owner = ""
                return attempt
            time.sleep(0.002 * attempt)          # let the driver's threads be scheduled
        raise StudioError(
            f"could not clear the device's workgroup memory between two packages' kernels: its "
            f"{groups} executor threads did not all run the clearing kernel ({len(CLEAR_PATIENCE)} attempts)",
            field="GPU adapter", hint="the machine is probably too busy to schedule the driver's threads; "
                                      "try again, or set LP_NUM_THREADS to fewer threads")

    def prepare_isolation(self) -> None:
        """Compile the clearing kernel now and clear once (llvmpipe compiles a kernel at its first
        dispatch, ~0.3 s): the device worker's child does this while it starts."""
        if self.isolates_workgroups and self._owner is None:
            self.clear_workgroup_memory()

    def _clear_pipeline(self):
        words = int(self.profile.limits.get("max-compute-workgroup-storage-size", 16384)) // 4
        groups = max(1, int(self.executors or 1))
        source = (SHADERS / CLEAR_SHADER).read_text()
        module = self.compile(source, file=str(SHADERS / CLEAR_SHADER))
        layouts = self.bind_group_layouts({0: [{"binding": 0, "kind": "storage", "access": "read_write",
                                               "min_size": 16}]})
        pipe = self.device.create_compute_pipeline(
            layout=self.device.create_pipeline_layout(bind_group_layouts=layouts),
            compute={"module": module, "entry_point": "main", "constants": {"WORDS": words, "GROUPS": groups}})
        return pipe, layouts[0], groups
