"""Which specialization of a point kernel a GPU call runs (``targets.cuda_layout.
Variant``: CUDA's entries and OpenCL's executables alike), from the device arrays of the
call: the output's unit-stride axis (grid x runs along it, so that a warp's loads and stores
coalesce in any order: C, Fortran, the storages of ``sk.empty(..., backend="cuda")`` whose
unit stride is J), the arrays with a unit stride along it, whether 32-bit index arithmetic
is exact for these arrays, and whether the grids can cover the extents (a thread per point,
no grid-stride loops; CUDA's only: OpenCL's NDRanges always cover). For a CUDA computation
with column-private temporaries, also whether nk of them per thread fit a block's shared
memory (``Variants.wanted``; the block is then sized to fit: ``shared_block``).

A new variant is built (planned, printed, compiled) on the first call that needs it and kept
by the entry, as the signature cache keeps specializations.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ..ir.plan import LaunchPlan, Variant

#: a call runs 32-bit index arithmetic when every array's extents, strides (in elements) and
#: span (the sum of extent * |stride|) are below this. Half of 2**31: a neighbour's index
#: (an offset past the span by less than it) and a grid-stride counter (below twice the
#: extent plus a block) stay below 2**31 too.
NARROW_LIMIT = 2**30


#: a call's grids cover every extent up to this (each thread one point): the y and z limit of
#: a grid (``runtime.cuda.GRID_LIMITS``), so that ceil(extent / block) blocks never exceed it
COVERING_LIMIT = 65535


def unit_axis(shape: Sequence[int], strides: Sequence[int]) -> int:
    """The axis with the smallest stride (in bytes or elements) among those with more than one
    element; the last one on a tie, or when there is none."""
    axes = [d for d in range(len(shape)) if shape[d] > 1]
    if not axes:
        return len(shape) - 1
    return min(reversed(axes), key=lambda d: abs(strides[d]))


def fits_32_bits(arrays: Sequence[object], limit: int | None = None) -> bool:
    """Every index the kernel computes on ``arrays`` fits a signed 32-bit integer (with the
    margin of ``limit``, default ``NARROW_LIMIT``)."""
    limit = NARROW_LIMIT if limit is None else limit
    for a in arrays:
        item = a.itemsize  # type: ignore[attr-defined]
        span = 0
        for n, s in zip(a.shape, a.strides):  # type: ignore[attr-defined]
            s = abs(int(s)) // item
            if n >= limit or s >= limit:
                return False
            span += int(n) * s
        if span >= limit:
            return False
    return True


def choose(names: Sequence[str], args: Sequence[object], out: str) -> Variant:
    """The variant for a call whose arguments ``args`` (device arrays and scalars) are named
    ``names``; ``out`` names the output."""
    # per call: the arrays' geometry only (a tuple of tuples); the decision is cached on it
    return _choose(tuple((n, a.shape, a.strides, a.itemsize)  # type: ignore[attr-defined]
                         for n, a in zip(names, args)
                         if type(a) not in _SCALARS and hasattr(a, "strides")), out,
                   NARROW_LIMIT, COVERING_LIMIT)


def choose_elements(views: Mapping[str, tuple[Sequence[int], Sequence[int]]], out: str
                    ) -> Variant:
    """The variant for arrays given by (shape, strides in elements) by name (OpenCL's
    device views); ``out`` names the output."""
    return _choose(tuple((n, tuple(sh), tuple(st), 1) for n, (sh, st) in views.items()), out,
                   NARROW_LIMIT, COVERING_LIMIT)


_SCALARS = (bool, int, float, complex)

#: the dynamic shared memory a block may use without opting in (cudaFuncSetAttribute): 48 KiB
#: on every architecture since sm_30, so no launch needs a per-device attribute
SHARED_LIMIT = 48 * 1024
#: the fewest threads of a block that keeps its temporaries on chip: one warp (fewer would
#: leave lanes idle and the reductions' shuffles assume whole warps)
MIN_SHARED_THREADS = 32


#: the shared memory of one SM on the devices the backend is tuned for (H100, H200: 228 KiB)
SHARED_PER_SM = 228 * 1024
#: the fewest resident threads per SM the on-chip variant must leave: 16 warps. Each thread
#: of a sweep has about one level's loads in flight (32 bytes for a, b, c, d), so bandwidth
#: wants thousands of threads per SM (Little's law: ~4.8 TB/s x ~0.6 µs over 132 SMs is
#: ~22 KB in flight per SM). With fewer than this, keeping cp and dp on chip (40 instead of
#: 72 bytes per point) is estimated to lose more to latency than it saves in traffic, so the
#: global-memory variant, at full occupancy, runs instead. Unmeasured on a GPU: a GPU run
#: decides the floor (docs/performance-gpu.md, "Occupancy").
MIN_RESIDENT_THREADS = 512


def fits_on_chip(levels: int, level_bytes: int) -> bool:
    """Whether ``levels`` levels of ``level_bytes`` bytes per thread fit a block of
    ``MIN_SHARED_THREADS`` threads within ``SHARED_LIMIT`` and leave an SM at least
    ``MIN_RESIDENT_THREADS`` resident threads within ``SHARED_PER_SM``."""
    column = levels * level_bytes
    return (0 < level_bytes and column * MIN_SHARED_THREADS <= SHARED_LIMIT
            and column * MIN_RESIDENT_THREADS <= SHARED_PER_SM)


def shared_block(block: tuple[int, int, int], bytes_per_thread: int
                 ) -> tuple[int, int, int] | None:
    """``block`` with as many threads as fit ``SHARED_LIMIT`` bytes of shared memory at
    ``bytes_per_thread`` each (halved along z, then y, then x, down to a warp), or None
    when a warp does not fit."""
    dims = list(block)
    while dims[0] * dims[1] * dims[2] * bytes_per_thread > SHARED_LIMIT:
        axis = next((a for a in (2, 1, 0) if dims[a] > 1), 0)
        if dims[0] * dims[1] * dims[2] <= MIN_SHARED_THREADS:
            return None
        dims[axis] //= 2
    return dims[0], dims[1], dims[2]


@functools.lru_cache(maxsize=1024)
def _choose(arrays: tuple[tuple[str, tuple[int, ...], tuple[int, ...], int], ...],
            out: str, narrow_limit: int, covering_limit: int) -> Variant:
    geometry = {n: (shape, strides, item) for n, shape, strides, item in arrays}
    shape, strides, item = geometry[out]
    axis = unit_axis(shape, strides)
    # arrays of the output's rank only: another's (a standard_indexing table's) axis of
    # that number is another axis; its strides stay what the signature made them
    units = frozenset(n for n, (sh, st, it) in geometry.items()
                      if len(sh) == len(shape) and st[axis] == it)
    covering = all(n <= covering_limit for n in shape)
    narrow = fits_32_bits([_Geometry(sh, st, it) for sh, st, it in geometry.values()],
                          narrow_limit)
    return Variant(axis, units, narrow, covering)


class _Geometry:
    """What ``fits_32_bits`` reads of an array."""

    __slots__ = ("shape", "strides", "itemsize")

    def __init__(self, shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> None:
        self.shape, self.strides, self.itemsize = shape, strides, itemsize


@dataclass(frozen=True)
class Variants:
    """How a point kernel's entry gets its other specializations: ``own`` is the variant its
    plan was built for, ``build`` plans and prints another, ``out`` names the output (whose
    unit-stride axis decides the grid's x); ``relevant`` keeps of a chosen variant what the
    kernels are specialized for (a computation's plans differ in index width and grid loops
    only: its lowering fixed the axes), so that a call its own plan serves runs it instead
    of building an identical one."""

    own: Variant
    build: Callable[[Variant], tuple[LaunchPlan, str]]
    out: str
    relevant: Callable[[Variant], Variant] = lambda variant: variant  # noqa: E731
    #: a computation's column-private temporaries: their bytes per level of one column
    #: (0: none); on chip where the output's levels fit (``fits_on_chip``: its K extent
    #: bounds nk, so the bound plan's nk always fits the block the launcher sizes)
    level_bytes: int = 0

    def wanted(self, variant: Variant, names: Sequence[str], args: Sequence[object]
               ) -> Variant:
        """The variant to run for a call whose arguments ``args`` are named ``names``, of
        the layout and sizes ``variant`` (``choose``)."""
        if self.level_bytes:
            out = args[list(names).index(self.out)]
            levels = int(out.shape[2])  # type: ignore[attr-defined]  # an IJK field's K
            variant = dataclasses.replace(variant,
                                          on_chip=fits_on_chip(levels, self.level_bytes))
        return self.relevant(variant)
