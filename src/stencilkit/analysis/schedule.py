"""Typing, access rules, extents and the stage/multistage schedule of a computation.

Meaning (API.md section 2): within a computation each statement acts as if applied to the
whole extended IJ plane of the current K level before the next one runs. From that:

- a *unit* is a top-level statement of an interval body (an ``if`` or ``while`` counts as
  one unit, as GT4Py treats it as one stage);
- extents are propagated backwards from the compute domain over all units (to a fixed point
  where FORWARD/BACKWARD loops carry values between levels);
- a stage is a run of consecutive units with one extent and no horizontal read-after-write
  or write-after-read between them, so one loop nest computes it;
- a FORWARD/BACKWARD multistage runs column by column (parallel over IJ, K sequential) when
  no unit reads a field written in it with a horizontal offset, else plane by plane;
- what has no well-defined meaning is rejected with ``AccessRuleError``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..errors import AccessRuleError
from ..ir import computation as c
from ..ir import definition as d
from ..ir.core import walk
from .typing import ArgType, Typer

ZERO: c.Extent = (0, 0, 0, 0)


def union(a: c.Extent, b: c.Extent) -> c.Extent:
    return (min(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), max(a[3], b[3]))


def shift(e: c.Extent, di: int, dj: int) -> c.Extent:
    return (min(0, e[0] + di), max(0, e[1] + di), min(0, e[2] + dj), max(0, e[3] + dj))


def offsets(a: d.Access) -> tuple[int, int, int]:
    return tuple(int(o.value) for o in a.offset)  # type: ignore[return-value]


def reads(stmt: d.Stmt) -> list[d.Access]:
    return [n for n in walk(stmt) if isinstance(n, d.Access)]


def writes(stmt: d.Stmt) -> set[str]:
    return {n.target for n in walk(stmt) if isinstance(n, d.Assign)}


# ------------------------------------------------------------------ typing


def type_computation(defn: c.ComputationDef) -> c.ComputationDef:
    """Requires: a parsed computation. Ensures: typed expressions, temporaries' dtypes
    (unified over their assignments, NumPy rules), casts to the written field's dtype."""
    arrays = {f.name: ArgType(f.dtype, len(f.axes)) for f in defn.fields}
    scalars = {s.name: s.dtype for s in defn.scalars}
    temps = frozenset(n for n, _ in defn.temporaries)
    typer = Typer(defn.name, scalars, arrays, rules="numpy", fields=frozenset(arrays))
    typer.temporaries = temps
    bodies = [iv.body for b in defn.blocks for iv in b.intervals]
    everything = tuple(s for body in bodies for s in body)
    typer.infer_vars(everything)
    missing = temps - set(typer.vars)
    if missing:
        raise AccessRuleError(f"temporaries {sorted(missing)} are read but never assigned",
                              stencil=defn.name, loc=defn.loc, hint="assign them first")
    blocks = tuple(dataclasses.replace(b, intervals=tuple(
        dataclasses.replace(iv, body=typer.stmts(iv.body)) for iv in b.intervals))
        for b in defn.blocks)
    temporaries = tuple(sorted((n, t) for n, t in typer.vars.items() if n in temps))
    return dataclasses.replace(defn, blocks=blocks, temporaries=temporaries)


# ------------------------------------------------------------------ schedule


@dataclass(frozen=True)
class Stage:
    units: tuple[d.Stmt, ...]
    extent: c.Extent


@dataclass(frozen=True)
class IntervalSchedule:
    interval: c.IntervalBlock
    stages: tuple[Stage, ...]


@dataclass(frozen=True)
class MultiStage:
    """``intervals`` are in execution order (K ascending for FORWARD, descending BACKWARD)."""

    policy: str
    mode: str  # "parallel" | "columns" | "planes"
    intervals: tuple[IntervalSchedule, ...]
    written: frozenset[str]


@dataclass(frozen=True)
class KAccess:
    """Field ``name`` is read at K offsets [dk_lo, dk_hi] over the levels of ``interval``."""

    name: str
    interval: c.IntervalBlock
    dk_lo: int
    dk_hi: int


@dataclass(frozen=True)
class Schedule:
    multistages: tuple[MultiStage, ...]
    extents: tuple[tuple[str, c.Extent], ...]  # horizontal halo each field/temporary needs
    k_accesses: tuple[KAccess, ...]

    def extent(self, name: str) -> c.Extent:
        return dict(self.extents).get(name, ZERO)


def _rule_error(rule: str, message: str, defn: c.ComputationDef, loc, hint: str) -> AccessRuleError:
    return AccessRuleError(f"{rule}: {message}", stencil=defn.name, loc=loc, hint=hint)


def check_access_rules(defn: c.ComputationDef) -> None:
    """Reject what has no well-defined meaning (see the module docstring)."""
    temps = {t for t, _ in defn.temporaries}
    written_before: set[str] = set()
    for block in defn.blocks:
        block_writes = set().union(*(writes(s) for iv in block.intervals for s in iv.body))
        visible = written_before | (block_writes if block.policy != "PARALLEL" else set())
        for iv in block.intervals:
            for unit in iv.body:
                for acc in _reads_before_writes(unit, visible):
                    if acc.field in temps:
                        raise _rule_error(
                            "undefined read", f"temporary '{acc.field}' is read before any "
                            "statement writes it, so its value is undefined", defn, acc.loc,
                            "assign the temporary first (or in an earlier computation)")
                visible |= writes(unit)
        written_before |= block_writes
    for block in defn.blocks:
        block_writes = set().union(*(writes(s) for iv in block.intervals for s in iv.body))
        for iv in block.intervals:
            for unit in iv.body:
                written = writes(unit)
                for acc in reads(unit):
                    di, dj, dk = offsets(acc)
                    if acc.field in written and (di, dj) != (0, 0):
                        raise _rule_error(
                            "rule 2", f"'{acc.field}' is written by this statement and read "
                            f"by it with the horizontal offset ({di}, {dj})", defn, acc.loc,
                            "write the result to a new temporary, or split the statement so "
                            "that the offset read comes from a previous statement")
                    if block.policy == "PARALLEL" and dk != 0 and acc.field in block_writes:
                        raise _rule_error(
                            "PARALLEL", f"'{acc.field}' is written in this PARALLEL "
                            f"computation and read with the vertical offset {dk}", defn,
                            acc.loc, "use computation(FORWARD) or BACKWARD for vertical "
                            "dependencies, or compute the field in an earlier computation")


def _reads_before_writes(stmt: d.Stmt, visible: set[str]) -> list[d.Access]:
    """Reads in ``stmt`` of names that no earlier statement (``visible``) nor an earlier
    statement inside ``stmt`` writes: ``if c: t = a; b = t`` reads ``t`` after writing it."""
    match stmt:
        case d.If(cond=cond, body=body, orelse=orelse):
            found = [n for n in walk(cond) if isinstance(n, d.Access) and n.field not in visible]
            for branch in (body, orelse):
                seen = set(visible)
                for s in branch:
                    found += _reads_before_writes(s, seen)
                    seen |= writes(s)
            return found
        case d.While():  # a later iteration may read what an earlier one wrote
            return [a for a in reads(stmt) if a.field not in visible | writes(stmt)]
    return [a for a in reads(stmt) if a.field not in visible]


def compute_extents(defn: c.ComputationDef) -> dict[int, c.Extent]:
    """Extent of each unit (keyed by its position in program order).

    Backwards over the blocks; inside a FORWARD/BACKWARD block the sweep repeats until
    nothing grows, because a unit may read what a later unit wrote at a previous level.
    """
    units = [(b_i, s) for b_i, b in enumerate(defn.blocks) for iv in b.intervals for s in iv.body]
    extents: dict[int, c.Extent] = {i: ZERO for i in range(len(units))}
    need: dict[str, c.Extent] = {}
    for b_i in reversed(range(len(defn.blocks))):
        members = [i for i, (b, _) in enumerate(units) if b == b_i]
        for _ in range(1 if defn.blocks[b_i].policy == "PARALLEL" else 10):
            changed = False
            for i in reversed(members):
                unit = units[i][1]
                ext = extents[i]
                for w in writes(unit):
                    ext = union(ext, need.get(w, ZERO))
                if ext != extents[i]:
                    extents[i] = ext
                    changed = True
                for acc in reads(unit):
                    di, dj, _ = offsets(acc)
                    grown = union(need.get(acc.field, ZERO), shift(ext, di, dj))
                    if grown != need.get(acc.field):
                        need[acc.field] = grown
                        changed = True
            if not changed:
                break
    return extents


def build_schedule(defn: c.ComputationDef) -> Schedule:
    """Requires: a typed computation that passed the access rules."""
    unit_extents = compute_extents(defn)
    field_extent: dict[str, c.Extent] = {}
    k_accesses: list[KAccess] = []
    multistages = []
    pos = 0
    for block in defn.blocks:
        block_writes = set().union(*(writes(s) for iv in block.intervals for s in iv.body))
        horizontal_dep = any(
            acc.field in block_writes and offsets(acc)[:2] != (0, 0)
            for iv in block.intervals for s in iv.body for acc in reads(s))
        mode = ("parallel" if block.policy == "PARALLEL" else
                "planes" if horizontal_dep else "columns")
        scheds = []
        for iv in block.intervals:
            stages: list[Stage] = []
            for unit in iv.body:
                ext = unit_extents[pos]
                pos += 1
                for w in writes(unit):
                    field_extent[w] = union(field_extent.get(w, ZERO), ext)
                ks: dict[str, tuple[int, int]] = {}
                for acc in reads(unit):
                    di, dj, dk = offsets(acc)
                    field_extent[acc.field] = union(field_extent.get(acc.field, ZERO),
                                                    shift(ext, di, dj))
                    lo, hi = ks.get(acc.field, (dk, dk))
                    ks[acc.field] = (min(lo, dk), max(hi, dk))
                k_accesses += [KAccess(n, iv, lo, hi) for n, (lo, hi) in ks.items()]
                if stages and stages[-1].extent == ext and not _hazard(stages[-1].units, unit):
                    stages[-1] = Stage(stages[-1].units + (unit,), ext)
                else:
                    stages.append(Stage((unit,), ext))
            scheds.append(IntervalSchedule(iv, tuple(stages)))
        if block.policy != "PARALLEL":  # execution order: along K in the policy's direction
            scheds.sort(key=lambda s: s.interval.start.resolve(1 << 40),
                        reverse=block.policy == "BACKWARD")
        multistages.append(MultiStage(block.policy, mode, tuple(scheds), frozenset(block_writes)))
    return Schedule(tuple(multistages), tuple(sorted(field_extent.items())), tuple(k_accesses))


def _hazard(group: tuple[d.Stmt, ...], unit: d.Stmt) -> bool:
    """Whether fusing ``unit`` after ``group`` into one loop nest could change results."""
    earlier_writes = set().union(*(writes(s) for s in group))
    for acc in reads(unit):
        if acc.field in earlier_writes and offsets(acc)[:2] != (0, 0):
            return True  # read-after-write with an offset: needs the whole plane first
    later_writes = writes(unit)
    for s in group:
        for acc in reads(s):
            if acc.field in later_writes and offsets(acc)[:2] != (0, 0):
                return True  # write-after-read with an offset: a neighbour would see the new value
    return False


def format_schedule(defn: c.ComputationDef, sched: Schedule) -> str:
    """What ``obj.ir`` prints below the definition: multistages, stages, extents."""
    lines = [c.format_computation(defn), "", "schedule:"]
    for m_i, ms in enumerate(sched.multistages):
        lines.append(f"  multistage {m_i}: {ms.policy}, executed by {ms.mode}")
        for isched in ms.intervals:
            iv = isched.interval
            lines.append(f"    interval({iv.start}, {iv.end}):")
            for s_i, st in enumerate(isched.stages):
                i_lo, i_hi, j_lo, j_hi = st.extent
                targets = sorted(set().union(*(writes(u) for u in st.units)))
                where = ", ".join(f"line {u.loc.line}" for u in st.units if u.loc)
                lines.append(f"      stage {s_i}: writes {', '.join(targets)}; extent "
                             f"i[{i_lo},{i_hi}] j[{j_lo},{j_hi}] ({where})")
    lines.append("  field extents: " + ", ".join(
        f"{n} i[{e[0]},{e[1]}] j[{e[2]},{e[3]}]" for n, e in sched.extents))
    return "\n".join(lines)
