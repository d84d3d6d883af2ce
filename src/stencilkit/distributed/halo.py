"""Halo exchange: what each array needs, and the non-blocking traffic that fills it.

A :class:`Need` lists, per axis, how many points an array is read before (``lo``) and after
(``hi``) its owned block, and the neighbour *directions* (vectors in {-1, 0, 1}^ndim) whose
data is read: faces, and edges/corners only when some read reaches diagonally. Only axes
whose halos come from other blocks (split, or periodic) have non-zero components.

The exchange is one round: every rank posts one ``Irecv`` per direction it needs and one
``Isend`` per direction its neighbours need (the same set, since every rank makes the same
call), packs with NumPy copies of views into reusable contiguous buffers, waits for all,
and unpacks. The tag encodes (array, receiver's direction), so two directions leading to the
same rank (two blocks along a periodic axis, or one) never mix.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..errors import ArgumentError

if TYPE_CHECKING:
    from .array import DistributedArray
    from .decomposition import Decomposition

Direction = tuple[int, ...]


@dataclass(frozen=True)
class Need:
    """The halo one array must receive: widths per axis and the directions read."""

    widths: tuple[tuple[int, int], ...]
    directions: frozenset[Direction]

    @property
    def empty(self) -> bool:
        return not self.directions


def from_offsets(dec: Decomposition, offsets: Iterable[Sequence[int]]) -> Need:
    """The need of an array read at these constant offsets (relative to each owned point)."""
    ndim = dec.ndim
    lo, hi = [0] * ndim, [0] * ndim
    directions = set()
    for off in offsets:
        d = tuple((o > 0) - (o < 0) if dec.exchanged(i) else 0 for i, o in enumerate(off))
        for i, o in enumerate(off):
            if d[i]:
                lo[i], hi[i] = max(lo[i], -o), max(hi[i], o)
        # a diagonal read from a point near only some of the block's faces lands in those
        # faces' halos: every direction between 0 and d is read
        for sub in itertools.product(*(((0, c) if c else (0,)) for c in d)):
            if any(sub):
                directions.add(sub)
    return Need(tuple(zip(lo, hi)), frozenset(directions))


def from_box(dec: Decomposition, widths: Sequence[tuple[int, int]], corners: bool) -> Need:
    """The need of an array read anywhere in a box around the owned block; with
    ``corners`` False only the faces of the box (no two exchanged axes at once)."""
    widths = tuple((lo if dec.exchanged(i) else 0, hi if dec.exchanged(i) else 0)
                   for i, (lo, hi) in enumerate(widths))
    directions = set()
    for d in itertools.product((-1, 0, 1), repeat=dec.ndim):
        if not any(d) or (not corners and sum(map(abs, d)) > 1):
            continue
        if all(c == 0 or (widths[i][0] if c < 0 else widths[i][1]) > 0
               for i, c in enumerate(d)):
            directions.add(d)
    return Need(widths, frozenset(directions))


def full_need(dec: Decomposition) -> Need:
    """The whole halo, corners included (``dec.exchange``)."""
    return from_box(dec, tuple((h, h) for h in dec.halo), True)


def check_blocks(dec: Decomposition, needs: Sequence[tuple[str, Need]],
                 stencil: str | None, halos: Sequence[tuple[int, ...]] | None = None) -> None:
    """The halo must hold what is needed, and the thinnest block must hold what a neighbour
    needs from it (data two blocks away is never fetched). Same verdict on every rank: it
    depends only on the decomposition. ``halos`` gives each array's halo (default: dec's)."""
    for k, (name, need) in enumerate(needs):
        halo = dec.halo if halos is None else halos[k]
        for i, (lo, hi) in enumerate(need.widths):
            width = max(lo, hi)
            if width > halo[i]:
                raise ArgumentError(
                    f"array '{name}' needs a halo of {width} along axis {i} (it is read {lo} "
                    f"point(s) before and {hi} after its block) but its decomposition has "
                    f"halo {halo[i]}", stencil=stencil,
                    hint=f"create the Decomposition with halo >= {width} along axis {i}")
            if width > dec.min_block[i]:
                raise ArgumentError(
                    f"array '{name}' is read {width} point(s) beyond its block along axis {i}, "
                    f"but the thinnest block there has {dec.min_block[i]} point(s): the data "
                    "would come from beyond the nearest neighbour", stencil=stencil,
                    hint=f"use fewer ranks along axis {i} (dims=...) or a larger shape")


def agree(dec: Decomposition, error: Exception | None) -> None:
    """Raise on every rank when any rank found an error (no rank goes on to an exchange that
    another one skipped): the local error where there is one, else the first rank's."""
    from mpi4py import MPI

    flag = np.array([0 if error is None else 1], np.intc)
    dec.comm.Allreduce(MPI.IN_PLACE, flag, op=MPI.MAX)
    if not flag[0]:
        return
    messages = dec.comm.allgather(None if error is None else str(error))
    if error is not None:
        raise error
    rank, text = next((r, m) for r, m in enumerate(messages) if m is not None)
    raise ArgumentError(f"rank {rank} refused the call: {text}",
                        hint="every rank must make the same call with valid arguments")


def _region(dec: Decomposition, d: Direction, need: Need, send: bool) -> tuple[slice, ...]:
    """In data coordinates: the halo region filled from direction ``d`` (receive), or the
    owned region the neighbour at ``-d`` stores in its halo region ``d`` (send)."""
    out = []
    for i, c in enumerate(d):
        h, n = dec.halo[i], dec.local_shape[i]
        lo, hi = need.widths[i]
        if c == 0:
            out.append(slice(h, h + n))
        elif c < 0:
            out.append(slice(h + n - lo, h + n) if send else slice(h - lo, h))
        else:
            out.append(slice(h, h + hi) if send else slice(h + n, h + n + hi))
    return tuple(out)


def _code(d: Direction) -> int:
    return sum((c + 1) * 3**i for i, c in enumerate(d))


class Exchanger:
    """Runs exchanges for one decomposition, keeping its pack buffers between calls."""

    def __init__(self, dec: Decomposition) -> None:
        self.dec = dec
        self._buffers: dict[tuple, np.ndarray] = {}
        self.seconds = 0.0  # time spent in exchanges (packing, waiting, unpacking)

    def _buffer(self, key: tuple, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        buf = self._buffers.get((key, shape, dtype))
        if buf is None:
            buf = self._buffers[(key, shape, dtype)] = np.empty(shape, dtype)
        return buf

    def run_back(self, arrays: list[DistributedArray], needs: list[Need],
                 masks: list[dict[Direction, np.ndarray]]) -> None:
        """The reverse of ``run``: each rank sends its halo region ``d`` to the neighbour at
        ``d``, which keeps the received points where ``masks[k][d]`` is true (points it
        owns but that only the sender computed). Collective like ``run``."""
        from mpi4py import MPI

        dec = self.dec
        comm = dec.comm
        stride = 3**dec.ndim
        requests, unpack = [], []
        for k, (a, need) in enumerate(zip(arrays, needs)):
            for d in sorted(need.directions):
                source = dec.neighbor(tuple(-c for c in d))
                if source == MPI.PROC_NULL:
                    continue
                view = a.data[_region(dec, d, need, True)]
                buf = self._buffer(("br", k, d), view.shape, a.dtype)
                requests.append(comm.Irecv([buf, MPI.BYTE], source=source,
                                           tag=k * stride + _code(d)))
                unpack.append((view, buf, masks[k].get(d)))
        for k, (a, need) in enumerate(zip(arrays, needs)):
            for d in sorted(need.directions):
                dest = dec.neighbor(d)
                if dest == MPI.PROC_NULL:
                    continue
                view = a.data[_region(dec, d, need, False)]
                buf = self._buffer(("bs", k, d), view.shape, a.dtype)
                np.copyto(buf, view)
                requests.append(comm.Isend([buf, MPI.BYTE], dest=dest,
                                           tag=k * stride + _code(d)))
        MPI.Request.Waitall(requests)
        for view, buf, mask in unpack:
            if mask is not None:
                np.copyto(view, buf, where=mask)

    def run(self, arrays: list[DistributedArray], needs: list[Need],
            via: Decomposition | None = None) -> None:
        """Fill the halo regions ``needs`` of ``arrays``; ``via`` is this decomposition
        seen with more axes periodic (``Decomposition.wrapped``), whose neighbours to use."""
        self.finish(self.start(arrays, needs, via))

    def start(self, arrays: list[DistributedArray], needs: list[Need],
              via: Decomposition | None = None) -> tuple:
        """Post the receives and the sends of ``run`` and return at once (what ``finish``
        waits for): the owned blocks may be read meanwhile, not the halos written."""
        from mpi4py import MPI

        started = time.perf_counter()
        dec = via or self.dec
        comm = dec.comm
        stride = 3**dec.ndim
        requests, unpack = [], []
        for k, (a, need) in enumerate(zip(arrays, needs)):
            for d in sorted(need.directions):
                source = dec.neighbor(d)
                if source == MPI.PROC_NULL:
                    continue
                view = a.data[_region(dec, d, need, False)]
                buf = self._buffer(("r", k, d), view.shape, a.dtype)
                requests.append(comm.Irecv([buf, MPI.BYTE], source=source,
                                           tag=k * stride + _code(d)))
                unpack.append((view, buf))
        for k, (a, need) in enumerate(zip(arrays, needs)):
            for d in sorted(need.directions):
                dest = dec.neighbor(tuple(-c for c in d))
                if dest == MPI.PROC_NULL:
                    continue
                view = a.data[_region(dec, d, need, True)]
                buf = self._buffer(("s", k, d), view.shape, a.dtype)
                np.copyto(buf, view)
                requests.append(comm.Isend([buf, MPI.BYTE], dest=dest,
                                           tag=k * stride + _code(d)))
        self.seconds += time.perf_counter() - started
        return requests, unpack

    def finish(self, pending: tuple) -> None:
        """Wait for an exchange ``start`` posted, and unpack what it received."""
        from mpi4py import MPI

        started = time.perf_counter()
        requests, unpack = pending
        MPI.Request.Waitall(requests)
        for view, buf in unpack:
            np.copyto(view, buf)
        self.seconds += time.perf_counter() - started
