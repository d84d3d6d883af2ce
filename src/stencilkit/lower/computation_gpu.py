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

from ..analysis.schedule import MultiStage, Schedule, Stage, offsets, reads, variable_k_reads
from ..ir import computation as c
from ..ir import definition as d
from ..ir import kernel as k
from ..ir.core import walk
from .computation import (
    ComputationLowering,
    _chained,
    _const,
    _sym,
    _uses,
    origin_key,
    stage_union,
)


@dataclass(frozen=True)
class Carried:
    """Field or temporary ``name`` carried in a register by the sweep of multistage
    ``multistage``, read at K offset ``dk`` (-1 FORWARD, +1 BACKWARD) from the register;
    ``only_register``: a temporary nothing else reads, never stored."""

    multistage: int
    name: str
    dk: int
    only_register: bool


def _reads_previous_level_written(iv: c.IntervalBlock, dk: int) -> bool:
    """Whether every level of ``iv`` has its neighbour at ``dk`` inside the domain for
    every nk: FORWARD reads k - 1 from an interval starting at a fixed level >= 1,
    BACKWARD k + 1 from one ending at least one level below the end."""
    if dk < 0:
        return not iv.start.from_end and iv.start.offset >= 1
    return iv.end.from_end and iv.end.offset <= -1


def _carried_in(ms: MultiStage, name: str, dk: int) -> tuple[bool, bool] | None:
    """(carried, read at offset 0 before its write) of ``name`` in sweep ``ms``, None when
    the register cannot stand for the previous level (see the module docstring)."""
    if not _chained([isched.interval for isched in ms.intervals]):
        return None  # a level the sweep skips keeps the old value: only memory has it
    carried = zero_first = False
    read_in: list[c.Extent] = []  # the extents of the stages reading it, and writing it
    written_in: list[c.Extent] = []
    for isched in ms.intervals:
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
    return (carried, zero_first) if carried else None


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
            alone = temporary and not found[1] and \
                all(m == m_i for m, _, _ in _uses(sched, name))
            out[(m_i, name)] = Carried(m_i, name, dk, alone)
    return out


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
                 layout: Mapping[str, int | None], *args, **kwargs) -> None:
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

    def columns_group(self, group: list[tuple[int, MultiStage]]) -> k.Stmt:
        title = "; ".join(f"multistage {m_i}: {ms.policy}" for m_i, ms in group) + \
            ", a thread per column"
        stages = [st for _, ms in group for isched in ms.intervals for st in isched.stages]
        ext = stage_union(stages)
        kc = self.counters[2]
        per_level: list[k.Stmt] = [k.Declare(sym, None) for (m_i, _), sym in
                                   self.carried_registers.items()
                                   if m_i in {m for m, _ in group}]
        for m_i, ms in group:
            self.multistage_now = m_i
            for isched in ms.intervals:
                k0, k1 = self.k_bounds(isched.interval)
                body = self.level_body(isched, ext)
                per_level.append(self.k_loop(kc, k0, k1, ms.policy, body))
        self.multistage_now = -1
        nest: tuple[k.Stmt, ...] = tuple(per_level)
        for axis in reversed([a for a in self.loop_order() if a != 2]):
            start, stop = self.horizontal_range(axis, ext)
            nest = (k.Loop(self.counters[axis], start, stop, _const(1), nest,
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
            body = (k.Loop(self.counters[axis], start, stop, _const(1), body,
                           parallel=k.Parallel()),)
        return body[0]

    # -------------------------------------------------------------- carried values

    def dtype_of(self, name: str):
        types = {**{f.name: f.dtype for f in self.defn.fields}, **dict(self.defn.temporaries)}
        return types[name]

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
                    return _sym(reg)
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
                                   _sym(reg), loc=s.loc))
        return tuple(out)
