"""The computation lowering for GPUs (CUDA and OpenCL alike): a thread per column for
FORWARD/BACKWARD multistages, values carried between levels in registers.

The CPU lowering (``lower_computation``) jams blocks of columns under the K loop and keeps
column temporaries in C99 variable-length arrays; CUDA has neither VLAs nor a use for the
jamming (the warp is the vector). Here every "columns" group is two parallel loops over the
horizontal axes (the unit-stride one innermost, so it lands on ``threadIdx.x``) around the
K loops: one thread per column, the K loop inside, temporaries read only at zero offset in
registers (as GridTools does), the others in the 3-D temporaries the runtime allocates.

A sweep carries a value from one level to the next in a register (``carried_values``): where
a FORWARD sweep writes ``f`` at every level it visits and reads it only at the level itself
and at ``k - 1`` (BACKWARD: ``k + 1``), each read of ``f[0, 0, -1]`` comes before the
level's first write of ``f``, and the level below is always one the sweep wrote, the read
is the register the previous level's write set: a tridiagonal solve's ``c'`` and ``d'``
are not reloaded. Fields are still stored at every write (others read them); a temporary
used nowhere else needs no 3-D array at all.

PARALLEL stages are loop nests whose every loop is parallel (a grid of up to three
dimensions); "planes" multistages are the CPU lowering's. The K loops of FORWARD/BACKWARD
sweeps are never marked parallel: the GPU platforms make threads of marked loops only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .. import dtypes
from ..analysis.schedule import MultiStage, Schedule, Stage, offsets, reads, variable_k_reads
from ..ir import computation as c
from ..ir import definition as d
from ..ir import kernel as k
from ..ir.core import rewrite, walk
from .computation import (
    AXES,
    ComputationLowering,
    _chained,
    _op,
    _uses,
    column_groups,
    origin_key,
    register_temporaries,
    stage_union,
    written_before_read,
)


@dataclass(frozen=True)
class Carried:
    """Field or temporary ``name`` carried in a register by the sweep of multistage
    ``multistage``, read at K offset ``dk`` (-1 FORWARD, +1 BACKWARD) from the register;
    ``only_register``: a temporary nothing else reads, never stored; ``preload``: the
    sweep's first level reads a neighbour it did not write (the in-place tridiagonal
    solve's BACKWARD sweep reads ``d[k + 1]`` at the top), loaded into the register once
    before the sweep."""

    multistage: int
    name: str
    dk: int
    only_register: bool
    preload: bool = False


def _reads_previous_level_written(iv: c.IntervalBlock, dk: int) -> bool:
    """Whether every level of ``iv`` has its neighbour at ``dk`` inside the domain for
    every nk: FORWARD reads k - 1 from an interval starting at a fixed level >= 1,
    BACKWARD k + 1 from one ending at least one level below the end."""
    if dk < 0:
        return not iv.start.from_end and iv.start.offset >= 1
    return iv.end.from_end and iv.end.offset <= -1


def _contiguous(intervals: list[c.IntervalBlock], dk: int) -> bool:
    """Whether the intervals of a sweep in direction ``-dk`` visit one run of levels without
    a gap for every nk, so that every level but the sweep's first has its neighbour at
    ``dk`` written just before: each starts where the one before ends, and the sweep's
    first bound and the bounds between intervals are all counted from the same end of the
    axis (then the clamping to [0, nk) cannot empty an interval before a non-empty one)."""
    ivs = sorted(intervals, key=lambda iv: (iv.start.from_end, iv.start.offset))
    if not ivs or any(a.end != b.start for a, b in zip(ivs, ivs[1:])):
        return False
    first = ivs[0].start if dk < 0 else ivs[-1].end
    return all(b.from_end == first.from_end for b in [iv.start for iv in ivs[1:]])


def _carried_in(ms: MultiStage, name: str, dk: int) -> tuple[bool, bool, bool] | None:
    """(carried, read at offset 0 before its write, preloaded) of ``name`` in sweep ``ms``,
    None when the register cannot stand for the previous level (see the module docstring).
    Preloaded: the sweep's first interval reads the neighbour, which the sweep did not
    write; the register is loaded before the sweep (the neighbour lies in the domain)."""
    intervals = [isched.interval for isched in ms.intervals]
    if not (_chained(intervals) or _contiguous(intervals, dk)):
        return None  # a level the sweep skips keeps the old value: only memory has it
    carried = zero_first = preload = False
    read_in: list[c.Extent] = []  # the extents of the stages reading it, and writing it
    written_in: list[c.Extent] = []
    for position, isched in enumerate(ms.intervals):
        written = False
        for stage, unit in ((st, u) for st in isched.stages for u in st.units):
            for acc in reads(unit):
                if acc.field != name:
                    continue
                off = offsets(acc)
                if off == (0, 0, dk):
                    if written or not _reads_previous_level_written(isched.interval, dk):
                        return None
                    carried = True
                    preload |= position == 0  # (ms.intervals are in the sweep's order)
                elif off == (0, 0, 0):
                    zero_first |= not written
                else:
                    return None
                read_in.append(stage.extent)
            if type(unit) is d.Assign and unit.target == name:
                written = True
                written_in.append(stage.extent)
            elif any(isinstance(n, d.Assign) and n.target == name for n in walk(unit)):
                return None  # conditional or at a K offset: the register would miss it
        if not written:
            return None
    # a column some writing stage skips would read a level the register never held
    if not all(_within(r, w) for r in read_in for w in written_in):
        return None
    return (carried, zero_first, preload) if carried else None


def _within(inner: c.Extent, outer: c.Extent) -> bool:
    return outer[0] <= inner[0] and inner[1] <= outer[1] and outer[2] <= inner[2] \
        and inner[3] <= outer[3]


def carried_values(defn: c.ComputationDef, sched: Schedule) -> dict[tuple[int, str], Carried]:
    """Per (multistage, name), the values its FORWARD/BACKWARD sweep (a thread per column)
    carries in a register from one level to the next."""
    varying = {a.field for a in variable_k_reads(defn)}
    shaped = {f.name for f in defn.fields if f.axes == "IJK" and not f.data_dims}
    names = shaped | {t for t, _ in defn.temporaries}
    out: dict[tuple[int, str], Carried] = {}
    for m_i, ms in enumerate(sched.multistages):
        if ms.mode != "columns" or ms.policy not in ("FORWARD", "BACKWARD"):
            continue
        dk = -1 if ms.policy == "FORWARD" else 1
        for name in sorted((ms.written & names) - varying):
            found = _carried_in(ms, name, dk)
            if found is None:
                continue
            temporary = name in dict(defn.temporaries)
            _, zero_first, preload = found
            alone = temporary and not zero_first and not preload and \
                all(m == m_i for m, _, _ in _uses(sched, name))
            out[(m_i, name)] = Carried(m_i, name, dk, alone, preload)
    return out


def column_private_temporaries(defn: c.ComputationDef, sched: Schedule,
                               carried: Mapping[tuple[int, str], Carried]) -> tuple[str, ...]:
    """The 3-D temporaries that each thread of a column group (one thread per column, the
    sweeps one after the other) alone writes and reads: touched by the multistages of one
    column group only, never at a horizontal offset, written only at the level itself,
    every level of [0, nk) written before it is read (``written_before_read``: so no read
    sees a level another call or no write left), and read only in columns that every
    stage writing it covers. Such a temporary can live in the thread's own slice of the
    block's shared memory, nk values per thread, instead of a 3-D array in global memory
    (the "cuda" backend's on-chip variant: ``targets.cuda_layout.on_chip``). Only those of
    the first one's element type (one shared array per launch, of one type); in the
    order of ``defn.temporaries``. A temporary carried only in a register needs neither."""
    types = dict(defn.temporaries)
    varying = {a.field for a in variable_k_reads(defn)}
    # in registers already: those read at their own point only, and those only carried
    only_register = {cv.name for cv in carried.values() if cv.only_register} \
        | register_temporaries(defn, sched)
    out: list[str] = []
    for group in column_groups(sched):
        members = {m for m, _ in group}
        if any(ms.mode != "columns" for _, ms in group):
            continue
        for name in types:
            uses = _uses(sched, name)
            if name in varying | only_register or not uses \
                    or any(m not in members or off is not None and off[:2] != (0, 0)
                           for m, _, off in uses) \
                    or not written_before_read(name, group) \
                    or not _columns_written(group, name):
                continue
            out.append(name)
    return tuple(n for n in out if types[n] == types[out[0]])


def _columns_written(group: list[tuple[int, MultiStage]], name: str) -> bool:
    """Every write of ``name`` in ``group`` is at the level itself, and every stage reading
    it lies within the extent of every stage writing it."""
    read_in: list[c.Extent] = []
    written_in: list[c.Extent] = []
    for _, ms in group:
        for stage in (st for isched in ms.intervals for st in isched.stages):
            for unit in stage.units:
                if any(acc.field == name for acc in reads(unit)):
                    read_in.append(stage.extent)
                for n in walk(unit):
                    if isinstance(n, d.Assign) and n.target == name:
                        if c.write_offset(n):
                            return False
                        written_in.append(stage.extent)
    return all(_within(r, w) for r in read_in for w in written_in)


def temporaries_unit_axis(defn: c.ComputationDef, layout: Mapping[str, int | None]) -> int:
    """The unit-stride axis of a GPU computation's 3-D temporaries: the one of its first 3-D
    field (the axis grid x runs along, so that a warp's accesses to the temporaries coalesce
    as its accesses to the fields do), K where that field has none. The "cuda" backend
    allocates its temporaries so (``ComputationStencil._temporaries``)."""
    first = next((f.name for f in defn.fields if f.axes == "IJK" and not f.data_dims), None)
    unit = layout.get(first) if first is not None else None
    return 2 if unit is None else unit


class GpuComputationLowering(ComputationLowering):
    def __init__(self, defn: c.ComputationDef, sched: Schedule,
                 layout: Mapping[str, int | None], *args, column_pointers: bool = False,
                 **kwargs) -> None:
        """``column_pointers``: access the column-private temporaries through a pointer to
        the thread's column, which the CUDA platform can point into shared memory (an
        OpenCL pointer would need an address space per variant: OpenCL keeps the 3-D
        arrays)."""
        unit = temporaries_unit_axis(defn, layout)
        layout = {**layout, **{t: unit for t, _ in defn.temporaries}}
        super().__init__(defn, sched, layout, *args, **kwargs)
        self.carried = carried_values(self.defn, self.sched)
        self.carried_registers = {key: self.ctx.symbol(f"{key[1]}_carried", dtype)
                                  for key in sorted(self.carried)
                                  for dtype in [self.dtype_of(key[1])]}
        only_register = {cv.name for cv in self.carried.values() if cv.only_register}
        for name in only_register & set(self.buffers):
            del self.buffers[name], self.origins[name]
        self.multistage_now = -1  # the multistage being lowered (whose registers apply)
        # column buffers are the CPU's jammed VLAs: keep those temporaries in memory instead
        for name in sorted(set(self.columns) - only_register):
            dtype = dict(self.defn.temporaries)[name]
            self.buffers[name] = self.ctx.buffer(name, dtype, 3, unit_stride_last=False,
                                                 restrict=True, read_only=False,
                                                 unit_dim=self.unit_axes.get(name),
                                                 marks=frozenset({k.Temporary()}))
            self.origins[name] = [self.ctx.user_symbol(
                f"{name}_origin_{a}", k.INDEX,
                properties=frozenset({k.ScalarArgument(origin_key(name, a))}))
                for a in self.axes[name]]
        self.columns = {}
        # the temporaries each thread keeps to itself: accessed through a pointer to its
        # column (``column_pointers``), which the on-chip variant points into shared memory
        self.column_pointers: dict[str, k.Buffer] = {}
        private = column_private_temporaries(self.defn, self.sched, self.carried) \
            if column_pointers else ()
        for name in private:
            dtype = self.dtype_of(name)
            sym = self.ctx.symbol(f"{name}_column", dtype, pointer=True)
            level_stride = self.buffers[name].strides[self.axes[name].index("K")]
            self.column_pointers[name] = k.Buffer(sym.name, dtype, sym, (k.ref(self.domain[2]),),
                                                  (level_stride,))

    def buffer(self, name: str) -> k.Buffer:
        return self.column_pointers.get(name) or super().buffer(name)

    def index(self, name: str, off: tuple[int, int, int]) -> tuple[k.Expr, ...]:
        if name in self.column_pointers:  # the level, in the thread's own column
            return (_op("+", k.ref(self.counters[2]), k.index_const(off[2])),)
        return super().index(name, off)

    def column_pointer_decls(self, group: list[tuple[int, MultiStage]]) -> list[k.Stmt]:
        """The pointers to this thread's column of the column-private temporaries ``group``
        uses: level 0 of the column in the 3-D temporary (the on-chip variant redirects
        them into shared memory)."""
        out: list[k.Stmt] = []
        members = {m for m, _ in group}
        for name, column in self.column_pointers.items():
            if not any(m in members for m, _, _ in _uses(self.sched, name)):
                continue
            index = tuple(_op("+", k.ref(o), k.ref(self.counters[AXES.index(a)]))
                          if a != "K" else k.ref(o)
                          for a, o in zip(self.axes[name], self.origins[name]))
            full = self.buffers[name]
            out.append(k.Declare(column.base, k.Address(full, index, dtype=full.element_type)))
        return out

    def columns_group(self, group: list[tuple[int, MultiStage]]) -> k.Stmt:
        title = "; ".join(f"multistage {m_i}: {ms.policy}" for m_i, ms in group) + \
            ", a thread per column"
        stages = [st for _, ms in group for isched in ms.intervals for st in isched.stages]
        ext = stage_union(stages)
        kc = self.counters[2]
        per_level: list[k.Stmt] = [k.Declare(sym, None) for (m_i, _), sym in
                                   self.carried_registers.items()
                                   if m_i in {m for m, _ in group}]
        per_level += self.column_pointer_decls(group)
        for m_i, ms in group:
            self.multistage_now = m_i
            for position, isched in enumerate(ms.intervals):
                k0, k1 = self.k_bounds(isched.interval)
                if position == 0:
                    per_level += self.preloads(m_i, ms.policy, k0, k1)
                body = self.level_body(isched, ext)
                per_level.append(self.k_loop(kc, k0, k1, ms.policy, body))
        self.multistage_now = -1
        nest: tuple[k.Stmt, ...] = tuple(per_level)
        for axis in reversed([a for a in self.loop_order() if a != 2]):
            start, stop = self.horizontal_range(axis, ext)
            nest = (k.Loop(self.counters[axis], start, stop, k.index_const(1), nest,
                           parallel=k.Parallel()),)
        return k.Section(title, nest)

    def stage_nest(self, stage: Stage, k_range: tuple[k.Expr, k.Expr] | None,
                   parallel: bool, workshare: bool = False) -> k.Stmt:
        # every loop of a stage's nest writes disjoint points (the access rules): all
        # parallel, so that the grid covers the whole nest, not just its outermost loop
        body: tuple[k.Stmt, ...] = self.register_decls(stage.units) + self.stmts(stage.units)
        order = self.loop_order() if k_range is not None else [a for a in self.loop_order()
                                                               if a != 2]
        for axis in reversed(order):
            if axis == 2:
                assert k_range is not None  # (K is in the order only with a range)
                start, stop = k_range
            else:
                start, stop = self.horizontal_range(axis, stage.extent)
            body = (k.Loop(self.counters[axis], start, stop, k.index_const(1), body,
                           parallel=k.Parallel()),)
        return body[0]

    # -------------------------------------------------------------- carried values

    def dtype_of(self, name: str):
        types = {**{f.name: f.dtype for f in self.defn.fields}, **dict(self.defn.temporaries)}
        return types[name]

    def preloads(self, m_i: int, policy: str, k0: k.Expr, k1: k.Expr) -> list[k.Stmt]:
        """The registers of sweep ``m_i`` that its first level reads as its neighbour's
        value without the sweep having written it: loaded once, before the sweep's first
        interval [k0, k1), where that interval has a level (its neighbour is then inside
        the domain: ``_reads_previous_level_written``)."""
        kc = self.counters[2]
        preloaded = [name for (m, name), cv in self.carried.items() if m == m_i and cv.preload]
        if not preloaded:
            return []
        # the neighbour of the sweep's first level (all carried values share the direction),
        # declared so that an index variant narrows it with the counters
        level = self.ctx.symbol("k_neighbour", k.INDEX)
        neighbour = _op("-", k0, k.index_const(1)) if policy == "FORWARD" else k1

        def at_neighbour(n):
            return k.ref(level) if isinstance(n, k.Sym) and n.symbol == kc else None

        body: list[k.Stmt] = [k.Declare(level, neighbour)]
        for name in preloaded:
            index = tuple(rewrite(e, at_neighbour) for e in self.index(name, (0, 0, 0)))
            load = k.Load(self.buffer(name), index, dtype=self.dtype_of(name))
            body.append(k.SetSym(self.carried_registers[(m_i, name)], load))
        return [k.Branch(k.Op("<", (k0, k1), dtype=dtypes.BOOL), tuple(body))]

    def carried_register(self, name: str) -> tuple[Carried, k.Symbol] | None:
        key = (self.multistage_now, name)
        if key not in self.carried:
            return None
        return self.carried[key], self.carried_registers[key]

    def expr(self, e: d.Expr) -> k.Expr:
        if isinstance(e, d.Access):
            found = self.carried_register(e.field)
            if found is not None:
                cv, reg = found
                off = offsets(e)
                # _carried_in: a register-only temporary is read at offset 0 only after
                # the level's write; the previous level only before it
                if off == (0, 0, cv.dk) or cv.only_register and off == (0, 0, 0):
                    return k.ref(reg)
        return super().expr(e)

    def stmts(self, body: tuple[d.Stmt, ...]) -> tuple[k.Stmt, ...]:
        out: list[k.Stmt] = []
        for s in body:
            found = self.carried_register(s.target) if type(s) is d.Assign else None
            if found is None:
                out += super().stmts((s,))
                continue
            cv, reg = found
            assert isinstance(s, d.Assign)
            src = self.comment(s)
            out.append(k.SetSym(reg, self.expr(s.value), loc=s.loc, source=src))
            if not cv.only_register:
                out.append(k.Store(self.buffer(s.target), self.index(s.target, (0, 0, 0)),
                                   k.ref(reg), loc=s.loc))
        return tuple(out)
