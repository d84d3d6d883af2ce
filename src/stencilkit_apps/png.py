"""A PNG writer without matplotlib: 8-bit RGB, one zlib stream, a ``tEXt`` title.

The demo's picture where matplotlib is not installed (the compiler does not need it). Only
what the PNG specification requires for a truecolour image: the signature, ``IHDR``, one
``IDAT`` of filter-0 scanlines, ``IEND``; each chunk with its CRC-32.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np

SIGNATURE = b"\x89PNG\r\n\x1a\n"

# matplotlib's "inferno" at nine even steps: dark for cold, bright for hot (as the
# matplotlib picture), interpolated linearly in between
_INFERNO = np.array([(0, 0, 4), (33, 12, 74), (87, 16, 110), (138, 34, 106), (188, 55, 84),
                     (228, 90, 49), (249, 142, 9), (249, 203, 53), (252, 255, 164)], float)


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def encode(rgb: np.ndarray, title: str | None = None) -> bytes:
    """The PNG file of ``rgb``, a (height, width, 3) uint8 array, top row first."""
    if rgb.ndim != 3 or rgb.shape[2] != 3 or rgb.dtype != np.uint8 or 0 in rgb.shape[:2]:
        raise ValueError(f"expected a non-empty (height, width, 3) uint8 array, got shape "
                         f"{rgb.shape} of {rgb.dtype}")
    height, width = rgb.shape[:2]
    rows = np.concatenate([np.zeros((height, 1), np.uint8),  # filter type 0 per scanline
                           np.ascontiguousarray(rgb).reshape(height, 3 * width)], axis=1)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB, no interlace
    text = b"" if not title else _chunk(b"tEXt", b"Title\0" + title.encode("latin-1", "replace"))
    return (SIGNATURE + _chunk(b"IHDR", header) + text
            + _chunk(b"IDAT", zlib.compress(rows.tobytes(), 6)) + _chunk(b"IEND", b""))


def colour(values: np.ndarray, *, min_side: int = 256) -> np.ndarray:
    """A 2-D field as an RGB image: its range mapped onto the colour scale, row 0 at the
    bottom (as a plot with ``origin="lower"``), each value a square of pixels so that the
    picture is at least ``min_side`` pixels across."""
    v = np.asarray(values, dtype=float)
    lo, hi = (float(np.nanmin(v)), float(np.nanmax(v))) if v.size else (0.0, 0.0)
    t = np.zeros_like(v) if hi <= lo else (np.nan_to_num(v, nan=lo) - lo) / (hi - lo)
    x = np.clip(t, 0.0, 1.0) * (len(_INFERNO) - 1)
    i = np.minimum(x.astype(int), len(_INFERNO) - 2)
    f = (x - i)[..., None]
    rgb = np.rint(_INFERNO[i] * (1 - f) + _INFERNO[i + 1] * f).astype(np.uint8)[::-1]
    scale = max(1, -(-min_side // max(v.shape)))
    return np.repeat(np.repeat(rgb, scale, axis=0), scale, axis=1)
