"""The labelled images a data-parallel training batches (``[data]``, docs/workflows.md "Data-parallel
training"): a .csv or .csv.gz of rows ``side·side`` pixel values then the label (the layout of
scikit-learn's bundled 8×8 digits), read within limits checked before the work (compressed bytes,
decompressed bytes, rows, image side), scaled, and split once into training and held-out rows by a
seeded permutation the record names. Batches are contiguous slices of the training rows in an
order drawn per epoch from the same seed, so every owner count sees the same batches."""
from __future__ import annotations

import hashlib
import io
import math
import zlib
from dataclasses import dataclass

import numpy as np

from ..contract.package import read_regular
from ..errors import StudioError
from .spec import Data

MAX_FILE_BYTES = 16 << 20           # the file as stored
MAX_TEXT_BYTES = 64 << 20           # once decompressed: checked while inflating, not after
MAX_ROWS = 200_000
MAX_SIDE = 16                       # the 2-D convolutions' image side (core/nn/conv2d_bf16@1)


@dataclass
class Dataset:
    images: np.ndarray              # f32 [rows, 1, side, side], scaled
    labels: np.ndarray              # i64 [rows]
    train: np.ndarray               # row indices (into images) of the training rows
    held_out: np.ndarray            # ... and of the held-out rows
    sha256: str                     # of the file's bytes
    classes: int
    seed: int

    @property
    def side(self) -> int:
        return int(self.images.shape[-1])

    def one_hot(self, rows: np.ndarray) -> np.ndarray:
        out = np.zeros((len(rows), self.classes), np.float32)
        out[np.arange(len(rows)), self.labels[rows]] = 1.0
        return out

    def epoch_order(self, epoch: int) -> np.ndarray:
        """The training rows in epoch ``epoch``'s order (1-based): a permutation drawn from (seed, epoch)."""
        rng = np.random.default_rng([self.seed, 1, epoch])
        return self.train[rng.permutation(len(self.train))]

    def record(self) -> dict:
        return {"sha256": self.sha256, "rows": int(len(self.labels)), "train": int(len(self.train)),
                "held_out": int(len(self.held_out)), "side": self.side, "classes": self.classes, "seed": self.seed}


def _inflate(raw: bytes, file: str) -> bytes:
    """gzip bytes inflated up to MAX_TEXT_BYTES (a small file that inflates to gigabytes is refused
    before it is held)."""
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = d.decompress(raw, MAX_TEXT_BYTES + 1)
    except zlib.error as e:
        raise StudioError(f"{file}: not a gzip file ({e})", file=file, hint="give a .csv, or a .csv.gz made by gzip") from None
    if len(out) > MAX_TEXT_BYTES or d.unconsumed_tail:
        raise StudioError(f"{file}: decompresses to more than {MAX_TEXT_BYTES >> 20} MiB", file=file,
                          hint="a dataset for this trainer is a few megabytes of text")
    return out


def load(data: Data, *, classes: int | None = None) -> Dataset:
    file = str(data.path)
    raw = read_regular(data.path, MAX_FILE_BYTES, what="dataset file", file=file,
                       hint=f"a .csv or .csv.gz of at most {MAX_FILE_BYTES >> 20} MiB")
    text = _inflate(raw, file) if file.lower().endswith(".gz") else raw
    if text.count(b"\n") > MAX_ROWS + 1:
        raise StudioError(f"{file}: more than {MAX_ROWS} rows", file=file, hint="split the dataset")
    try:
        table = np.loadtxt(io.BytesIO(text), delimiter=",", dtype=np.float64, ndmin=2)
    except ValueError as e:
        raise StudioError(f"{file}: {e}".splitlines()[0], file=file,
                          hint="every row: side·side numbers, then the label, separated by commas") from None
    rows, cols = table.shape
    side = math.isqrt(max(cols - 1, 0))
    if rows < 2 or side < 1 or side * side != cols - 1 or side > MAX_SIDE:
        raise StudioError(f"{file}: {rows} rows of {cols} columns is not rows of side·side pixels and a label "
                          f"(side ≤ {MAX_SIDE})", file=file, hint="e.g. 65 columns: an 8×8 image, then its label")
    if not np.all(np.isfinite(table)):
        line = int(np.flatnonzero(~np.all(np.isfinite(table), axis=1))[0]) + 1
        raise StudioError(f"{file}:{line}: a value is not a finite number", file=file, line=line)
    labels = table[:, -1]
    k = int(classes or data.classes)
    bad = np.flatnonzero((labels != np.round(labels)) | (labels < 0) | (labels >= k))
    if bad.size:
        line = int(bad[0]) + 1
        raise StudioError(f"{file}:{line}: label {float(labels[bad[0]]):g} is not a class in 0..{k - 1}", file=file, line=line,
                          hint="the last column is the class index; [data] classes says how many there are")
    images = (table[:, :-1] * data.scale).astype(np.float32).reshape(rows, 1, side, side)
    perm = np.random.default_rng([data.seed, 0]).permutation(rows)
    n_held = max(1, int(round(rows * data.held_out)))
    return Dataset(images, labels.astype(np.int64), np.sort(perm[n_held:]), np.sort(perm[:n_held]),
                   hashlib.sha256(raw).hexdigest(), k, data.seed)


__all__ = ["Dataset", "load"]
