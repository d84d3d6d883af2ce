"""Collapse the J and K loops of a PARALLEL stage nest into one loop where the fields'
(J, K) planes are contiguous.

Requires: kernel IR from ``lower_computation`` with K the unit-stride axis: a loop over J
from 0 to ``nj`` whose only statement is a vectorizable loop over all the domain's K levels,
whose body indexes 3-D buffers (unit K stride) with J only in their second index and K only
in their third. Ensures: where every such buffer's J stride equals ``nk`` at run time (the
arrays have no K halo, as in most PARALLEL stencils), one loop over ``t`` in
[0, nj * nk) with J replaced by 0 and K by ``t`` (the same addresses: j * nk + k = t);
otherwise the loops as they were.

Why: with K only 80 long (a weather model's levels), the inner loop is short, and at every J
step GCC rebuilds the dozen row pointers of a fused stencil (hdiff reads 13 rows) and spills
them; one long loop pays that once per I.
"""

from __future__ import annotations

import dataclasses
from typing import cast

from .. import dtypes
from ..ir import kernel as k
from ..ir.core import Node, map_children, rewrite, walk


def collapse_contiguous_rows(kf: k.KernelFunction, j: k.Symbol, kc: k.Symbol, nj: k.Symbol,
                             nk: k.Symbol, full_k: tuple[k.Expr, k.Expr]) -> k.KernelFunction:
    """``kf`` with every collapsible J/K loop pair (module docstring) collapsed under a run-
    time test of the buffers' J strides. ``full_k``: the bounds of a loop over every level."""
    t = k.Symbol("t", k.INDEX)
    params = frozenset(kf.params)

    def visit(n: Node) -> Node:
        if isinstance(n, k.Loop):
            collapsed = _collapse(n, j, kc, nj, nk, full_k, t, params)
            if collapsed is not None:
                return collapsed
        return map_children(n, visit)

    # visit maps a statement to a statement
    body = cast("tuple[k.Stmt, ...]", tuple(visit(s) for s in kf.body))
    if body == kf.body:
        return kf
    return dataclasses.replace(kf, body=body)


def _collapse(loop: k.Loop, j: k.Symbol, kc: k.Symbol, nj: k.Symbol, nk: k.Symbol,
              full_k: tuple[k.Expr, k.Expr], t: k.Symbol, params: frozenset[k.Symbol]
              ) -> k.Stmt | None:
    if loop.counter != j or loop.parallel is not None or len(loop.body) != 1 \
            or loop.start != k.index_const(0) or loop.stop != k.Sym(nj, dtype=k.INDEX):
        return None
    inner = loop.body[0]
    if not (isinstance(inner, k.Loop) and inner.counter == kc and inner.vectorize
            and inner.parallel is None and (inner.start, inner.stop) == full_k
            and inner.step == k.index_const(1)):
        return None
    buffers = _buffers_if_collapsible(inner.body, j, kc, params)
    if not buffers:
        return None
    sj, sk = k.Sym(j, dtype=k.INDEX), k.Sym(kc, dtype=k.INDEX)
    st = k.Sym(t, dtype=k.INDEX)

    def substitute(n: Node) -> Node | None:
        if n == sj:
            return k.index_const(0)
        if n == sk:
            return st
        return None

    body = tuple(rewrite(s, substitute) for s in inner.body)
    n_nk = k.Sym(nk, dtype=k.INDEX)
    flat = k.Loop(t, k.index_const(0), k.Op("*", (k.Sym(nj, dtype=k.INDEX), n_nk), dtype=k.INDEX),
                  k.index_const(1), body, vectorize=True)
    cond: k.Expr | None = None
    for b in sorted(buffers, key=lambda b: b.name):
        same = k.Op("==", (b.strides[1], n_nk), dtype=dtypes.BOOL)
        cond = same if cond is None else k.Op("&&", (cond, same), dtype=dtypes.BOOL)
    assert cond is not None
    return k.Branch(cond, (flat,), (loop,))


def _buffers_if_collapsible(body: tuple[k.Stmt, ...], j: k.Symbol, kc: k.Symbol,
                            params: frozenset[k.Symbol]) -> list[k.Buffer] | None:
    """The buffers ``body`` indexes, when J and K appear only as their second and third
    indices, each of those a sum of the counter, kernel parameters (origins) and constants
    (not a level computed at run time, say ``f[0, 0, lev]``), every buffer is 3-D with a unit
    K stride, and nothing else (local arrays, addresses, atomics) is in the way; else None."""
    buffers: dict[str, k.Buffer] = {}
    allowed: set[int] = set()  # ids of the index expressions J and K may appear in
    for s in body:
        for n in walk(s):
            if isinstance(n, (k.Load, k.Store)):
                b = n.buffer
                if len(n.indices) != 3 or b.strides[2] != k.index_const(1) or \
                        any(_uses(x, (j, kc)) for x in (*b.shape, *b.strides)):
                    return None
                if _uses(n.indices[0], (j, kc)) or \
                        not _shifted(n.indices[1], j, params) or \
                        not _shifted(n.indices[2], kc, params):
                    return None
                buffers[b.name] = b
                allowed.update((id(n.indices[1]), id(n.indices[2])))
            elif isinstance(n, (k.DeclareArray, k.Address, k.AtomicUpdate, k.StreamedRow)):
                return None
    # every use of J or K must lie inside an allowed index expression
    if _stray_uses(body, (j, kc), allowed):
        return None
    return list(buffers.values())


def _shifted(e: k.Expr, counter: k.Symbol, params: frozenset[k.Symbol]) -> bool:
    """Whether ``e`` is ``counter`` plus terms that do not vary in the loop: a sum and
    difference of the counter (added exactly once), parameters and constants."""
    def count(x: k.Expr, sign: int) -> int | None:  # the counter's coefficient, or None
        if isinstance(x, k.Sym):
            return sign if x.symbol == counter else 0 if x.symbol in params else None
        if isinstance(x, k.Constant):
            return 0
        if isinstance(x, k.Op) and x.op in ("+", "-") and len(x.args) == 2:
            a = count(x.args[0], sign)
            b = count(x.args[1], sign if x.op == "+" else -sign)
            return None if a is None or b is None else a + b
        return None

    return count(e, 1) == 1


def _uses(e: Node, symbols: tuple[k.Symbol, ...]) -> bool:
    return any(isinstance(n, k.Sym) and n.symbol in symbols for n in walk(e))


def _stray_uses(body: tuple[k.Stmt, ...], symbols: tuple[k.Symbol, ...],
                allowed: set[int]) -> bool:
    def visit(n: Node) -> bool:
        if id(n) in allowed:
            return False
        if isinstance(n, k.Sym):
            return n.symbol in symbols
        found = False

        def child(c: Node) -> Node:
            nonlocal found
            found = found or visit(c)
            return c

        map_children(n, child)
        return found

    return any(visit(s) for s in body)


