"""A lowered kernel function specialized, before the CUDA planner cuts it into launches, for
the layout and the sizes of the arrays of a call (``Variant``, chosen per call by
``runtime.cuda_variants``):

- ``on_chip``: a computation's column-private temporaries (``lower.computation_gpu.
  column_private_temporaries``) in the thread's slice of the block's dynamic shared memory
  instead of their 3-D arrays (``on_chip``); otherwise their accesses index the 3-D arrays
  directly (``in_global_memory``);

- the strides that are one element on the output's unit-stride axis become the constant 1
  (no multiply, and the loads of neighbouring threads are visibly consecutive);
- where every array's extents and strides fit (``runtime.cuda_variants.fits_32_bits``), the
  shape and stride parameters (a computation's origins and domain too) and the loop
  counters over extents are 32-bit: an index is
  then 32-bit arithmetic, sign-extended once per access, instead of 64-bit multiplies in
  every load (the registers of a thread nearly halve: docs/performance-gpu.md).

Only the declared types of symbols change (parameters, loop counters): the expressions keep
their 64-bit type in the IR, so that helpers (``sk_min_int64``) and conversions chosen by
type still compute in 64 bits where they mix with other values; C's promotions then do
32-bit arithmetic only where every operand is 32-bit.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..ir import kernel as k
from ..ir.core import Node, rewrite, walk
from ..ir.plan import (
    SharedMemory,
    Variant,  # noqa: F401 (re-exported: what a kernel is specialized for)
)
from .cuda import BLOCK_THREADS, THREAD_IN_BLOCK

INDEX32 = np.dtype(np.int32)
SHARED = "sk_shared"  # the launch's dynamic shared memory (``extern __shared__``)
BLOCK_SIZE = "sk_block_threads"  # the threads of a block: the stride between two levels


def on_chip(kf: k.KernelFunction, columns: tuple[str, ...]) -> tuple[k.KernelFunction,
                                                                     SharedMemory | None]:
    """``kf`` with the column pointers named ``columns`` (a computation's column-private
    temporaries, ``lower.computation_gpu``) pointing into the block's dynamic shared memory
    instead of the temporaries' 3-D arrays, and that memory's description: nk elements
    per temporary per thread, level-major. The temporary ``t``-th in ``columns`` holds
    level ``k`` of thread ``p`` (the thread's index within its block) at ``sk_shared[(t *
    nk + k) * threads + p]``: a warp's accesses to one level are 32 consecutive elements
    (no bank conflicts), and a thread's column is its own. Nothing else changes: the
    loads and stores of the temporaries index the column by the level as before, with the
    block's thread count as the stride. ``kf`` unchanged (and None) without columns."""
    pointers = {}
    for s in kf.body:
        for n in walk(s):
            if isinstance(n, k.Declare) and n.symbol.name in columns:
                pointers[n.symbol.name] = n.symbol
    if not pointers:
        return kf, None
    nk = next(p for p in kf.params if (arg := p.get(k.ScalarArgument)) is not None
              and arg.key == k.DomainExtent("K"))
    index_t = nk.dtype
    dtype = next(iter(pointers.values())).dtype
    shared = k.Symbol(SHARED, dtype, pointer=True)
    memory = k.Buffer(SHARED, dtype, shared, (), ())
    threads = k.Symbol(BLOCK_SIZE, index_t)
    level_stride = (k.Sym(threads, dtype=index_t),)
    thread = k.Literal(THREAD_IN_BLOCK.format(ctype=_ctype(index_t)), dtype=index_t)
    order = [name for name in columns if name in pointers]

    def first_element(name: str) -> k.Expr:
        t = order.index(name)
        if t == 0:
            return thread
        levels: k.Expr = k.Sym(nk, dtype=index_t)
        if t > 1:
            levels = k.Op("*", (k.Constant(index_t.type(t), dtype=index_t), levels),
                          dtype=index_t)
        before = k.Op("*", (levels, k.Sym(threads, dtype=index_t)), dtype=index_t)
        return k.Op("+", (before, thread), dtype=index_t)

    def node(n: Node) -> Node | None:
        match n:
            case k.Declare(symbol=sym) if sym.name in pointers:
                return dataclasses.replace(n, value=k.Address(
                    dataclasses.replace(memory, shape=(first_element(sym.name),),
                                        strides=(k.Constant(index_t.type(1), dtype=index_t),)),
                    (first_element(sym.name),), dtype=dtype))
            case k.Load() | k.Store() if n.buffer.base.name in pointers:
                return dataclasses.replace(n, buffer=dataclasses.replace(
                    n.buffer, strides=level_stride))
        return None

    def with_block_size(body: tuple[k.Stmt, ...]) -> tuple[k.Stmt, ...]:
        """The block's thread count declared before the first column pointer."""
        for i, s in enumerate(body):
            if isinstance(s, k.Declare) and s.symbol.name in pointers:
                size = k.Literal(BLOCK_THREADS.format(ctype=_ctype(index_t)), dtype=index_t)
                return (*body[:i], k.Declare(threads, size), *body[i:])
            inner = _inner_body(s)
            if inner is not None:
                new = with_block_size(inner)
                if new is not inner:
                    return (*body[:i], _with_inner_body(s, new), *body[i + 1:])
        return body

    body = with_block_size(tuple(rewrite(s, node) for s in kf.body))
    per_thread = k.Op("*", (k.Constant(index_t.type(len(order)), dtype=index_t),
                            k.Sym(nk, dtype=index_t)), dtype=index_t) \
        if len(order) > 1 else k.Sym(nk, dtype=index_t)
    return dataclasses.replace(kf, body=body), SharedMemory(shared, per_thread)


def in_global_memory(kf: k.KernelFunction, columns: tuple[str, ...]) -> k.KernelFunction:
    """``kf`` with the column pointers named ``columns`` folded back into the accesses of
    their 3-D temporaries (the variant whose temporaries stay in global memory): a 64-bit
    pointer per column held across the sweeps costs more registers than the 32-bit indices
    it would replace."""
    columns_at: dict[str, k.Address] = {}
    for s in kf.body:
        for n in walk(s):
            if isinstance(n, k.Declare) and n.symbol.name in columns \
                    and isinstance(n.value, k.Address):
                columns_at[n.symbol.name] = n.value
    if not columns_at:
        return kf

    def node(n: Node) -> Node | None:
        if isinstance(n, (k.Load, k.Store)) and n.buffer.base.name in columns_at:
            at = columns_at[n.buffer.base.name]
            (level,) = n.indices  # the level in the column: added to the column's K index
            last = at.indices[-1]
            index = (*at.indices[:-1], k.Op("+", (last, level), dtype=last.dtype))
            return dataclasses.replace(n, buffer=at.buffer, indices=index)
        return None

    def drop(body: tuple[k.Stmt, ...]) -> tuple[k.Stmt, ...]:
        out = []
        for s in body:
            if isinstance(s, k.Declare) and s.symbol.name in columns_at:
                continue
            inner = _inner_body(s)
            if inner is not None:
                s = _with_inner_body(s, drop(inner))
                if isinstance(s, k.Branch) and s.orelse:
                    s = dataclasses.replace(s, orelse=drop(s.orelse))
            out.append(s)
        return tuple(out)

    return dataclasses.replace(kf, body=drop(tuple(rewrite(s, node) for s in kf.body)))


def _ctype(t: np.dtype) -> str:
    return "int32_t" if t == INDEX32 else "int64_t"


def _inner_body(s: k.Stmt) -> tuple[k.Stmt, ...] | None:
    if isinstance(s, (k.Loop, k.Section, k.Block, k.ParallelRegion)):
        return s.body
    if isinstance(s, k.Branch):
        return s.then
    return None


def _with_inner_body(s: k.Stmt, body: tuple[k.Stmt, ...]) -> k.Stmt:
    if isinstance(s, k.Branch):
        return dataclasses.replace(s, then=body)
    return dataclasses.replace(s, body=body)  # type: ignore[call-arg]



def specialize(kf: k.KernelFunction, variant: Variant) -> k.KernelFunction:
    """``kf`` with the unit strides of ``variant`` as constants and, if it is ``narrow``, its
    index parameters and internal loop counters declared 32-bit."""
    one = k.index_const(1)
    constant: dict[str, k.Expr] = {}
    retyped: dict[str, k.Symbol] = {}
    for p in kf.params:
        stride = p.get(k.StrideOf)
        if stride is not None and stride.dim == variant.unit_axis \
                and stride.buffer in variant.unit_buffers:
            constant[p.name] = one
        elif variant.narrow and (stride is not None or p.has(k.ShapeOf) or _extent(p)) \
                and p.dtype == k.INDEX:
            retyped[p.name] = dataclasses.replace(p, dtype=INDEX32)

    def symbol(s: k.Symbol) -> k.Symbol:
        return retyped.get(s.name, s)

    def expr(e: k.Expr) -> k.Expr:
        return rewrite(e, node)

    def buffer(b: k.Buffer) -> k.Buffer:
        return dataclasses.replace(b, shape=tuple(expr(e) for e in b.shape),
                                   strides=tuple(expr(e) for e in b.strides))

    def node(n: Node) -> Node | None:
        match n:
            case k.Sym(symbol=s) if s.name in constant:
                return constant[s.name]
            case k.Sym(symbol=s) if s.name in retyped:
                return dataclasses.replace(n, symbol=retyped[s.name])  # its dtype: still 64
            case k.Load() | k.Store() | k.Address() | k.AtomicUpdate() | k.DeclareArray():
                return dataclasses.replace(n, buffer=buffer(n.buffer))
            case k.Loop(counter=c) if c.name in retyped:
                return dataclasses.replace(n, counter=retyped[c.name])
            case k.Declare(symbol=s, value=v) if s.name in retyped and v is not None:
                # the expression keeps its 64-bit type (as retyped symbols' uses do): the
                # conversion says the narrowing is intended, and C computes it in 32 bits
                return dataclasses.replace(n, symbol=retyped[s.name],
                                           value=k.Convert(expr(v), dtype=INDEX32))
        return None

    if variant.narrow:  # counters first: their uses in loop bodies are rewritten below
        # a variable assigned after its declaration (a point kernel's sk_result = s) holds
        # a value, not an index computed once: it keeps its type
        assigned = {n.symbol.name for s in kf.body for n in walk(s) if isinstance(n, k.SetSym)}
        for s in kf.body:
            for n in walk(s):
                if isinstance(n, k.Loop) and _internal(n.counter):
                    retyped[n.counter.name] = dataclasses.replace(n.counter, dtype=INDEX32)
                elif isinstance(n, k.Declare) and n.symbol.name not in assigned \
                        and _narrowable(n, retyped, constant):
                    # an index computed from 32-bit ones only (a hoisted row base): 32-bit too
                    retyped[n.symbol.name] = dataclasses.replace(n.symbol, dtype=INDEX32)
    body = tuple(rewrite(s, node) for s in kf.body)
    params = tuple(symbol(p) for p in kf.params)
    return dataclasses.replace(kf, params=params, body=body,
                               buffers=tuple(buffer(b) for b in kf.buffers))


def _extent(p: k.Symbol) -> bool:
    """A computation's origin or domain extent: below the extents of its fields, so 32-bit
    where they are (``fits_32_bits`` looks at every field and temporary of the call)."""
    arg = p.get(k.ScalarArgument)
    return arg is not None and isinstance(arg.key, (k.OriginOf, k.DomainExtent))


def _narrowable(d: k.Declare, retyped: dict[str, k.Symbol], constant: dict[str, k.Expr]
                ) -> bool:
    """An internal index declaration whose value is integer arithmetic on symbols already
    32-bit (or constant): within the arrays' extents, which the narrow variant's sizes
    bound below 2**31."""
    if d.value is None or d.symbol.dtype != k.INDEX or d.symbol.name.endswith("_"):
        return False
    for n in walk(d.value):
        if isinstance(n, k.Sym) and n.symbol.name not in retyped \
                and n.symbol.name not in constant:
            return False
        if isinstance(n, k.MathCall) and n.func in ("min", "max"):
            continue  # of 32-bit values: 32-bit (a sweep's first level, clamped to [0, nk])
        if not isinstance(n, (k.Sym, k.Constant, k.Op)) or (
                isinstance(n, k.Op) and n.op not in ("+", "-", "*", "neg")):
            return False
    return True


def _internal(c: k.Symbol) -> bool:
    """A loop counter of the lowering's (over extents), not a loop the user wrote (whose
    counter keeps the user's name, ending with ``_``, and its 64-bit type)."""
    return c.dtype == k.INDEX and not c.name.endswith("_")

