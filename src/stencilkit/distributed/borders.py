"""The global border of distributed arrays in the remapping border modes.

A point kernel in mode "nearest", "reflect", "mirror" or "wrap" computes every element, a
read outside the array taking the element the mode maps it to (contract.md section 1). On a
distributed array the halo cells beyond the *global* edge are filled with exactly those
elements after the exchange, so the kernel can then run in "constant" mode on the owned
block widened by its border: every owned point is interior, and reads the value the
one-process call would read.

The fill runs one axis after the other, each pass spanning the halo of the axes around it:
a cell beyond the edge along several axes is copied, in the pass of the last of them, from a
cell beyond the edge along the others only, which an earlier pass filled. A cell beyond the
edge along one axis and in a neighbour's halo along another is copied from that neighbour's
face, which the exchange filled whenever the kernel reads there.

The fill copies from the rank's block and its halo: along a split axis, where the mapped
cells lie beyond the edge block (a mirror image wider than a thin block), the exchange brings
them (``reach`` widens what the array receives), within the limits every exchange has (the
halo, the neighbour's block); along an axis that one rank holds whole, any width works (a
neighbourhood wider than the global array included). Along a split axis "wrap" is the
exchange of a periodic axis instead (``exchanged_axes``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..errors import ArgumentError
from ..runtime.numpy_regions import remap
from .decomposition import split

if TYPE_CHECKING:
    from .decomposition import Decomposition

Widths = Sequence[tuple[int, int]]


@dataclass(frozen=True, eq=False)  # eq=False: identity, as ``src`` holds an array
class AxisFill:
    """One copy ``data[dst] = data[src]``: a halo slab beyond the global edge along
    ``axis``, from the cells the mode maps it to (owned, or received into the halo by a
    widened exchange: ``reach``; ``src`` indexes ``axis`` with an
    integer array, the other axes with the slab's slices)."""

    axis: int
    dst: tuple[slice, ...]
    src: tuple[slice | np.ndarray, ...]


def exchanged_axes(dec: Decomposition, modes: Sequence[str]) -> tuple[bool, ...]:
    """Per axis, whether the halo beyond the global edge comes from the exchange (periodic
    axes; every split axis in mode "wrap" too): ``dec.periodic`` widened."""
    return tuple(p or (m == "wrap" and d > 1)
                 for p, d, m in zip(dec.periodic, dec.dims, modes))


def check_halo(dec: Decomposition, name: str, widths: Widths, modes: Sequence[str],
               stencil: str | None) -> None:
    """The kernel runs on the block widened by its border along every remapped axis (split
    or not), so the halo must hold that border there."""
    for i, (lo, hi) in enumerate(widths):
        mode = modes[i]
        if mode != "constant" and max(lo, hi) > dec.halo[i]:
            raise ArgumentError(
                f"array '{name}' needs a halo of {max(lo, hi)} along axis {i} in border mode "
                f"{mode!r} (it is read {lo} point(s) before and {hi} after its block) but its "
                f"decomposition has halo {dec.halo[i]}", stencil=stencil,
                hint=f"create the Decomposition with halo >= {max(lo, hi)} along axis {i}")


def _mapped(dec: Decomposition, i: int, side: int, count: int, mode: str) -> np.ndarray:
    """The global cells that the ``count`` cells beyond the edge ``side`` of axis ``i`` map
    to (nearest first)."""
    n = dec.shape[i]
    g = np.arange(-count, 0) if side < 0 else np.arange(n, n + count)
    return remap(mode, g, n)


def reach(dec: Decomposition, widths: Widths, modes: Sequence[str],
          exchanged: Sequence[bool]) -> tuple[tuple[int, int], ...]:
    """``widths`` widened by how far the cells the fill copies from lie beyond the edge
    block, into its halo: a block thinner than the mirror image of the border (mode
    "mirror" reading ``w`` points beyond the edge maps them up to ``w`` points inside; the
    cell ``w`` inside is the neighbour's when the edge block has ``w`` points). What the
    array must receive; the same on every rank (it depends on the decomposition only)."""
    out = []
    for i, (lo, hi) in enumerate(widths):
        p = dec.dims[i]
        mode = modes[i]
        # one rank holds the axis: every source is its own; "constant": nothing is filled
        if exchanged[i] or p == 1 or mode == "constant":
            out.append((lo, hi))
            continue
        first, last = split(dec.shape[i], p, 0), split(dec.shape[i], p, p - 1)
        wide_lo, wide_hi = lo, hi
        if hi:  # the last block's sources may lie before it
            wide_lo = max(lo, last[0] - int(_mapped(dec, i, 1, hi, mode).min()))
        if lo:  # the first block's sources may lie after it
            wide_hi = max(hi, int(_mapped(dec, i, -1, lo, mode).max()) - first[1] + 1)
        out.append((wide_lo, wide_hi))
    return tuple(out)


def plan(dec: Decomposition, widths: Widths, modes: Sequence[str],
         exchanged: Sequence[bool]) -> tuple[AxisFill, ...]:
    """The copies that fill the halo beyond the global edge of an array read
    ``widths[i] = (before, after)`` its block along each axis, once it holds
    ``reach(...)`` from the exchange (``check_halo`` and the exchange's checks passed)."""
    wide = reach(dec, widths, modes, exchanged)
    # each slab spans the part of the other axes' halos that is read or copied from
    around = [slice(dec.halo[j] - wlo, dec.halo[j] + dec.local_shape[j] + whi)
              for j, (wlo, whi) in enumerate(wide)]
    fills = []
    for i, (lo, hi) in enumerate(widths):
        if exchanged[i] or modes[i] == "constant":
            continue
        mode = modes[i]
        h, s, e = dec.halo[i], *dec.bounds[i]
        for side, count, coord in ((-1, lo, 0), (1, hi, dec.dims[i] - 1)):
            if count == 0 or coord != dec.coords[i]:
                continue
            dst, src = list(around), list(around)
            dst[i] = slice(h - count, h) if side < 0 else slice(h + e - s, h + e - s + count)
            src[i] = h + _mapped(dec, i, side, count, mode) - s
            fills.append(AxisFill(i, tuple(dst), tuple(src)))
    return tuple(fills)


def fill(data: np.ndarray, fills: Sequence[AxisFill]) -> None:
    for f in fills:  # in axis order (see the module docstring)
        data[f.dst] = data[f.src]
