"""Row bases hoisted out of the innermost loops: a pass ``KernelFunction -> KernelFunction``
that never changes what the kernel computes, bit for bit (issue 26, item 5; issue 27).

A lowering writes every access as its full address: ``a[i0 - 1, i1, i2]`` prints as
``a_[(i0 - 1) * a_stride_0_ + i1 * a_stride_1_ + i2]``, the outer counters times their
strides recomputed in the innermost loop for each of the kernel's reads. This pass splits
each index of an access in an innermost loop into a loop-invariant part and a constant
(``i0 - 1`` is ``i0`` and ``-1``), declares the sum of the invariant parts times their strides
once per buffer and row (``int64_t a_row = i0 * a_stride_0_ + i1 * a_stride_1_;``), and
indexes the buffer from it: ``a_[a_row - a_stride_0_ + i2]``, as hand-written stencil code
does. Integer address arithmetic is exact, so the addresses are the same.

Where the declarations go (``Placement``):

- ``OUTSIDE`` (C): just before the innermost loop (before the streamed row that holds it),
  so that each row's bases are computed once per row. Compilers hoist such invariants
  themselves when they can prove them invariant; the pass makes it explicit, and the code
  reads like the hand kernels.
- ``THREAD`` (CUDA, OpenCL): a parallel innermost loop becomes a grid dimension, and a
  statement between it and its parallel parents would split the nest the planner makes one
  grid of; its bases are declared at the top of its body (each thread computes its row base
  once for all its reads). A serial innermost loop (a K sweep inside a thread) gets them
  before it, as on the CPU. Stores keep their full address: the planner puts the grid's
  fastest dimension on the counter that indexes the output's unit-stride axis in its store.

Only what is safe to compute early is hoisted: sums, differences and products of integer
symbols and constants that nothing in the loop assigns (no loads, no index checks, which
report errors through the status). Accesses through pointers that are not parameters (local
arrays, row buffers) are left alone, as are accesses with nothing invariant to hoist.

Requires: kernel IR after ``lower.simplify`` (verified by ``ir.verify``: symbols defined
before use, one index per buffer dimension). Ensures: the same, every symbol it declares a
fresh ``INDEX`` name (``<buffer>_row``, numbered when a kernel has several), each access it
rewrites indexing a view of the same base pointer (named ``<buffer>.row``) whose first index
is the row base plus the constant displacement; a streamed row's buffer is its rewritten
store's. Idempotent: views are left alone.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable

import numpy as np

from ..ir import kernel as k
from ..ir.core import Node, rewrite, walk

__all__ = ["Placement", "hoist_row_bases"]


class Placement(enum.Enum):
    """Where a row's base offsets are declared (see the module docstring)."""

    OUTSIDE = "outside"  # before the innermost loop
    THREAD = "thread"  # at the top of a parallel innermost loop's body (a GPU thread)


_INDEX_OPS = frozenset({"+", "-", "*", "neg"})
#: the name suffix of a buffer indexed from a row base (never a user's name: not an
#: identifier), so that the pass leaves what it rewrote alone
ROW_VIEW = ".row"
_LOOPS = (k.Loop, k.WhileLoop, k.StreamedRow)


def hoist_row_bases(kf: k.KernelFunction, placement: Placement = Placement.OUTSIDE
                    ) -> k.KernelFunction:
    """``kf`` with the loop-invariant part of each address in an innermost loop declared
    once as a row base (``placement``: where)."""
    pointers = frozenset(p.name for p in kf.params if p.pointer)
    # a GPU planner finds the grid's unit-stride axis by the counter that indexes it in the
    # output's store (targets/gpu.py): stores keep their dimensions there
    stores = placement is Placement.OUTSIDE
    # every name of the kernel is taken; a row base's name only in its scope and those
    # nested in it, so sibling blocks (an interior and its border strips) reuse "out_row"
    kernel_names = frozenset({p.name for p in kf.params}
                             | {n.name for s in kf.body for n in _symbols(s)})

    def block(body: tuple[k.Stmt, ...], visible: frozenset[str]) -> tuple[k.Stmt, ...]:
        out: list[k.Stmt] = []
        names = _Names(set(visible))
        rows: dict[tuple, k.Symbol] = {}  # declared earlier in this block, still valid
        for s in body:
            loop = _innermost(s)
            if loop is None:
                out.append(_map_bodies(s, lambda b: block(b, frozenset(names.taken))))
            elif placement is Placement.THREAD and loop.parallel is not None:
                decls, hoisted = _hoist(loop, pointers, _Names(set(names.taken)), {}, stores)
                out.append(_replace_loop(s, dataclasses.replace(
                    hoisted, body=(*decls, *hoisted.body))))
            else:
                decls, hoisted = _hoist(loop, pointers, names, rows, stores)
                out.extend(decls)
                out.append(_replace_loop(s, hoisted))
            assigned = {n.symbol.name for n in walk(s) if isinstance(n, k.SetSym)}
            for key in [key for key in rows if assigned & _key_names(key)]:
                del rows[key]  # its value may differ after this statement
        return tuple(out)

    body = block(kf.body, kernel_names)
    return kf if body == kf.body else dataclasses.replace(kf, body=body)


def _key_names(key: tuple) -> set[str]:
    return {n.symbol.name for part in key[1] for _, t in part[1] for n in walk(t)
            if isinstance(n, k.Sym)} | {n.symbol.name for st in key[2] for n in walk(st)
                                        if isinstance(n, k.Sym)}


# ---------------------------------------------------------------- the loops


def _innermost(s: k.Stmt) -> k.Loop | None:
    """The loop ``s`` is (or a streamed row holds) when no loop is nested in it."""
    loop = s.loop if isinstance(s, k.StreamedRow) else s
    if not isinstance(loop, k.Loop):
        return None
    if any(isinstance(n, _LOOPS) for st in loop.body for n in walk(st)):
        return None
    return loop


def _replace_loop(s: k.Stmt, loop: k.Loop) -> k.Stmt:
    if not isinstance(s, k.StreamedRow):
        return loop
    # the streamed row writes its (one) store's buffer through the row buffer
    stores = [n for st in loop.body for n in walk(st)
              if isinstance(n, k.Store) and n.buffer.base == s.buffer.base]
    return dataclasses.replace(s, loop=loop, buffer=stores[0].buffer if stores else s.buffer)


def _map_bodies(s: k.Stmt, fn: Callable[[tuple[k.Stmt, ...]], tuple[k.Stmt, ...]]) -> k.Stmt:
    match s:
        case k.Loop() | k.WhileLoop() | k.Section() | k.ParallelRegion() | k.Block():
            return dataclasses.replace(s, body=fn(s.body))
        case k.Branch():
            return dataclasses.replace(s, then=fn(s.then), orelse=fn(s.orelse))
    return s


def _symbols(s: Node):
    """The symbols ``s`` declares or counts with."""
    for n in walk(s):
        match n:
            case k.Declare(symbol=sym) | k.Loop(counter=sym):
                yield sym
            case k.DeclareArray(buffer=b):
                yield b.base


def _assigned(loop: k.Loop) -> frozenset[str]:
    """What changes from one iteration of ``loop`` to the next: its counter and what its
    body declares or assigns."""
    names = {loop.counter.name}
    for st in loop.body:
        names.update(sym.name for sym in _symbols(st))
        names.update(n.symbol.name for n in walk(st) if isinstance(n, k.SetSym))
    return frozenset(names)


def row_name(pointer: str) -> str:
    """The row base's name for a buffer whose base pointer is ``pointer``: ``a_`` -> ``a_row``.
    Never in the compiler's ``sk_`` namespace, whose names the platforms add after this pass
    without seeing ours (the C platform's streamed-row buffer is ``sk_row``): a user's array
    ``sk`` gets ``usk_row``."""
    name = f"{pointer.rstrip('_')}_row"
    return "u" + name if name.startswith("sk_") else name


class _Names:
    def __init__(self, taken: set[str]) -> None:
        self.taken = taken

    def fresh(self, stem: str) -> str:
        name, n = stem, 1
        while name in self.taken:
            n += 1
            name = f"{stem}{n}"
        self.taken.add(name)
        return name


# ---------------------------------------------------------------- the accesses


def _hoist(loop: k.Loop, pointers: frozenset[str], names: _Names, rows: dict[tuple, k.Symbol],
           stores: bool) -> tuple[tuple[k.Declare, ...], k.Loop]:
    """(the declarations of the row bases ``rows`` does not hold yet, which it then holds;
    ``loop`` indexing from them; ``stores``: stores and atomic updates too, else loads and
    addresses only)."""
    variant = _assigned(loop)
    decls: list[k.Declare] = []

    def invariant(e: k.Expr) -> bool:
        return all(_index_node(n) and not (isinstance(n, k.Sym) and n.symbol.name in variant)
                   for n in walk(e))

    def row_symbol(b: k.Buffer, parts: tuple[tuple[int, tuple[_Term, ...]], ...]) -> k.Symbol:
        key = (b.base.name, parts, tuple(b.strides[d] for d, _ in parts))
        sym = rows.get(key)
        if sym is None:
            sym = k.Symbol(names.fresh(row_name(b.base.name)), k.INDEX)
            rows[key] = sym
            decls.append(k.Declare(sym, _sum([(1, _times(_rebuilt(terms, 0), b.strides[d]))
                                              for d, terms in parts], 0)))
        return sym

    def access(b: k.Buffer, indices: tuple[k.Expr, ...]
               ) -> tuple[k.Buffer, tuple[k.Expr, ...]] | None:
        if b.base.name not in pointers or b.name.endswith(ROW_VIEW) \
                or len(indices) != len(b.strides) or not all(invariant(st) for st in b.strides):
            return None
        parts: list[tuple[int, tuple[_Term, ...]]] = []  # per dimension: what moves out
        kept: list[tuple[int, k.Expr]] = []  # dimensions indexed in the loop, and how
        displacement: list[tuple[int, int]] = []  # hoisted dimensions' constants
        for d, e in enumerate(indices):
            terms, constant = _terms(e)
            if terms is None:
                return None  # not an integer sum: left as written
            out = tuple(t for t in terms if invariant(t[1]))
            inner = tuple(t for t in terms if not invariant(t[1]))
            if out:
                parts.append((d, out))
            if inner:
                kept.append((d, _rebuilt(inner, constant)))
            elif constant:
                displacement.append((d, constant))
        if not parts:
            return None
        first: k.Expr = k.Sym(row_symbol(b, tuple(parts)), dtype=k.INDEX)
        for d, offset in displacement:
            first = _displaced(first, offset, b.strides[d])
        view = dataclasses.replace(
            b, name=b.name + ROW_VIEW, shape=(_ONE, *(b.shape[d] for d, _ in kept)),
            strides=(_ONE, *(b.strides[d] for d, _ in kept)))
        return view, (first, *(e for _, e in kept))

    def node(n: Node) -> Node | None:
        match n:
            case k.Store() | k.AtomicUpdate() if not stores:
                return None
            case k.Load(buffer=b, indices=idx) | k.Address(buffer=b, indices=idx) | \
                    k.Store(buffer=b, indices=idx) | k.AtomicUpdate(buffer=b, indices=idx):
                found = access(b, idx)
                if found is not None:
                    return dataclasses.replace(n, buffer=found[0], indices=found[1])
        return None

    body = tuple(rewrite(s, node) for s in loop.body)
    return tuple(decls), dataclasses.replace(loop, body=body)


_ONE = k.index_const(1)
_Term = tuple[int, k.Expr]  # (sign, expression)


def _index_node(n: Node) -> bool:
    """Integer arithmetic that may run before the loop: no loads, no effects."""
    match n:
        case k.Sym(symbol=s):
            return not s.pointer and np.issubdtype(n.dtype, np.integer)
        case k.Constant():
            return np.issubdtype(n.dtype, np.integer)
        case k.Op(op=op):
            return op in _INDEX_OPS and np.issubdtype(n.dtype, np.integer)
    return False


def _terms(e: k.Expr) -> tuple[list[_Term] | None, int]:
    """An integer index as a signed sum (its non-constant terms, its constant):
    ``i0 + o - 1`` is ``([(1, i0), (1, o)], -1)``; None for an index not of type INDEX."""
    if e.dtype != k.INDEX:  # the row bases are INDEX sums: other index types stay as written
        return None, 0
    match e:
        case k.Constant():
            return [], int(e.value)
        case k.Op(op="+" | "-" as op, args=(a, b)) if a.dtype == e.dtype == b.dtype:
            ta, ca = _terms(a)
            tb, cb = _terms(b)
            if ta is None or tb is None:
                return None, 0
            if op == "-":
                tb, cb = [(-s, t) for s, t in tb], -cb
            return ta + tb, ca + cb
        case k.Op(op="neg", args=(a,)) if a.dtype == e.dtype:
            ta, ca = _terms(a)
            return (None, 0) if ta is None else ([(-s, t) for s, t in ta], -ca)
    return [(1, e)], 0


def _rebuilt(terms: tuple[_Term, ...] | list[_Term], constant: int) -> k.Expr:
    """The sum again, positive terms first where the first is negative (``o - i0``)."""
    ordered = sorted(terms, key=lambda t: t[0] < 0) if terms and terms[0][0] < 0 else terms
    return _sum(list(ordered), constant)


def _sum(terms: list[_Term], constant: int) -> k.Expr:
    total: k.Expr | None = None
    for sign, t in terms:
        if total is None:
            total = t if sign > 0 else k.Op("neg", (t,), dtype=k.INDEX)
        else:
            total = k.Op("+" if sign > 0 else "-", (total, t), dtype=k.INDEX)
    if total is None:
        return k.index_const(constant)
    if constant:
        c = k.index_const(abs(constant))
        total = k.Op("+" if constant > 0 else "-", (total, c), dtype=k.INDEX)
    return total


def _times(v: k.Expr, stride: k.Expr) -> k.Expr:
    if isinstance(stride, k.Constant) and int(stride.value) == 1:
        return v
    return k.Op("*", (v, stride), dtype=k.INDEX)


def _displaced(first: k.Expr, offset: int, stride: k.Expr) -> k.Expr:
    """``first + offset * stride``, written as a person would (``- a_stride_0_``)."""
    if isinstance(stride, k.Constant):
        step: k.Expr = k.index_const(abs(offset) * int(stride.value))
    elif abs(offset) == 1:
        step = stride
    else:
        step = k.Op("*", (k.index_const(abs(offset)), stride),
                    dtype=k.INDEX)
    return k.Op("+" if offset > 0 else "-", (first, step), dtype=k.INDEX)
