"""The Numba platform: kernel IR for generated Python compiled by ``numba.njit(parallel=True)``.

What each abstract node becomes:

- a parallel ``Loop``: a ``Pragma(("prange",))`` followed by the plain loop (the printer
  prints that loop over ``numba.prange``). ``only_if`` is dropped: a ``prange`` cannot be
  made serial at run time, and a ParLoop or computation of little work starts Numba's
  threads for nothing, which costs microseconds. Reductions become per-iteration partials:
  a ``(trip count, size)`` array the iterations accumulate into, combined after the loop
  (Numba's own ``prange`` reductions cover scalars and whole arrays, not ``r[q] += x``);
- a ``ParallelRegion``: its body, once (its shared loops are ``prange`` loops, and the end
  of a ``prange`` is the barrier the region's shared loops promise);
- ``AtomicUpdate``: refused. Numba has no atomic update of a NumPy array element on the
  CPU: ParLoops on "numba" always colour (``registry/numba.py`` builds them without atomics);
- ``SetError``: a store into a one-element ``int32`` status array (any thread may write it),
  declared first and returned last when the kernel can set an error;
- ``MathCall``: left for the printer (``codegen/numba.py`` maps it per dtype to ``math``,
  ``cmath``, NumPy or a helper of ``numba_helpers``, which already make Numba's results the
  C backend's).

Two rewrites for NumPy arrays, which Numba indexes itself:

- buffers whose strides the kernel computes (local arrays, column buffers, a ParLoop
  kernel's row-major argument blocks: no ``StrideOf`` symbol among their strides) become
  flat one-dimensional buffers indexed by the linear offset; buffers handed in as arrays
  keep their indices (Numba strides through them, in bytes);
- a ``DeclareArray`` whose size uses no local symbol moves to the start of the enclosing
  parallel loop's body (or of the function): allocating inside a per-element loop would
  call the allocator per element. Numba hoists it further, once per thread.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .. import dtypes
from ..errors import BackendError
from ..ir import kernel as k
from ..ir.core import Node, rewrite, walk
from .base import Platform

PRANGE = k.Pragma(("prange",))


def _op(op: str, a: k.Expr, b: k.Expr, t: np.dtype = k.INDEX) -> k.Expr:
    """``a op b``, folded where an index operand is a constant 0 or 1 (or both constant)."""
    if t == k.INDEX and op in "+-*":
        ca = int(a.value) if isinstance(a, k.Constant) else None
        cb = int(b.value) if isinstance(b, k.Constant) else None
        if ca is not None and cb is not None:
            return k.index_const(ca + cb if op == "+" else ca - cb if op == "-" else ca * cb)
        if cb == 0 and op in "+-" or cb == 1 and op == "*":
            return a
        if ca == 0 and op == "+" or ca == 1 and op == "*":
            return b
        if (ca == 0 or cb == 0) and op == "*":
            return k.index_const(0)
    return k.Op(op, (a, b), dtype=t)


class NumbaPlatform(Platform):
    name = "numba"
    keeps = (k.MathCall,)  # printed per dtype by codegen/numba.py

    def __init__(self) -> None:
        # internal functions (a ParLoop's kernel) that take their caller's status array as
        # their last parameter: allocating one per call (per element) would cost more than
        # the kernel; lower them before their callers
        self._takes_status: set[str] = set()

    def lower(self, kf: k.KernelFunction) -> k.KernelFunction:
        self._status_buffer = _status_buffer(kf) if needs_status(kf) else None
        kf = flatten_local_buffers(kf)
        lowered = super().lower(kf)
        if kf.internal and self._status_buffer is not None:
            self._takes_status.add(kf.name)
            lowered = dataclasses.replace(lowered, params=(*lowered.params,
                                                           self._status_buffer.base))
        return dataclasses.replace(lowered, body=hoist_arrays(lowered.body, lowered.params))

    def _expression(self, node: Node) -> Node | None:
        # MathCall is printed per dtype by the printer
        if isinstance(node, k.Call) and node.function in self._takes_status:
            assert self._status_buffer is not None, f"{node.function} needs a status"
            status = self._status_buffer.base
            return dataclasses.replace(node, args=(*node.args, k.Sym(status, dtype=k.STATUS)))
        return None

    # ------------------------------------------------------------ threads

    def parallel_loop(self, loop: k.Loop, kf: k.KernelFunction) -> tuple[k.Stmt, ...]:
        par = loop.parallel
        assert par is not None
        plain = dataclasses.replace(loop, parallel=None, vectorize=False)
        before: list[k.Stmt] = []
        after: list[k.Stmt] = []
        for r in par.reductions:
            pre, plain, post = _partials(r, plain)
            before += pre
            after += post
        return (*before, PRANGE, plain, *after)

    def parallel_region(self, region: k.ParallelRegion) -> tuple[k.Stmt, ...]:
        return region.body

    def atomic_update(self, s: k.AtomicUpdate) -> tuple[k.Stmt, ...]:
        raise BackendError("the numba backend has no atomic updates of array elements",
                           hint="run the ParLoop with race='color' (the numba backend "
                                "colours every ParLoop)")

    # ------------------------------------------------------------ the error channel

    def set_error(self, code: int, kf: k.KernelFunction, s: k.SetError) -> tuple[k.Stmt, ...]:
        buf = self._status_buffer
        assert buf is not None, f"{kf.name} sets an error but has no status"
        return (k.Store(buf, (k.index_const(0),), k.Constant(np.int32(code), dtype=k.STATUS), loc=s.loc,
                        source=s.source),)

    def error_prologue(self, kf: k.KernelFunction) -> tuple[k.Stmt, ...]:
        buf = self._status_buffer
        if buf is None or kf.internal:  # an internal function's status is its caller's
            return ()
        return (k.DeclareArray(buf, k.index_const(1)),
                k.Store(buf, (k.index_const(0),), k.Constant(np.int32(0), dtype=k.STATUS)))

    def error_epilogue(self, kf: k.KernelFunction) -> tuple[k.Stmt, ...]:
        buf = self._status_buffer
        if buf is None:
            return (k.Return(k.Constant(np.int32(0), dtype=k.STATUS)),)
        return (k.Return(k.Load(buf, (k.index_const(0),), dtype=k.STATUS)),)


def needs_status(kf: k.KernelFunction) -> bool:
    """Whether the kernel can set its error status: it says so, or its body has a
    ``SetError`` or an index helper that records one."""
    if kf.status is None:
        return False
    if kf.uses_error_flag:
        return True
    return any(isinstance(n, k.SetError) or isinstance(n, k.Op) and n.op in (
        "checked_offset", "wrap_index") for s in kf.body for n in walk(s))


def _status_buffer(kf: k.KernelFunction) -> k.Buffer:
    """The status as a one-element array (named as the kernel's status symbol, which it
    replaces)."""
    assert kf.status is not None
    base = k.Symbol(kf.status.name, k.STATUS, pointer=True)
    return k.Buffer(kf.status.name, k.STATUS, base, (k.index_const(1),), (k.index_const(1),))


# ---------------------------------------------------------------- reductions


def _partials(r: k.Reduction, loop: k.Loop
              ) -> tuple[list[k.Stmt], k.Loop, list[k.Stmt]]:
    """Per-iteration partials of reduction ``r`` over ``loop``: initialized to the identity
    (the shared value itself for min/max, which ignore a repeated operand), accumulated by
    the iteration's statements, combined into the shared buffer after the loop."""
    red, t = r.buffer, r.buffer.element_type
    stem = red.base.name
    trips = _op("-", loop.stop, loop.start)  # the loops of lowerings step by 1
    base = k.Symbol(f"{stem}_partials", t, pointer=True)
    size = k.index_const(r.size)
    part = k.Buffer(base.name, t, base, (_op("*", trips, size),), (k.index_const(1),))
    w = k.Symbol(f"{stem}_w", k.INDEX)
    q = k.Symbol(f"{stem}_q", k.INDEX)

    def at(row: k.Expr, col: k.Expr) -> tuple[k.Expr]:
        return (_op("+", _op("*", row, size), col),)

    def shared(i: k.Expr) -> k.Load:
        return k.Load(red, (i,), dtype=t)

    init = (k.Constant(t.type(0), dtype=t) if r.op == "+" else shared(k.ref(q)))
    fill = k.Loop(w, k.index_const(0), trips, k.index_const(1), (
        k.Loop(q, k.index_const(0), size, k.index_const(1), (k.Store(part, at(k.ref(w), k.ref(q)), init),)),))
    row = _op("-", k.ref(loop.counter), loop.start)

    def redirect(node: Node) -> Node | None:
        match node:
            case k.Load(buffer=b, indices=(i,)) if b == red:
                return k.Load(part, at(row, i), dtype=t)
            case k.Store(buffer=b, indices=(i,), value=v) if b == red:
                return dataclasses.replace(node, buffer=part, indices=at(row, i), value=v)
        return None

    body = tuple(rewrite(s, redirect) for s in loop.body)
    value = k.Load(part, at(k.ref(w), k.ref(q)), dtype=t)
    if r.op == "+":
        combine: k.Stmt = k.Store(red, (k.ref(q),), _op("+", shared(k.ref(q)), value, t))
    else:
        better = _op("<" if r.op == "min" else ">", value, shared(k.ref(q)), dtypes.BOOL)
        combine = k.Branch(better, (k.Store(red, (k.ref(q),), value),))
    zero, one = k.index_const(0), k.index_const(1)
    fold = k.Loop(w, zero, trips, one, (k.Loop(q, zero, size, one, (combine,)),))
    return ([k.DeclareArray(part, part.shape[0]), fill], dataclasses.replace(loop, body=body),
            [fold])


# ---------------------------------------------------------------- arrays


def _computed_strides(b: k.Buffer) -> bool:
    return b.ndim > 1 and not any(isinstance(s, k.Sym) and s.symbol.has(k.StrideOf)
                                  for s in b.strides)


def flatten_local_buffers(kf: k.KernelFunction) -> k.KernelFunction:
    """Buffers whose strides the kernel computes as flat arrays indexed by the offset."""
    flat: dict[k.Buffer, k.Buffer] = {}

    def flat_of(b: k.Buffer) -> k.Buffer:
        if b not in flat:
            size: k.Expr = b.shape[0]
            for n in b.shape[1:]:
                size = _op("*", size, n)
            flat[b] = k.Buffer(b.name, b.element_type, b.base, (size,), (k.index_const(1),))
        return flat[b]

    def offset(b: k.Buffer, idx: tuple[k.Expr, ...]) -> tuple[k.Expr]:
        terms = [i if isinstance(s, k.Constant) and int(s.value) == 1 else _op("*", i, s)
                 for i, s in zip(idx, b.strides)]
        out = terms[0]
        for x in terms[1:]:
            out = _op("+", out, x)
        return (out,)

    def visit(node: Node) -> Node | None:
        match node:
            case k.Load(buffer=b, indices=idx) if _computed_strides(b):
                return k.Load(flat_of(b), offset(b, idx), dtype=node.dtype)
            case k.Address(buffer=b, indices=idx) if _computed_strides(b):
                return k.Address(flat_of(b), offset(b, idx), dtype=node.dtype)
            case k.Store(buffer=b, indices=idx) if _computed_strides(b):
                return dataclasses.replace(node, buffer=flat_of(b), indices=offset(b, idx))
            case k.DeclareArray(buffer=b) if _computed_strides(b):
                return dataclasses.replace(node, buffer=flat_of(b))
        return None

    body = tuple(rewrite(s, visit) for s in kf.body)
    buffers = tuple(flat_of(b) if _computed_strides(b) else b for b in kf.buffers)
    return dataclasses.replace(kf, body=body, buffers=buffers)


def hoist_arrays(body: tuple[k.Stmt, ...], params: tuple[k.Symbol, ...]
                 ) -> tuple[k.Stmt, ...]:
    """Every ``DeclareArray`` whose size uses parameters only, moved to the start of the
    body of the ``prange`` loop around it, or of the function."""
    names = {p.name for p in params}

    def movable(s: k.Stmt) -> bool:
        return isinstance(s, k.DeclareArray) and all(
            n.symbol.name in names for n in walk(s.size) if isinstance(n, k.Sym))

    def strip(stmts: tuple[k.Stmt, ...], found: list[k.Stmt]) -> tuple[k.Stmt, ...]:
        out: list[k.Stmt] = []
        prange = False
        for s in stmts:
            if movable(s):
                found.append(s)
                continue
            if isinstance(s, k.Loop) and prange:  # a scope of its own
                inner: list[k.Stmt] = []
                body = strip(s.body, inner)
                out.append(dataclasses.replace(s, body=tuple(inner) + body))
            elif isinstance(s, (k.Loop, k.WhileLoop, k.Section, k.Block)):
                out.append(dataclasses.replace(s, body=strip(s.body, found)))
            elif isinstance(s, k.Branch):
                out.append(dataclasses.replace(s, then=strip(s.then, found),
                                               orelse=strip(s.orelse, found)))
            else:
                out.append(s)
            prange = s == PRANGE
        return tuple(out)

    top: list[k.Stmt] = []
    rest = strip(body, top)
    return tuple(top) + rest
