"""The hint under a conformance failure: the likeliest cause, named from what the failure shows —
the engine's 2-D launch fold, the poison of an element never written, an f32 intermediate that
overflowed where the f64 reference did not, or a NaN test the compiler folded away."""
from __future__ import annotations

import numpy as np

from ..precision import POISON_WORD

FOLD_KINDS = ("fold", "backward_fold")
F32_SQRT_MAX = 1.8e19          # a product of two values above this overflows f32


def hint(case, kind: str, mismatch, *, workgroup_size: int | None = None, folded: bool | None = None,
         what: str = "kernel", launch: dict | None = None) -> str | None:
    """One line (without the leading 'hint: '), or None. ``launch``: the fold case's launch facts
    (conformance's ``fold``: its grid, which axis folded, how many workgroups past the end)."""
    in_fold = case.shape_kind in FOLD_KINDS if folded is None else folded
    poisoned = mismatch is not None and mismatch.got_bits == POISON_WORD
    if in_fold and kind == "out_of_range_write":
        fold = (launch or {}).get("fold") or "x into y"
        grid = " × ".join(f"{g:,}" for g in (launch or {}).get("grid", [])[:2 if fold == "x into y" else 3])
        extra = (launch or {}).get("extra")
        return (f"this case's launch is folded ({fold}: an axis needs more than 65,535 workgroups, so the engine "
                f"splits it into rows{', a ' + grid + ' grid' if grid else ''}), and the last row is padded: "
                f"{extra if extra is not None else 'some'} workgroup(s) run past the end "
                f"(docs/package-format.md, \"Launch geometry\"). Guard every write with the folded index, e.g. "
                + (f"`let i = gid.x + gid.y * nwg.x * {workgroup_size or 64}u; if (i >= n) {{ return; }}`; a write "
                   f"per workgroup compares the workgroup's folded index (wid.x + wid.y * nwg.x) with the number "
                   f"of workgroups needed" if fold == "x into y" else
                   f"`let {fold[0]} = gid.{fold[0]} + gid.{fold[-1]} * nwg.{fold[0]} * WG_{fold[0].upper()};` and "
                   f"`if ({fold[0]} >= <its invocations>) {{ return; }}` (nwg = @builtin(num_workgroups))"))
    if in_fold and kind in ("unwritten", "mismatch") and (kind == "unwritten" or poisoned):
        wg = workgroup_size or 64
        fold = (launch or {}).get("fold")
        if fold and fold != "x into y":       # a 2-D kernel: its axis folds into z
            axis, into = fold.split(" into ")
            return (f"this case's launch needs more than 65,535 workgroups along {axis}, so the engine folds that "
                    f"axis into {into} (gid.{into} counts the rows): the {what} reads only gid.{axis}. Index with "
                    f"`let {axis} = gid.{axis} + gid.{into} * nwg.{axis} * WG_{axis.upper()};` (nwg = "
                    f"@builtin(num_workgroups), WG_{axis.upper()} the workgroup size along {axis}) and guard it, or "
                    f"bound that size in the signature so no launch folds")
        return (f"this case's launch needs more than 65,535 workgroups, so the engine folds it into 2-D "
                f"(gid.y counts the rows): the {what} reads only gid.x. Fix it one of two ways: index with "
                f"`let i = gid.y * nwg.x * {wg}u + gid.x;` (nwg = @builtin(num_workgroups)), or bound the size in "
                f"the signature (e.g. `n <= {65535 * wg}`) so no launch folds")
    if poisoned or kind == "unwritten":
        return (f"the element still holds the engine's poison word (0x{POISON_WORD:08X}, a NaN the engine writes "
                f"before the {what} runs): the {what} never wrote it. Check the guard (`if (i >= n)`), the "
                f"invocations count and the index arithmetic, not NaN handling")
    if mismatch is None:
        return None
    exp, got = mismatch.expected, mismatch.got
    if np.isfinite(exp) and not np.isfinite(got):
        top = max((float(np.max(np.abs(np.asarray(v, np.float64))[np.isfinite(np.asarray(v, np.float64))],
                                initial=0.0)) for v in case.inputs.values()), default=0.0)
        if top > F32_SQRT_MAX or abs(exp) > 1e30:
            return (f"the reference (f64) stayed finite but the kernel's f32 arithmetic overflowed (inputs reach "
                    f"{top:.3g}; f32 tops out at 3.4e38): an f32 intermediate such as a product or a sum of squares "
                    f"went to inf. Rescale before multiplying (e.g. by the largest |x|), or declare a value domain "
                    f"that keeps intermediates finite (`x: f32[n] in [-1e15, 1e15]`)")
    if np.isnan(exp) != np.isnan(got):
        return ("WGSL lets the compiler assume no NaNs, so `x != x` or `isNan`-style comparisons may be folded "
                "away; test NaN by its bits: (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u")
    return None


# ------------------------------------------------------------------ what the failing cases share
EXPLAINS = 0.75     # a condition names the failures when at least this share of the cases meeting it fail


def fails_when(failing: list, cases: list) -> str | None:
    """What every failing case shares and no passing case does, as a label ("w > 31", "n = w",
    "n > 1000003"): a relation tight in every failing case and in no passing one; else the one
    parameter or size whose failing values lie in a range that passing values lie outside of
    (named by those passing values), where most cases inside the range fail (``EXPLAINS``: a value
    the failing cases share only by construction, such as the large cases' first parameter
    combination, names nothing). Parameters before sizes, the sharpest range first. None when no
    case passes (nothing separates them) or nothing is shared."""
    failing = list({c.index: c for c in failing}.values())        # a case failing on two outputs is one case
    bad = {c.index for c in failing}
    passing = [c for c in cases if c.index not in bad]
    if not failing or not passing:
        return None
    tight = [t for t in sorted(set(failing[0].tight).intersection(*(set(c.tight) for c in failing[1:])))
             if not any(t in c.tight for c in passing)]
    if tight:
        return " and ".join(tight)
    best = None
    for name in dict.fromkeys([*failing[0].params, *failing[0].dims]):
        got = _range_label(name, [_value(c, name) for c in failing], [_value(c, name) for c in passing])
        if got is not None and (best is None or got[0] > best[0]):
            best = got
    return best[1] if best else None


def _value(case, name):
    v = {**case.dims, **case.params}.get(name)
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v) else None


def _range_label(name: str, fv: list, pv: list) -> tuple[float, str] | None:
    """(the share of the cases in the failing range that fail, the label), or None."""
    if not fv or any(v is None for v in fv):
        return None
    pv = [v for v in pv if v is not None]
    lo, hi = min(fv), max(fv)
    below, above = [v for v in pv if v < lo], [v for v in pv if v > hi]
    share = len(fv) / (len(fv) + sum(lo <= v <= hi for v in pv))
    if not (below or above) or share < EXPLAINS:
        return None
    if lo == hi:
        return share, f"{name} = {_num(lo)}"
    if below and above:
        return share, f"{name} in [{_num(lo)}, {_num(hi)}]"
    return share, (f"{name} > {_num(max(below))}" if below else f"{name} < {_num(min(above))}")


def _num(v) -> str:
    return str(int(v)) if float(v).is_integer() and abs(v) < 2**53 else repr(float(v))


def labelled(case, label: str | None) -> str:
    """The case's one-line description under the failures' label: the relations tight in this case
    are shown only when the label names them (a tight `n = w` is no cause when every failing case
    has w > 31, and cases with n = w and w <= 31 pass)."""
    text = case.describe()
    if label and case.tight and not all(t in label for t in case.tight):
        text = text.replace(f" ({', '.join(case.tight)})", "", 1)
    return text + (f" (failures only where {label})" if label else "")
