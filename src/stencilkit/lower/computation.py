"""Lower a scheduled computation to kernel IR: column groups, register and column
temporaries, stage nests, K sweeps, and the loop order chosen by the fields' layout.

Requires: a ``ComputationDef`` with its ``Schedule`` (stages, extents, multistage modes) and
the layout (which axis of each field has unit stride; the loop over that axis is innermost
so that it vectorizes). Ensures: a ``KernelFunction`` whose parameters are the free symbols
of its body (fields, temporaries held in memory, origins, scalars, the domain), and per
multistage:

- PARALLEL: per interval and stage, one loop nest over the stage's extended region, the
  outermost loop parallel;
- FORWARD/BACKWARD "columns": parallel over the outer horizontal axis, K sequential, every
  stage of the multistage fused into one body; temporaries read only at zero offset inside
  the multistage are registers (locals), not arrays; temporaries read only in the column
  are per-thread buffers, level-major so that the innermost horizontal loop vectorizes over
  them: with K contiguous, blocks of columns are jammed under the K loop and the buffers
  hold one block's columns; otherwise (K outermost, a horizontal axis contiguous) they hold
  the row of columns that one iteration of the parallel loop sweeps; with
  ``stage_columns``, the fields the group touches only in their own column are copied into
  such buffers too (and the written ones back) around each block's sweeps;
- "planes": one ``ParallelRegion``; for each K level in order and each stage, a loop over
  the plane shared among the region's threads (its implicit barrier orders the stages).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .. import dtypes
from ..analysis.schedule import (
    IntervalSchedule,
    MultiStage,
    Schedule,
    Stage,
    data_index,
    offsets,
    reads,
    variable_k,
    variable_k_reads,
    writes,
)
from ..frontend.source import SourceFunction
from ..ir import computation as c
from ..ir import definition as d
from ..ir import kernel as k
from ..ir.core import walk
from .point import PARALLEL_MIN_WORK, PointLowering, free_parameters, function_name

AXES = "IJK"
#: columns interleaved per K sweep when K is the contiguous axis (the default; the C
#: backend's tuner measures others: build/tuning.py's ``column_block``)
COLUMN_BLOCK = 8


def _op(op: str, a: k.Expr, b: k.Expr, t=k.INDEX) -> k.Expr:
    if isinstance(b, k.Constant) and op in "+-":
        v = int(b.value)
        if v == 0:
            return a
        if v < 0:
            return k.Op("-" if op == "+" else "+", (a, k.index_const(-v)), dtype=t)
    return k.Op(op, (a, b), dtype=t)


def _uses(sched: Schedule, t: str) -> list[tuple[int, int, tuple[int, int, int] | None]]:
    """Where ``t`` is touched: (multistage, stage, read offset) per read, offset None per
    write."""
    out = []
    for m_i, ms in enumerate(sched.multistages):
        for isched in ms.intervals:
            for s_i, stage in enumerate(isched.stages):
                for unit in stage.units:
                    for w in walk(unit):  # a write at a K offset counts as a use at that offset
                        if isinstance(w, d.Assign) and w.target == t:
                            dk = c.write_offset(w)
                            out.append((m_i, s_i, (0, 0, dk) if dk else None))
                    out += [(m_i, s_i, offsets(acc)) for acc in reads(unit) if acc.field == t]
    return out


def register_temporaries(defn: c.ComputationDef, sched: Schedule) -> frozenset[str]:
    """Temporaries that can live in registers: written and read in one columns-mode
    multistage (or one PARALLEL stage), every read at offset (0, 0, 0)."""
    out = set()
    varying = {a.field for a in variable_k_reads(defn)}  # need every level in memory
    for t, _ in defn.temporaries:
        if t in varying:
            continue
        uses = _uses(sched, t)
        homes = {(m_i, s_i if sched.multistages[m_i].mode == "parallel" else -1)
                 for m_i, s_i, _ in uses}
        zero_only = all(off in (None, (0, 0, 0)) for _, _, off in uses)
        if zero_only and len(homes) == 1:
            (m_i, _), = homes
            if sched.multistages[m_i].mode in ("columns", "parallel"):
                out.add(t)
    return frozenset(out)


def column_groups(sched: Schedule) -> list[list[tuple[int, MultiStage]]]:
    """Consecutive column-mode multistages that can share one loop over columns: none reads
    with a horizontal offset what another one writes."""
    groups: list[list[tuple[int, MultiStage]]] = []
    for m_i, ms in enumerate(sched.multistages):
        prev = groups[-1] if groups else None
        if ms.mode == "columns" and prev and prev[-1][1].mode == "columns" and all(
                _no_offset_crossing(a, ms) for _, a in prev):
            prev.append((m_i, ms))
        else:
            groups.append([(m_i, ms)])
    return groups


def _no_offset_crossing(a: MultiStage, b: MultiStage) -> bool:
    for x, y in ((a, b), (b, a)):
        for isched in y.intervals:
            for st in isched.stages:
                for unit in st.units:
                    for acc in reads(unit):
                        if acc.field in x.written and offsets(acc)[:2] != (0, 0):
                            return False
    return True


def column_temporaries(defn: c.ComputationDef, sched: Schedule,
                       registers: frozenset[str]) -> dict[str, tuple[int, int]]:
    """Temporaries that can live in a per-thread buffer of the columns being swept, with the
    K levels they need below and above the level being computed: written and read in one
    group of columns-mode multistages, every read at horizontal offset 0. (On K-outermost
    layouts a full 3-D temporary would be written and read back through memory: twice the
    traffic of the fields themselves for a tridiagonal solve's cp and dp.)"""
    group_of = {m_i: g_i for g_i, g in enumerate(column_groups(sched)) for m_i, _ in g}
    out = {}
    varying = {a.field for a in variable_k_reads(defn)}  # need every level in memory
    for t, _ in defn.temporaries:
        if t in registers or t in varying:
            continue
        uses = _uses(sched, t)
        homes = {m_i for m_i, _, _ in uses}
        reads_ = [off for _, _, off in uses if off is not None]
        ks = [0] + [off[2] for off in reads_]
        if homes and all(off[:2] == (0, 0) for off in reads_) \
                and len({group_of[m] for m in homes}) == 1 \
                and all(sched.multistages[m].mode == "columns" for m in homes):
            out[t] = (max(0, -min(ks)), max(0, max(ks)))
    return out


def _chained(intervals: list[c.IntervalBlock]) -> bool:
    """Whether the intervals, in K order, cover [0, nk) one after the other for every nk: each
    starts where the one before ends (the clamping to [0, nk) keeps such a chain a cover)."""
    ivs = sorted(intervals, key=lambda iv: (iv.start.from_end, iv.start.offset))
    return bool(ivs) and ivs[0].start == c.AxisBound(0, False) \
        and ivs[-1].end == c.AxisBound(0, True) \
        and all(a.end == b.start for a, b in zip(ivs, ivs[1:]))


def written_before_read(f: str, group: list[tuple[int, MultiStage]]) -> bool:
    """Whether the group sets every level of ``f`` in [0, nk) before it reads any: then a
    column buffer of ``f`` needs no copy of the field's old values. True when the first
    multistage of the group that touches ``f`` is a sweep whose intervals cover [0, nk) one
    after the other; in each interval the first statement that mentions ``f`` assigns it
    unconditionally at the level itself; and its reads are at the level after that
    assignment, or at levels the sweep has already passed that lie inside [0, nk)."""
    for _, ms in group:
        mentions = [u for isched in ms.intervals for st in isched.stages for u in st.units
                    if f in writes(u) or any(a.field == f for a in reads(u))]
        if not mentions:
            continue
        if ms.policy not in ("FORWARD", "BACKWARD") or \
                not _chained([isched.interval for isched in ms.intervals]):
            return False
        step = 1 if ms.policy == "FORWARD" else -1
        for isched in ms.intervals:
            start, end = isched.interval.start, isched.interval.end
            assigned = False
            for st in isched.stages:
                for u in st.units:
                    for acc in reads(u):
                        if acc.field != f:
                            continue
                        dk = offsets(acc)[2]
                        if not assigned and dk == 0 or dk * step > 0:
                            return False  # the old value, or a level not swept yet
                        if dk > 0 and not (end.from_end and end.offset + dk <= 0):
                            return False  # above the top level
                        if dk < 0 and not (not start.from_end and start.offset + dk >= 0):
                            return False  # below the bottom level
                    if f in writes(u):
                        if not (type(u) is d.Assign and u.target == f) and not assigned:
                            return False  # a conditional or offset write comes first
                        assigned = True
            if not assigned:
                return False
        return True
    return False


class ComputationLowering(PointLowering):
    """Reuses the point-kernel expression lowering; accesses become origin-relative loads."""

    def __init__(self, defn: c.ComputationDef, sched: Schedule, layout: dict[str, int | None],
                 src: SourceFunction, *, stage_columns: bool = False,
                 column_block: int = COLUMN_BLOCK, levels_outermost: bool = False) -> None:
        dummy = d.PointKernel(defn.name, (), (), ndim=3, return_type=dtypes.FLOAT64)
        super().__init__(dummy, ((0, 0),) * 3, None, src.line_text,  # type: ignore[arg-type]
                         src.filename.rsplit("/", 1)[-1])
        self.defn = defn
        self.sched = sched
        self.column_block = column_block
        self.levels_outermost = levels_outermost
        self.unit_axes = layout  # per field: its unit-stride axis (None: none)
        self.registers = register_temporaries(defn, sched)
        self.columns = column_temporaries(defn, sched, self.registers)
        self.column_buffers: dict[str, k.Buffer] = {}
        # Fields copied into column buffers around each block (stage_columns): the symbol
        # holding the lowest level the buffer keeps
        self.stage_columns = stage_columns
        self.staged: dict[str, k.Symbol] = {}
        self.jam_start: k.Expr | None = None  # first column of the jammed block
        self.axes: dict[str, str] = {f.name: f.axes for f in defn.fields}
        self.data_dims = {f.name: f.data_dims for f in defn.fields if f.data_dims}
        self.origins: dict[str, list[k.Symbol]] = {}
        for t, _ in defn.temporaries:
            self.axes[t] = "IJK"
        for name, dtype in [(f.name, f.dtype) for f in defn.fields] + list(defn.temporaries):
            if name in self.registers:
                self.locals[name] = self.ctx.user_symbol(name, dtype)
                continue
            if name in self.columns:
                continue
            ax = self.axes[name]
            ndim = len(ax) + len(self.data_dims.get(name, ()))
            temporary = frozenset({k.Temporary()}) if name in dict(defn.temporaries) \
                else frozenset()
            self.buffers[name] = self.ctx.buffer(name, dtype, ndim, unit_stride_last=False,
                                                 restrict=True, read_only=False,
                                                 unit_dim=layout.get(name), marks=temporary)
            self.origins[name] = [self.ctx.user_symbol(
                f"{name}_origin_{a}", k.INDEX,
                properties=frozenset({k.ScalarArgument(origin_key(name, a))})) for a in ax]
        for s in defn.scalars:
            self.scalars[s.name] = self.ctx.user_symbol(
                s.name, s.dtype, properties=frozenset({k.ScalarArgument(s.name)}))
        self.domain = [self.ctx.symbol(f"n{a.lower()}", k.INDEX,
                                       properties=frozenset({k.ScalarArgument(domain_key(a))}))
                       for a in AXES]
        self.counters = [self.ctx.symbol(a.lower(), k.INDEX) for a in AXES]

    # -------------------------------------------------------------- accesses

    def expr(self, e: d.Expr) -> k.Expr:
        if isinstance(e, d.Access):
            if e.field in self.registers:
                return k.ref(self.locals[e.field])
            index = self.index(e.field, offsets(e))
            dk = variable_k(e)
            if dk is not None:  # f[0, 0, lev]: checked against the field's levels
                kd = self.axes[e.field].index("K")
                buf = self.buffer(e.field)
                self.uses_error_flag = True  # the check reports through the status
                level = k.Op("checked_offset", (
                    _op("+", index[kd], self.expr(dk)), k.index_const(0),
                    _op("-", buf.shape[kd], k.index_const(1))), dtype=k.INDEX)
                index = (*index[:kd], level, *index[kd + 1:])
            index += tuple(k.index_const(n) for n in data_index(e))  # an element of a vector field
            assert e.dtype is not None, f"untyped expression {e!r} after the typing pass"
            return k.Load(self.buffer(e.field), index, dtype=e.dtype)
        if isinstance(e, c.InRegion):
            return self.in_region(e)
        return super().expr(e)

    def in_region(self, r: c.InRegion) -> k.Expr:
        """``start <= i < end && ...`` for the bounds a horizontal region has."""
        conds: list[k.Expr] = []
        for axis, bounds in ((0, r.i), (1, r.j)):
            counter = k.ref(self.counters[axis])
            for op, b in zip((">=", "<"), bounds):
                if b is not None:
                    pos = _op("+", k.ref(self.domain[axis]), k.index_const(b.offset)) if b.from_end \
                        else k.index_const(b.offset)
                    conds.append(k.Op(op, (counter, pos), dtype=dtypes.BOOL))
        cond: k.Expr = k.Constant(np.bool_(True), dtype=dtypes.BOOL)
        for i, x in enumerate(conds):
            cond = x if i == 0 else k.Op("&&", (cond, x), dtype=dtypes.BOOL)
        return cond

    def buffer(self, name: str) -> k.Buffer:
        return self.column_buffers.get(name) or self.buffers[name]

    def index(self, name: str, off: tuple[int, int, int]) -> tuple[k.Expr, ...]:
        if name in self.staged:  # (column within the jammed block, level - lowest level)
            assert self.jam_start is not None
            inner = self.inner_axis()
            return (_op("-", k.ref(self.counters[inner]), self.jam_start),
                    _op("-", _op("+", k.ref(self.counters[2]), k.index_const(off[2])),
                        k.ref(self.staged[name])))
        return self.field_index(name, off)

    def field_index(self, name: str, off: tuple[int, int, int]) -> tuple[k.Expr, ...]:
        if name in self.columns:  # (column within the block or row, level)
            assert self.jam_start is not None
            jb = self.jam_start
            inner = self.inner_axis()
            below = self.columns[name][0]
            return (_op("-", k.ref(self.counters[inner]), jb),
                    _op("+", k.ref(self.counters[2]), k.index_const(below + off[2])))
        idx = []
        for a, o in zip(self.axes[name], self.origins[name]):
            ai = AXES.index(a)
            idx.append(_op("+", _op("+", k.ref(o), k.ref(self.counters[ai])), k.index_const(off[ai])))
        return tuple(idx)

    def stmts(self, body: tuple[d.Stmt, ...]) -> tuple[k.Stmt, ...]:
        out: list[k.Stmt] = []
        for s in body:
            if isinstance(s, d.Assign):
                src = self.comment(s)
                value = self.expr(s.value)
                if s.target in self.registers:
                    out.append(k.SetSym(self.locals[s.target], value, loc=s.loc, source=src))
                else:
                    index = self.index(s.target, (0, 0, c.write_offset(s)))
                    index += tuple(k.index_const(n) for n in getattr(s, "data_index", ()))
                    out.append(k.Store(self.buffer(s.target), index, value, loc=s.loc,
                                       source=src))
            else:
                out.extend(super().stmts((s,)))
        return tuple(out)

    # -------------------------------------------------------------- loops

    def loop_order(self) -> list[int]:
        """Axes from outermost to innermost: the unit-stride axis of the first 3-D field
        innermost, I before J otherwise."""
        first = next((f.name for f in self.defn.fields if f.axes == "IJK" and not f.data_dims),
                     None)
        unit = self.unit_axes.get(first) if first else None
        if unit is None:
            unit = 2
        return [a for a in (0, 1, 2) if a != unit] + [unit]

    def nest_order(self) -> list[int]:
        """A PARALLEL stage's loops, outermost first: ``loop_order``, except that with
        ``levels_outermost`` and a horizontal unit-stride axis (storages and Fortran order
        keep K outermost in memory) the K levels come first. Then each thread's share of
        the (K, outer horizontal) iterations sweeps rows of one level, and the rows a
        stencil reads around a row stay in L1; with K in the middle a thread sweeps every
        level for each outer row, and the neighbouring rows of all 80 levels of hdiff
        256x256x80 (800 KB) fall out of a 1 MB L2 (docs/performance.md)."""
        order = self.loop_order()
        if self.levels_outermost and order[-1] != 2:
            return [2] + [a for a in order if a != 2]
        return order

    def full_k_bounds(self) -> tuple[k.Expr, k.Expr]:
        """The bounds of a loop over every level of the domain (``interval(...)``)."""
        return self.k_bounds(c.IntervalBlock(c.AxisBound(0, False), c.AxisBound(0, True), ()))

    def inner_axis(self) -> int:
        """The innermost horizontal axis: the loop that column buffers are indexed by."""
        return [a for a in self.loop_order() if a != 2][-1]

    def k_bounds(self, iv: c.IntervalBlock) -> tuple[k.Expr, k.Expr]:
        nk = k.ref(self.domain[2])

        def bound(b: c.AxisBound) -> k.Expr:
            e = _op("+", nk, k.index_const(b.offset)) if b.from_end else k.index_const(b.offset)
            return k.MathCall("max", (k.index_const(0), k.MathCall("min", (nk, e), dtype=k.INDEX)),
                              dtype=k.INDEX)
        return bound(iv.start), bound(iv.end)

    def horizontal_range(self, axis: int, ext: c.Extent) -> tuple[k.Expr, k.Expr]:
        lo, hi = (ext[0], ext[1]) if axis == 0 else (ext[2], ext[3])
        return k.index_const(lo), _op("+", k.ref(self.domain[axis]), k.index_const(hi))

    def enough_work(self) -> k.Expr:
        """Whether the domain holds enough points for a team of threads: a smaller call
        runs on the calling thread (point kernels' threshold, ``PARALLEL_MIN_WORK``). A
        team waits for every thread it wakes: tens of microseconds when another process
        holds a CPU, against a few for a 8x8x8 call of hdiff. Tested where the team would
        start (OpenMP's ``if``), not by a serial copy as in point kernels: a copy of every
        parallel loop nearly doubled a computation's compile time (hdiff 0.6 -> 1.1 s,
        the tridiagonal solve 0.7 -> 1.0-1.45 s in GCC), paid by every build and every
        tuning candidate (docs/performance.md)."""
        points = _op("*", _op("*", k.ref(self.domain[0]), k.ref(self.domain[1])),
                     k.ref(self.domain[2]))
        return k.Op(">=", (points, k.index_const(PARALLEL_MIN_WORK)), dtype=dtypes.BOOL)

    def stage_nest(self, stage: Stage, k_range: tuple[k.Expr, k.Expr] | None,
                   parallel: bool, workshare: bool = False) -> k.Stmt:
        body: tuple[k.Stmt, ...] = self.register_decls(stage.units) + self.stmts(stage.units)
        order = self.nest_order() if k_range is not None else [a for a in self.loop_order()
                                                               if a != 2]
        # levels first: they and the next loop are shared out together, so that a stage
        # over one level (interval(0, 1)) still gives every thread rows
        collapse = 2 if order[0] == 2 and len(order) == 3 else 1
        for depth, axis in reversed(list(enumerate(order))):
            if axis == 2:
                assert k_range is not None  # (K is in the order only with a range)
                start, stop = k_range
            else:
                start, stop = self.horizontal_range(axis, stage.extent)
            par = None
            if depth == 0 and workshare:
                par = k.Parallel(shared=True)
            elif depth == 0 and parallel:
                par = k.Parallel(only_if=self.enough_work(), serial_copy=False,
                                 collapse=collapse)
            body = (k.Loop(self.counters[axis], start, stop, k.index_const(1), body, parallel=par,
                           vectorize=depth == len(order) - 1),)
        (nest,) = body
        return nest

    def multistage(self, m_i: int, ms: MultiStage) -> k.Stmt:
        title = f"multistage {m_i}: {ms.policy}, by {ms.mode}"
        ivs = list(ms.intervals)
        if ms.mode == "parallel":
            nests = []
            for isched in ivs:
                kr = self.k_bounds(isched.interval)
                nests += [self.stage_nest(st, kr, parallel=True) for st in isched.stages]
            return k.Section(title, tuple(nests))
        kc = self.counters[2]
        if ms.mode == "planes":
            levels = []
            for isched in ivs:
                k0, k1 = self.k_bounds(isched.interval)
                stages = tuple(self.stage_nest(st, None, parallel=False, workshare=True)
                               for st in isched.stages)
                levels.append(self.k_loop(kc, k0, k1, ms.policy, stages))
            region = k.ParallelRegion(tuple(levels), only_if=self.enough_work())
            return k.Section(title + " (parallel region)", (region,))
        return self.columns_group([(m_i, ms)])

    def columns_group(self, group: list[tuple[int, MultiStage]]) -> k.Stmt:
        """Column-mode multistages fused under one loop over columns: every stage of every
        interval of each, the multistages one after the other within each column."""
        title = "; ".join(f"multistage {m_i}: {ms.policy}" for m_i, ms in group) + ", by columns"
        stages = [st for _, ms in group for isched in ms.intervals for st in isched.stages]
        ext = stage_union(stages)
        order = [a for a in self.loop_order() if a != 2]
        unit_k = self.loop_order()[-1] == 2
        kc = self.counters[2]
        written = set().union(*(ms.written for _, ms in group))
        outer, inner_axis = order
        start, stop = self.horizontal_range(inner_axis, ext)
        if unit_k:  # one block of jammed columns
            jb = self.ctx.symbol("jb", k.INDEX)
            self.jam_start = k.ref(jb)
            width: k.Expr = k.index_const(self.column_block)
        else:  # the row of columns of one outer iteration
            self.jam_start = start
            width = _op("-", stop, start)
        arrays = self.column_arrays(written, width)
        if unit_k:
            block_end = k.MathCall("min", (_op("+", k.ref(jb), k.index_const(self.column_block)), stop),
                                   dtype=k.INDEX)
            staged = self.staged_fields(group, stages, ext)
            stage_in, stage_out = self.stage_copies(staged, written, inner_axis, k.ref(jb),
                                                    block_end, self.fresh_fields(staged, group))
        per_level: list[k.Stmt] = []
        for _, ms in group:
            for isched in ms.intervals:
                k0, k1 = self.k_bounds(isched.interval)
                inner_t = self.level_body(isched, ext)
                if unit_k:
                    per_level.append(self.k_loop(kc, k0, k1, ms.policy, inner_t))
                else:
                    row = k.Loop(self.counters[inner_axis], start, stop, k.index_const(1), inner_t,
                                 vectorize=True)
                    per_level.append(self.k_loop(kc, k0, k1, ms.policy, (row,)))
        body: tuple[k.Stmt, ...] = tuple(per_level)
        if unit_k:
            # Unroll and jam: K outside a block of columns, so that the block's independent
            # recurrences overlap instead of waiting on one column's latency chain.
            body = tuple(self.jam_levels(stmt, inner_axis, k.ref(jb), block_end) for stmt in body)
            body = (k.Loop(jb, start, stop, k.index_const(self.column_block),
                           tuple(arrays) + stage_in + body + stage_out),)
            for f in staged:  # the next group reads the fields themselves
                del self.staged[f], self.column_buffers[f]
        else:
            body = tuple(arrays) + body
        o_start, o_stop = self.horizontal_range(outer, ext)
        body = (k.Loop(self.counters[outer], o_start, o_stop, k.index_const(1), body,
                       parallel=k.Parallel(only_if=self.enough_work(), serial_copy=False)),)
        return k.Section(title, body)

    def column_arrays(self, written: set[str], width: k.Expr) -> list[k.Stmt]:
        """The per-thread buffers of the column temporaries the group writes, ``width``
        columns by the levels each needs; level-major, so that the innermost horizontal
        loop runs over contiguous elements."""
        arrays: list[k.Stmt] = []
        for t, (below, above) in sorted(self.columns.items()):
            if t not in written:
                continue
            span = _op("+", k.ref(self.domain[2]), k.index_const(below + above))
            base = self.ctx.user_symbol(f"{t}_column", dict(self.defn.temporaries)[t],
                                        pointer=True)
            buf = k.Buffer(t, base.dtype, base, (width, span), (k.index_const(1), width))
            self.column_buffers[t] = buf
            arrays.append(k.DeclareArray(buf, k.Op("*", (width, span), dtype=k.INDEX)))
        return arrays

    def staged_fields(self, group: list[tuple[int, MultiStage]], stages: list[Stage],
                      ext: c.Extent) -> list[str]:
        """The 3-D fields, K contiguous, that the group reads and writes only in the column
        being computed, when every stage covers every column of the group (so that the
        copies touch only what the stages touch)."""
        if not self.stage_columns or any(st.extent != ext for st in stages):
            return []
        varying = {a.field for a in variable_k_reads(self.defn)}
        own_column: dict[str, bool] = {}
        for st in stages:
            for unit in st.units:
                for acc in reads(unit):
                    own_column[acc.field] = own_column.get(acc.field, True) and \
                        offsets(acc)[:2] == (0, 0)
                for t in writes(unit):
                    own_column.setdefault(t, True)
        fields = {f.name: f for f in self.defn.fields}
        return sorted(n for n, ok in own_column.items()
                      if ok and n in fields and fields[n].axes == "IJK"
                      and not fields[n].data_dims and n not in varying
                      and self.unit_axes.get(n) == 2)

    def fresh_fields(self, staged: list[str], group: list[tuple[int, MultiStage]]
                     ) -> set[str]:
        """The staged fields whose buffers the group fills before reading them, over exactly
        the levels copied back: an output such as a tridiagonal solve's ``x`` is then only
        written to memory, not also read (a sixth of the solve's traffic)."""
        whole = (k.index_const(0), k.ref(self.domain[2]))
        return {f for f in staged
                if self.staged_levels(f) == whole and written_before_read(f, group)}

    def stage_copies(self, staged: list[str], written: set[str], axis: int, start: k.Expr,
                     stop: k.Expr, fresh: set[str]
                     ) -> tuple[tuple[k.Stmt, ...], tuple[k.Stmt, ...]]:
        """Per staged field: its level range and buffer, then one loop over the block's
        columns copying each field's column in (contiguous reads; not the ``fresh`` ones),
        and one copying the written fields back. Fields with one level range share one loop
        over the levels."""
        kc, jc = self.counters[2], self.counters[axis]
        dtype = {f.name: f.dtype for f in self.defn.fields}
        decls: list[k.Stmt] = []
        ranges: dict[tuple[k.Expr, k.Expr], list[str]] = {}
        for f in staged:
            ranges.setdefault(self.staged_levels(f), []).append(f)
        ins: list[k.Stmt] = []
        outs: list[k.Stmt] = []
        for (lo, hi), names in ranges.items():
            lo_s = self.ctx.symbol(f"{names[0]}_lo", k.INDEX)
            hi_s = self.ctx.symbol(f"{names[0]}_hi", k.INDEX)
            decls += [k.Declare(lo_s, lo), k.Declare(hi_s, hi)]
            span = _op("-", k.ref(hi_s), k.ref(lo_s))
            local = (_op("-", k.ref(jc), start), _op("-", k.ref(kc), k.ref(lo_s)))
            copy_in, copy_out = [], []
            for f in names:
                base = self.ctx.user_symbol(f"{f}_column", dtype[f], pointer=True)
                buf = k.Buffer(f, dtype[f], base, (k.index_const(self.column_block), span),
                               (k.index_const(1), k.index_const(self.column_block)))
                decls.append(k.DeclareArray(buf, k.Op("*", (k.index_const(self.column_block), span),
                                                      dtype=k.INDEX)))
                home = self.field_index(f, (0, 0, 0))
                if f not in fresh:
                    copy_in.append(k.Store(buf, local, k.Load(self.buffers[f], home,
                                                              dtype=dtype[f])))
                if f in written:
                    copy_out.append(k.Store(self.buffers[f], home,
                                            k.Load(buf, local, dtype=dtype[f])))
                self.staged[f] = lo_s
                self.column_buffers[f] = buf
            if copy_in:
                ins.append(k.Loop(kc, k.ref(lo_s), k.ref(hi_s), k.index_const(1), tuple(copy_in)))
            if copy_out:
                outs.append(k.Loop(kc, k.ref(lo_s), k.ref(hi_s), k.index_const(1), tuple(copy_out)))
        before = (k.Loop(jc, start, stop, k.index_const(1), tuple(ins)),) if ins else ()
        after = (k.Loop(jc, start, stop, k.index_const(1), tuple(outs)),) if outs else ()
        return tuple(decls) + before, after

    def staged_levels(self, f: str) -> tuple[k.Expr, k.Expr]:
        """The levels of field ``f`` the call's accesses can reach, and at least the
        domain's [0, nk) (which the halo check guarantees every field has): the lowest and
        one past the highest. An access that cannot leave [0, nk) adds nothing; the others
        count only when their interval is not empty (an empty one reads nothing)."""
        nk = k.ref(self.domain[2])
        lo: k.Expr = k.index_const(0)
        hi: k.Expr = nk
        for acc in self.sched.k_accesses:
            if acc.name != f:
                continue
            s, e = acc.interval.start, acc.interval.end
            low_ok = acc.dk_lo + (0 if s.from_end else max(0, s.offset)) >= 0
            high_ok = acc.dk_hi + (min(0, e.offset) if e.from_end else 0) <= 0
            if low_ok and high_ok:
                continue
            k0, k1 = self.k_bounds(acc.interval)
            live = k.Op(">", (k1, k0), dtype=dtypes.BOOL)
            if not low_ok:
                lo = k.MathCall("min", (lo, k.Select(live, _op("+", k0, k.index_const(acc.dk_lo)),
                                                     k.index_const(0), dtype=k.INDEX)), dtype=k.INDEX)
            if not high_ok:
                hi = k.MathCall("max", (hi, k.Select(live, _op("+", k1, k.index_const(acc.dk_hi)),
                                                     nk, dtype=k.INDEX)), dtype=k.INDEX)
        return lo, hi

    def jam_levels(self, level_loop: k.Stmt, axis: int, start: k.Expr, stop: k.Expr) -> k.Stmt:
        """Put a loop over ``axis`` in [start, stop) just inside a K loop."""
        assert isinstance(level_loop, k.Loop)
        inner = k.Loop(self.counters[axis], start, stop, k.index_const(1), level_loop.body,
                       vectorize=True)
        return dataclasses.replace(level_loop, body=(inner,))

    def level_body(self, isched: IntervalSchedule, ext: c.Extent) -> tuple[k.Stmt, ...]:
        """One level of an interval: its stages' statements (each guarded to its extent
        ``ext``) after the declarations of the registers they use."""
        inner = [stmt for st in isched.stages for stmt in self.guarded(st, ext)]
        units = tuple(u for st in isched.stages for u in st.units)
        return self.register_decls(units) + tuple(inner)

    def register_decls(self, units: tuple[d.Stmt, ...]) -> tuple[k.Stmt, ...]:
        used = {n.field for u in units for n in walk(u) if isinstance(n, d.Access)}
        used |= {t for u in units for t in writes(u)}
        return tuple(k.Declare(self.locals[t], None) for t in sorted(self.registers & used))

    def guarded(self, st: Stage, ext: c.Extent) -> tuple[k.Stmt, ...]:
        body = self.stmts(st.units)
        if st.extent == ext:
            return body
        conds = []
        for axis in (0, 1):
            lo, hi = self.horizontal_range(axis, st.extent)
            cv = k.ref(self.counters[axis])
            conds += [k.Op(">=", (cv, lo), dtype=dtypes.BOOL), k.Op("<", (cv, hi),
                                                                   dtype=dtypes.BOOL)]
        cond = conds[0]
        for x in conds[1:]:
            cond = k.Op("&&", (cond, x), dtype=dtypes.BOOL)
        return (k.Branch(cond, body),)

    @staticmethod
    def k_loop(kc: k.Symbol, k0: k.Expr, k1: k.Expr, policy: str,
               body: tuple[k.Stmt, ...]) -> k.Stmt:
        if policy == "BACKWARD":
            one = k.index_const(1)
            return k.Loop(kc, _op("-", k1, one), _op("-", k0, one), k.index_const(-1), body)
        return k.Loop(kc, k0, k1, k.index_const(1), body)

    def lower_all(self) -> k.KernelFunction:
        sections = tuple(self.columns_group(group) if len(group) > 1 else
                         self.multistage(*group[0]) for group in column_groups(self.sched))
        order: list[k.ArgumentKey] = [
            *self.buffers, *[origin_key(n, a) for n in self.origins for a in self.axes[n]],
            *[s.name for s in self.defn.scalars], *[domain_key(a) for a in AXES]]
        params = free_parameters(sections, order)
        return k.KernelFunction(function_name("computation", self.defn.name), params, sections,
                                tuple(self.buffers.values()),
                                f"computation '{self.defn.name}'", self.uses_error_flag,
                                status=self.status)


def origin_key(field: str, axis: str) -> k.OriginOf:
    """The argument key of a field's origin along an axis (a value, not a name, so that no
    scalar parameter can have it)."""
    return k.OriginOf(field, axis)


def domain_key(axis: str) -> k.DomainExtent:
    return k.DomainExtent(axis)


def stage_union(stages: list[Stage]) -> c.Extent:
    ext = (0, 0, 0, 0)
    for st in stages:
        e = st.extent
        ext = (min(ext[0], e[0]), max(ext[1], e[1]), min(ext[2], e[2]), max(ext[3], e[3]))
    return ext


def layout_of(fields: dict[str, np.ndarray] | None, defn: c.ComputationDef) -> dict[str, int | None]:
    """Per field, the axis (position in the array) whose stride is one element, if any."""
    out: dict[str, int | None] = {}
    for f in defn.fields:
        a = None if fields is None else fields.get(f.name)
        if a is None:
            out[f.name] = len(f.axes) - 1
            continue
        unit = [i for i, s in enumerate(a.strides) if s == a.itemsize and a.shape[i] > 1]
        out[f.name] = unit[-1] if unit else None
    for t, _ in defn.temporaries:
        out[t] = 2
    return out
