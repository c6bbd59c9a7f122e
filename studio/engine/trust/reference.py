"""The reference path: an op's numpy reference on the CPU, in f64 where the contract says so.
It anchors all numerical correctness."""
from __future__ import annotations

import math
from contextlib import contextmanager

import numpy as np

from ..contract.package import OpPackage
from ..errors import StudioError
from ..precision import round_to, to_reference
from .code import code_files, code_hash
from .pool import DEFAULT_LIMITS, MIN_REPLY_BYTES, REPLY_FACTOR, HostPool, RemoteError
from .results import ResultCache, result_key
from .store import TrustStore

ITEM_BYTES_MAX = 16               # the widest element a reply may use for a signature's element (c16)
REPLY_SLACK = 4096


class ReferenceModule:
    """An op's reference.py, loaded in its confined host (studio/engine/trust/host.py). Attribute
    access gives a callable for each function the module defines; calling it runs the
    function in the host, with arrays, numbers, lists, tuples and dicts crossing both ways."""

    def __init__(self, refs: "References", pkg: OpPackage, functions: list[str]):
        self._refs, self._pkg, self._functions = refs, pkg, frozenset(functions)
        self.__file__ = pkg.reference_path

    @property
    def functions(self) -> frozenset[str]:
        return self._functions

    def __getattr__(self, name: str):
        if name.startswith("_") or name not in self._functions:
            raise AttributeError(name)
        return _RemoteFunction(self._refs, self._pkg, name)

    def __dir__(self):
        return sorted(self._functions)


class _RemoteFunction:
    def __init__(self, refs: "References", pkg: OpPackage, name: str, reply_bytes: int | None = None):
        self.refs, self.pkg, self.__name__, self.reply_bytes = refs, pkg, name, reply_bytes

    def limited(self, reply_bytes: int | None) -> "_RemoteFunction":
        """The same function, whose reply's arrays may hold at most reply_bytes."""
        return _RemoteFunction(self.refs, self.pkg, self.__name__, reply_bytes)

    def __call__(self, *args, **kwargs):
        pkg, name = self.pkg, self.__name__
        host = self.refs.host(pkg)           # a live host: one that ended between calls is replaced
        self.refs.host_calls += 1
        try:
            return host.request(name, args, kwargs, reply_bytes=self.reply_bytes)
        except RemoteError as e:
            if e.kind in ("died", "timeout", "protocol"):
                self.refs.hosts.discard(host)
            raise _remote_error(e, pkg, f"reference {name}") from None
        except (TypeError, ValueError) as e:     # an argument that cannot cross to the host
            raise StudioError(f"reference {name}: cannot pass the arguments ({e})", file=pkg.reference_path,
                              hint="pass numpy arrays, numbers, strings, lists, tuples or dicts") from None


def _remote_error(e, pkg: OpPackage, what: str) -> StudioError:
    file = pkg.reference_path
    if e.kind == "syntax":
        return StudioError(f"reference does not parse: {e.message}", file=file, line=e.line, col=e.col,
                           hint="fix the Python syntax")
    if e.kind == "load":
        return StudioError(f"reference failed while loading: {e.type_name}: {e.message}", file=file, line=e.line,
                           hint="a reference may import numpy and define functions; nothing else at import")
    if e.kind == "missing":
        return StudioError(f"reference.py defines no function '{what.split()[-1]}'", file=file,
                           field="reference.forward")
    if e.type_name == "ReplyTooLarge":
        return StudioError(f"{what} {e.message}", file=file,
                           hint="a reference returns the outputs its signature declares (their shapes bound "
                                "the reply); return just those arrays")
    if e.kind in ("died", "timeout", "protocol"):
        return StudioError(f"{what} {e.message}", file=file,
                           hint="the reference runs in a separate process with CPU, memory and time limits "
                                "(docs/security.md); make it cheaper or look for an endless loop")
    extra = " (the reference process may use at most " \
            f"{DEFAULT_LIMITS.memory_bytes >> 20} MiB)" if e.type_name == "MemoryError" else ""
    return StudioError(f"{what} raised {e.type_name}: {e.message}{extra}", file=file, line=e.line,
                       hint="fix the reference so it handles every input the signature admits")


class References:
    """The reference path of one process: each op's reference.py runs only when its Python is
    trusted (``trust``), in a confined host from ``hosts`` (one per reference hash, code.py, reused
    across kernel edits). Inside ``caching()`` results come from and go to ``results``
    (results.py); ``host_calls`` counts the calls that reached a host."""

    def __init__(self, trust: TrustStore, hosts: HostPool, results: ResultCache | None = None):
        self.trust, self.hosts = trust, hosts
        self.results = results if results is not None else ResultCache(trust.home)
        self.host_calls = 0
        self._caching = 0
        self._codes: dict[str, str] = {}
        self._trusted: set[str] = set()     # package hashes judged trusted in the current caching block

    def code_hash(self, pkg: OpPackage) -> str:
        """The package's reference hash (code.py), computed once per content hash."""
        code = self._codes.get(pkg.hash)
        if code is None:
            code = self._codes[pkg.hash] = code_hash(pkg.files)
        return code

    @contextmanager
    def caching(self):
        """Reference results inside this block come from the cache when it has them (and go into it
        when not); the new ones are written to the user folder when the outermost block ends."""
        if not self._caching:
            self._trusted.clear()           # trust is judged again in every block
        self._caching += 1
        try:
            yield self.results
        finally:
            self._caching -= 1
            if not self._caching:
                self.results.flush()

    def host(self, pkg: OpPackage):
        try:
            return self.hosts.host_for(self.code_hash(pkg), pkg.reference_source, pkg.reference_path,
                                       files=code_files(pkg.files), reference=pkg.contract.reference_file)
        except RemoteError as e:
            raise _remote_error(e, pkg, "reference") from None

    def load(self, pkg: OpPackage) -> ReferenceModule:
        """The package's reference, loaded in its confined process. Refused with a StudioError
        unless the package is trusted (docs/security.md): code someone else wrote never runs unasked."""
        self.trust.require_trusted(pkg)
        host = self.host(pkg)
        return ReferenceModule(self, pkg, host.functions or [])

    def function(self, pkg: OpPackage, name: str):
        fn = getattr(self.load(pkg), name, None)
        if not callable(fn):
            raise StudioError(f"reference.py defines no function '{name}'", file=pkg.reference_path,
                              field="reference.forward",
                              hint=f"define `def {name}(...)` in {pkg.contract.reference_file}")
        return fn

    def forward(self, pkg: OpPackage, inputs: dict, params: dict, *,
                precision: str | None = None) -> dict[str, np.ndarray]:
        """Forward on the reference path; outputs rounded to the signature's dtypes. The reply may
        hold no more than the signature's outputs (ITEM_BYTES_MAX bytes per element)."""
        sig = pkg.contract.signature
        env = sig.resolve({k: np.shape(v) for k, v in inputs.items()}, dict(params))
        shapes = sig.output_shapes(env)
        limit = ITEM_BYTES_MAX * sum(math.prod(s) for s in shapes.values()) + REPLY_SLACK
        out = self.call_as_given(pkg, pkg.contract.reference_forward, cast_inputs(pkg, inputs, precision), params,
                                 reply_bytes=limit)
        return outputs_dict(pkg, out, shapes)

    def call(self, pkg: OpPackage, fn_name: str, inputs: dict, params: dict, **extra):
        """Call any reference function (forward, vjp, magnitude, kinks) in f64, unrounded."""
        return self.call_as_given(pkg, fn_name, cast_inputs(pkg, inputs, "f64"), params, **extra)

    def call_as_given(self, pkg: OpPackage, fn_name: str, arrays: dict, params: dict, *,
                      reply_bytes: int | None = None, **extra):
        """Call a reference function with the arrays exactly as given (no casting, no rounding). Its
        reply may hold reply_bytes, by default what reply_limit allows."""
        kw = {p.name: params[p.name] for p in pkg.contract.signature.params}
        key = None
        if self._caching:
            if pkg.hash not in self._trusted:          # a cached result is still only for trusted code
                self.trust.require_trusted(pkg)
                self._trusted.add(pkg.hash)
            code = self.code_hash(pkg)
            key = result_key(code, pkg.contract.reference_file, fn_name, {**arrays, **extra, **kw})
            hit = self.results.get(code, key) if key is not None else None
            if hit is not None:
                return hit
        fn = self.function(pkg, fn_name)
        if reply_bytes is None:
            reply_bytes = reply_limit(pkg, arrays, kw, extra)
        try:
            with np.errstate(all="ignore"):
                out = fn.limited(reply_bytes)(**arrays, **extra, **kw)
        except StudioError:
            raise
        except Exception as e:  # noqa: BLE001 (whatever the author's reference raises: said as a reference error)
            raise reference_error(e, pkg, f"reference {fn_name}") from None
        if key is not None:
            self.results.put(self.code_hash(pkg), key, out)
        return out


def reply_limit(pkg: OpPackage, arrays: dict, params: dict, extra: dict) -> int:
    """What a reply to any reference call (a VJP, a magnitude, kinks) may hold: the signature's
    outputs for these inputs, plus REPLY_FACTOR x the arrays sent (a VJP answers per input),
    at least MIN_REPLY_BYTES."""
    sig = pkg.contract.signature
    try:
        env = sig.resolve({t.name: np.shape(arrays[t.name]) for t in sig.inputs}, dict(params))
        outs = sum(math.prod(s) for s in sig.output_shapes(env).values())
    except (StudioError, KeyError, TypeError, ValueError):
        outs = 0                      # no static output shape: the request alone bounds the reply
    sent = sum(np.asarray(v).nbytes for v in [*arrays.values(), *extra.values()]
               if isinstance(v, (np.ndarray, np.generic)))
    return ITEM_BYTES_MAX * outs + REPLY_FACTOR * sent + MIN_REPLY_BYTES


def reference_error(exc: Exception, pkg: OpPackage, what: str) -> StudioError:
    tb = exc.__traceback__
    line = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == pkg.reference_path:
            line = tb.tb_lineno
        tb = tb.tb_next
    return StudioError(f"{what} raised {type(exc).__name__}: {exc}", file=pkg.reference_path, line=line,
                       hint="fix the reference so it handles every input the signature admits")


def _def_line(source: str, name: str) -> int | None:
    """The line of ``def name(`` in the reference's source (where a wrong return is to be fixed)."""
    for n, line in enumerate(source.splitlines(), 1):
        if line.lstrip().startswith(f"def {name}("):
            return n
    return None


def outputs_dict(pkg: OpPackage, out, shapes: dict | None = None) -> dict[str, np.ndarray]:
    outs = pkg.contract.signature.outputs
    if not isinstance(out, dict):
        out = {outs[0].name: out} if len(outs) == 1 else dict(zip([o.name for o in outs], out))
    result = {}
    for o in outs:
        if o.name not in out:
            raise StudioError(f"reference returned no output '{o.name}'", file=pkg.reference_path)
        a = np.asarray(out[o.name])
        if shapes is not None and a.shape != tuple(shapes[o.name]):
            a = a.reshape(-1) if a.size == int(np.prod(shapes[o.name])) else a
            if a.size != int(np.prod(shapes[o.name])):
                fn = pkg.contract.reference_forward
                raise StudioError(f"reference output '{o.name}' has shape {a.shape}, the signature says "
                                  f"{tuple(shapes[o.name])}", file=pkg.reference_path,
                                  line=_def_line(pkg.reference_source, fn), field="reference.forward",
                                  hint=f"make {fn}() return an array of shape {tuple(shapes[o.name])} for "
                                       f"'{o.name}' (the signature: {pkg.contract.signature.text})")
            a = a.reshape(shapes[o.name])
        result[o.name] = round_to(a, o.dtype)        # once, from the reference's own precision
    return result


def cast_inputs(pkg: OpPackage, inputs: dict, precision: str | None = None) -> dict[str, np.ndarray]:
    prec = precision or pkg.contract.precision
    sig = pkg.contract.signature
    cast = {}
    for t in sig.inputs:
        cast[t.name] = to_reference(inputs[t.name], t.dtype, prec)
    return cast
