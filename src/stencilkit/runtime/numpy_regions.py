"""Regions of the vectorized NumPy backend: where one pass of a point kernel's body runs.

The generated function runs its body once per region: the interior (every relative read a
shifted view, exactly as without border modes), then, in the remapping border modes
("nearest", "reflect", "mirror", "wrap"), one box per dimension covering the border: box
``d`` holds the points inside the interior along the dimensions before ``d``, in the two
border strips along ``d``, and anywhere along the dimensions after it, so the boxes are
disjoint and together hold every point outside the interior. With one mode per axis
(contract.md section 9) only the remapped axes have boxes, and every box keeps to the interior
along the "constant" axes (whose border the caller filled with cval). A box reads through open-mesh
index arrays (``np.ix_``), each remapped into the array it indexes by its own extent, so
no padded copy of an input is ever made.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from .numpy_support import shifted, store


def remap(mode: str, j: np.ndarray, n: int) -> np.ndarray:
    """Positions ``j`` along an axis of extent ``n >= 1`` mapped into ``[0, n)`` as
    scipy.ndimage's ``mode`` does (``np.pad``'s "edge", "symmetric", "reflect", "wrap",
    repeated to any distance)."""
    if mode == "nearest":
        return np.clip(j, 0, n - 1)
    if mode == "wrap":
        return np.mod(j, n)
    if mode == "reflect":
        m = np.mod(j, 2 * n)
        return np.where(m < n, m, 2 * n - 1 - m)
    if mode == "mirror":
        if n == 1:
            return np.zeros_like(j)
        m = np.mod(j, 2 * n - 2)
        return np.where(m < n, m, 2 * n - 2 - m)
    raise ValueError(f"no index remapping for border mode {mode!r}")


class Interior:
    """The points whose whole neighbourhood lies inside the first array: shifted views."""

    __slots__ = ("shape", "lo", "hi")

    def __init__(self, shape: tuple[int, ...], lo: tuple[int, ...], hi: tuple[int, ...]) -> None:
        self.shape, self.lo, self.hi = shape, lo, hi

    def shifted(self, a: np.ndarray, offset: tuple) -> np.ndarray:
        return shifted(a, offset, self.lo, self.hi, self.shape)

    def store(self, out: np.ndarray, value) -> None:
        store(out, self.lo, self.hi, value)


class Box:
    """A box of border points given by its centre indices per dimension."""

    __slots__ = ("centres", "grid", "lo", "hi", "modes")

    def __init__(self, centres: tuple[np.ndarray, ...], lo: tuple[int, ...],
                 hi: tuple[int, ...], modes: tuple[str, ...]) -> None:
        self.centres = centres
        self.grid = np.ix_(*centres)
        self.lo, self.hi, self.modes = lo, hi, modes

    def shifted(self, a: np.ndarray, offset: tuple) -> np.ndarray:
        """``a`` read at every point of the box shifted by ``offset``, indices remapped."""
        if all(type(o) in (int, np.int64) or np.ndim(o) == 0 for o in offset):
            idx = []
            for dim, (c, o, l_, h) in enumerate(zip(self.centres, offset, self.lo, self.hi)):
                o = int(o)
                if o < -l_ or o > h:
                    raise IndexError(f"relative index {o} outside the neighbourhood")
                idx.append(_remapped(self.modes[dim], c + o, a.shape[dim]))
            return a[np.ix_(*idx)]
        # Offsets that vary per point: full index arrays (broadcast by advanced indexing).
        full = []
        for dim, (g, o, l_, h) in enumerate(zip(self.grid, offset, self.lo, self.hi)):
            o = np.asarray(o)
            if np.any((o < -l_) | (o > h)):
                raise IndexError("relative index outside the neighbourhood")
            full.append(_remapped(self.modes[dim], g + o, a.shape[dim]))
        return a[tuple(full)]

    def store(self, out: np.ndarray, value) -> None:
        out[self.grid] = np.asarray(value).astype(out.dtype, copy=False)


def _remapped(mode: str, j: np.ndarray, n: int) -> np.ndarray:
    # along a "constant" axis a box holds interior points only: every read is inside
    return j if mode == "constant" else remap(mode, j, n)


def regions(shape: tuple[int, ...], lo: tuple[int, ...], hi: tuple[int, ...],
            mode: str | tuple[str, ...]) -> Iterator[Interior | Box]:
    """The interior (when it has points), then the border boxes of the remapped axes that
    have points. ``lo``/``hi``: the border widths below and above, per dim; ``mode``: one
    border mode, or one per axis."""
    if all(n - h > l_ for n, l_, h in zip(shape, lo, hi)):
        yield Interior(shape, lo, hi)
    modes = (mode,) * len(shape) if isinstance(mode, str) else tuple(mode)
    for d in range(len(shape)):
        if modes[d] == "constant":
            continue
        centres = []
        for k, (n, l_, h) in enumerate(zip(shape, lo, hi)):
            if k < d or modes[k] == "constant":
                centres.append(np.arange(l_, n - h))
            elif k == d:
                head = min(l_, n)
                centres.append(np.concatenate([np.arange(0, head),
                                               np.arange(max(head, n - h), n)]))
            else:
                centres.append(np.arange(n))
        if all(len(c) for c in centres):
            yield Box(tuple(centres), lo, hi, modes)
