"""The data-parallel learner as data (docs/requirements.md L1-L9, docs/learner.md): parameter count k, sample
width s, state width m, the contribution and update programs, initial parameters and state, the
rate, and per owner the list of its samples (unequal shares, an owner with none allowed).

A file is a ``learner.toml`` beside its ``.assign`` programs and ``.npy`` arrays; the same system is
built in Python with :class:`System` (``System.build``). Samples have one global order (their row
in the samples array); an owner's samples are a list of global indices, and together the owners'
lists are a partition of all samples (each exactly once)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from ..arrays import load_array
from ..contract.manifest import read_manifest
from ..errors import StudioError
from ..workflow.toml_fields import Fields
from .fingerprint import array_hash, digest

TREES = ("canonical", "per-owner")
PRECISIONS = ("f32", "bf16")
BF16_TREE = ("the bf16 combine rounds each owner's partial sum, so it needs the per-owner tree (the canonical "
             "tree's nodes are not the owners' sums)")
BF16_HINT = 'set [combine] tree = "per-owner" (its contract names the partition), or precision = "f32"'
TOP = ("learner", "combine", "owners")
LEARNER_KEYS = ("name", "summary", "k", "s", "m", "rate", "steps", "contribution", "update", "params", "state",
                "samples")
COMBINE_KEYS = ("tree", "precision")
OWNER_KEYS = ("shares", "assignment")


# ------------------------------------------------------------------ the two rules over programs
@dataclass(frozen=True)
class ProgramContribution:
    """A contribution program (docs/requirements.md L6): per sample, the frame ``[params k | sample s |
    contribution k]``; the contribution slots start at zero and are what it writes."""
    program: object                  # a Program (studio/engine/learner/program.py)
    bound: object                    # ... checked against the slot layout (check_program)
    k: int
    s: int

    @property
    def hash(self) -> str:
        return self.program.hash

    def contributions(self, params: np.ndarray, samples: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """(rows, k): the contribution slots of the frames ``[params | sample | 0]`` (evaluate's bits,
        without building the frames: evaluate.contributions). ``out``: a float32 (rows, k)
        C-contiguous array to write them into (a caller's buffer kept between steps), returned."""
        n, k = samples.shape[0], self.k
        if n == 0:
            return np.zeros((0, k), np.float32)
        from .evaluate import contributions
        return contributions(self.bound, params, samples, out=out)


@dataclass(frozen=True)
class ProgramUpdate:
    """The update program: one frame ``[params k | state m | mean k | rate]``; it writes the new
    parameters and state ``[0, k + m)``."""
    program: object
    bound: object
    k: int
    m: int

    @property
    def hash(self) -> str:
        return self.program.hash

    def apply(self, params: np.ndarray, state: np.ndarray, mean: np.ndarray, rate: np.float32):
        k, m = self.k, self.m
        frame = np.empty((1, 2 * k + m + 1), np.float32)     # every slot is set here
        frame[0, :k], frame[0, k:k + m], frame[0, k + m:2 * k + m], frame[0, 2 * k + m] = params, state, mean, rate
        from .evaluate import evaluate
        out = evaluate(self.bound, frame, in_place=True).reshape(-1)
        return out[:k], out[k:k + m]                  # views of this call's own frame: nothing else holds it

    def apply_frame(self, frame: np.ndarray) -> None:
        """The update on a frame that is already ``[params | state | mean | rate]`` (f32, C-contiguous,
        one row), in place: the new parameters and state in its first k + m slots (an owner's
        mailbox holds its replica so, learner/mailbox.py). The same evaluation as ``apply``."""
        from .evaluate import evaluate
        if frame.shape != (1, 2 * self.k + self.m + 1) or not frame.flags.c_contiguous:
            raise ValueError(f"an update frame is (1, {2 * self.k + self.m + 1}) C-contiguous, not {frame.shape}")
        evaluate(self.bound, frame, in_place=True)


# ------------------------------------------------------------------ the system
@dataclass(frozen=True)
class System:
    name: str
    k: int
    s: int
    m: int
    contribution: object             # .hash, .contributions(params (k,), samples (n, s)) -> (n, k) f32
    update: object                   # .hash, .apply(params, state, mean, rate) -> (params, state)
    params: np.ndarray               # initial parameters (k,) f32
    state: np.ndarray                # initial state (m,) f32
    rate: np.float32
    samples: np.ndarray              # (N, s) f32, row i is global sample i
    owners: tuple[np.ndarray, ...]   # per owner: the global indices of its samples (int64)
    tree: str = "canonical"
    precision: str = "f32"
    steps: int = 10
    summary: str = ""
    origin: str = "<python>"
    metric: str = "|mean contribution|"
    extra: dict = field(default_factory=dict, compare=False)

    @classmethod
    def build(cls, *, k, s, m, contribution, update, params, state, rate, samples, owners=None, shares=None,
              name="learner", tree="canonical", precision="f32", steps=10, summary="", origin="<python>",
              metric="|mean contribution|") -> System:
        """``contribution``/``update``: Program objects (checked against §6 here) or rule objects
        (``.hash`` and ``.contributions`` / ``.apply``). ``owners``: per owner a list of global
        sample indices; or ``shares``: per owner a count, contiguous in the global order; neither:
        one owner with every sample."""
        k, s, m = int(k), int(s), int(m)
        if not hasattr(contribution, "contributions"):          # a Program
            from .program import check_program
            contribution = ProgramContribution(contribution, check_program(contribution, role="contribution", k=k,
                                                                           s=s, m=m), k, s)
        if not hasattr(update, "apply"):
            from .program import check_program
            update = ProgramUpdate(update, check_program(update, role="update", k=k, s=s, m=m), k, m)
        samples = np.ascontiguousarray(np.asarray(samples, np.float32).reshape(-1, s) if s else
                                       np.zeros((len(samples), 0), np.float32))
        params = _vector(params, k, "params", origin)
        state = _vector(state, m, "state", origin)
        n = samples.shape[0]
        if owners is None:
            owners = split(n, shares if shares is not None else [n], origin=origin)
        sysm = cls(name, k, s, m, contribution, update, params, state, np.float32(rate), samples,
                   tuple(np.asarray(o, np.int64).reshape(-1) for o in owners), tree, precision, int(steps), summary,
                   origin, metric)
        sysm.validate()
        return sysm

    # ------------------------------------------------------------------ checks
    def validate(self) -> None:
        if self.tree not in TREES:
            raise StudioError(f"unknown combine tree '{self.tree}'", file=self.origin, field="combine.tree",
                              hint="canonical (over the global sample order) or per-owner (names the partition)")
        if self.precision not in PRECISIONS:
            raise StudioError(f"unknown combine precision '{self.precision}'", file=self.origin,
                              field="combine.precision", hint="f32 or bf16")
        if self.precision == "bf16" and self.tree != "per-owner":
            raise StudioError(BF16_TREE, file=self.origin, field="combine.precision", hint=BF16_HINT)
        n = self.samples.shape[0]
        if n == 0:
            raise StudioError("the learner has no samples", file=self.origin, field="learner.samples",
                              hint="give an (N, s) array with N >= 1")
        if n >= 2 ** 24:
            raise StudioError(f"{n} samples: the mass must be exact in f32 (below 2^24)", file=self.origin,
                              field="learner.samples")
        if not self.owners:
            raise StudioError("the learner has no owners", file=self.origin, field="owners", hint="at least one")
        seen = np.full(n, -1, np.int64)
        for o, idx in enumerate(self.owners):
            bad = idx[(idx < 0) | (idx >= n)]
            if bad.size:
                raise StudioError(f"owner {o} lists sample {int(bad[0])}, outside [0, {n})", file=self.origin,
                                  field=f"owners[{o}]", hint="samples are the rows of the samples array")
            dup = idx[seen[idx] >= 0]
            if dup.size or np.unique(idx).size != idx.size:
                i = int(dup[0]) if dup.size else int(idx[np.argmax(np.bincount(idx) > 1)])
                other = int(seen[i]) if seen[i] >= 0 else o
                raise StudioError(f"sample {i} is held by owner {other} and owner {o}: it would be counted twice",
                                  file=self.origin, field=f"owners[{o}]", hint="each sample has exactly one owner")
            seen[idx] = o
        if (seen < 0).any():
            i = int(np.argmax(seen < 0))
            raise StudioError(f"sample {i} has no owner: it would be lost", file=self.origin, field="owners",
                              hint="each sample has exactly one owner")

    # ------------------------------------------------------------------ placement
    @property
    def shares(self) -> list[int]:
        return [int(o.size) for o in self.owners]

    def assignment(self) -> np.ndarray:
        """owner of each global sample (int32, length N)."""
        a = np.empty(self.samples.shape[0], np.int32)
        for o, idx in enumerate(self.owners):
            a[idx] = o
        return a

    def partition_hash(self) -> str:
        return digest(*(array_hash(o) for o in self.owners))

    def data_hash(self) -> str:
        """The system's data: samples, initial parameters and state, rate."""
        return digest(array_hash(self.samples), array_hash(self.params), array_hash(self.state),
                      np.float32(self.rate).tobytes())

    def with_owners(self, owners) -> System:
        out = replace(self, owners=tuple(np.asarray(o, np.int64).reshape(-1) for o in owners))
        out.validate()
        return out

    def with_shares(self, shares) -> System:
        return self.with_owners(split(self.samples.shape[0], shares, origin=self.origin))

    def evenly(self, n_owners: int) -> System:
        """``n_owners`` contiguous shares as equal as possible (the first ones one larger)."""
        n = self.samples.shape[0]
        if n_owners < 1:
            raise StudioError(f"--owners {n_owners}: at least one owner", field="--owners")
        q, r = divmod(n, n_owners)
        return self.with_shares([q + (1 if i < r else 0) for i in range(n_owners)])


def split(n: int, shares, *, origin: str = "<python>") -> list[np.ndarray]:
    shares = [int(x) for x in shares]
    if any(x < 0 for x in shares) or sum(shares) != n:
        raise StudioError(f"shares {shares} add up to {sum(shares)}, the learner has {n} samples", file=origin,
                          field="owners.shares", hint="one non-negative count per owner, adding up to the samples")
    edges = np.cumsum([0, *shares])
    return [np.arange(edges[i], edges[i + 1], dtype=np.int64) for i in range(len(shares))]


def _vector(v, n: int, what: str, origin: str) -> np.ndarray:
    a = np.asarray(v, np.float32).reshape(-1)
    if a.size != n:
        raise StudioError(f"{what} has {a.size} values, the learner declares {n}", file=origin,
                          field=f"learner.{what}", hint=f"give {n} values")
    return np.ascontiguousarray(a)


# ------------------------------------------------------------------ the file
def load_system(path: str | Path, *, max_owners: int | None = None) -> System:
    """A learner.toml (docs/learner.md), its programs and arrays resolved beside it: every file
    read bounded (regular files only, size caps), every size checked against the machine before
    it is allocated, and no more owners than ``max_owners`` (the workers this run may start)."""
    from ..contract.package import read_regular
    from .limits import MAX_LEARNER_BYTES, fits_memory
    p = Path(path)
    if p.is_dir():
        p = p / "learner.toml"
    raw = read_regular(p, MAX_LEARNER_BYTES, what="the learner file", file=str(p),
                       hint="give a learner.toml (docs/learner.md)")      # a FIFO or a device is never opened
    m = read_manifest(raw, str(p))
    f = Fields(m.data, m.text, str(p))
    f.known((), TOP)
    f.known(("learner",), LEARNER_KEYS)
    f.known(("combine",), COMBINE_KEYS)
    f.known(("owners",), OWNER_KEYS)
    base = p.resolve().parent
    k, s, mm = _read_dims(f)
    fits_memory(f, k, s, mm)
    progs = _read_programs(f, base, k, s)
    initial = getattr(progs["contribution"], "initial_params", None)
    params = _array_field(f, ("learner", "params"), base, k,
                          default=initial if initial is not None else np.zeros(k, np.float32))
    state = _array_field(f, ("learner", "state"), base, mm, default=np.zeros(mm, np.float32))
    srel = f.get(("learner", "samples"), str, required=True)
    samples = _load(f, ("learner", "samples"), _beneath(f, ("learner", "samples"), base, srel))
    if samples.ndim != 2 or samples.shape[1] != s:
        raise f.error(("learner", "samples"), f"{srel} has shape {samples.shape}, the learner needs (N, {s})",
                      hint="one row per sample, s columns")
    n = samples.shape[0]
    owners = _read_owners(f, base, p, n, srel, max_owners)
    tree, prec = _read_combine(f)
    rate = f.get(("learner", "rate"), float, required=True)
    if not math.isfinite(rate):
        raise f.error(("learner", "rate"), f"rate {rate} is not finite")
    steps = f.get(("learner", "steps"), int, default=10)
    return System.build(k=k, s=s, m=mm, contribution=progs["contribution"], update=progs["update"], params=params,
                        state=state, rate=rate, samples=samples, owners=owners, tree=tree, precision=prec,
                        steps=steps, name=f.get(("learner", "name"), str, default=p.parent.name),
                        summary=f.get(("learner", "summary"), str, default=""), origin=str(p))


def _read_dims(f: Fields) -> tuple[int, int, int]:
    """[learner] k, s and m: the words per parameter vector, sample and state, each within bounds."""
    from .limits import MAX_WIDTH
    dims = {}
    for key in ("k", "s", "m"):
        v = f.get(("learner", key), int, required=True)
        if v < (1 if key != "m" else 0):
            raise f.error(("learner", key), f"{key} = {v} is too small", hint="k, s >= 1; m >= 0")
        if v > MAX_WIDTH:
            raise f.error(("learner", key), f"{key} = {v} is over the {MAX_WIDTH} words a learner may declare",
                          hint="k, s and m are counts of f32 words per parameter vector, sample and state")
        dims[key] = v
    return dims["k"], dims["s"], dims["m"]


def _read_programs(f: Fields, base: Path, k: int, s: int) -> dict:
    """The contribution (an assignment program, or a workflow's per-sample gradient) and the update."""
    from ..contract.package import read_regular
    from .program import MAX_PROGRAM_BYTES, parse_program
    progs = {}
    if isinstance(f.node(("learner", "contribution")), dict):          # a workflow's per-sample gradient
        progs["contribution"] = _workflow_rule(f, base, k, s)
    for key in ("contribution", "update"):
        if key in progs:
            continue
        rel = f.get(("learner", key), str, required=True)
        q = _beneath(f, ("learner", key), base, rel)
        try:
            text = read_regular(q, MAX_PROGRAM_BYTES, what=f"the {key} program {rel}").decode("utf-8")
        except (StudioError, UnicodeDecodeError) as e:       # a decoding error's bytes are not shown
            why = getattr(e, "message", None) or "it is not UTF-8 text"
            raise f.error(("learner", key), f"cannot read the {key} program {rel}: {why}",
                          hint="a .assign file beside learner.toml (docs/assignment-programs.md)") from None
        progs[key] = parse_program(text, origin=str(q))
    return progs


def _read_owners(f: Fields, base: Path, p: Path, n: int, srel: str, max_owners: int | None) -> list | None:
    """[owners] shares or assignment: each owner's samples (None: neither given, the default split)."""
    from .limits import check_owners
    owners = None
    shares = f.get(("owners", "shares"), list)
    arel = f.get(("owners", "assignment"), str)
    if shares is not None and arel is not None:
        raise f.error(("owners", "assignment"), "give owners.shares or owners.assignment, not both")
    if shares is not None:
        check_owners(f, ("owners", "shares"), len(shares), max_owners, f"{len(shares)} owners")
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in shares):
            raise f.error(("owners", "shares"), "owners.shares must be integers", hint="e.g. shares = [40, 0, 24]")
        if sum(shares) != n or any(x < 0 for x in shares):
            raise f.error(("owners", "shares"), f"shares {shares} add up to {sum(shares)}, {srel} holds {n} samples",
                          hint="one non-negative count per owner, adding up to the samples")
        owners = split(n, shares, origin=str(p))
    elif arel is not None:
        a = _load(f, ("owners", "assignment"), _beneath(f, ("owners", "assignment"), base, arel))
        if a.shape != (n,) or a.dtype.kind not in "iu" or (a.size and a.min() < 0):
            raise f.error(("owners", "assignment"), f"{arel} must hold one owner number (>= 0) per sample ({n})",
                          hint="an integer .npy of length N")
        if a.size:
            n_owners = int(a.max()) + 1
            check_owners(f, ("owners", "assignment"), n_owners, max_owners, f"{arel} names {n_owners} owners")
        owners = [np.flatnonzero(a == o) for o in range(int(a.max()) + 1 if a.size else 1)]
    return owners


def _read_combine(f: Fields) -> tuple[str, str]:
    """[combine] tree and precision (bf16 only on the per-owner tree)."""
    tree = f.get(("combine", "tree"), str, default="canonical")
    if tree not in TREES:
        raise f.error(("combine", "tree"), f"unknown combine tree '{tree}'", hint="canonical or per-owner")
    prec = f.get(("combine", "precision"), str, default="f32")
    if prec not in PRECISIONS:
        raise f.error(("combine", "precision"), f"unknown precision '{prec}'", hint="f32 or bf16")
    if prec == "bf16" and tree != "per-owner":
        raise f.error(("combine", "precision"), BF16_TREE, hint=BF16_HINT)
    return tree, prec


WORKFLOW_KEYS = ("workflow", "bind", "place", "receipts", "allow_unverified")


def _workflow_rule(f: Fields, base: Path, k: int, s: int):
    """``contribution = { workflow = "train.toml", bind = ["signal.seed"], place = "device" }``:
    the workflow's per-sample gradient (pipeline.py); its trainable sources are the parameters."""
    from .pipeline import WorkflowGradient
    at = ("learner", "contribution")
    f.known(at, WORKFLOW_KEYS)
    rel = f.get((*at, "workflow"), str, required=True)
    bind = f.get((*at, "bind"), list, required=True)
    if not bind or not all(isinstance(b, str) and "." in b for b in bind):
        raise f.error((*at, "bind"), "bind must list STEP.PARAM names, one per sample word", hint='["signal.seed"]')
    if len(bind) != s:
        raise f.error((*at, "bind"), f"bind names {len(bind)} step parameters, a sample has s = {s} words",
                      hint="one STEP.PARAM per sample word")
    place = f.get((*at, "place"), str, default="device")
    if place not in ("device", "reference"):
        raise f.error((*at, "place"), f"place '{place}' is not device or reference")
    receipts = f.get((*at, "receipts"), str)
    unverified = f.get((*at, "allow_unverified"), bool, default=False)
    from ..home import studio_home
    try:                                # the owners judge receipts with this user's key (this process's home)
        rule = WorkflowGradient(base / rel, bind, place=place, allow_unverified=unverified, home=studio_home(),
                                receipts=str(base / receipts) if receipts is not None else None)
        initial = rule.initial()
    except StudioError as e:
        raise f.error((*at, "workflow"), f"{rel}: {e.message}", hint=e.hint) from None
    if initial.size != k:
        raise f.error(("learner", "k"), f"k = {k}, the workflow's trainable sources ({', '.join(rule.names)}) hold "
                      f"{initial.size} values", hint=f"k = {initial.size}")
    rule.initial_params = initial
    return rule


def _beneath(f: Fields, path: tuple[str, ...], base: Path, rel: str) -> Path:
    """A file the learner file names: beneath its folder, through no symlink (arrays.input_beneath)."""
    from ..arrays import input_beneath
    try:
        return input_beneath(base, rel)
    except StudioError as e:
        raise f.error(path, e.message, hint=e.hint) from None


def _load(f: Fields, path: tuple[str, ...], file: Path) -> np.ndarray:
    from .limits import samples_limit
    try:
        return load_array(file, max_bytes=samples_limit(), why="a quarter of the memory this machine has available")
    except StudioError as e:
        raise f.error(path, f"{file.name}: {e.message}", hint=e.hint) from None


def _array_field(f: Fields, path, base: Path, n: int, *, default: np.ndarray) -> np.ndarray:
    v = f.node(path)
    if v is None:
        return default
    if isinstance(v, str):
        a = _load(f, path, _beneath(f, path, base, v))
    elif isinstance(v, list) and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v):
        a = np.asarray(v, np.float64)
    else:
        raise f.error(path, f"'{'.'.join(path)}' must be an array of numbers or a .npy file name")
    if a.size != n:
        raise f.error(path, f"'{'.'.join(path)}' has {a.size} values, the learner declares {n}", hint=f"give {n}")
    return np.asarray(a, np.float32).reshape(-1)


def pipeline_system(workflow: str | Path, seeds, *, bind=("signal.seed",), update: str | None = None, rate: float = 0.05,
                    state=None, m: int = 0, shares=None, owners=None, steps: int = 10, receipts=None, home=None,
                    place: str = "device", allow_unverified: bool = False, ctx=None) -> System:
    """The learner whose contribution is ``workflow``'s per-sample gradient: one sample per seed
    (``seeds``: (N,) or (N, len(bind))), the workflow's trainable sources as the initial parameters,
    ``update`` an update program (default plain gradient descent)."""
    from .pipeline import SGD, WorkflowGradient
    from .program import parse_program
    rule = WorkflowGradient(workflow, list(bind), receipts=receipts, home=home, place=place,
                            allow_unverified=allow_unverified)
    params = rule.initial(ctx)
    samples = np.asarray(seeds, np.float32).reshape(-1, len(bind))
    return System.build(k=params.size, s=samples.shape[1], m=m, contribution=rule,
                        update=parse_program(update or SGD, origin="<pipeline update>"), params=params,
                        state=np.zeros(m, np.float32) if state is None else state, rate=rate, samples=samples,
                        owners=owners, shares=shares, name=Path(workflow).stem, steps=steps,
                        summary=f"per-sample gradient of {Path(workflow).name}", origin=str(workflow))
