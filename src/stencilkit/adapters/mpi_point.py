"""Point kernels on DistributedArrays.

Each rank runs the kernel on a *view* of its arrays' data: its owned block widened by the
kernel's border (Numba's ``(min(0, lo), max(0, hi))`` per axis). In that view exactly the
owned points are interior points, so the kernel computes them and nothing else.

In mode "constant" the view is clipped at the global edges of non-periodic axes: an owned
point whose neighbourhood leaves the global array is a border point of the view too, and
gets ``cval`` (or keeps ``out``'s value) as in the one-process call. Along periodic axes the
view is never clipped: the exchange fills the halo with the wrapped-around data, so every
point is computed as with ``"wrap"``. In the remapping modes ("nearest", "reflect",
"mirror", "wrap") the view is never clipped either: after the exchange, the halo beyond the
global edge is filled with the elements the mode maps it to (``borders``), and the kernel
runs in "constant" mode on the view (a twin of the stencil), computing every owned point
from the values the one-process call reads. Periodic axes stay periodic in every mode.
With one mode per axis (contract.md section 9) each axis follows its own mode: clipped along
"constant" axes (cval, with the twin carrying it), widened and filled along the others.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np

from ..api.stencil import PointStencil
from ..compile.point import analyse
from ..distributed import borders, halo
from ..distributed.array import DistributedArray
from ..distributed.decomposition import Decomposition
from ..errors import ArgumentError, StencilError
from ..ir import border_modes


@dataclass(frozen=True)
class PointPlan:
    """What a call with one argument signature exchanges and where it runs."""

    decomposition: Decomposition
    exchanged: tuple[int, ...]  # positions of the arrays read at offsets beyond the block
    needs: tuple[halo.Need, ...]
    view: tuple[slice, ...]  # in data coordinates
    owned_in_view: tuple[slice, ...]
    kernel: PointStencil  # the stencil, or its "constant" twin in a remapping mode
    via: Decomposition | None = None  # dec with the axes "wrap" exchanges periodic
    fills: tuple[tuple[int, tuple[borders.AxisFill, ...]], ...] = ()  # (position, copies)


# per stencil, per signature: (border, needs per position); analysis is per call otherwise
_analyses: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# per stencil in a remapping mode: the same kernel in mode "constant" (what each rank runs)
_twins: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


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
    dec.exchanger.run([args[i] for i in plan.exchanged], list(plan.needs), plan.via)
    for i, fills in plan.fills:
        borders.fill(args[i].data, fills)
    local = tuple(a.data[plan.view] if type(a) is DistributedArray else a for a in args)
    if out is None:
        res = plan.kernel(*local)
        result = dec.zeros(res.dtype)
        result.local[...] = res[plan.owned_in_view]
        return result
    plan.kernel(*local, out=out.data[plan.view])  # type: ignore[union-attr]
    return out  # type: ignore[return-value]


def _plan(st, args: tuple, out: object, dec: Decomposition) -> PointPlan:
    name = st.__name__
    kernel, _ = st._parse()
    mode = st.mode
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
    box = _widths(border)
    modes = st.axis_modes(len(border))
    remapping = mode != "constant"
    via = dec.wrapped(borders.exchanged_axes(dec, modes))
    if remapping:  # the view below spans the border along every remapped axis
        borders.check_halo(dec, kernel.params[0], box, modes, name)
    needs, fills = [], []
    for i, a in enumerate(args):
        if type(a) is not DistributedArray:
            continue
        p = kernel.params[i]
        if remapping:
            read = _reach(offsets[p]) if offsets is not None else box
            wide = borders.reach(dec, read, modes, via.periodic)
            if wide != read:  # sources beyond the edge block: its whole box, corners too
                need = halo.from_box(via, wide, True)
            else:
                need = (halo.from_offsets(via, offsets[p]) if offsets is not None
                        else halo.from_box(via, box, True))
            copies = borders.plan(dec, read, modes, via.periodic)
            if copies:
                fills.append((i, copies))
        else:
            need = (halo.from_offsets(via, offsets[p]) if offsets is not None
                    else halo.from_box(via, box, True))
        if not need.empty:
            needs.append((i, need))
            halo.check_blocks(via, [(p, need)], name)
    view_need = halo.from_box(via, box, False)
    halo.check_blocks(via, [(kernel.params[0], view_need)], name)
    split = via.as_split()
    if split is not via:  # a job with more ranks would split more axes: the same verdict
        halo.check_blocks(split, [
            (kernel.params[i], halo.from_offsets(split, offsets[kernel.params[i]])
             if offsets is not None else halo.from_box(split, box, True))
            for i, a in enumerate(args) if type(a) is DistributedArray], name)
    return PointPlan(dec, tuple(i for i, _ in needs), tuple(n for _, n in needs),
                     *_view(via, border, tuple(m != "constant" for m in modes)),
                     kernel=_twin(st) if remapping else st,
                     via=None if via is dec else via, fills=tuple(fills))


def _reach(offsets: list[tuple[int, ...]]) -> tuple[tuple[int, int], ...]:
    """How far before and after its block an array read at ``offsets`` is read, per axis."""
    if not offsets:
        return ()
    return tuple((max(0, -min(o)), max(0, max(o))) for o in zip(*offsets))


def _twin(st: PointStencil) -> PointStencil:
    twin = _twins.get(st)
    if twin is None:
        # cval where some axis is "constant": the view's border along it is the call's
        cval = st.cval if border_modes.any_constant(st.mode) else None
        twin = _twins[st] = PointStencil(
            st.func, neighborhood=st.explicit_neighborhood, cval=cval,
            standard_indexing=st.standard_indexing, backend=st.backend, mode="constant",
            fast_math=st.fast_math)
    return twin


def _widths(border) -> tuple[tuple[int, int], ...]:
    return tuple((-lo, hi) for lo, hi in border)


def _analyse(st, kernel, local: tuple):
    """(border, {param: constant offsets} or None when some index is not constant)."""
    key = tuple((a.dtype, a.ndim) if isinstance(a, np.ndarray) else type(a) for a in local)
    cache = _analyses.setdefault(st, {})
    hit = cache.get(key)
    if hit is None:
        typed = analyse(kernel, st._arg_types(local), st.explicit_neighborhood)
        if st._neighborhood is None:  # the twin runs in a remapping mode, not the stencil
            st._neighborhood = typed.neighborhood.neighborhood
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


def _view(dec: Decomposition, border, unclipped: tuple[bool, ...]
          ) -> tuple[tuple[slice, ...], tuple[slice, ...]]:
    view, owned = [], []
    for i, ((s, e), (lo, hi)) in enumerate(zip(dec.bounds, border)):
        g0, g1 = s + lo, e + hi  # lo <= 0 <= hi
        if not (unclipped[i] or dec.periodic[i]):
            g0, g1 = max(g0, 0), min(g1, dec.shape[i])
        h = dec.halo[i]
        view.append(slice(g0 - s + h, g1 - s + h))
        owned.append(slice(s - g0, e - g0))
    return tuple(view), tuple(owned)
