"""Relative-index collection and neighbourhood inference, exactly as ``numba.stencil`` does it.

The neighbourhood of each dimension is ``(min(0, lowest), max(0, highest))`` over every
constant relative index of every relatively indexed array. An explicit neighbourhood is kept as
given; the border computed from it is ``(min(0, lo), max(0, hi))``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import StencilSyntaxError, StencilTypeError
from ..ir import definition as d

Neighborhood = tuple[tuple[int, int], ...]

#: Offsets beyond this can never meet an array (and would overflow 64-bit index arithmetic).
MAX_OFFSET = 2**40


@dataclass(frozen=True)
class NeighborhoodResult:
    """``neighborhood`` is what the user sees (``obj.neighborhood``); ``border`` what is skipped."""

    neighborhood: Neighborhood
    border: Neighborhood
    constant: bool  # every relative index is a compile-time constant


def infer(kernel: d.PointKernel, ndim: int, explicit: Neighborhood | None) -> NeighborhoodResult:
    """Requires: a parsed point kernel and the first array's ndim. Ensures: the neighbourhood."""
    accesses = kernel.accesses()
    name = kernel.name
    if not accesses:
        raise StencilSyntaxError("stencil kernel with no accesses to relatively indexed arrays",
                                 stencil=name, loc=kernel.loc,
                                 hint="index the first argument relatively, e.g. a[0, 0]")
    if explicit is not None and len(explicit) != ndim:
        raise StencilTypeError(
            f"{len(explicit)} dimensional neighborhood specified for {ndim} dimensional input "
            "array", stencil=name, loc=kernel.loc,
            hint=f"give one (lo, hi) pair per dimension: {ndim} pairs")
    lows = [0] * ndim
    highs = [0] * ndim
    all_constant = True
    for acc in accesses:
        if len(acc.offset) != ndim:
            raise StencilTypeError(
                f"relative index {acc.field}[{', '.join('…' for _ in acc.offset)}] has "
                f"{len(acc.offset)} component(s) but the arrays are {ndim}-dimensional",
                stencil=name, loc=acc.loc, hint=f"use {ndim} indices, one per dimension")
        for o in acc.offset:
            if isinstance(o, d.Const) and not (o.dtype is not None and o.dtype.kind in "iu"):
                raise StencilTypeError(
                    f"stencil index {o.value!r} is not an integer", stencil=name, loc=acc.loc,
                    hint="relative indices must be integers")
        const = acc.constant_offset()
        if const is None or any(o.dtype is not None and o.dtype.itemsize != 8 and
                                isinstance(o, d.Const) for o in acc.offset):
            all_constant = False
            if explicit is None:
                raise StencilTypeError(
                    "stencil kernel index is not constant, 'neighborhood' option required",
                    stencil=name, loc=acc.loc,
                    hint="use integer literals as relative indices, or pass neighborhood="
                         "((lo, hi), ...) covering every index the kernel can use")
            continue
        if any(abs(off) > MAX_OFFSET for off in const):
            # Numba fills such an output with cval; the border arithmetic near 2**63 would
            # overflow here (issue 25: "Python integer ... out of bounds for uint64")
            raise StencilTypeError(
                f"relative index {acc.field}{list(const)} exceeds 2**40 in magnitude, more "
                "than any array extends", stencil=name, loc=acc.loc,
                hint="use relative indices within the arrays' extent")
        for k, off in enumerate(const):
            lows[k] = min(lows[k], off)
            highs[k] = max(highs[k], off)
    if explicit is not None:
        nb = tuple((int(lo), int(hi)) for lo, hi in explicit)
        border = tuple((min(0, lo), max(0, hi)) for lo, hi in nb)
        for acc in accesses:
            const = acc.constant_offset()
            if const is not None and any(not lo <= o <= hi for o, (lo, hi) in zip(const, border)):
                raise StencilTypeError(
                    f"relative index {acc.field}{list(const)} lies outside the given "
                    f"neighborhood {nb}", stencil=name, loc=acc.loc,
                    hint="widen neighborhood= so that it covers every index the kernel uses")
        return NeighborhoodResult(nb, border, all_constant)
    nb = tuple(zip(lows, highs))
    return NeighborhoodResult(nb, nb, True)
