"""The CUDA platform: a kernel function's parallel loops become grids of threads.

Requires: a ``KernelFunction`` as a lowering produced it, whose loops that may run
concurrently are marked ``parallel`` (a point kernel's by ``passes.parallel_nests``), whose
parallel loops have unit steps and bounds that depend only on parameters and on enclosing
serial loops' counters, and whose statements outside parallel loops declare nothing a
parallel loop reads except local arrays of constant size (a ParLoop's reduction buffers).

Ensures: a ``LaunchPlan``, an ordered list of steps, each a ``Launch`` (one ``__global__``
function over up to three perfectly nested parallel loops: a thread per iteration, the
innermost loop on ``threadIdx.x`` so that neighbouring threads touch neighbouring elements)
or a ``HostLoop`` (a serial loop holding parallel loops, e.g. the K levels of a "planes"
multistage: the host runs it and passes its counter to the launches inside, since the
threads of one launch cannot wait for each other). Statements outside any parallel loop run
as a launch of one thread; the conditions of enclosing branches are repeated inside each
launch. Local arrays declared outside parallel loops become device scratch arrays (``Plan.
scratch``) that the launcher allocates. A parallel loop's reductions are accumulated in
thread-private copies and combined into the shared array with atomics when the thread ends.
Inside a launch the error status is the thread's ``sk_error``, stored into the device status
word with ``atomicExch`` when non-zero.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from ... import dtypes
from ...ir import kernel as k
from ...ir.core import Node, rewrite, walk
from .base import status_constant
from .c import _TESTS, CPlatform, libm

MAX_DIMS = 3
#: thread-index expressions per grid dimension (dimension 0 is x, the fastest)
_AXES = ("x", "y", "z")
STATUS_POINTER = "sk_status"  # the device status word every launch takes last
#: the operators ``runtime.cuda.evaluate`` computes on the host (a launch's conditions made
#: of these, on scalar parameters, are decided before launching)
HOST_OPS = frozenset({"+", "-", "*", "min", "max", "<", "<=", ">", ">=", "==", "!=", "&&",
                      "||", "!", "neg"})


@dataclass(frozen=True)
class Dim:
    """One grid dimension: ``counter`` runs over [start, stop). ``start``/``stop`` are the
    lowering's expressions (the host evaluates them to size the grid)."""

    counter: k.Symbol
    start: k.Expr
    stop: k.Expr


@dataclass(frozen=True)
class Launch:
    """One ``__global__`` function: the body each thread runs under ``conditions``, for
    every point of ``dims`` (dimension 0 first, on x; empty: a single thread). ``params``:
    the kernel's parameters it uses, the host loops' counters, the scratch arrays."""

    name: str
    params: tuple[k.Symbol, ...]
    dims: tuple[Dim, ...]
    conditions: tuple[k.Expr, ...]
    body: tuple[k.Stmt, ...]
    #: what each thread runs once before its first and after its last iteration (a
    #: reduction's private copy: initialized, then combined with the warp's and the block's)
    prologue: tuple[k.Stmt, ...] = ()
    epilogue: tuple[k.Stmt, ...] = ()
    #: the conditions read scalar parameters and host loop counters only: the host evaluates
    #: them and does not launch when one is false (a point kernel's border fill under
    #: ``fill_border``: an ``out=`` call that fills nothing is one launch)
    host_conditions: bool = False


@dataclass(frozen=True)
class HostLoop:
    counter: k.Symbol
    start: k.Expr
    stop: k.Expr
    step: k.Expr
    body: tuple[Step, ...]


Step = Launch | HostLoop


@dataclass(frozen=True)
class Scratch:
    """A device array the launcher allocates per call (a top-level local array)."""

    symbol: k.Symbol
    size: int


@dataclass(frozen=True)
class LaunchPlan:
    kernel: k.KernelFunction
    steps: tuple[Step, ...]
    scratch: tuple[Scratch, ...] = ()
    #: every launch's grid covers its dimensions (the launcher checks it): a thread computes
    #: one point, under an ``if`` instead of grid-stride loops, whose counters, strides and
    #: bounds would otherwise stay live in registers (lap3d: 22 registers instead of 39)
    covering: bool = False

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


def _unit(e: k.Expr) -> bool:
    return isinstance(e, k.Constant) and int(e.value) == 1


def _has_parallel(s: k.Stmt) -> bool:
    return any(isinstance(n, k.Loop) and n.parallel for n in walk(s))


def _names(*nodes: Node) -> set[str]:
    return {n.symbol.name for x in nodes for n in walk(x) if isinstance(n, k.Sym)}


class CudaPlatform(CPlatform):
    """What is left abstract inside one thread's body, as CUDA C++. Parallel loops that did
    not become grid dimensions run serially in the thread; math functions are CUDA's
    overloaded device functions (``sqrt`` of a float is ``sqrtf``); on complex numbers
    (``codegen.cuda.COMPLEX``) only ``abs``, ``exp``, ``sqrt`` and the NaN/infinity tests
    (``COMPLEX_FUNCTIONS``: the backend refuses the others before lowering)."""

    name = "cuda"
    streaming_stores = False  # a work-item's stores have no row buffer to stream

    # ------------------------------------------------------------ the plan

    def plan(self, kf: k.KernelFunction, unit: tuple[str, int] | None = None,
             covering: bool = False) -> LaunchPlan:
        """The launch plan of a lowered kernel function (an entry, not an internal one).
        ``unit``: (buffer, axis), the unit-stride axis of the buffer that dominates the
        traffic (a point kernel's output): each launch puts on grid x the dimension whose
        counter indexes that axis in the buffer's stores, so that a warp's accesses are
        consecutive elements whatever the order. Without it (or where no store says), the
        innermost loop is on x: the unit stride of C order. ``covering``: the caller
        launches grids that cover every dimension (``LaunchPlan.covering``)."""
        return dataclasses.replace(_Splitter(self, kf, unit).run(), covering=covering)

    def lower_body(self, body: tuple[k.Stmt, ...], kf: k.KernelFunction) -> tuple[k.Stmt, ...]:
        return self.stmts(tuple(rewrite(s, self._expression) for s in body), kf)

    def lower_expr(self, e: k.Expr) -> k.Expr:
        return rewrite(e, self._expression)

    # ------------------------------------------------------------ hooks

    def parallel_loop(self, loop: k.Loop, kf: k.KernelFunction) -> tuple[k.Stmt, ...]:
        # a parallel loop inside a thread's body (e.g. a ParLoop kernel's): serial there
        return (dataclasses.replace(loop, parallel=None, vectorize=False),)

    def parallel_region(self, region: k.ParallelRegion) -> tuple[k.Stmt, ...]:
        return (k.Block(region.body, loc=region.loc),)

    def vector_loop(self, loop: k.Loop) -> tuple[k.Stmt, ...]:
        return (dataclasses.replace(loop, vectorize=False),)

    def atomic_update(self, s: k.AtomicUpdate) -> tuple[k.Stmt, ...]:
        if s.op is None:  # aligned stores of at most 8 bytes are indivisible on the GPU
            return (k.Store(s.buffer, s.indices, s.value, loc=s.loc, source=s.source),)
        call = atomic_call(s.op, k.Address(s.buffer, s.indices, dtype=s.buffer.element_type),
                           s.value)
        return (k.Evaluate(call, loc=s.loc, source=s.source),)

    def set_error(self, code: int, kf: k.KernelFunction, s: k.SetError) -> tuple[k.Stmt, ...]:
        assert kf.status is not None, f"{kf.name} sets an error but has no status symbol"
        return (k.SetSym(kf.status, status_constant(code), loc=s.loc, source=s.source),)

    def math_call(self, call: k.MathCall) -> k.Expr:
        a = call.args[0].dtype
        if dtypes.is_complex(a):
            if call.func in ("abs", "exp", "sqrt"):
                return k.CCall(f"sk_c{call.func}", call.args, dtype=call.dtype)
            if call.func in _TESTS:
                return k.Op(call.func, call.args, dtype=call.dtype)
            raise NotImplementedError(f"CUDA: no complex {call.func}")
        e = super().math_call(call)
        if isinstance(e, k.CCall) and dtypes.is_float(a) and call.func not in _TESTS:
            # libm's per-precision names exist in CUDA too; the overloaded names (sqrt of a
            # float is the float function) read better and pick the same implementation
            func = "fabs" if call.func == "abs" else call.func
            if e.name == libm(func, a):
                e = dataclasses.replace(e, name={"gamma": "tgamma"}.get(func, func))
        return e


CUDA_PLATFORM = CudaPlatform()
#: The math functions "cuda" computes on complex numbers (libdevice has no complex ones)
COMPLEX_FUNCTIONS = frozenset({"abs", "exp", "sqrt", *_TESTS})


def unsupported_complex_call(kf: k.KernelFunction) -> tuple[str, k.Stmt | None] | None:
    """(function, innermost statement holding it) of the first math call on a complex number
    that "cuda" does not compute (``COMPLEX_FUNCTIONS``), in a kernel function before
    platform lowering; None if there is none."""
    def refused(n: Node) -> str | None:
        if isinstance(n, k.MathCall) and n.func not in COMPLEX_FUNCTIONS and any(
                dtypes.is_complex(a.dtype) for a in n.args):
            return n.func
        if isinstance(n, k.Op) and n.op == "powi" and dtypes.is_complex(n.dtype):
            return "power"
        return None

    found = next((f for st in kf.body for n in walk(st) if (f := refused(n))), None)
    if found is None:
        return None
    holder: k.Stmt | None = None
    for st in kf.body:
        for n in walk(st):  # parents first: the last statement holding it is the innermost
            if isinstance(n, k.Stmt) and n.loc is not None and any(
                    refused(x) == found for x in walk(n)):
                holder = n
    return found, holder


# Atomic read-modify-write helpers of the prelude (codegen.cuda), by operator and type.
_ATOMIC_TYPES = {"float": "f32", "double": "f64", "int32_t": "int32", "uint32_t": "uint32",
                 "int64_t": "int64", "uint64_t": "uint64", "float _Complex": "c64",
                 "double _Complex": "c128"}


_WARP_OPS = {"+": "add", "min": "min", "max": "max"}


def atomic_call(op: str, address: k.Expr, value: k.Expr) -> k.CCall:
    t = address.dtype
    suffix = _ATOMIC_TYPES.get(dtypes.c_name(t))
    name = {"+": "add", "min": "min", "max": "max"}.get(op)
    if suffix is None or name is None:
        raise NotImplementedError(f"CUDA: no atomic {op!r} on {t}")
    return k.CCall(f"sk_atomic_{name}_{suffix}", (address, value), dtype=t)


def _identity(op: str, t: np.dtype) -> k.Constant:
    if op == "+":
        v: object = 0
    elif dtypes.is_float(t):
        v = np.inf if op == "min" else -np.inf
    else:
        info = np.iinfo(t)
        v = info.max if op == "min" else info.min
    return k.Constant(t.type(v), dtype=t)


class _Splitter:
    def __init__(self, platform: CudaPlatform, kf: k.KernelFunction,
                 unit: tuple[str, int] | None = None) -> None:
        self.platform = platform
        self.kf = kf
        self.unit = unit
        self.count = 0
        self.scratch: dict[str, Scratch] = {}
        self.ctx_names = {p.name for p in kf.params}

    def run(self) -> LaunchPlan:
        body = self.drop_unused(self.kf.body)
        steps = tuple(self.split(body, (), ()))
        return LaunchPlan(self.kf, steps, tuple(self.scratch.values()))

    def drop_unused(self, body: tuple[k.Stmt, ...]) -> tuple[k.Stmt, ...]:
        """The OpenMP thresholds (``only_if`` and the ``sk_work`` it reads) mean nothing on a
        GPU: drop them, and top-level declarations nothing else reads."""
        def strip(s: k.Stmt) -> k.Stmt:
            if isinstance(s, k.Loop):
                par = s.parallel
                if par is not None and par.only_if is not None:
                    par = dataclasses.replace(par, only_if=None)
                return dataclasses.replace(s, parallel=par, body=tuple(strip(x) for x in s.body))
            if isinstance(s, (k.Section, k.Block, k.ParallelRegion, k.WhileLoop)):
                return dataclasses.replace(s, body=tuple(strip(x) for x in s.body))
            if isinstance(s, k.Branch):
                return dataclasses.replace(s, then=tuple(strip(x) for x in s.then),
                                           orelse=tuple(strip(x) for x in s.orelse))
            return s
        body = tuple(strip(s) for s in body)
        out = []
        for i, s in enumerate(body):
            if isinstance(s, k.Declare) and not s.symbol.pointer:
                rest = body[:i] + body[i + 1:]
                if s.symbol.name not in _names(*rest):
                    continue
            out.append(s)
        return tuple(out)

    def name(self) -> str:
        self.count += 1
        return f"{self.kf.name}_{self.count}"

    def split(self, body: tuple[k.Stmt, ...], conds: tuple[k.Expr, ...],
              counters: tuple[k.Symbol, ...]) -> list[Step]:
        steps: list[Step] = []
        serial: list[k.Stmt] = []

        def flush() -> None:
            if serial:
                steps.append(self.launch((), conds, tuple(serial), counters, ()))
                serial.clear()

        for s in body:
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
                    steps.append(self.nest(s, conds, counters))
                case k.Loop(counter=ctr, start=a, stop=b, step=st, body=inner):
                    steps.append(HostLoop(ctr, a, b, st,
                                          tuple(self.split(inner, conds, counters + (ctr,)))))
                case _:
                    raise NotImplementedError(f"CUDA: a parallel loop inside "
                                              f"{type(s).__name__}")
        flush()
        return steps

    def nest(self, loop: k.Loop, conds: tuple[k.Expr, ...],
             counters: tuple[k.Symbol, ...]) -> Launch:
        """Up to three perfectly nested parallel loops with unit steps, internal counters
        and bounds that do not depend on each other become the grid; the rest is the
        thread's body. Only loops marked ``parallel`` join the grid: a loop nested alone in a
        parallel one may carry a dependence (a FORWARD sweep's K loop, one level reading the
        one below), and its iterations as threads would all read the values from before the
        launch."""
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
            raise NotImplementedError("CUDA: a parallel loop with a non-unit step")
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
               reductions: tuple[k.Reduction, ...]) -> Launch:
        p = self.platform
        body = p.lower_body(body, self.kf)
        pre: tuple[k.Stmt, ...] = ()
        post: tuple[k.Stmt, ...] = ()
        if reductions:
            pre, body, post = self.privatize(body, reductions, warp=bool(dims))
        lowered_conds = tuple(p.lower_expr(c) for c in conds)
        used: set[str] = set()
        roots: list[Node] = [*pre, *body, *post, *lowered_conds,
                               *(e for d in dims for e in (d.start, d.stop))]
        for r in roots:
            for n in walk(r):
                match n:
                    case k.Sym(symbol=s):
                        used.add(s.name)
                    case k.Load(buffer=b) | k.Store(buffer=b) | k.Address(buffer=b):
                        used.add(b.base.name)
                        used.update(e.symbol.name for e in (*b.strides, *b.shape)
                                    if isinstance(e, k.Sym))
        params = tuple(q for q in self.kf.params if q.name in used)
        params += tuple(c for c in counters if c.name in used)
        params += tuple(s.symbol for s in self.scratch.values() if s.symbol.name in used)
        scalars = {q.name for q in self.kf.params if not q.pointer} | {c.name for c in counters}
        on_host = bool(lowered_conds) and all(
            isinstance(n, (k.Sym, k.Constant, k.Op, k.Convert))
            and (not isinstance(n, k.Sym) or n.symbol.name in scalars)
            and (not isinstance(n, k.Op) or n.op in HOST_OPS)
            for c in lowered_conds for n in walk(c))
        return Launch(self.name(), params, dims, lowered_conds, body, pre, post, on_host)

    def privatize(self, body: tuple[k.Stmt, ...], reductions: tuple[k.Reduction, ...], *,
                  warp: bool) -> tuple[tuple[k.Stmt, ...], ...]:
        """(prologue, body, epilogue): each thread accumulates into a private copy
        (initialized to the identity) over all its iterations; then, where the block has
        whole warps (``warp``: a launch with grid dimensions), the warp combines its
        threads' copies by shuffles and its first lane alone adds the result to the shared
        array with an atomic (32 times fewer atomics on one address); otherwise every thread
        adds its own."""
        renamed: dict[str, k.Buffer] = {}
        pre: list[k.Stmt] = []
        post: list[k.Stmt] = []
        for r in reductions:
            b = r.buffer
            sym = dataclasses.replace(b.base, name=b.base.name + "_private")
            priv = dataclasses.replace(b, base=sym)
            renamed[b.base.name] = priv
            pre.append(k.DeclareArray(priv, k.Constant(np.int64(r.size), dtype=k.INDEX)))
            for q in range(r.size):
                idx = (k.Constant(np.int64(q), dtype=k.INDEX),)
                pre.append(k.Store(priv, idx, _identity(r.op, b.element_type)))
                value = k.Load(priv, idx, dtype=b.element_type)
                combine = k.Evaluate(atomic_call(
                    r.op, k.Address(b, idx, dtype=b.element_type), value))
                if not warp:
                    post.append(combine)
                    continue
                # every lane shuffles (all 32 must take part), only lane 0 stores
                post.append(k.Store(priv, idx, k.CCall(f"sk_warp_{_WARP_OPS[r.op]}", (value,),
                                                       dtype=b.element_type)))
                post.append(k.Branch(k.Op("==", (k.CCall("sk_lane", (), dtype=k.INDEX),
                                                 k.Constant(np.int64(0), dtype=k.INDEX)),
                                          dtype=dtypes.BOOL), (combine,)))

        def swap(node):
            if isinstance(node, k.Load) and node.buffer.base.name in renamed:
                return dataclasses.replace(node, buffer=renamed[node.buffer.base.name])
            if isinstance(node, k.Store) and node.buffer.base.name in renamed:
                return dataclasses.replace(node, buffer=renamed[node.buffer.base.name])
            return None
        body = tuple(rewrite(s, swap) for s in body)
        return tuple(pre), body, tuple(post)


def grid_index(dim: int, ctype: str = "int64_t") -> tuple[str, str]:
    """(first index of this thread, grid-stride) along grid dimension ``dim``, as CUDA C, of
    the counter's type ``ctype``. In 32 bits the products are the unsigned products of the
    built-ins, cast once: a 32-bit variant's grid covers fewer than 2**31 threads per axis."""
    a = _AXES[dim]
    if ctype != "int64_t":
        return (f"({ctype})(blockIdx.{a} * blockDim.{a} + threadIdx.{a})",
                f"({ctype})(gridDim.{a} * blockDim.{a})")
    return (f"(int64_t)blockIdx.{a} * blockDim.{a} + threadIdx.{a}",
            f"(int64_t)gridDim.{a} * blockDim.{a}")
