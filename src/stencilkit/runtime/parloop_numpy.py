"""Running a ParLoop on the NumPy backend: one vectorized call of the generated kernel over
all elements, with gathers through maps before it and scatters (INC, WRITE, RW, MIN, MAX,
Globals, Mats) after it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..ir.abi import Access, ArgKind, ParLoopCall
from .parloop_blocks import check_status

READ, WRITE, RW, INC, MIN, MAX = (Access.READ, Access.WRITE, Access.RW, Access.INC, Access.MIN,
                                  Access.MAX)


def run_vectorized(call: ParLoopCall, fn: Callable[..., object]) -> None:
    """One vectorized call over all elements; but RW through a map gathers and
    scatters, so elements that share a target run in separate rounds: each sees the
    others' updates, as in C's serial blocks (an increment by RW counts every time)."""
    n = call.set_size
    if not n:
        return
    shared_rw = [a for a in call.arguments if a.kind.mapped and a.access is RW]
    if not shared_rw:
        _run_part(call, fn, n, None)
        return
    holder = shared_rw[0].colourings
    assert holder is not None
    key = ("rounds",) + tuple((a.map_version, a.entry) for a in shared_rw)
    if key not in holder:
        holder[key] = element_rounds(n, [a.targets for a in shared_rw])  # type: ignore[misc]
    rounds = holder[key]
    if len(rounds) == 1:
        _run_part(call, fn, n, None)
        return
    for sel in rounds:
        _run_part(call, fn, n, sel)


def _run_part(call: ParLoopCall, fn: Callable[..., object], n: int,
              sel: np.ndarray | None) -> None:
    """Run the elements ``sel`` (all when None)."""
    count = n if sel is None else len(sel)
    pick = (lambda x: x) if sel is None else (lambda x: x[sel])
    locals_: list[np.ndarray] = []
    finish = []
    for a in call.arguments:
        data = a.data
        shape = (count, *a.local_shape)
        if a.kind is ArgKind.DIRECT and a.access.reduces:
            rows = data.reshape((n, *a.local_shape))
            loc = pick(rows).copy()
            red = np.minimum if a.access is MIN else np.maximum
            finish.append(lambda d_=rows, l_=loc, r=red: d_.__setitem__(
                slice(None) if sel is None else sel, r(pick(d_), l_)))
        elif a.kind is ArgKind.DIRECT:
            rows = data.reshape((n, *a.local_shape))
            loc = pick(rows)
            if sel is not None and a.access.writes:
                finish.append(lambda d_=rows, l_=loc: d_.__setitem__(sel, l_))
        elif a.kind.mapped:
            values: np.ndarray = a.map_values  # type: ignore[assignment]
            idx = pick(values if a.entry is None else values[:, a.entry])
            view = data.reshape(data.shape[0], a.dim)
            loc = view[idx].reshape(shape) if a.access in (READ, RW, MIN, MAX) \
                else np.zeros(shape, data.dtype)
            if a.access.reduces:
                red = np.minimum if a.access is MIN else np.maximum
                finish.append(lambda v=view, i=idx, l_=loc, r=red: r.at(
                    v, i, l_.reshape(v[i].shape)))
            elif a.access is INC:
                finish.append(lambda v=view, i=idx, l_=loc: scatter_add(v, i, l_))
            elif a.access in (WRITE, RW):
                finish.append(lambda v=view, i=idx, l_=loc: v.__setitem__(
                    i, l_.reshape(v[i].shape)))
        elif a.kind is ArgKind.GLOBAL:
            if a.access is READ:
                loc = np.broadcast_to(data, shape)
            elif a.access is INC:
                loc = np.zeros(shape, data.dtype)
                finish.append(lambda g=data, l_=loc: g.__iadd__(l_.sum(axis=0)))
            else:
                loc = np.broadcast_to(data, shape).copy()
                red = np.minimum if a.access is MIN else np.maximum
                finish.append(lambda g=data, l_=loc, r=red: g.__setitem__(
                    slice(None), r(g, r.reduce(l_, axis=0)) if len(l_) else g))
        else:
            loc = np.zeros(shape, data.dtype)
            lmap = pick(a.map_values)
            if a.access is INC:
                finish.append(lambda v=data, i=lmap, l_=loc: np.add.at(v, i, l_))
            else:
                finish.append(lambda v=data, i=lmap, l_=loc: v.__setitem__(i, l_))
        locals_.append(loc)
    try:
        fn(*locals_)
    except IndexError:
        # a run-time index past a local block (NumPy checks it; C clamps, flags 2)
        check_status(call, 2)
    for f in finish:
        f()


def element_rounds(n: int, maps: list[np.ndarray], max_rounds: int = 64) -> list[np.ndarray]:
    """Elements in rounds such that no two elements of a round share a target entry (of
    any of ``maps``, which index one target set each). Luby's rule: each element gets a
    random priority, and a round takes every remaining element whose priority is the
    lowest on all its targets (with priorities in element order, a chain of neighbours
    would give one element per round). Past ``max_rounds`` (a target shared by very many
    elements) the rest run one element per round."""
    offsets = np.cumsum([0] + [int(m.max()) + 1 if m.size else 0 for m in maps])
    rows = np.concatenate([m.astype(np.int64) + o for m, o in zip(maps, offsets)], axis=1)
    priority = np.random.default_rng(0).permutation(n)
    remaining = np.arange(n)
    rounds: list[np.ndarray] = []
    while remaining.size and len(rounds) < max_rounds:
        r, p = rows[remaining], priority[remaining]
        lowest = np.full(offsets[-1], n, np.int64)
        np.minimum.at(lowest, r.reshape(-1), np.repeat(p, r.shape[1]))
        wins = (lowest[r] == p[:, None]).all(axis=1)
        rounds.append(remaining[wins])
        remaining = remaining[~wins]
    rounds += [remaining[i:i + 1] for i in range(remaining.size)]
    return rounds


def scatter_add(target: np.ndarray, index: np.ndarray, values: np.ndarray) -> None:
    """``target[index] += values`` with repeated indices accumulated (np.bincount for reals,
    several times faster than np.add.at)."""
    flat_index = index.reshape(-1)
    vals = values.reshape(flat_index.size, target.shape[1])
    if target.dtype.kind == "f":
        rows, length = flat_index, target.shape[0]
        if length > 4 * flat_index.size + 4096:
            # few entries of a huge target: bincount over the distinct ones only
            rows, flat_index = np.unique(flat_index, return_inverse=True)
            flat_index, length = flat_index.reshape(-1), len(rows)
        for col in range(target.shape[1]):
            sums = np.bincount(flat_index, weights=vals[:, col], minlength=length)
            if length == target.shape[0]:
                target[:, col] += sums.astype(target.dtype)
            else:
                target[rows, col] += sums.astype(target.dtype)
    else:
        np.add.at(target, flat_index, vals)
