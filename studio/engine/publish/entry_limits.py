"""What a stranger's ring index entry may make this machine spend. A fetch regenerates the corpus
the entry names (fetch.py, ``_corpus``) to compare its hash: the sizes the entry declares are
judged here first — their type and range before any file of the package is read, then what the
corpus's large cases would hold for the package's own signature — so an entry naming
``fold_size = 10**11`` or every size kind at its largest is refused in one line, naming the field
and the limit, before a byte is allocated (docs/publishing.md, docs/security.md)."""
from __future__ import annotations

import math

from ..contract.signature import Signature
from ..errors import StudioError
from ..precision import DTYPE_BYTES

RING_CORPUS_BYTES = 1 << 30     # the inputs of a ring entry's large corpus cases, all together
MAX_SEED = (1 << 63) - 1
VALUE_KINDS_PER_SIZE = 2        # a large size is generated with at most two value kinds (normal, constant)


def _refuse(op: str, field: str, what: str, hint: str) -> StudioError:
    return StudioError(f"the ring's entry for {op}: {field} {what}", field=field,
                       hint=f"nothing was written here; {hint}")


def _size(op: str, field: str, v, top: int) -> int:
    if not isinstance(v, int) or isinstance(v, bool):
        raise _refuse(op, field, f"is {type(v).__name__}, not a whole number", "the entry is damaged: tell its owner")
    if not 1 <= v <= top:
        raise _refuse(op, field, f"= {v} is outside [1, {top}] (the largest size a corpus holds)",
                      "the entry names a corpus no publisher's engine makes: tell the ring's owner")
    return v


def check_identity(entry: dict) -> None:
    """The corpus identity's fields by type and range, before anything of the package is read."""
    from ..proof.corpus import MAX_SIZE, SIZE_KINDS
    op, ident = str(entry.get("id"))[:200], entry.get("corpus")
    if not isinstance(ident, dict):
        raise _refuse(op, "corpus", "is missing: it records no corpus identity", "the publisher's entry is incomplete")
    seed = ident.get("seed")
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed <= MAX_SEED:
        raise _refuse(op, "corpus.seed", f"must be a whole number in [0, {MAX_SEED}]", "the entry is damaged")
    if not isinstance(ident.get("large"), bool):
        raise _refuse(op, "corpus.large", "must be true or false", "the entry is damaged")
    if ident.get("fold_size") is not None:
        _size(op, "corpus.fold_size", ident["fold_size"], MAX_SIZE)
    sizes = ident.get("sizes")
    if sizes is not None:
        if not isinstance(sizes, dict) or len(sizes) > 4 * len(SIZE_KINDS):
            raise _refuse(op, "corpus.sizes", f"must map at most {4 * len(SIZE_KINDS)} size kinds to sizes",
                          "the entry is damaged")
        for k, v in sizes.items():
            _size(op, f"corpus.sizes.{str(k)[:40]}", v, MAX_SIZE)


def _input_bytes(sig: Signature, env: dict | None, v: int) -> int:
    """What one case's inputs hold at swept size ``v`` (each input taken as growing with it where
    its shape cannot be evaluated)."""
    total = 0
    for t in sig.inputs:
        item = DTYPE_BYTES.get(t.dtype, 8)
        try:
            total += math.prod(int(d.eval(env)) for d in t.dims) * item if env is not None else v * item
        except Exception:              # noqa: BLE001 (an expression this environment cannot evaluate: the worst linear case)
            total += v * item
    return total


def corpus_bytes(sig: Signature, ident: dict) -> int:
    """About how much the large cases of the corpus ``ident`` names would hold: every declared size
    (``fold_size``, ``sizes``; ``large`` adds one near 10⁶), each with at most two value kinds."""
    from ..proof import corpus
    sizes = dict(ident.get("sizes") or {})
    if not sizes and ident.get("fold_size") is not None:
        sizes = {"fold": ident["fold_size"]}
    if ident.get("large") and not any(v >= corpus.LARGE_SIZE for v in sizes.values()):
        sizes["big"] = corpus.LARGE_SIZE
    try:
        env_for, _ = corpus.swept_env(sig, int(ident.get("seed", 0)))
    except Exception:  # noqa: BLE001 (a signature swept_env cannot build an environment for: the worst linear case)
        env_for = None
    total = 0
    for key, v in sizes.items():
        axis = str(key).partition("@")[2]
        env = None
        try:
            if axis and hasattr(corpus, "axis_env"):
                base = corpus.axis_env(sig, axis, int(ident.get("seed", 0)))
                env = {**base, axis: v} if base is not None else None
            elif env_for is not None:
                env = env_for(v)
        except Exception:  # noqa: BLE001 (an axis environment that cannot be built: the worst linear case)
            env = None
        total += VALUE_KINDS_PER_SIZE * _input_bytes(sig, env, v)
    return total


def check_corpus_bytes(op: str, sig: Signature, ident: dict, limit: int = RING_CORPUS_BYTES) -> None:
    """Refuse, before it is generated, a corpus whose large cases would hold more than ``limit``."""
    need = corpus_bytes(sig, ident)
    if need > limit:
        field = "corpus.sizes" if ident.get("sizes") else "corpus.fold_size"
        raise _refuse(op, field, f"names large cases holding about {need / 2**30:.1f} GiB, over the "
                      f"{limit >> 20} MiB a ring entry's corpus may take", "the entry names a corpus far larger "
                      "than any conformance run makes: tell the ring's owner")
