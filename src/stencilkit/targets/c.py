"""The C99 + OpenMP platform: pragmas for parallel loops, reductions and atomics, libm per
dtype, the status as a local ``int`` the function returns."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from .. import dtypes
from ..ir import kernel as k
from ..ir.core import Node, rewrite, walk
from .base import Platform, status_constant

_HELPER_MATH = ("min", "max", "minimum", "maximum", "abs", "sign")
_TESTS = ("isnan", "isinf", "isfinite")
# an explicit team size (codegen/c.py's prelude says why)
_TEAM = " num_threads(sk_team_size())"
# A parallel loop with a run-in-parallel-only-if condition gets a serial copy when its body
# has at most this many IR nodes (small kernels, whose calls are short); larger ones keep
# OpenMP's if clause rather than compile their body twice.
SERIAL_COPY_NODES = 2000


#: the width of a short vector: AVX2's, the natural width of the CPUs GCC tunes for (the
#: reference machine's ``short_vector_bytes``; the C backend passes its machine's)
SHORT_VECTOR_BYTES = 32
#: the widest vector (the reference machine's ``vector_bytes``: AVX-512's): a small call's
#: row loops run in whole vectors of this width where the row holds at least one
WHOLE_VECTOR_BYTES = 64


@dataclass(frozen=True)
class CKnobs:
    """What the C platform's output depends on beyond the kernel: the machine's short vector
    (``build.machine.MachineProfile.short_vector_bytes``) and the OpenMP team and schedule
    of the variant being built (``build.tuning.Variant``). The defaults are the reference
    machine's and OpenMP's: the whole team, ``schedule(static)``."""

    short_vector_bytes: int = SHORT_VECTOR_BYTES
    #: a small call's row loops in whole vectors of this many bytes, the last one moved
    #: back to end at the row's end (``SmallWorkCPlatform.vector_loop``); None: not so
    whole_vector_bytes: int | None = WHOLE_VECTOR_BYTES
    #: at most this many threads per parallel loop or region (None: the whole team)
    team_threads: int | None = None
    #: ``schedule(static, chunk)``: iterations dealt round-robin in chunks of this many
    #: (None: one contiguous block per thread)
    schedule_chunk: int | None = None


class CPlatform(Platform):
    name = "c"
    streaming_stores = True

    def __init__(self, knobs: CKnobs = CKnobs()) -> None:
        self.knobs = knobs

    # ------------------------------------------------------------ threads

    def stmt(self, s: k.Stmt, kf: k.KernelFunction) -> tuple[k.Stmt, ...]:
        par = s.parallel if isinstance(s, k.Loop) else None
        if not isinstance(s, k.Loop) or par is None or par.only_if is None or par.shared \
                or not par.serial_copy:
            return super().stmt(s, kf)
        # a serial copy, not OpenMP's if clause: libgomp still sets up a team of one for
        # that, about 0.5 us per loop, a third of a small stencil's call. The copy only runs
        # on small work, so its row loops get short vectors (SmallWorkCPlatform).
        plain = dataclasses.replace(s, parallel=None)
        serial = SmallWorkCPlatform(par.only_if, self.knobs).stmts((plain,), kf)
        if _nodes(serial) > SERIAL_COPY_NODES and _nodes(SmallWorkCPlatform(
                par.only_if, dataclasses.replace(self.knobs, whole_vector_bytes=None)
        ).stmts((plain,), kf)) > SERIAL_COPY_NODES:
            # the body's size as written (the whole-vector copies of its rows do not
            # count; lowered again only where they could matter)
            return super().stmt(s, kf)  # compiled once, with the if clause
        if len(serial) == 1 and isinstance(serial[0], k.Loop):
            loop, fence = _fence_hoisted(serial[0])
            serial = (loop, *fence)
        unconditional = dataclasses.replace(s, parallel=dataclasses.replace(par, only_if=None))
        return (k.Branch(par.only_if, super().stmt(unconditional, kf), serial),)

    def parallel_loop(self, loop: k.Loop, kf: k.KernelFunction) -> tuple[k.Stmt, ...]:
        par = loop.parallel
        assert par is not None
        parts: list[str | k.Expr] = ["omp for" if par.shared else "omp parallel for",
                                     self._collapse(par), f" schedule({self._schedule(par)})"]
        for r in par.reductions:
            parts += [f" reduction({r.op}: ", k.Sym(r.buffer.base, dtype=r.buffer.element_type),
                      f"[:{r.size}])"]
        if par.only_if is not None:
            parts += [" if(", par.only_if, ")"]
        plain = dataclasses.replace(loop, parallel=None, vectorize=False)
        if par.shared:
            return (k.Pragma(tuple(parts)), plain)
        team = self._team(has_reductions=bool(par.reductions))
        hoisted, fence = _fence_hoisted(plain)
        if not fence or par.reductions:
            return (k.Pragma((*parts, team)), plain)
        # Streaming stores need a fence before the loop's closing barrier, not after each
        # row: a fence waits for the row's streaming stores to reach memory, and the next
        # row's stores wait behind it (jacobi2d 4096^2, one thread: 3.6-4.4% of the call,
        # docs/performance.md). So the team's region holds the loop without its barrier
        # (nowait) and each thread fences once after its share, before the region's barrier.
        region: list[str | k.Expr] = ["omp parallel"]
        if par.only_if is not None:
            region += [" if(", par.only_if, ")"]
        return (k.Pragma((*region, team)), k.Block((
            k.Pragma((f"omp for{self._collapse(par)} schedule({self._schedule(par)}) nowait",)),
            hoisted, *fence),
            loc=loop.loc))

    def parallel_region(self, region: k.ParallelRegion) -> tuple[k.Stmt, ...]:
        # its loops are lowered already: a reduction is a clause of their pragmas
        reduces = any(isinstance(n, k.Pragma) and any(
            isinstance(p, str) and p.startswith(" reduction(") for p in n.parts)
            for st in region.body for n in walk(st))
        # OpenMP's if clause: a team of one runs the region's ``omp for`` loops whole
        region_if: tuple[str | k.Expr, ...] = () if region.only_if is None else (
            " if(", region.only_if, ")")
        return (k.Pragma(("omp parallel", *region_if, self._team(has_reductions=reduces))),
                k.Block(region.body, loc=region.loc))

    # The knobs never apply where they would change results: a reduction's partial sums
    # are combined per thread, so another team size, or another dealing of iterations,
    # would add them in another order. Elsewhere every iteration computes the same values
    # whichever thread runs it (bit-identical, tests/test_tuning_knobs.py).

    @staticmethod
    def _collapse(par: k.Parallel) -> str:
        return f" collapse({par.collapse})" if par.collapse > 1 else ""

    def _schedule(self, par: k.Parallel) -> str:
        chunk = self.knobs.schedule_chunk
        if chunk is None or par.reductions or par.schedule != "static":
            return par.schedule
        return f"static, {chunk}"

    def _team(self, *, has_reductions: bool) -> str:
        cap = self.knobs.team_threads
        if cap is None or has_reductions:
            return _TEAM
        # fewer threads, never more than the team (sk.set_num_threads, OMP_NUM_THREADS)
        return f" num_threads(sk_team_size() < {cap} ? sk_team_size() : {cap})"

    def vector_loop(self, loop: k.Loop) -> tuple[k.Stmt, ...]:
        # the arrays are restrict-qualified, but GCC still versions loops whose stores may
        # alias loads through computed indices; ivdep drops that check. clang ignores GCC's
        # pragma and loses restrict on the pointers an OpenMP region captures: without its
        # own assertion it vectorized no row of a computation (hdiff 2.3x slower than GCC's
        # code, docs/performance.md). Each compiler ignores the other's pragma.
        return (k.Pragma(("GCC ivdep",)), k.Pragma(("clang loop vectorize(assume_safety)",)),
                dataclasses.replace(loop, vectorize=False))

    def atomic_update(self, s: k.AtomicUpdate) -> tuple[k.Stmt, ...]:
        # the statement's source comment goes above the pragma, which must precede the store
        if s.op is None:
            return (k.Pragma(("omp atomic write",), loc=s.loc, source=s.source),
                    k.Store(s.buffer, s.indices, s.value))
        old = k.Load(s.buffer, s.indices, dtype=s.buffer.element_type)
        value = k.Op(s.op, (old, s.value), dtype=s.buffer.element_type)
        return (k.Pragma(("omp atomic",), loc=s.loc, source=s.source),
                k.Store(s.buffer, s.indices, value))

    # ------------------------------------------------------------ streaming stores

    def streamed_row(self, s: k.StreamedRow, kf: k.KernelFunction) -> tuple[k.Stmt, ...]:
        """When ``s.when`` holds: the row's whole 64-byte lines of the output in chunks,
        each computed by the unchanged loop into ``sk_row`` (L1-resident) and written by
        ``sk_stream_copy`` (non-temporal stores, as wide as the CPU has); the partial lines
        at both ends by the loop itself, with plain stores. Else the plain loop.
        Bit-identical either way: the values are the same, only the path of the store
        differs."""
        loop, out = s.loop, s.buffer
        t = out.element_type
        size = k.index_const(t.itemsize)

        def sym(symbol: k.Symbol) -> k.Sym:
            return k.Sym(symbol, dtype=k.INDEX)

        def address(first: k.Expr) -> k.Address:
            return k.Address(out, tuple(first if isinstance(i, k.Sym) and i.symbol ==
                                        loop.counter else i
                                        for i in _store_indices(loop, out)), dtype=t)

        def index_call(name: str, *args: k.Expr) -> k.CCall:
            return k.CCall(name, args, dtype=k.INDEX)

        lines_start, lines_stop = k.Symbol("sk_lines", k.INDEX), k.Symbol("sk_lines_end", k.INDEX)
        edge, lo, hi = (k.Symbol(n, k.INDEX) for n in ("sk_edge", "sk_lo", "sk_hi"))
        first_edge = k.Op("==", (sym(edge), k.index_const(0)),
                          dtype=dtypes.BOOL)
        # the partial lines before and after the whole ones: one loop, run twice
        edges = k.Loop(edge, k.index_const(0),
                       k.index_const(2),
                       k.index_const(1), (
            k.Declare(lo, k.Select(first_edge, loop.start, sym(lines_stop), dtype=k.INDEX)),
            k.Declare(hi, k.Select(first_edge, sym(lines_start), loop.stop, dtype=k.INDEX)),
            *self.stmt(dataclasses.replace(loop, start=sym(lo), stop=sym(hi)), kf)))

        start = k.Symbol("sk_chunk", k.INDEX)
        stop = k.Symbol("sk_chunk_end", k.INDEX)
        # on a line boundary, as the lines it is copied to: whole-line loads
        row = k.Buffer("sk_row", t, k.Symbol("sk_row", t, pointer=True,
                                             properties=frozenset({k.Alignment(64)})),
                       (k.index_const(s.chunk),),
                       (k.index_const(1),))
        counter = k.Sym(loop.counter, dtype=k.INDEX)

        def to_row(n: Node) -> Node | None:
            if isinstance(n, k.Store) and n.buffer == out:
                return k.Store(row, (k.Op("-", (counter, sym(start)), dtype=k.INDEX),), n.value)
            return None

        body = tuple(rewrite(st, to_row) for st in loop.body)
        chunk_loop = dataclasses.replace(loop, start=sym(start), stop=sym(stop), body=body)
        nbytes = k.Op("*", (k.Op("-", (sym(stop), sym(start)), dtype=k.INDEX), size),
                      dtype=k.INDEX)
        copy = k.Evaluate(k.CCall("sk_stream_copy", (
            address(sym(start)), k.Sym(row.base, dtype=t), nbytes), dtype=k.STATUS))
        chunk_end = index_call("sk_stream_chunk_end", sym(start), sym(lines_stop),
                               k.index_const(s.chunk))
        chunks = k.WhileLoop(k.Op("<", (sym(start), sym(lines_stop)), dtype=dtypes.BOOL), (
            k.Declare(stop, chunk_end), *self.stmt(chunk_loop, kf), copy,
            k.SetSym(start, sym(stop))))
        streamed = (
            k.Declare(lines_start, index_call("sk_stream_first", address(loop.start),
                                              loop.start, loop.stop, size)),
            k.Declare(lines_stop, index_call("sk_stream_last", sym(lines_start), loop.stop,
                                             size)),
            edges, k.DeclareArray(row, row.shape[0]), k.Declare(start, sym(lines_start)),
            chunks)
        return (k.Branch(s.when, streamed, self.stmt(loop, kf)),)

    def store_fence(self) -> tuple[k.Stmt, ...]:
        return (k.Evaluate(k.CCall("sk_store_fence", (), dtype=k.STATUS)),)

    # ------------------------------------------------------------ the error channel

    def set_error(self, code: int, kf: k.KernelFunction, s: k.SetError) -> tuple[k.Stmt, ...]:
        assert kf.status is not None, f"{kf.name} sets an error but has no status symbol"
        return (k.Pragma(("omp atomic write",), loc=s.loc, source=s.source),
                k.SetSym(kf.status, status_constant(code)))

    def error_prologue(self, kf: k.KernelFunction) -> tuple[k.Stmt, ...]:
        return () if kf.status is None else (k.Declare(kf.status, status_constant(0)),)

    def error_epilogue(self, kf: k.KernelFunction) -> tuple[k.Stmt, ...]:
        if kf.status is None:
            return ()
        return (k.Return(k.Sym(kf.status, dtype=kf.status.dtype)),)

    # ------------------------------------------------------------ math

    def math_call(self, call: k.MathCall) -> k.Expr:
        func, args, a = call.func, call.args, call.args[0].dtype
        if func in _HELPER_MATH:
            if func == "abs" and dtypes.is_float(a):
                return k.CCall(libm("fabs", a), args, dtype=call.dtype)
            if func == "abs" and dtypes.is_complex(a):
                name = "cabsf" if a == dtypes.COMPLEX64 else "cabs"
                return k.CCall(name, args, dtype=call.dtype)
            return k.Op(func, args, dtype=call.dtype)  # a runtime helper (sk_min_f64, ...)
        if func in _TESTS:
            if dtypes.is_intlike(a):
                return k.Constant(np.bool_(func == "isfinite"), dtype=dtypes.BOOL)
            if dtypes.is_complex(a):
                return k.Op(func, args, dtype=call.dtype)
            # the C macros return a non-zero int, not necessarily 1
            test = k.CCall(func, args, dtype=k.STATUS)
            return k.Op("!=", (test, status_constant(0)), dtype=dtypes.BOOL)
        return k.CCall(libm(func, a), args, dtype=call.dtype)


class SmallWorkCPlatform(CPlatform):
    """C for the serial copy of a parallel loop (the work is below its ``only_if``
    threshold): row loops that may run as ``omp simd`` get 256-bit vectors.

    Why: GCC 12 vectorizes for AVX-512 with 512-bit vectors on some CPUs (it tunes Zen 4 as
    Zen 3). A short row then runs one full vector iteration and leaves the rest to scalar
    and half-width epilogues: a 16^3 Laplacian ran 1.18x faster with 256-bit vectors, while
    the large, parallel loops are faster with 512-bit ones (docs/performance.md).

    ``below``: the serial copy runs where this condition does not hold. A streamed row whose
    condition implies it never streams here and is compiled as the plain loop only."""

    def __init__(self, below: k.Expr, knobs: CKnobs = CKnobs()) -> None:
        super().__init__(knobs)
        self.below = below

    def streamed_row(self, s: k.StreamedRow, kf: k.KernelFunction) -> tuple[k.Stmt, ...]:
        if _implies(s.when, self.below):
            return self.stmt(s.loop, kf)
        return super().streamed_row(s, kf)

    def vector_loop(self, loop: k.Loop) -> tuple[k.Stmt, ...]:
        lanes = short_vector_lanes(loop, self.knobs.short_vector_bytes)
        if lanes is None:
            return super().vector_loop(loop)
        short = (k.Pragma((f"omp simd simdlen({lanes})",)),
                 dataclasses.replace(loop, vectorize=False))
        whole = self.knobs.whole_vector_bytes
        if whole is None or not reruns_alike(loop):
            return short
        return (whole_vectors(loop, short_vector_lanes(loop, whole) or 1, short),)


def whole_vectors(loop: k.Loop, lanes: int, short: tuple[k.Stmt, ...]) -> k.Branch:
    """``loop`` (a row loop that ``reruns_alike``) as whole vectors of ``lanes`` iterations
    where the row has at least that many, the last vector moved back to end at the row's
    end: it runs again up to ``lanes - 1`` iterations the one before ran, storing the same
    values. Elsewhere ``short``, the loop as it was.

    Why: a short row (14 elements of a 16^3 Laplacian) ran one full vector and then scalar
    or half-width epilogues, much of the call; with whole vectors small Laplacian calls ran
    1.03-1.24x faster at most sizes from 6^3 to 31^3 (docs/performance.md, "Short rows in
    whole vectors")."""
    index = k.INDEX
    const = k.index_const

    def op(o: str, a: k.Expr, b: k.Expr) -> k.Op:
        return k.Op(o, (a, b), dtype=dtypes.BOOL if o in ("<=", ">=") else index)

    vec, first, lane = (k.Symbol(name, index) for name in ("sk_vec", "sk_first", "sk_lane"))
    at_vec, at_first = k.Sym(vec, dtype=index), k.Sym(first, dtype=index)
    # the vector at sk_vec, or the one ending at the row's end where that would pass it
    start = k.Select(op("<=", op("+", at_vec, const(lanes)), loop.stop), at_vec,
                     op("-", loop.stop, const(lanes)), dtype=index)
    # counted from 0 to a constant: under -fwrapv, "i < sk_first + 8" is no trip count GCC
    # may assume, and it added half-width and scalar epilogues to every vector
    one_vector = k.Loop(lane, const(0), const(lanes), const(1), (
        k.Declare(loop.counter, op("+", at_first, k.Sym(lane, dtype=index))), *loop.body))
    vectors = k.Loop(vec, loop.start, loop.stop, const(lanes), (
        k.Declare(first, start),
        k.Pragma((f"omp simd simdlen({lanes})",)), one_vector))
    # the row holds a whole vector: stop - start >= lanes, folded where start is a constant
    if isinstance(loop.start, k.Constant):
        fits = op(">=", loop.stop, const(int(loop.start.value) + lanes))
    else:
        fits = op(">=", op("-", loop.stop, loop.start), const(lanes))
    return k.Branch(fits, (vectors,), short)


def reruns_alike(loop: k.Loop) -> bool:
    """Whether running any of ``loop``'s iterations again after later ones stores the same
    values (``whole_vectors`` does): it computes from loads (a fill loop is left to the
    compiler), reads no buffer it stores to, and each store's index varies with the
    counter, so every iteration writes its own elements from inputs the loop never
    changes. The body is already known to hold no call, atomic or error channel
    (``short_vector_lanes``)."""
    loaded: set[k.Buffer] = set()
    stored: set[k.Buffer] = set()
    for st in loop.body:
        for n in walk(st):
            if isinstance(n, k.Load):
                loaded.add(n.buffer)
            elif isinstance(n, k.Store):
                stored.add(n.buffer)
                if not any(isinstance(m, k.Sym) and m.symbol == loop.counter
                           for i in n.indices for m in walk(i)):
                    return False
    return bool(loaded) and not loaded & stored


# statements an omp simd row loop may contain: no OpenMP construct (a Pragma: atomics, the
# error channel), no nested loop, no call statement, no local array
_SIMD_STATEMENTS = (k.Declare, k.SetSym, k.Store, k.Branch, k.Block)


def _nodes(stmts: tuple[k.Stmt, ...]) -> int:
    return sum(1 for st in stmts for _ in walk(st))


def _is_fence(st: k.Stmt) -> bool:
    return isinstance(st, k.Evaluate) and isinstance(st.value, k.CCall) and \
        st.value.name == "sk_store_fence"


def _fence_hoisted(loop: k.Loop) -> tuple[k.Loop, tuple[k.Stmt, ...]]:
    """``loop`` without the store fence that ends its body, and that fence (to run once
    after the loop: the same thread's stores need no fence between iterations, only
    before another thread may read them); ``loop`` and () where its body ends otherwise."""
    if not loop.body or not _is_fence(loop.body[-1]):
        return loop, ()
    return dataclasses.replace(loop, body=loop.body[:-1]), (loop.body[-1],)


def short_vector_lanes(loop: k.Loop, vector_bytes: int = SHORT_VECTOR_BYTES) -> int | None:
    """``simdlen`` for ``loop`` (an already lowered vectorizable loop) with ``vector_bytes``
    vectors, or None where ``omp simd`` could change its meaning.

    ``omp simd`` asserts what ``GCC ivdep`` asserts about memory, and more about scalars:
    a scalar assigned in the loop but declared outside it would be a reduction, which needs
    a clause. So every assigned scalar must be declared in the body. Complex numbers keep
    ``ivdep`` (a complex128 is half a short vector)."""
    if not (isinstance(loop.step, k.Constant) and int(loop.step.value) == 1):
        return None
    declared: set[k.Symbol] = set()
    widest = 0
    for st in loop.body:
        for n in walk(st):
            if isinstance(n, k.Stmt) and not isinstance(n, _SIMD_STATEMENTS):
                return None
            if isinstance(n, k.Call):
                return None
            if isinstance(n, k.Declare):
                declared.add(n.symbol)
            elif isinstance(n, k.SetSym) and n.symbol not in declared:
                return None
            t = n.dtype if isinstance(n, k.Load) else \
                n.buffer.element_type if isinstance(n, k.Store) else None
            if t is not None:
                if dtypes.is_complex(t):
                    return None
                widest = max(widest, t.itemsize)
    if widest == 0:
        return None
    return max(1, vector_bytes // widest)


def _implies(a: k.Expr, b: k.Expr) -> bool:
    """Whether ``a`` implies ``b`` where both are ``x >= constant`` of one symbol (the work
    thresholds of point kernels); False where that cannot be told."""
    ta, tb = _threshold(a), _threshold(b)
    return ta is not None and tb is not None and ta[0] == tb[0] and ta[1] >= tb[1]


def _threshold(e: k.Expr) -> tuple[k.Symbol, int] | None:
    if isinstance(e, k.Op) and e.op == ">=" and isinstance(e.args[0], k.Sym) and \
            isinstance(e.args[1], k.Constant):
        return e.args[0].symbol, int(e.args[1].value)
    return None


def _store_indices(loop: k.Loop, out: k.Buffer) -> tuple[k.Expr, ...]:
    """The indices of the (one) store to ``out`` in ``loop``'s body."""
    for st in loop.body:
        for n in walk(st):
            if isinstance(n, k.Store) and n.buffer == out:
                return n.indices
    raise AssertionError(f"a streamed row without a store to {out.name}")


def libm(func: str, t: np.dtype) -> str:
    """The C function computing ``func`` on ``t``: ``sqrt``, ``sqrtf``, ``csqrt``, ..."""
    name = {"gamma": "tgamma"}.get(func, func)  # C's gamma() is lgamma on glibc
    if t == dtypes.FLOAT32:
        return name + "f"
    if t == dtypes.COMPLEX64:
        return "c" + name + "f"
    if t == dtypes.COMPLEX128:
        return "c" + name
    return name


C_PLATFORM = CPlatform()
