"""The reference path: an op's numpy reference on the CPU, in f64 where the contract says so.
It anchors all numerical correctness."""
from __future__ import annotations

import types

import numpy as np

from .errors import StudioError
from .package import OpPackage
from .signature import NUMPY_DTYPE

_MODULES: dict[str, types.ModuleType] = {}


def load_reference(pkg: OpPackage) -> types.ModuleType:
    """Execute reference.py once per content hash (in-process; see docs/security.md for
    when code someone else wrote is allowed to run)."""
    mod = _MODULES.get(pkg.hash)
    if mod is None:
        mod = types.ModuleType(f"scellis_reference_{pkg.hash[:12]}")
        mod.__file__ = pkg.reference_path
        try:
            code = compile(pkg.reference_source, pkg.reference_path, "exec")
            exec(code, mod.__dict__)
        except SyntaxError as e:
            raise StudioError(f"reference does not parse: {e.msg}", file=pkg.reference_path, line=e.lineno,
                              col=e.offset, hint="fix the Python syntax") from None
        except Exception as e:
            raise StudioError(f"reference failed while loading: {type(e).__name__}: {e}", file=pkg.reference_path,
                              hint="a reference may import numpy and define functions; nothing else at import") from None
        _MODULES[pkg.hash] = mod
    return mod


def reference_function(pkg: OpPackage, name: str):
    fn = getattr(load_reference(pkg), name, None)
    if not callable(fn):
        raise StudioError(f"reference.py defines no function '{name}'", file=pkg.reference_path,
                          field="reference.forward", hint=f"define `def {name}(...)` in {pkg.contract.reference_file}")
    return fn


def _error_from(exc: Exception, pkg: OpPackage, what: str) -> StudioError:
    tb = exc.__traceback__
    line = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == pkg.reference_path:
            line = tb.tb_lineno
        tb = tb.tb_next
    return StudioError(f"{what} raised {type(exc).__name__}: {exc}", file=pkg.reference_path, line=line,
                       hint="fix the reference so it handles every input the signature admits")


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
                raise StudioError(f"reference output '{o.name}' has shape {a.shape}, the signature says "
                                  f"{tuple(shapes[o.name])}", file=pkg.reference_path)
            a = a.reshape(shapes[o.name])
        with np.errstate(over="ignore", invalid="ignore"):
            result[o.name] = a.astype(NUMPY_DTYPE[o.dtype])
    return result


def cast_inputs(pkg: OpPackage, inputs: dict, precision: str | None = None) -> dict[str, np.ndarray]:
    prec = precision or pkg.contract.precision
    sig = pkg.contract.signature
    cast = {}
    for t in sig.inputs:
        a = np.asarray(inputs[t.name])
        if t.dtype == "f32":
            a = a.astype(np.float32)
            if prec == "f64":
                a = a.astype(np.float64)
        else:
            a = a.astype(NUMPY_DTYPE[t.dtype])
        cast[t.name] = a
    return cast


def run_reference(pkg: OpPackage, inputs: dict, params: dict, *, precision: str | None = None) -> dict[str, np.ndarray]:
    """Forward on the reference path; outputs rounded to the signature's dtypes."""
    sig = pkg.contract.signature
    env = sig.resolve({k: np.shape(v) for k, v in inputs.items()}, dict(params))
    shapes = sig.output_shapes(env)
    fn = reference_function(pkg, pkg.contract.reference_forward)
    kw = {p.name: params[p.name] for p in sig.params}
    try:
        with np.errstate(all="ignore"):
            out = fn(**cast_inputs(pkg, inputs, precision), **kw)
    except StudioError:
        raise
    except Exception as e:
        raise _error_from(e, pkg, "reference forward") from None
    return outputs_dict(pkg, out, shapes)


def run_reference_raw(pkg: OpPackage, fn_name: str, inputs: dict, params: dict, **extra):
    """Call any reference function (vjp, magnitude, kinks) in f64, unrounded."""
    sig = pkg.contract.signature
    fn = reference_function(pkg, fn_name)
    kw = {p.name: params[p.name] for p in sig.params}
    try:
        with np.errstate(all="ignore"):
            return fn(**cast_inputs(pkg, inputs, "f64"), **extra, **kw)
    except Exception as e:
        raise _error_from(e, pkg, f"reference {fn_name}") from None
