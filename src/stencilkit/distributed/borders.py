"""The global border of distributed arrays in the remapping border modes.

A point kernel in mode "nearest", "reflect", "mirror" or "wrap" computes every element, a
read outside the array taking the element the mode maps it to (API.md section 1). On a
distributed array the halo cells beyond the *global* edge are filled with exactly those
elements after the exchange, so the kernel can then run in "constant" mode on the owned
block widened by its border: every owned point is interior, and reads the value the
one-process call would read.

The fill runs one axis after the other, each pass spanning the halo of the axes around it:
a cell beyond the edge along several axes is copied, in the pass of the last of them, from a
cell beyond the edge along the others only, which an earlier pass filled. A cell beyond the
edge along one axis and in a neighbour's halo along another is copied from that neighbour's
face, which the exchange filled whenever the kernel reads there.

The fill copies only from the rank's own block (no data from further ranks), so along a split
axis the mapped cells must lie in the block at the edge; along an axis that one rank holds
whole, any width works (a neighbourhood wider than the global array included). Along a split
axis "wrap" is the exchange of a periodic axis instead (``exchanged_axes``).
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
    ``axis``, from the owned cells the mode maps it to (``src`` indexes ``axis`` with an
    integer array, the other axes with the slab's slices)."""

    axis: int
    dst: tuple[slice, ...]
    src: tuple[slice | np.ndarray, ...]


def exchanged_axes(dec: Decomposition, mode: str) -> tuple[bool, ...]:
    """Per axis, whether the halo beyond the global edge comes from the exchange (periodic
    axes; in mode "wrap", every split axis too): ``dec.periodic`` widened."""
    if mode != "wrap":
        return dec.periodic
    return tuple(p or d > 1 for p, d in zip(dec.periodic, dec.dims))


def check_halo(dec: Decomposition, name: str, widths: Widths, mode: str,
               stencil: str | None) -> None:
    """In a remapping mode the kernel runs on the block widened by its border along every
    axis (split or not), so the halo must hold that border everywhere."""
    for i, (lo, hi) in enumerate(widths):
        if max(lo, hi) > dec.halo[i]:
            raise ArgumentError(
                f"array '{name}' needs a halo of {max(lo, hi)} along axis {i} in border mode "
                f"{mode!r} (it is read {lo} point(s) before and {hi} after its block) but its "
                f"decomposition has halo {dec.halo[i]}", stencil=stencil,
                hint=f"create the Decomposition with halo >= {max(lo, hi)} along axis {i}")


def plan(dec: Decomposition, name: str, widths: Widths, mode: str,
         exchanged: Sequence[bool], stencil: str | None) -> tuple[AxisFill, ...]:
    """The copies that fill the halo of array ``name`` beyond the global edge, for reads
    ``widths[i] = (before, after)`` its block along each axis. The verdict (an
    ``ArgumentError`` or not) depends only on the decomposition: the same on every rank."""
    fills = []
    for i, (lo, hi) in enumerate(widths):
        if exchanged[i] or (lo == 0 and hi == 0):
            continue
        n, p = dec.shape[i], dec.dims[i]
        h, s, e = dec.halo[i], *dec.bounds[i]
        # the slab spans the part of the other axes' halos that is read
        around = [slice(dec.halo[j] - wlo, dec.halo[j] + dec.local_shape[j] + whi)
                  for j, (wlo, whi) in enumerate(widths)]
        for side, count, coord in ((-1, lo, 0), (1, hi, p - 1)):
            if count == 0:
                continue
            edge_s, edge_e = split(n, p, coord)  # the block at this edge, known everywhere
            g = np.arange(-count, 0) if side < 0 else np.arange(n, n + count)
            mapped = remap(mode, g, n)
            if mapped.min() < edge_s or mapped.max() >= edge_e:
                far = int(mapped.max() if side < 0 else mapped.min())
                raise ArgumentError(
                    f"array '{name}' is read {count} point(s) beyond the global "
                    f"{'start' if side < 0 else 'end'} of axis {i}, which border mode "
                    f"{mode!r} maps to point {far}, outside the block at that edge "
                    f"[{edge_s}, {edge_e})", stencil=stencil,
                    hint=f"use fewer ranks along axis {i} (dims=...) or a larger shape")
            if coord != dec.coords[i]:
                continue
            dst, src = list(around), list(around)
            dst[i] = slice(h - count, h) if side < 0 else slice(h + e - s, h + e - s + count)
            src[i] = h + mapped - s
            fills.append(AxisFill(i, tuple(dst), tuple(src)))
    return tuple(fills)


def fill(data: np.ndarray, fills: Sequence[AxisFill]) -> None:
    for f in fills:  # in axis order (see the module docstring)
        data[f.dst] = data[f.src]
