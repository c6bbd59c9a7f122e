"""Semantic categories verified on the reference path: declared, then checked, never believed."""
from __future__ import annotations

import numpy as np

from ..contract.package import OpPackage
from ..errors import StudioError
from ..trust.reference import References
from .corpus import CorpusCase


def _bits(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a).reshape(-1)
    return a.view(np.uint32) if a.dtype.itemsize == 4 else a


def verify_category(refs: References, pkg: OpPackage, cases: list[CorpusCase], *, probes: int = 4) -> list[StudioError]:
    """Check the reference against its declared category on corpus cases."""
    cat = pkg.contract.tolerance.category
    check = _CHECKS.get(cat)
    if check is None:
        return []
    rng = np.random.default_rng(7)
    for case in cases:
        out = refs.forward(pkg, case.inputs, case.params)
        msg = check(refs, pkg, case, out, rng, probes)
        if msg:
            return [StudioError(f"the reference breaks its declared category '{cat}': {msg} ({case.describe()})",
                                file=pkg.manifest_path, field="tolerance.category",
                                hint="fix the reference, or declare the category it really has")]
    return []


def _selection(refs, pkg, case, out, rng, probes):
    pool = [_bits(np.asarray(v, np.float32)) for v in case.inputs.values()]
    pool += [_bits(np.asarray([v], np.float32)) for v in case.params.values()]
    allowed = np.unique(np.concatenate(pool)) if pool else np.array([], np.uint32)
    for name, y in out.items():
        b = _bits(y)
        missing = ~np.isin(b, allowed)
        if missing.any():
            i = int(np.flatnonzero(missing)[0])
            return f"output {name}[{i}] = {y.reshape(-1)[i]!r} (0x{b[i]:08x}) is not bit for bit one of the inputs"
    return None


def _permutation(refs, pkg, case, out, rng, probes):
    src = np.sort(np.concatenate([_bits(np.asarray(v)) for v in case.inputs.values()]))
    for name, y in out.items():
        if not np.array_equal(np.sort(_bits(y)), src):
            return f"output {name} is not a permutation of the input"
    return None


def _copy(refs, pkg, case, out, rng, probes):
    if not case.inputs:              # found by tests/trust/test_tamper.py: np.concatenate([]) raised ValueError
        return "a copy needs an input tensor to copy, and this op has none"
    src = np.concatenate([_bits(np.asarray(v)) for v in case.inputs.values()])
    for name, y in out.items():
        if not np.array_equal(_bits(y), src[: _bits(y).size]):
            return f"output {name} is not a copy of the input"
    return None


def _integer(refs, pkg, case, out, rng, probes):
    for t in (*pkg.contract.signature.inputs, *pkg.contract.signature.outputs):
        if t.dtype not in ("i32", "u32"):
            return f"tensor {t.name} is {t.dtype}; the integer category is for integer tensors"
    return None


def _perturbed(pkg, case, j: int) -> dict:
    inputs = {k: np.array(v, copy=True) for k, v in case.inputs.items()}
    for v in inputs.values():
        flat = v.reshape(-1)
        if j < flat.size:
            flat[j] = flat[j] * np.float32(1.5) + np.float32(1.0)
    return inputs


def _changed(a: dict, b: dict) -> np.ndarray:
    diffs = [np.flatnonzero(_bits(a[k]) != _bits(b[k])) for k in a]
    return np.unique(np.concatenate(diffs)) if diffs else np.array([], int)


def _elementwise(refs, pkg, case, out, rng, probes):
    n = min(np.asarray(v).size for v in case.inputs.values()) if case.inputs else 0
    for _ in range(probes if n > 1 else 0):
        j = int(rng.integers(0, n))
        changed = _changed(out, refs.forward(pkg, _perturbed(pkg, case, j), case.params))
        if changed.size and (changed.size > 1 or changed[0] != j):
            return f"perturbing input element {j} changed outputs {changed[:5].tolist()}"
    return None


def _stencil(refs, pkg, case, out, rng, probes):
    n = min(np.asarray(v).size for v in case.inputs.values()) if case.inputs else 0
    if n < 64:
        return None
    for _ in range(probes):
        j = int(rng.integers(0, n))
        changed = _changed(out, refs.forward(pkg, _perturbed(pkg, case, j), case.params))
        if changed.size and (changed.max() - changed.min() > n // 4):
            return f"perturbing input element {j} changed outputs {changed.min()}..{changed.max()}: not local"
    return None


def _contraction(refs, pkg, case, out, rng, probes):
    """Linear in each input: scaling one input by 2 (exact in binary) scales every output by 2.
    Integer inputs (indices, a CSR structure) say where terms go, not what they are: not scaled."""
    integer = {t.name for t in pkg.contract.signature.inputs if t.dtype in ("u32", "i32")}
    for name in (n for n in case.inputs if n not in integer):
        if not np.all(np.isfinite(case.inputs[name])) or np.max(np.abs(case.inputs[name]), initial=0) > 1e30:
            return None
        scaled = dict(case.inputs, **{name: np.asarray(case.inputs[name], np.float32) * np.float32(2)})
        twice = refs.forward(pkg, scaled, case.params)
        for k, y in out.items():
            if not np.allclose(twice[k].astype(np.float64), 2 * y.astype(np.float64), rtol=1e-5, atol=1e-30):
                return f"not linear in input '{name}' (scaling it by 2 does not scale {k} by 2)"
    return None


def _reduction(refs, pkg, case, out, rng, probes):
    n_in = sum(np.asarray(v).size for v in case.inputs.values())
    n_out = sum(np.asarray(v).size for v in out.values())
    if n_in > 1 and n_out >= n_in:
        return f"{n_out} outputs from {n_in} inputs is no reduction"
    return None


def _scan(refs, pkg, case, out, rng, probes):
    """A scan's output i depends on inputs up to i only: perturbing element j leaves every output
    before j unchanged (and it is linear, as a prefix sum is: contraction's check)."""
    n = min(np.asarray(v).size for v in case.inputs.values()) if case.inputs else 0
    for _ in range(probes if n > 1 else 0):
        j = int(rng.integers(1, n))
        changed = _changed(out, refs.forward(pkg, _perturbed(pkg, case, j), case.params))
        if changed.size and changed.min() < j:
            return f"perturbing input element {j} changed output {int(changed.min())} before it: not a prefix scan"
    return _contraction(refs, pkg, case, out, rng, probes)


def _normalization(refs, pkg, case, out, rng, probes):
    """Row-wise: each output row depends on its own input row only (the first axis indexes rows):
    perturbing one element of row r changes no output of another row."""
    x = next((np.asarray(v) for v in case.inputs.values() if np.asarray(v).dtype.kind == "f"), None)
    if x is None or x.ndim < 2 or x.shape[0] < 2:
        return None
    rows = x.shape[0]
    for _ in range(probes):
        j = int(rng.integers(0, x.size))
        r = j // (x.size // rows)
        again = refs.forward(pkg, _perturbed(pkg, case, j), case.params)
        for k, y in out.items():
            per = max(y.size // rows, 1)
            changed = np.flatnonzero(_bits(y) != _bits(again[k])) // per
            if changed.size and np.any(changed != r):
                return (f"perturbing input element {j} (row {r}) changed output {k} in row "
                        f"{int(changed[changed != r][0])}: not row-wise")
    return None


def _generator(refs, pkg, case, out, rng, probes):
    if case.inputs:
        return f"a generator has no array inputs, and this op reads {', '.join(case.inputs)}"
    again = refs.forward(pkg, case.inputs, case.params)
    if not all(np.array_equal(_bits(again[k]), _bits(out[k])) for k in out):
        return "two runs with the same parameters differ: a generator must be deterministic"
    return None


_CHECKS = {"selection": _selection, "permutation": _permutation, "copy": _copy, "integer": _integer,
           "elementwise": _elementwise, "stencil": _stencil, "contraction": _contraction,
           "reduction": _reduction, "generator": _generator, "scan": _scan,
           "normalization": _normalization}
