"""User arrays in and out: ``.npy`` (numpy's own format, no pickles) and ``.csv`` (numbers, one
sample per row). The one reader and writer of the CLI, the Studio and the engine; every write is
crash-safe (temp, fsync, rename)."""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from .atomic import write_bytes
from .errors import StudioError


def load_array(path: str | Path) -> np.ndarray:
    p = Path(path)
    if not p.is_file():
        raise StudioError(f"no such file: {path}", file=str(path), hint="give a .npy or .csv file")
    try:
        if p.suffix.lower() == ".csv":
            return np.loadtxt(p, delimiter=",", dtype=np.float32, ndmin=1)
        return np.load(p, allow_pickle=False)
    except ValueError as e:
        raise StudioError(f"cannot read array: {e}", file=str(path),
                          hint="a .npy saved by numpy, or numbers in a .csv") from None


def save_array(path: str | Path, arr) -> None:
    """.csv (one value per row, or one row per sample) or .npy, by extension."""
    arr = np.asarray(arr)
    buf = io.BytesIO()
    if str(path).lower().endswith(".csv"):
        np.savetxt(buf, arr.reshape(arr.shape[0], -1) if arr.ndim else arr.reshape(1, 1), delimiter=",", fmt="%.9g")
    else:
        np.save(buf, arr, allow_pickle=False)
    write_bytes(path, buf.getvalue())
