"""The spike-removal report: against the clean signal (the signal before its spikes), how much of
the spike energy the workflow removed and how much of the clean signal's energy it kept.

Series of different lengths are compared over their centred overlap: the valid-mode ops of a
workflow (the windowed median, a symmetric FIR) shorten a signal by the same amount at each end.

- spike energy     E_spike = Σ (raw − clean)²          (what the spikes add; the raw's noise is clean)
- left after       E_left  = Σ (cleaned − clean)²
- removed          1 − E_left / E_spike
- clean kept       ⟨cleaned, clean⟩ / ⟨clean, clean⟩    (the clean signal's part of the result)"""
from __future__ import annotations

import numpy as np

from ..errors import StudioError
from .sources import spike_mask


def centred(a: np.ndarray, length: int) -> np.ndarray:
    a = np.asarray(a).reshape(-1)
    start = (a.size - length) // 2
    return a[start:start + length]


def overlap(*series: np.ndarray) -> list[np.ndarray]:
    n = min(np.asarray(s).size for s in series)
    return [centred(s, n).astype(np.float64) for s in series]


def offset_of(series: np.ndarray, reference: np.ndarray) -> int:
    """Where ``series`` starts in ``reference``'s sample index (the centred alignment)."""
    return (np.asarray(reference).size - np.asarray(series).size) // 2


def spike_report(raw: np.ndarray, cleaned: np.ndarray, clean: np.ndarray) -> dict:
    if min(np.asarray(s).size for s in (raw, cleaned, clean)) == 0:
        raise StudioError("the report's series are empty", field="report")
    r, y, c = overlap(raw, cleaned, clean)
    spike_energy = float(np.sum((r - c) ** 2))
    left = float(np.sum((y - c) ** 2))
    clean_energy = float(np.sum(c * c))
    removed = 1.0 - left / spike_energy if spike_energy > 0 else float("nan")
    kept = float(np.sum(y * c)) / clean_energy if clean_energy > 0 else float("nan")
    mask = spike_mask(r)
    return {"samples": int(r.size), "spikes": int(mask.sum()), "spike_energy": spike_energy, "energy_left": left,
            "spike_energy_removed": removed, "clean_energy": clean_energy, "clean_energy_kept": kept,
            "spikes_left": int(np.sum(spike_mask(y))),
            "max_abs_error_at_spikes": float(np.max(np.abs(y - c)[mask])) if mask.any() else 0.0}


def report_lines(rep: dict) -> list[str]:
    return [f"spikes    {rep['spikes']} spikes in {rep['samples']} samples; {rep['spikes_left']} left after the workflow",
            f"removed   {100 * rep['spike_energy_removed']:.2f} % of the spike energy against the clean signal "
            f"(Σ(raw−clean)² = {rep['spike_energy']:.1f} → Σ(cleaned−clean)² = {rep['energy_left']:.1f})",
            f"kept      {100 * rep['clean_energy_kept']:.2f} % of the clean signal's energy "
            f"(⟨cleaned, clean⟩ / ⟨clean, clean⟩, ‖clean‖² = {rep['clean_energy']:.1f})"]
