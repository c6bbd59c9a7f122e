"""WAV in and out with the standard library's ``wave``: PCM of 8, 16, 24 or 32 bits, any channel
count. Samples become f32 in [-1, 1); written back as 16-bit PCM, values outside [-1, 1) clipped
(and counted, so the run can say so). Reading is bounded like every file the product reads."""
from __future__ import annotations

import io
import wave

import numpy as np

from ..arrays import MAX_ARRAY_BYTES, check_writable
from ..atomic import write_bytes
from ..contract.package import read_regular
from ..errors import StudioError

_HINT = "a PCM .wav file (8, 16, 24 or 32-bit integer samples)"


def read_wav(path, *, channel: int | None = None, limit: int = MAX_ARRAY_BYTES) -> tuple[np.ndarray, int]:
    """(samples as f32, sample rate). A file with several channels needs ``channel``."""
    raw = read_regular(path, limit, what="the .wav file", file=str(path), hint=_HINT)
    try:
        with wave.open(io.BytesIO(raw), "rb") as w:
            nch, width, rate, frames = w.getnchannels(), w.getsampwidth(), w.getframerate(), w.getnframes()
            data = w.readframes(frames)
    except (wave.Error, EOFError, ValueError) as e:
        raise StudioError(f"not a readable .wav file: {e}", file=str(path), hint=_HINT) from None
    if width not in (1, 2, 3, 4) or nch < 1:
        raise StudioError(f"the .wav file has {width}-byte samples and {nch} channel(s)", file=str(path), hint=_HINT)
    got = len(data) // (width * nch)
    if got == 0:
        raise StudioError("the .wav file holds no samples", file=str(path), hint=_HINT)
    b = np.frombuffer(data[:got * width * nch], dtype=np.uint8).reshape(got, nch, width)
    if width == 1:
        v = (b[..., 0].astype(np.float64) - 128.0) / 128.0
    else:
        u = np.zeros(b.shape[:2], dtype=np.int64)
        for k in range(width):
            u |= b[..., k].astype(np.int64) << (8 * k)
        top = 1 << (8 * width - 1)
        v = (np.where(u >= top, u - 2 * top, u)).astype(np.float64) / top
    if nch > 1 and channel is None:
        raise StudioError(f"the .wav file has {nch} channels", file=str(path), field="channel",
                          hint="choose one: channel = 0 (the first) in the source")
    c = channel or 0
    if c >= nch:
        raise StudioError(f"channel {c} does not exist: the file has {nch}", file=str(path), field="channel")
    return np.ascontiguousarray(v[:, c].astype(np.float32)), rate


def write_wav(path, samples, sample_rate: int) -> int:
    """16-bit mono PCM, written crash-safely; returns how many samples were clipped to [-1, 1)."""
    p = check_writable(path)
    a = np.asarray(samples, dtype=np.float64).reshape(-1)
    if not np.all(np.isfinite(a)):
        raise StudioError("cannot write NaN or infinite samples to a .wav file", file=str(p),
                          hint="write the series to .npy instead")
    scaled = np.round(a * 32768.0)                 # the reader's scale: a sample reads back within 2^-16
    clipped = int(np.count_nonzero((scaled < -32768) | (scaled > 32767)))
    pcm = np.clip(scaled, -32768, 32767).astype("<i2")
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(int(sample_rate))
        w.writeframes(pcm.tobytes())
    write_bytes(p, buf.getvalue())
    return clipped
