"""The OpenCL platform: a kernel function's parallel loops become NDRanges of work-items.

Requires: a ``KernelFunction`` whose loops that may run concurrently are marked
``parallel`` (perfectly nested parallel loops are all independent: each marked loop's
iterations touch disjoint outputs), whose loop bounds of parallel loops depend only on
parameters and on enclosing serial loops' counters, and whose statements outside parallel
loops declare nothing that a parallel loop reads.

Ensures: a ``LaunchPlan``: an ordered list of steps, each either a ``Launch`` (one OpenCL
kernel over up to three perfectly nested parallel loops, the innermost one the fastest
work-item dimension 0 so that neighbouring work-items touch neighbouring elements) or a
``HostLoop`` (a serial loop whose body holds parallel loops: the host runs it and passes its
counter to the kernels inside, since work-items of one launch cannot wait for each other).
Statements outside any parallel loop run as a launch of one work-item; the conditions of
enclosing branches are repeated inside each launch (they depend only on parameters).

Reductions (a ParLoop's Globals): the local arrays they reduce into, declared at the top,
become device scratch arrays (``LaunchPlan.scratch``) the launcher allocates. In the
parallel loop each work-item accumulates into a private copy (initialized to the
identity) over its iterations; the work-group then combines its copies by a tree in local
memory and work-item 0 writes the group's partial result (``Partial``); a launch of one
work-item after it combines the partials into the scratch array, in group order (no
atomics: every dtype, and the same sum from run to run).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from ... import dtypes
from ...codegen.cfamily import type_suffix
from ...ir import kernel as k
from ...ir.core import Node, rewrite, walk
from ..parallel_nests import mark_parallel_nests  # noqa: F401 (platform.mark_parallel_nests)
from .base import status_constant
from .c import _TESTS, CPlatform, libm

MAX_DIMS = 3  # OpenCL NDRanges have up to three dimensions


@dataclass(frozen=True)
class Dim:
    """One NDRange dimension: ``counter`` runs over [start, stop)."""

    counter: k.Symbol
    start: k.Expr
    stop: k.Expr


@dataclass(frozen=True)
class Partial:
    """A reduction's per-group results: the launcher allocates ``buffer`` (``size``
    elements per work-group, a global buffer) and ``size`` elements of local memory per
    work-item for ``local``, and sets ``groups`` (the number of work-groups launched) for
    the launch that combines them."""

    buffer: k.Symbol
    local: k.Symbol
    groups: k.Symbol
    size: int


@dataclass(frozen=True)
class Launch:
    """One OpenCL kernel: ``dims`` (dimension 0 first; empty: a single work-item) and the
    body each work-item runs, under ``conditions``. ``params``: the kernel function's
    parameters it uses, then the host loops' counters, the scratch arrays and partials.
    ``prologue``/``epilogue``: what every work-item of the launch runs before and after
    its (guarded) body, out of range or not (a reduction's private copy, the group's
    combination, whose barriers every work-item must reach)."""

    name: str
    params: tuple[k.Symbol, ...]
    dims: tuple[Dim, ...]
    conditions: tuple[k.Expr, ...]
    body: tuple[k.Stmt, ...]
    prologue: tuple[k.Stmt, ...] = ()
    epilogue: tuple[k.Stmt, ...] = ()
    partials: tuple[Partial, ...] = ()


@dataclass(frozen=True)
class HostLoop:
    counter: k.Symbol
    start: k.Expr
    stop: k.Expr
    step: k.Expr
    body: tuple[Step, ...]


Step = Launch | HostLoop


@dataclass(frozen=True)
class LaunchPlan:
    kernel: k.KernelFunction
    steps: tuple[Step, ...]
    scratch: tuple[k.Symbol, ...] = ()  # device arrays (pointer symbols) of scratch_sizes
    scratch_sizes: tuple[int, ...] = ()

    def launches(self) -> list[Launch]:
        out: list[Launch] = []

        def visit(steps: tuple[Step, ...]) -> None:
            for s in steps:
                if isinstance(s, Launch):
                    out.append(s)
                else:
                    visit(s.body)
        visit(self.steps)
        return out


def _empty(s: k.Stmt) -> bool:
    return isinstance(s, k.Section) and all(_empty(x) for x in s.body)


def _has_parallel(s: k.Stmt) -> bool:
    return any(isinstance(n, k.Loop) and n.parallel for n in walk(s))


class _Splitter:
    def __init__(self, kf: k.KernelFunction) -> None:
        self.kf = kf
        self.count = 0
        self.reduced = {r.buffer.base.name for n in (x for s in kf.body for x in walk(s))
                        if isinstance(n, k.Loop) and n.parallel
                        for r in n.parallel.reductions}
        self.scratch: dict[str, tuple[k.Symbol, int]] = {}
        self.partials: dict[str, k.Symbol] = {}  # partial buffers and group counts

    def name(self) -> str:
        self.count += 1
        return f"{self.kf.name}_{self.count}"

    def split(self, body: tuple[k.Stmt, ...], conds: tuple[k.Expr, ...],
              counters: tuple[k.Symbol, ...]) -> list[Step]:
        steps: list[Step] = []
        serial: list[k.Stmt] = []

        def flush() -> None:
            if serial:
                steps.append(self.launch((), conds, tuple(serial), counters))
                serial.clear()

        for s in body:
            if _empty(s):  # a section with nothing in it (1-D border rows) needs no launch
                continue
            if isinstance(s, k.DeclareArray) and s.buffer.base.name in self.reduced \
                    and not conds and isinstance(s.size, k.Constant):
                # a reduction's shared array, used by the launches after it: device memory
                sym = dataclasses.replace(s.buffer.base, pointer=True)
                self.scratch[sym.name] = (sym, int(s.size.value))
                continue
            if not _has_parallel(s):
                serial.append(s)
                continue
            flush()
            match s:
                case k.Section(body=inner):
                    steps += self.split(inner, conds, counters)
                case k.Branch(cond=c, then=then, orelse=orelse):
                    steps += self.split(then, conds + (c,), counters)
                    if orelse:
                        neg = k.Op("!", (c,), dtype=dtypes.BOOL)
                        steps += self.split(orelse, conds + (neg,), counters)
                case k.ParallelRegion(body=inner):  # "planes": host K loops of launches
                    steps += self.split(inner, conds, counters)
                case k.Loop(parallel=par) if par:
                    steps += self.nest(s, conds, counters)
                case k.Loop(counter=ctr, start=a, stop=b, step=st, body=inner):
                    lower = OPENCL_PLATFORM.lower_expr
                    steps.append(HostLoop(ctr, lower(a), lower(b), lower(st),
                                          tuple(self.split(inner, conds, counters + (ctr,)))))
                case _:
                    raise NotImplementedError(f"OpenCL: parallel loop inside {type(s).__name__}")
        flush()
        return steps

    def nest(self, loop: k.Loop, conds: tuple[k.Expr, ...],
             counters: tuple[k.Symbol, ...]) -> list[Launch]:
        """Up to three perfectly nested parallel loops with unit steps and bounds that do not
        depend on each other become the NDRange; the rest is the work-item's body."""
        loops = [loop]
        while len(loops) < MAX_DIMS:
            inner = loops[-1].body
            if not (len(inner) == 1 and isinstance(inner[0], k.Loop) and inner[0].parallel):
                break
            cand = inner[0]
            bound = {lp.counter.name for lp in loops}
            used = {n.symbol.name for e in (cand.start, cand.stop) for n in walk(e)
                    if isinstance(n, k.Sym)}
            if used & bound or not _unit(cand.step):
                break
            loops.append(cand)
        if not _unit(loops[0].step):
            raise NotImplementedError("OpenCL: a parallel loop with a non-unit step")
        dims = tuple(Dim(lp.counter, lp.start, lp.stop) for lp in reversed(loops))
        reductions = loop.parallel.reductions if loop.parallel else ()
        if not reductions:
            return [self.launch(dims, conds, loops[-1].body, counters)]
        body = OPENCL_PLATFORM.lower_body(loops[-1].body, self.kf)
        name = self.name()
        pre, body, post, partials = _privatize(body, reductions, name)
        main = self.launch(dims, conds, body, counters, pre, post, partials, name)
        return [main, self.launch((), conds, _combine(reductions, partials), counters)]

    def launch(self, dims: tuple[Dim, ...], conds: tuple[k.Expr, ...],
               body: tuple[k.Stmt, ...], counters: tuple[k.Symbol, ...],
               pre: tuple[k.Stmt, ...] = (), post: tuple[k.Stmt, ...] = (),
               partials: tuple[Partial, ...] = (), name: str | None = None) -> Launch:
        # what a work-item runs: the abstract nodes left lowered by the OpenCL platform
        body = OPENCL_PLATFORM.lower_body(body, self.kf)
        conds = tuple(OPENCL_PLATFORM.lower_expr(c) for c in conds)
        dims = tuple(Dim(d.counter, OPENCL_PLATFORM.lower_expr(d.start),
                         OPENCL_PLATFORM.lower_expr(d.stop)) for d in dims)
        used: set[str] = set()
        roots: list[Node] = [*pre, *body, *post, *conds,
                               *(e for d in dims for e in (d.start, d.stop))]
        for r in roots:
            for n in walk(r):
                match n:
                    case k.Sym(symbol=s):
                        used.add(s.name)
                    case k.Load(buffer=b) | k.Store(buffer=b) | k.Address(buffer=b):
                        used.add(b.base.name)
                        used.update(e.symbol.name for e in b.strides if isinstance(e, k.Sym))
        params = tuple(p for p in self.kf.params if p.name in used)
        params += tuple(c for c in counters if c.name in used)
        params += tuple(sym for sym, _ in self.scratch.values() if sym.name in used)
        for part in partials:
            self.partials.update({part.buffer.name: part.buffer, part.groups.name: part.groups})
        params += tuple(sym for n, sym in self.partials.items() if n in used)
        return Launch(name or self.name(), params, dims, conds, body, pre, post, partials)


def _c(v: int) -> k.Constant:
    return k.Constant(np.int64(v), dtype=k.INDEX)


def _identity(op: str, t: np.dtype) -> k.Constant:
    if op == "+":
        v: object = 0
    elif dtypes.is_float(t):
        v = np.inf if op == "min" else -np.inf
    elif dtypes.is_bool(t):
        v = op == "min"
    else:
        info = np.iinfo(t)
        v = info.max if op == "min" else info.min
    return k.Constant(t.type(v), dtype=t)


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
        w = k.Buffer(local_sym.name, t, local_sym, (_c(0),), (_c(1),))
        p = k.Buffer(part.buffer.name, t, part.buffer, (_c(0),), (_c(1),))
        pre.append(k.DeclareArray(priv, _c(n)))
        group = _work_item("get_group_id")
        for q in range(n):
            pre.append(k.Store(priv, (_c(q),), _identity(r.op, t)))
            mine = k.Op("+", (k.Op("*", (me, _c(n)), dtype=k.INDEX), _c(q)), dtype=k.INDEX)
            theirs = k.Op("+", (k.Op("*", (k.Op("+", (me, other), dtype=k.INDEX), _c(n)),
                                      dtype=k.INDEX), _c(q)), dtype=k.INDEX)
            stage.append(k.Store(w, (mine,), k.Load(priv, (_c(q),), dtype=t)))
            tree.append(_fold(r.op, w, mine, w, theirs))
            at = k.Op("+", (k.Op("*", (group, _c(n)), dtype=k.INDEX), _c(q)), dtype=k.INDEX)
            out.append(k.Store(p, (at,), k.Load(w, (_c(q),), dtype=t)))
    half = k.Op("/", (_work_item("get_local_size"), _c(2)), dtype=k.INDEX)
    post = (k.Declare(lid, _work_item("get_local_id")), *stage, _BARRIER,
            k.Declare(span, half),
            k.WhileLoop(k.Op(">", (other, _c(0)), dtype=dtypes.BOOL), (
                k.Branch(k.Op("<", (me, other), dtype=dtypes.BOOL), tuple(tree)), _BARRIER,
                k.SetSym(span, k.Op("/", (other, _c(2)), dtype=k.INDEX)))),
            k.Branch(k.Op("==", (me, _c(0)), dtype=dtypes.BOOL), tuple(out)))

    def swap(node):
        if isinstance(node, (k.Load, k.Store)) and node.buffer.base.name in renamed:
            return dataclasses.replace(node, buffer=renamed[node.buffer.base.name])
        return None
    body = tuple(rewrite(s, swap) for s in body)
    return tuple(pre), body, post, tuple(partials)


def _combine(reductions: tuple[k.Reduction, ...], partials: tuple[Partial, ...]
             ) -> tuple[k.Stmt, ...]:
    """One work-item folding the groups' partials into the shared arrays, in group order."""
    out: list[k.Stmt] = []
    for r, part in zip(reductions, partials):
        t, n = r.buffer.element_type, r.size
        g = k.Symbol(f"{r.buffer.base.name}_g", k.INDEX)
        p = k.Buffer(part.buffer.name, t, part.buffer, (_c(0),), (_c(1),))
        fold = tuple(_fold(r.op, r.buffer, _c(q), p, k.Op("+", (k.Op(
            "*", (k.Sym(g, dtype=k.INDEX), _c(n)), dtype=k.INDEX), _c(q)), dtype=k.INDEX))
            for q in range(n))
        out.append(k.Loop(g, _c(0), k.Sym(part.groups, dtype=k.INDEX), _c(1), fold))
    return tuple(out)


def _unit(e: k.Expr) -> bool:
    return isinstance(e, k.Constant) and int(e.value) == 1


class OpenCLPlatform(CPlatform):
    """What is left abstract inside one work-item's body, as OpenCL C. Parallel loops that
    did not become NDRange dimensions run serially in the work-item; the error status is
    the work-item's private ``sk_error`` (the kernel stores it into the status buffer);
    math functions are overloaded by type (``sqrt`` for float and double, no ``sqrtf``)
    and OpenCL C has no complex types (the backend refuses complex dtypes)."""

    name = "opencl"
    streaming_stores = False  # a work-item's stores have no row buffer to stream

    def lower_body(self, body: tuple[k.Stmt, ...], kf: k.KernelFunction) -> tuple[k.Stmt, ...]:
        return self.stmts(tuple(rewrite(s, self._expression) for s in body), kf)

    def lower_expr(self, e: k.Expr) -> k.Expr:
        return rewrite(e, self._expression)

    def parallel_loop(self, loop: k.Loop, kf: k.KernelFunction) -> tuple[k.Stmt, ...]:
        return (dataclasses.replace(loop, parallel=None, vectorize=False),)

    def parallel_region(self, region: k.ParallelRegion) -> tuple[k.Stmt, ...]:
        return (k.Block(region.body, loc=region.loc),)

    def vector_loop(self, loop: k.Loop) -> tuple[k.Stmt, ...]:
        return (dataclasses.replace(loop, vectorize=False),)

    def atomic_update(self, s: k.AtomicUpdate) -> tuple[k.Stmt, ...]:
        if s.op is None:  # a store: the last write wins, as in C
            return (k.Store(s.buffer, s.indices, s.value, loc=s.loc, source=s.source),)
        t = s.buffer.element_type
        if s.op != "+" or not atomic_add_supported(t):
            raise NotImplementedError(f"OpenCL: no atomic {s.op!r} on {t}")
        address = k.Address(s.buffer, s.indices, dtype=t)
        call = k.CCall(f"sk_atomic_add_{type_suffix(t)}", (address, s.value), dtype=t)
        return (k.Evaluate(call, loc=s.loc, source=s.source),)

    def set_error(self, code: int, kf: k.KernelFunction, s: k.SetError) -> tuple[k.Stmt, ...]:
        assert kf.status is not None, f"{kf.name} sets an error but has no status symbol"
        return (k.SetSym(kf.status, status_constant(code), loc=s.loc, source=s.source),)

    def error_prologue(self, kf: k.KernelFunction) -> tuple[k.Stmt, ...]:
        return ()  # the kernel declares sk_error and stores it into the status buffer

    def error_epilogue(self, kf: k.KernelFunction) -> tuple[k.Stmt, ...]:
        return ()

    def math_call(self, call: k.MathCall) -> k.Expr:
        e = super().math_call(call)
        a = call.args[0].dtype
        if isinstance(e, k.CCall) and dtypes.is_float(a) and call.func not in _TESTS:
            # C's libm names per precision (sqrtf) -> OpenCL's overloaded built-ins (sqrt)
            func = "fabs" if call.func == "abs" else call.func
            if e.name == libm(func, a):
                e = dataclasses.replace(e, name={"gamma": "tgamma"}.get(func, func))
        return e


OPENCL_PLATFORM = OpenCLPlatform()


def atomic_add_supported(t: np.dtype) -> bool:
    """Element types with an atomic add (codegen.opencl's ``sk_atomic_add_*``: native on
    32/64-bit integers, compare-and-swap on the bits of floats); a ParLoop that would need
    another colours instead."""
    return t.kind in "fiu" and t.itemsize in (4, 8)


def plan(kf: k.KernelFunction) -> LaunchPlan:
    """The launches of ``kf`` (see the module's docstring)."""
    kf = dataclasses.replace(kf, body=_without_thresholds(kf.body))
    splitter = _Splitter(kf)
    steps = tuple(splitter.split(kf.body, (), ()))
    scratch = tuple(splitter.scratch.values())
    return LaunchPlan(kf, steps, tuple(s for s, _ in scratch), tuple(n for _, n in scratch))


def _without_thresholds(body: tuple[k.Stmt, ...]) -> tuple[k.Stmt, ...]:
    """Parallel loops always launch here: drop their ``only_if`` thresholds (for CPU
    threads) and the top-level declarations only those read (``sk_work``), which would
    otherwise cost a launch of one work-item per call."""
    def strip(node):
        if isinstance(node, k.Parallel) and node.only_if is not None:
            return dataclasses.replace(node, only_if=None)
        return None
    body = tuple(rewrite(s, strip) for s in body)
    read = {n.symbol.name for s in body for n in walk(s) if isinstance(n, k.Sym)}
    return tuple(s for s in body if not (isinstance(s, k.Declare) and s.symbol.name not in read
                                         and (s.value is None or _pure(s.value))))


def _pure(e: k.Expr) -> bool:
    """No loads or calls: dropping it changes nothing but the declaration."""
    return not any(isinstance(n, (k.Load, k.CCall, k.Call, k.MathCall)) for n in walk(e))


# ---------------------------------------------------------------- host-side evaluation


def evaluate(e: k.Expr, env: dict[str, object]) -> int:
    """The value of an index expression of parameters and host counters (loop bounds and
    NDRange sizes), with C's semantics for the operators it may contain."""
    match e:
        case k.Constant(value=v):
            return int(v)
        case k.Sym(symbol=s):
            return int(env[s.name])  # type: ignore[call-overload]
        case k.Op(op="neg", args=(a,)):
            return -evaluate(a, env)
        case k.Op(op="+" | "-" | "*" as op, args=(a, b)):
            x, y = evaluate(a, env), evaluate(b, env)
            return x + y if op == "+" else x - y if op == "-" else x * y
        case (k.MathCall(func="min" | "max" | "minimum" | "maximum" as f, args=args)
              | k.Op(op="min" | "max" | "minimum" | "maximum" as f, args=args)):
            vals = [evaluate(a, env) for a in args]
            return min(vals) if f in ("min", "minimum") else max(vals)
        case k.Convert(value=v) if np.issubdtype(e.dtype, np.integer):
            return evaluate(v, env)
    raise NotImplementedError(f"OpenCL: cannot evaluate {e!r} on the host")
