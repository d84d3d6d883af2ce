"""The OpenCL platform: the hooks of the GPU planner (``platforms.gpu``) in OpenCL C.

A launch is a ``__kernel`` function over an NDRange; dimension 0 is ``get_global_id(0)``.
OpenCL C has no complex types (the backend refuses complex dtypes) and atomic adds only
(``atomic_add_supported``: a ParLoop that needs another colours instead).

Index width: a 32-bit variant (``targets.cuda_layout``, chosen per call as CUDA's) keeps the
work-item index of NDRange dimension 0 64-bit where it runs along the unit stride
(``wide_first_index``); every other index, shape, stride, origin and row base is 32-bit.

Reductions (a ParLoop's Globals): the planner makes the local arrays they reduce into device
scratch arrays. In the parallel loop each work-item accumulates into a private copy
(initialized to the identity) over its iterations; the work-group then combines its copies
by a tree in local memory and work-item 0 writes the group's partial result (``Partial``);
a launch of one work-item after it combines the partials into the scratch array, in group
order (no atomics: every dtype, and the same sum from run to run).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .. import dtypes
from ..codegen.cfamily import type_suffix
from ..ir import kernel as k
from ..ir.core import Node, rewrite, walk
from ..ir.host_eval import evaluate  # noqa: F401 (re-exported: the runtimes' evaluator)
from ..ir.plan import Dim, HostLoop, Launch, LaunchPlan, Partial, Scratch, SharedMemory, Step  # noqa: F401
from ..lower.parallel_nests import mark_parallel_nests  # noqa: F401 (platform.mark_parallel_nests)
from .gpu import GpuPlatform, Reduced, identity, privatized


class OpenCLPlatform(GpuPlatform):
    """What is left abstract inside one work-item's body, as OpenCL C: the error status is
    the work-item's private ``sk_error`` (the kernel stores it into the status buffer);
    math functions are overloaded by type (``sqrt`` for float and double, no ``sqrtf``)."""

    name = "opencl"

    def plan(self, kf: k.KernelFunction, unit: tuple[str, int] | None = None,
             covering: bool = False, shared: SharedMemory | None = None) -> LaunchPlan:
        return wide_first_index(super().plan(kf, unit, covering, shared))

    def thread_index(self, dim: int, ctype: str) -> tuple[str, str | None]:
        # the NDRange is rounded up to whole work-groups: it always covers the dimension
        return f"({ctype})get_global_id({dim})", None

    def reduce(self, body: tuple[k.Stmt, ...], reductions: tuple[k.Reduction, ...],
               launch: str) -> Reduced:
        pre, body, post, partials = _privatize(body, reductions, launch)
        return Reduced(pre, body, post, partials, _combine(reductions, partials))

    def atomic_update(self, s: k.AtomicUpdate) -> tuple[k.Stmt, ...]:
        if s.op is None:  # a store: the last write wins, as in C
            return (k.Store(s.buffer, s.indices, s.value, loc=s.loc, source=s.source),)
        t = s.buffer.element_type
        if s.op != "+" or not atomic_add_supported(t):
            raise NotImplementedError(f"OpenCL: no atomic {s.op!r} on {t}")
        address = k.Address(s.buffer, s.indices, dtype=t)
        call = k.CCall(f"sk_atomic_add_{type_suffix(t)}", (address, s.value), dtype=t)
        return (k.Evaluate(call, loc=s.loc, source=s.source),)

    def error_prologue(self, kf: k.KernelFunction) -> tuple[k.Stmt, ...]:
        return ()  # the kernel declares sk_error and stores it into the status buffer

    def error_epilogue(self, kf: k.KernelFunction) -> tuple[k.Stmt, ...]:
        return ()


OPENCL_PLATFORM = OpenCLPlatform()


def plan(kf: k.KernelFunction, unit: tuple[str, int] | None = None) -> LaunchPlan:
    """The launches of ``kf`` (``GpuPlatform.plan``)."""
    return OPENCL_PLATFORM.plan(kf, unit)


def wide_first_index(plan: LaunchPlan) -> LaunchPlan:
    """``plan`` with the counter of each launch's dimension 0 declared 64-bit where a 32-bit
    variant narrowed it. PoCL's CPU device runs a work-group as a loop over dimension 0 and
    vectorizes it only where it can prove the addresses consecutive: ``(int)get_global_id(0)``
    (a truncation) hides that, and lap3d ran 1.2-1.5x slower than with 64-bit indices. With
    a ``long`` index and 32-bit row bases, an address is one sign extension and one 64-bit
    add, and the 32-bit variant runs as fast as the 64-bit one (docs/opencl.md). The
    expressions already compute in 64 bits where they mix (``targets.cuda_layout``), so only
    the declarations change. A dimension 0 whose index is multiplied (a stride apart: the
    border rows of a point kernel, a wrap-mode kernel's rows) keeps it 32-bit, so that no
    index multiply is a 64-bit one; its addresses are not consecutive anyway."""
    def widen(launch: Launch) -> Launch:
        if not launch.dims or launch.dims[0].counter.dtype == k.INDEX \
                or _multiplied(launch.dims[0].counter.name, launch):
            return launch
        first = launch.dims[0]
        wide = dataclasses.replace(first.counter, dtype=k.INDEX)

        def node(n: Node) -> Node | None:
            if isinstance(n, k.Sym) and n.symbol.name == wide.name:
                return dataclasses.replace(n, symbol=wide)
            return None

        def stmts(body: tuple[k.Stmt, ...]) -> tuple[k.Stmt, ...]:
            return tuple(rewrite(s, node) for s in body)

        return dataclasses.replace(
            launch, dims=(dataclasses.replace(first, counter=wide), *launch.dims[1:]),
            conditions=tuple(rewrite(c, node) for c in launch.conditions),
            body=stmts(launch.body), prologue=stmts(launch.prologue),
            epilogue=stmts(launch.epilogue))

    def steps(body: tuple[Step, ...]) -> tuple[Step, ...]:
        return tuple(widen(s) if isinstance(s, Launch)
                     else dataclasses.replace(s, body=steps(s.body)) for s in body)

    return dataclasses.replace(plan, steps=steps(plan.steps))


def _multiplied(name: str, launch: Launch) -> bool:
    """Whether ``launch`` multiplies the index ``name``: by a stride that is not the constant
    1 in an element's address, or in an expression (a row base)."""
    for s in (*launch.prologue, *launch.body, *launch.epilogue):
        for n in walk(s):
            if isinstance(n, k.Op) and n.op == "*" and any(_in_index(a, name) for a in n.args):
                return True
            if isinstance(n, (k.Load, k.Store, k.Address, k.AtomicUpdate)) and any(
                    _in_index(i, name) and not _unit(st)
                    for i, st in zip(n.indices, n.buffer.strides)):
                return True
    return False


def _in_index(e: k.Expr, name: str) -> bool:
    """``name`` is a term of the integer expression ``e`` (not of an index of a load in it)."""
    match e:
        case k.Sym(symbol=s):
            return s.name == name
        case k.Op(args=args):
            return any(_in_index(a, name) for a in args)
        case k.Convert(value=v):
            return _in_index(v, name)
    return False


def _unit(e: k.Expr) -> bool:
    return isinstance(e, k.Constant) and int(e.value) == 1


def atomic_add_supported(t: np.dtype) -> bool:
    """Element types with an atomic add (codegen.opencl's ``sk_atomic_add_*``: native on
    32/64-bit integers, compare-and-swap on the bits of floats); a ParLoop that would need
    another colours instead."""
    return t.kind in "fiu" and t.itemsize in (4, 8)



def _fold(op: str, buf: k.Buffer, at: k.Expr, other: k.Buffer, at_other: k.Expr) -> k.Stmt:
    """``buf[at] = buf[at] op other[at_other]`` (min/max: keep the smaller/larger, as the
    lowering's own MIN/MAX updates do)."""
    t = buf.element_type
    x, y = k.Load(buf, (at,), dtype=t), k.Load(other, (at_other,), dtype=t)
    if op == "+":
        return k.Store(buf, (at,), k.Op("+", (x, y), dtype=t))
    better = k.Op("<" if op == "min" else ">", (y, x), dtype=dtypes.BOOL)
    return k.Branch(better, (k.Store(buf, (at,), y),))


def _work_item(func: str, dtype: np.dtype = k.INDEX) -> k.Expr:
    return k.Convert(k.CCall(func, (k.Literal("0", dtype=k.STATUS),), dtype=k.INDEX), dtype=dtype)


_BARRIER = k.Evaluate(k.CCall("barrier", (k.Literal("CLK_LOCAL_MEM_FENCE", dtype=k.STATUS),),
                              dtype=k.STATUS))


def _privatize(body: tuple[k.Stmt, ...], reductions: tuple[k.Reduction, ...], launch: str
               ) -> tuple[tuple[k.Stmt, ...], tuple[k.Stmt, ...], tuple[k.Stmt, ...],
                          tuple[Partial, ...]]:
    """(prologue, body, epilogue, partials) of a parallel loop with reductions: private
    copies initialized to the identity, the body accumulating into them, then the tree over
    the work-group in local memory (``span`` halves each step; a barrier between steps)
    and work-item 0's store of the group's partial."""
    lid = k.Symbol("sk_lid", k.INDEX)
    span = k.Symbol("sk_span", k.INDEX)
    me, other = k.Sym(lid, dtype=k.INDEX), k.Sym(span, dtype=k.INDEX)
    renamed: dict[str, k.Buffer] = {}
    pre: list[k.Stmt] = []
    stage: list[k.Stmt] = []  # each work-item's copy into local memory
    tree: list[k.Stmt] = []  # one step of the tree
    out: list[k.Stmt] = []  # work-item 0: the group's partial
    partials: list[Partial] = []
    for r in reductions:
        b, n, t = r.buffer, r.size, r.buffer.element_type
        stem = b.base.name
        priv = dataclasses.replace(b, base=k.Symbol(f"{stem}_private", t, pointer=True))
        renamed[stem] = priv
        local_sym = k.Symbol(f"{stem}_group", t, pointer=True)
        part = Partial(k.Symbol(f"{stem}_partial", t, pointer=True), local_sym,
                       k.Symbol(f"{stem}_groups", k.INDEX), n)
        partials.append(part)
        w = k.Buffer(local_sym.name, t, local_sym, (k.index_const(0),), (k.index_const(1),))
        p = k.Buffer(part.buffer.name, t, part.buffer, (k.index_const(0),), (k.index_const(1),))
        pre.append(k.DeclareArray(priv, k.index_const(n)))
        group = _work_item("get_group_id")
        for q in range(n):
            pre.append(k.Store(priv, (k.index_const(q),), identity(r.op, t)))
            mine = k.Op("+", (k.Op("*", (me, k.index_const(n)), dtype=k.INDEX), k.index_const(q)),
                        dtype=k.INDEX)
            theirs = k.Op("+", (k.Op("*", (k.Op("+", (me, other), dtype=k.INDEX), k.index_const(n)),
                                      dtype=k.INDEX), k.index_const(q)), dtype=k.INDEX)
            stage.append(k.Store(w, (mine,), k.Load(priv, (k.index_const(q),), dtype=t)))
            tree.append(_fold(r.op, w, mine, w, theirs))
            at = k.Op("+", (k.Op("*", (group, k.index_const(n)), dtype=k.INDEX), k.index_const(q)),
                      dtype=k.INDEX)
            out.append(k.Store(p, (at,), k.Load(w, (k.index_const(q),), dtype=t)))
    half = k.Op("/", (_work_item("get_local_size"), k.index_const(2)), dtype=k.INDEX)
    post = (k.Declare(lid, _work_item("get_local_id")), *stage, _BARRIER,
            k.Declare(span, half),
            k.WhileLoop(k.Op(">", (other, k.index_const(0)), dtype=dtypes.BOOL), (
                k.Branch(k.Op("<", (me, other), dtype=dtypes.BOOL), tuple(tree)), _BARRIER,
                k.SetSym(span, k.Op("/", (other, k.index_const(2)), dtype=k.INDEX)))),
            k.Branch(k.Op("==", (me, k.index_const(0)), dtype=dtypes.BOOL), tuple(out)))
    return tuple(pre), privatized(body, renamed), post, tuple(partials)


def _combine(reductions: tuple[k.Reduction, ...], partials: tuple[Partial, ...]
             ) -> tuple[k.Stmt, ...]:
    """One work-item folding the groups' partials into the shared arrays, in group order."""
    out: list[k.Stmt] = []
    for r, part in zip(reductions, partials):
        t, n = r.buffer.element_type, r.size
        g = k.Symbol(f"{r.buffer.base.name}_g", k.INDEX)
        p = k.Buffer(part.buffer.name, t, part.buffer, (k.index_const(0),), (k.index_const(1),))
        fold = tuple(_fold(r.op, r.buffer, k.index_const(q), p, k.Op("+", (k.Op(
            "*", (k.ref(g), k.index_const(n)), dtype=k.INDEX), k.index_const(q)),
            dtype=k.INDEX)) for q in range(n))
        out.append(k.Loop(g, k.index_const(0), k.Sym(part.groups, dtype=k.INDEX), k.index_const(1), fold))
    return tuple(out)
