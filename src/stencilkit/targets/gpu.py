"""The GPU platform: the one launch planner of CUDA and OpenCL, over their hooks.

As pystencils 2's ``platforms/`` (a generic GPU platform, CUDA and HIP a few hooks over it):
``GpuPlatform.plan`` cuts a kernel function into a ``LaunchPlan`` (``ir.plan``) the same way
for every GPU language; a subclass supplies only what its language spells differently —
the thread index (``thread_index``), atomics (``atomic_update``), how a reduction's
thread-private copies are combined (``reduce``), math function names (``math_call``).

Requires: a ``KernelFunction`` as a lowering produced it, whose loops that may run
concurrently are marked ``parallel`` (a point kernel's by ``lower.parallel_nests``; a
computation's lowering marks its own and leaves FORWARD/BACKWARD K loops unmarked), whose
parallel loops have unit steps and bounds that depend only on parameters and on enclosing
serial loops' counters, and whose statements outside parallel loops declare nothing a
parallel loop reads except local arrays of constant size (a ParLoop's reduction buffers).

Ensures: a ``LaunchPlan``, an ordered list of steps, each a ``Launch`` (one device function
over up to three perfectly nested parallel loops, a thread per iteration, dimension 0 the
fastest thread index: the loop whose counter indexes the unit-stride axis of the dominant
buffer's stores when the caller names it, else the innermost) or a ``HostLoop`` (a serial
loop holding parallel loops: the host runs it and passes its counter to the launches
inside). Only loops marked parallel become grid dimensions: a loop nested alone in a
parallel one may carry a dependence (a FORWARD sweep's K loop). Statements outside any
parallel loop run as a launch of one thread; the conditions of enclosing branches are
repeated in each launch, and decided on the host where ``ir.host_eval`` can compute them.
Top-level local arrays become device scratch arrays (``LaunchPlan.scratch``). Every
expression of the plan is platform-lowered.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from .. import dtypes
from ..ir import kernel as k
from ..ir.core import Node, rewrite, walk
from ..ir.host_eval import host_computable
from ..ir.plan import (
    Dim,
    HostLoop,
    Launch,
    LaunchPlan,
    Partial,
    Scratch,
    SharedMemory,
    Step,
    plan_text,
)
from ..log import dump
from .base import status_constant
from .c import _TESTS, CPlatform, libm

MAX_DIMS = 3  # CUDA grids and OpenCL NDRanges have up to three dimensions


@dataclass(frozen=True)
class Reduced:
    """What a platform makes of a parallel loop's reductions (``GpuPlatform.reduce``):
    the thread's ``prologue`` (private copies at the identity), the ``body`` accumulating
    into them, the ``epilogue`` combining them; where the combination needs a second pass,
    the ``partials`` written per group and the body of a one-thread launch after this one
    that folds them (``combine``)."""

    prologue: tuple[k.Stmt, ...]
    body: tuple[k.Stmt, ...]
    epilogue: tuple[k.Stmt, ...]
    partials: tuple[Partial, ...] = ()
    combine: tuple[k.Stmt, ...] = ()


class GpuPlatform(CPlatform):
    """What is left abstract inside one thread's body, for a C-family GPU language, and
    the planner of launches. Parallel loops that did not become grid dimensions run
    serially in the thread; the error status is the thread's own variable (the printer
    stores it into the device status word); math functions are overloaded by type."""

    name = "gpu"
    streaming_stores = False  # a thread's stores have no row buffer to stream

    # ------------------------------------------------------------ the plan

    def plan(self, kf: k.KernelFunction, unit: tuple[str, int] | None = None,
             covering: bool = False, shared: SharedMemory | None = None) -> LaunchPlan:
        """The launch plan of a lowered kernel function (an entry, not an internal one).
        ``unit``: (buffer, axis), the unit-stride axis of the buffer that dominates the
        traffic (a point kernel's output): each launch puts on dimension 0 the dimension
        whose counter indexes that axis in the buffer's stores, so that neighbouring
        threads touch consecutive elements whatever the order. Without it (or where no
        store says), the innermost loop is dimension 0: the unit stride of C order.
        ``covering``: the caller launches grids that cover every dimension. ``shared``: the
        dynamic shared memory of the launches whose bodies use its array."""
        plan = dataclasses.replace(_Planner(self, kf, unit, shared).run(), covering=covering)
        dump("plan", f"{self.name} {kf.name}", plan_text(plan))
        return plan

    def lower_body(self, body: tuple[k.Stmt, ...], kf: k.KernelFunction) -> tuple[k.Stmt, ...]:
        return self.stmts(tuple(rewrite(s, self._expression) for s in body), kf)

    def lower_expr(self, e: k.Expr) -> k.Expr:
        return rewrite(e, self._expression)

    # ------------------------------------------------------------ platform hooks

    def thread_index(self, dim: int, ctype: str) -> tuple[str, str | None]:
        """(this thread's first index, the grid stride or None where the grid always
        covers the dimension) along dimension ``dim``, as the language writes it, in the
        counter's C type ``ctype``."""
        raise NotImplementedError

    def reduce(self, body: tuple[k.Stmt, ...], reductions: tuple[k.Reduction, ...],
               launch: str) -> Reduced:
        """``body`` (lowered) of launch ``launch`` accumulating into thread-private copies
        of the reductions' arrays, and their combination into the shared arrays."""
        raise NotImplementedError

    # ------------------------------------------------------------ shared hooks

    def parallel_loop(self, loop: k.Loop, kf: k.KernelFunction) -> tuple[k.Stmt, ...]:
        # a parallel loop inside a thread's body (e.g. a ParLoop kernel's): serial there
        return (dataclasses.replace(loop, parallel=None, vectorize=False),)

    def parallel_region(self, region: k.ParallelRegion) -> tuple[k.Stmt, ...]:
        return (k.Block(region.body, loc=region.loc),)

    def vector_loop(self, loop: k.Loop) -> tuple[k.Stmt, ...]:
        return (dataclasses.replace(loop, vectorize=False),)

    def set_error(self, code: int, kf: k.KernelFunction, s: k.SetError) -> tuple[k.Stmt, ...]:
        assert kf.status is not None, f"{kf.name} sets an error but has no status symbol"
        return (k.SetSym(kf.status, status_constant(code), loc=s.loc, source=s.source),)

    def math_call(self, call: k.MathCall) -> k.Expr:
        e = super().math_call(call)
        a = call.args[0].dtype
        if isinstance(e, k.CCall) and dtypes.is_float(a) and call.func not in _TESTS:
            # C's per-precision libm names (sqrtf) -> the overloaded names (sqrt of a float
            # is the float function): CUDA has both, OpenCL C only the overloaded ones
            func = "fabs" if call.func == "abs" else call.func
            if e.name == libm(func, a):
                e = dataclasses.replace(e, name={"gamma": "tgamma"}.get(func, func))
        return e


def identity(op: str, t: np.dtype) -> k.Constant:
    """The identity of reduction ``op`` ("+", "min", "max") on type ``t``."""
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


def privatized(body: tuple[k.Stmt, ...], renamed: dict[str, k.Buffer]) -> tuple[k.Stmt, ...]:
    """``body`` with its loads and stores of the buffers named in ``renamed`` redirected to
    their private copies."""
    def swap(node: Node) -> Node | None:
        if isinstance(node, (k.Load, k.Store)) and node.buffer.base.name in renamed:
            return dataclasses.replace(node, buffer=renamed[node.buffer.base.name])
        return None
    return tuple(rewrite(s, swap) for s in body)


def _unit(e: k.Expr) -> bool:
    return isinstance(e, k.Constant) and int(e.value) == 1


def _has_parallel(s: k.Stmt) -> bool:
    return any(isinstance(n, k.Loop) and n.parallel for n in walk(s))


def _empty(s: k.Stmt) -> bool:
    return isinstance(s, k.Section) and all(_empty(x) for x in s.body)


def _names(*nodes: Node) -> set[str]:
    return {n.symbol.name for x in nodes for n in walk(x) if isinstance(n, k.Sym)}


def _pure(e: k.Expr) -> bool:
    """No loads or calls: dropping it changes nothing but the declaration."""
    return not any(isinstance(n, (k.Load, k.CCall, k.Call, k.MathCall)) for n in walk(e))


def without_thresholds(body: tuple[k.Stmt, ...]) -> tuple[k.Stmt, ...]:
    """Parallel loops always launch on a GPU: drop their ``only_if`` thresholds (for CPU
    threads) and the top-level declarations only those read (``sk_work``), which would
    otherwise cost a launch of one thread per call."""
    def strip(node: Node) -> Node | None:
        if isinstance(node, k.Parallel) and node.only_if is not None:
            return dataclasses.replace(node, only_if=None)
        return None
    body = tuple(rewrite(s, strip) for s in body)
    out = []
    for i, s in enumerate(body):
        if isinstance(s, k.Declare) and not s.symbol.pointer \
                and (s.value is None or _pure(s.value)) \
                and s.symbol.name not in _names(*body[:i], *body[i + 1:]):
            continue
        out.append(s)
    return tuple(out)


class _Planner:
    def __init__(self, platform: GpuPlatform, kf: k.KernelFunction,
                 unit: tuple[str, int] | None, shared: SharedMemory | None = None) -> None:
        self.platform = platform
        self.kf = kf
        self.unit = unit
        self.shared = shared
        self.count = 0
        self.scratch: dict[str, Scratch] = {}
        self.partials: dict[str, k.Symbol] = {}  # partial buffers and group counts
        self.scalars = {p.name for p in kf.params if not p.pointer}

    def run(self) -> LaunchPlan:
        steps = tuple(self.split(without_thresholds(self.kf.body), (), ()))
        return LaunchPlan(self.kf, steps, tuple(self.scratch.values()))

    def name(self) -> str:
        self.count += 1
        return f"{self.kf.name}_{self.count}"

    def refuse(self, what: str) -> NotImplementedError:
        return NotImplementedError(f"{self.platform.name}: {what} ({self.kf.name})")

    def split(self, body: tuple[k.Stmt, ...], conds: tuple[k.Expr, ...],
              counters: tuple[k.Symbol, ...]) -> list[Step]:
        steps: list[Step] = []
        serial: list[k.Stmt] = []

        def flush() -> None:
            if serial:
                steps.extend(self.launch((), conds, tuple(serial), counters))
                serial.clear()

        lower = self.platform.lower_expr
        for s in body:
            if _empty(s):  # a section with nothing in it (1-D border rows) needs no launch
                continue
            if isinstance(s, k.DeclareArray) and not conds and isinstance(s.size, k.Constant):
                # shared by the launches after it: a device array, allocated per call
                sym = dataclasses.replace(s.buffer.base, pointer=True)
                self.scratch[sym.name] = Scratch(sym, int(s.size.value))
                continue
            if not _has_parallel(s):
                serial.append(s)
                continue
            flush()
            match s:
                case k.Section(body=inner) | k.Block(body=inner) | k.ParallelRegion(body=inner):
                    steps += self.split(inner, conds, counters)
                case k.Branch(cond=c, then=then, orelse=orelse):
                    steps += self.split(then, conds + (c,), counters)
                    if orelse:
                        neg = k.Op("!", (c,), dtype=dtypes.BOOL)
                        steps += self.split(orelse, conds + (neg,), counters)
                case k.Loop(parallel=par) if par:
                    steps += self.nest(s, conds, counters)
                case k.Loop(counter=ctr, start=a, stop=b, step=st, body=inner):
                    steps.append(HostLoop(ctr, lower(a), lower(b), lower(st),
                                          tuple(self.split(inner, conds, counters + (ctr,)))))
                case _:
                    raise self.refuse(f"a parallel loop inside {type(s).__name__}")
        flush()
        return steps

    def nest(self, loop: k.Loop, conds: tuple[k.Expr, ...],
             counters: tuple[k.Symbol, ...]) -> list[Launch]:
        """Up to three perfectly nested parallel loops with unit steps, internal counters
        and bounds that do not depend on each other become the grid; the rest is the
        thread's body. Only loops marked ``parallel`` join the grid: a loop nested alone in
        a parallel one may carry a dependence (a FORWARD sweep's K loop, one level reading
        the one below), and its iterations as threads would all read the values from before
        the launch."""
        loops = [loop]
        while len(loops) < MAX_DIMS:
            inner = loops[-1].body
            if not (len(inner) == 1 and isinstance(inner[0], k.Loop) and inner[0].parallel):
                break
            cand = inner[0]
            bound = {lp.counter.name for lp in loops}
            user = cand.counter.name.endswith("_")  # a loop the user wrote: keep it serial
            if user or _names(cand.start, cand.stop) & bound or not _unit(cand.step):
                break
            loops.append(cand)
        if not _unit(loops[0].step):
            raise self.refuse("a parallel loop with a non-unit step")
        dims = [Dim(lp.counter, lp.start, lp.stop) for lp in reversed(loops)]
        along = self.counter_along_unit(loops[-1].body, {d.counter.name for d in dims})
        dims.sort(key=lambda d: d.counter.name != along)  # stable: the rest keep their order
        reductions = loop.parallel.reductions if loop.parallel else ()
        return self.launch(tuple(dims), conds, loops[-1].body, counters, reductions)

    def counter_along_unit(self, body: tuple[k.Stmt, ...], counters: set[str]) -> str | None:
        """The grid counter that alone indexes the unit-stride axis in the first store into
        the ``unit`` buffer in ``body``; None when there is none."""
        if self.unit is None:
            return None
        buffer, axis = self.unit
        for s in body:
            for n in walk(s):
                if isinstance(n, k.Store) and n.buffer.base.name == buffer \
                        and axis < len(n.indices):
                    used = _names(n.indices[axis]) & counters
                    return used.pop() if len(used) == 1 else None
        return None

    def launch(self, dims: tuple[Dim, ...], conds: tuple[k.Expr, ...],
               body: tuple[k.Stmt, ...], counters: tuple[k.Symbol, ...],
               reductions: tuple[k.Reduction, ...] = ()) -> list[Launch]:
        """The launch of ``body`` over ``dims`` under ``conds`` and, where its reductions
        need one, the one-thread launch after it that combines the groups' partials."""
        p = self.platform
        name = self.name()
        body = p.lower_body(body, self.kf)
        red = p.reduce(body, reductions, name) if reductions else Reduced((), body, ())
        lowered = tuple(p.lower_expr(c) for c in conds)
        dims = tuple(Dim(d.counter, p.lower_expr(d.start), p.lower_expr(d.stop)) for d in dims)
        for part in red.partials:
            self.partials.update({part.buffer.name: part.buffer, part.groups.name: part.groups})
        used = _names(*red.prologue, *red.body, *red.epilogue, *lowered,
                      *(e for d in dims for e in (d.start, d.stop)))
        for r in (*red.prologue, *red.body, *red.epilogue):
            for n in walk(r):
                if isinstance(n, (k.Load, k.Store, k.Address)):
                    used.add(n.buffer.base.name)
                    used.update(e.symbol.name for e in n.buffer.strides if isinstance(e, k.Sym))
        params = tuple(q for q in self.kf.params if q.name in used)
        params += tuple(c for c in counters if c.name in used)
        params += tuple(s.symbol for s in self.scratch.values() if s.symbol.name in used)
        params += tuple(sym for n, sym in self.partials.items() if n in used)
        shared = self.shared if self.shared is not None \
            and self.shared.symbol.name in used else None
        if shared is not None:  # its size is evaluated on the host: its scalars are passed
            sized = _names(shared.per_thread)
            params += tuple(q for q in self.kf.params if q.name in sized and q not in params)
            shared = dataclasses.replace(shared, per_thread=p.lower_expr(shared.per_thread))
        host = self.scalars | {c.name for c in counters}
        on_host = bool(lowered) and all(host_computable(c, host) for c in lowered)
        out = [Launch(name, params, dims, lowered, red.body, red.prologue, red.epilogue,
                      on_host, red.partials, shared)]
        if red.combine:
            out += self.launch((), conds, red.combine, counters)
        return out

