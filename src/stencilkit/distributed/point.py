"""Point kernels on DistributedArrays.

Each rank runs the kernel on a *view* of its arrays' data: its owned block widened by the
kernel's border (Numba's ``(min(0, lo), max(0, hi))`` per axis), clipped at the global
edges of non-periodic axes. In that view exactly the owned points are interior points, so
the kernel computes them and nothing else; an owned point whose neighbourhood leaves the
global array is a border point of the view too, and gets ``cval`` (or keeps ``out``'s value)
as in the one-process call. Along periodic axes the view is never clipped: the exchange
fills the halo with the wrapped-around data, so every point is computed as with ``"wrap"``.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np

from ..errors import ArgumentError, StencilError
from ..passes import pipeline
from . import halo
from .array import DistributedArray
from .decomposition import Decomposition


@dataclass(frozen=True)
class PointPlan:
    """What a call with one argument signature exchanges and where it runs."""

    decomposition: Decomposition
    exchanged: tuple[int, ...]  # positions of the arrays read at offsets beyond the block
    needs: tuple[halo.Need, ...]
    view: tuple[slice, ...]  # in data coordinates
    owned_in_view: tuple[slice, ...]


# per stencil, per signature: (border, needs per position); analysis is per call otherwise
_analyses: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _first_distributed(args: tuple, out: object) -> Decomposition:
    for a in (*args, out):
        if type(a) is DistributedArray:
            return a.decomposition
    raise AssertionError("no DistributedArray among the arguments")  # the hook checked


# per stencil: plans by argument signature (decompositions by identity; each plan keeps its
# decomposition alive, so an id is never reused while its plan is cached)
_plans: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_MAX_PLANS = 64


def _signature(args: tuple, out: object) -> tuple:
    return tuple((id(a.decomposition), a.dtype) if type(a) is DistributedArray else
                 (type(a), a.dtype, a.shape) if isinstance(a, np.ndarray) else type(a)
                 for a in (*args, out))


def call(st, args: tuple, out: object) -> DistributedArray:
    """``st(*args, out=out)`` where some argument is a DistributedArray."""
    dec = _first_distributed(args, out)
    plans = _plans.setdefault(st, {})
    key = _signature(args, out)
    plan, error = plans.get(key), None
    if plan is None:
        try:
            plan = _plan(st, args, out, dec)
            if len(plans) >= _MAX_PLANS:
                plans.clear()
            plans[key] = plan
        except StencilError as exc:
            error = exc
    # every call, cached plan or not: a rank whose arguments differ must not be left alone
    halo.agree(dec, error)
    assert plan is not None
    dec.exchanger.run([args[i] for i in plan.exchanged], list(plan.needs))
    local = tuple(a.data[plan.view] if type(a) is DistributedArray else a for a in args)
    if out is None:
        res = st(*local)
        result = dec.zeros(res.dtype)
        result.local[...] = res[plan.owned_in_view]
        return result
    st(*local, out=out.data[plan.view])  # type: ignore[union-attr]
    return out  # type: ignore[return-value]


def _plan(st, args: tuple, out: object, dec: Decomposition) -> PointPlan:
    name = st.__name__
    kernel, _ = st._parse()
    mode = _border_mode(st)
    if mode != "constant":
        raise ArgumentError(f"border mode {mode!r} on DistributedArrays is not supported",
                            stencil=name, loc=kernel.loc,
                            hint="use func_or_mode='constant', or periodic=True on the "
                                 "Decomposition for 'wrap'")
    if not args or type(args[0]) is not DistributedArray:
        raise ArgumentError("the first argument must be a DistributedArray when any argument "
                            "is one", stencil=name, loc=kernel.loc,
                            hint="pass every relatively indexed array as a DistributedArray")
    for i, a in enumerate(args):
        p = kernel.params[i] if i < len(kernel.params) else f"argument {i + 1}"
        if type(a) is DistributedArray:
            if p in kernel.standard:
                raise ArgumentError(f"standard_indexing array '{p}' is a DistributedArray",
                                    stencil=name, loc=kernel.loc,
                                    hint="pass it as a plain NumPy array, the same on every "
                                         "rank (it is indexed absolutely)")
            if a.decomposition.layout != dec.layout:
                raise ArgumentError(f"array '{p}' has another decomposition than the first "
                                    f"argument ({a.decomposition.layout} vs {dec.layout})",
                                    stencil=name, loc=kernel.loc,
                                    hint="allocate every array of a call from one Decomposition")
        elif p in kernel.relative and (isinstance(a, (np.ndarray, list, tuple))
                                       or hasattr(a, "__array__")):
            raise ArgumentError(f"array '{p}' is a plain array but other arguments are "
                                "DistributedArrays", stencil=name, loc=kernel.loc,
                                hint="scatter it first: dec.scatter(global_array)")
    if out is not None and (type(out) is not DistributedArray
                            or out.decomposition.layout != dec.layout):
        raise ArgumentError("'out' must be a DistributedArray of the arguments' decomposition",
                            stencil=name, loc=kernel.loc, hint="allocate it with dec.empty(...)")
    local = tuple(a.data if type(a) is DistributedArray else a for a in args)
    border, offsets = _analyse(st, kernel, local)
    needs = []
    for i, a in enumerate(args):
        if type(a) is DistributedArray:
            need = (halo.from_offsets(dec, offsets[kernel.params[i]])
                    if offsets is not None else halo.from_box(dec, _widths(border), True))
            if not need.empty:
                needs.append((i, need))
    view_need = halo.from_box(dec, _widths(border), False)
    halo.check_blocks(dec, [(kernel.params[0], view_need)], name)
    return PointPlan(dec, tuple(i for i, _ in needs), tuple(n for _, n in needs),
                     *_view(dec, border))


def _border_mode(st) -> str:
    """The kernel's border mode. Modes other than "constant" are being added to point
    kernels elsewhere; whatever attribute ends up holding the mode, a distributed call must
    not run such a kernel with constant-mode borders."""
    for name in ("func_or_mode", "mode", "border_mode", "_mode"):
        value = getattr(st, name, None)
        if isinstance(value, str) and value != "constant":
            return value
    return "constant"


def _widths(border) -> tuple[tuple[int, int], ...]:
    return tuple((-lo, hi) for lo, hi in border)


def _analyse(st, kernel, local: tuple):
    """(border, {param: constant offsets} or None when some index is not constant)."""
    key = tuple((a.dtype, a.ndim) if isinstance(a, np.ndarray) else type(a) for a in local)
    cache = _analyses.setdefault(st, {})
    hit = cache.get(key)
    if hit is None:
        typed = pipeline.analyse(kernel, st._arg_types(local), st.explicit_neighborhood)
        if typed.kernel.ndim != local[0].ndim:
            raise ArgumentError("the kernel's dimensionality differs from the arrays'",
                                stencil=st.__name__, loc=kernel.loc)
        offsets: dict[str, list[tuple[int, ...]]] | None = {p: [] for p in kernel.relative}
        for acc in kernel.accesses():
            const = acc.constant_offset()
            if acc.field not in kernel.relative:
                continue
            if const is None:
                offsets = None
                break
            offsets[acc.field].append(const)  # type: ignore[index]
        hit = cache[key] = (typed.neighborhood.border, offsets)
    return hit


def _view(dec: Decomposition, border) -> tuple[tuple[slice, ...], tuple[slice, ...]]:
    view, owned = [], []
    for i, ((s, e), (lo, hi)) in enumerate(zip(dec.bounds, border)):
        g0, g1 = s + lo, e + hi  # lo <= 0 <= hi
        if not dec.periodic[i]:
            g0, g1 = max(g0, 0), min(g1, dec.shape[i])
        h = dec.halo[i]
        view.append(slice(g0 - s + h, g1 - s + h))
        owned.append(slice(s - g0, e - g0))
    return tuple(view), tuple(owned)
