"""Where a workflow's data comes from, besides its steps: files (.npy, .csv through the one array
reader, studio/engine/arrays.py; .wav through wavio), inline values, a constant shaped like another
value, and the spike-free part of the story's synthetic signal (the reference the report and the
training loss compare against). Each comes with what the record keeps of it: the file's sha256,
the generator and its seed."""
from __future__ import annotations

import hashlib

import numpy as np

from ..arrays import MAX_ARRAY_BYTES, input_beneath, load_array
from ..contract.package import read_regular
from ..errors import StudioError
from ..precision import numpy_dtype, round_to
from .dataset import load
from .spec import Source, Workflow
from .wavio import read_wav

SPIKY_SIGNAL = "core/signal/spiky_signal@1"
SPIKE_FREE_GENERATOR = "scellis/spiky_signal_spike_free/1"
SPIKE_THRESHOLD = 1.3125          # |slow + fast + noise| <= 1 + 0.25 + 1/16; every spike is >= 5


def _hash32(v: np.ndarray) -> np.ndarray:
    """lowbias32 on uint32 with wraparound: the generator's hash (its reference.py and WGSL)."""
    v = np.asarray(v, dtype=np.uint32)
    v = v ^ (v >> np.uint32(16))
    v = v * np.uint32(0x7FEB352D)
    v = v ^ (v >> np.uint32(15))
    v = v * np.uint32(0x846CA68B)
    return v ^ (v >> np.uint32(16))


def spike_free_signal(n: int, seed: int) -> np.ndarray:
    """core/signal/spiky_signal@1 before its spikes are put in: the same two triangle waves and the
    same noise (resources/ops/core/spiky_signal/reference.py), every value exact in f32, so
    it equals the op's output bit for bit wherever the op put no spike (tests/workflows/test_workflow_run.py)."""
    n = int(n)
    i = np.arange(n, dtype=np.uint32)
    mix = _hash32(np.atleast_1d(np.uint32(int(seed) & 0xFFFFFFFF) ^ np.uint32(0x9E3779B9)))
    ph1, ph2 = mix % np.uint32(4096), (mix >> np.uint32(12)) % np.uint32(256)
    a1 = np.abs(((i + ph1) % np.uint32(4096)).astype(np.int64) * 2 - 4096)
    a2 = np.abs(((i + ph2) % np.uint32(256)).astype(np.int64) * 2 - 256)
    slow = (a1 * 2 - 4096).astype(np.float64) * 2.0 ** -12
    fast = (a2 * 2 - 256).astype(np.float64) * 2.0 ** -10
    noise = ((_hash32(i ^ mix) >> np.uint32(16)).astype(np.float64) * 2.0 ** -16 - 0.5) * 2.0 ** -3
    return ((slow + fast) + noise).astype(np.float32)


def spike_mask(raw: np.ndarray) -> np.ndarray:
    """Where the story signal holds a spike: beyond anything its smooth part reaches."""
    return np.abs(np.asarray(raw, np.float64)) > SPIKE_THRESHOLD


def _named_here(wf: Workflow, src: Source, key: str, e: StudioError) -> StudioError:
    line, col = wf.fields.position(("sources", src.name, key))
    e.related.append(StudioError(f"read for source '{src.name}'", file=wf.file, line=line, col=col,
                                 field=f"sources.{src.name}.{key}"))
    return e


def file_sha256(path, limit: int = MAX_ARRAY_BYTES) -> str:
    return hashlib.sha256(read_regular(path, limit, what="the source file", file=str(path))).hexdigest()


def load_file(wf: Workflow, src: Source, *, max_bytes: int = MAX_ARRAY_BYTES) -> tuple[np.ndarray, dict]:
    """A file source as an array of its dtype, and what the record keeps of it."""
    path = src.path
    info = {"kind": "file", "path": str(path), "format": path.suffix.lower().lstrip(".")}
    try:
        if path.is_relative_to(wf.base):      # still through no symlink, now that it is read
            input_beneath(wf.base, path.relative_to(wf.base).as_posix())
        if info["format"] == "wav":
            a, rate = read_wav(path, channel=src.channel, limit=max_bytes)
            info["sample_rate"] = rate
            if src.channel is not None:
                info["channel"] = src.channel
        else:
            a = load_array(path, max_bytes=max_bytes, why="the limit for one source")
        info["sha256"] = file_sha256(path, max_bytes)
    except StudioError as e:
        raise _named_here(wf, src, "file", e) from None
    if src.column is not None:
        if a.ndim != 2 or src.column >= a.shape[1]:
            raise wf.error(("sources", src.name, "column"),
                           f"source '{src.name}': column {src.column} does not exist in {path.name} "
                           f"(shape {list(a.shape)})", hint="columns count from 0")
        a = a[:, src.column]
        info["column"] = src.column
    return _typed(wf, src, a, "file"), info


def inline_values(wf: Workflow, src: Source) -> tuple[np.ndarray, dict]:
    return _typed(wf, src, np.asarray(src.values), "values"), {"kind": "values"}


def _typed(wf: Workflow, src: Source, a: np.ndarray, key: str) -> np.ndarray:
    want = numpy_dtype(src.dtype)
    if a.dtype.kind == "f" and want.kind in "iu":
        if not np.all(np.isfinite(a)) or not np.array_equal(a, np.round(a)):
            raise wf.error(("sources", src.name, key),
                           f"source '{src.name}' holds non-integer values, but its dtype is {src.dtype}")
    if a.dtype.kind not in "fiu":
        raise wf.error(("sources", src.name, key), f"source '{src.name}' holds {a.dtype} values, not numbers")
    return np.ascontiguousarray(round_to(a, src.dtype))      # bf16: rounded from f64 directly (docs/bf16.md)


def fill_like(src: Source, shape: tuple[int, ...]) -> tuple[np.ndarray, dict]:
    return (np.full(shape, src.fill, dtype=numpy_dtype(src.dtype)),
            {"kind": "fill", "fill": src.fill, "like": src.like.text})


def spike_free(wf: Workflow, src: Source, step_op_id: str, params: dict) -> tuple[np.ndarray, dict]:
    """The spike-free signal of the spiky-signal step ``src.spike_free`` (its n and seed)."""
    if step_op_id != SPIKY_SIGNAL:
        raise wf.error(("sources", src.name, "spike_free"),
                       f"source '{src.name}': step '{src.spike_free}' runs {step_op_id}, not {SPIKY_SIGNAL}",
                       hint="spike_free names the step that generates the story's spiky signal")
    n, seed = params.get("n"), params.get("seed")
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (n, seed)):
        raise wf.error(("steps", src.spike_free, "params"), f"step '{src.spike_free}' needs integer n and seed")
    return spike_free_signal(n, seed), {"kind": "generator", "generator": SPIKE_FREE_GENERATOR, "of": src.spike_free,
                                        "n": n, "seed": seed}


def dataset_batch(wf: Workflow, src: Source, plan) -> tuple[np.ndarray, dict]:
    """A dataset source's value in a plain run: the first replica's batch of the first epoch (a
    trainer puts each step's batch here instead). Images keep the source's dtype; labels are one-hot
    rows (f32)."""
    if plan.dataset is None:
        plan.dataset = load(wf.data)
    ds = plan.dataset
    tr = wf.train
    n = tr.batch // tr.replicas if tr is not None and tr.explicit else min(64, len(ds.train))
    rows = ds.epoch_order(1)[:n]
    info = {"kind": "dataset", "part": src.dataset, "path": str(wf.data.path), "sha256": ds.sha256, "rows": int(n)}
    if src.dataset == "labels":
        if src.dtype != "f32":
            raise wf.error(("sources", src.name, "dtype"), f"source '{src.name}': labels are one-hot f32 rows")
        return ds.one_hot(rows), info
    return np.ascontiguousarray(round_to(ds.images[rows], src.dtype)), info


def initial(src: Source) -> tuple[np.ndarray, dict]:
    """An init source: He's normal (variance 2 / fan-in, fan-in = the product of every dim but the
    first) or zeros, from its own seed, rounded to its dtype."""
    shape = tuple(src.shape)
    if src.init == "zeros":
        a = np.zeros(shape, np.float64)
    else:
        fan_in = max(1, int(np.prod(shape[1:])) if len(shape) > 1 else shape[0])
        a = np.random.default_rng([src.seed, 2]).normal(0.0, np.sqrt(2.0 / fan_in), size=shape)
    return np.ascontiguousarray(round_to(a, src.dtype)), {"kind": "init", "init": src.init, "seed": src.seed}
