"""Typing, access rules, extents and the stage/multistage schedule of a computation.

Meaning (contract.md section 2): within a computation each statement acts as if applied to the
whole extended IJ plane of the current K level before the next one runs. From that:

- a *unit* is a top-level statement of an interval body (an ``if`` or ``while`` counts as
  one unit, as GT4Py treats it as one stage);
- extents are propagated backwards from the compute domain over all units (to a fixed point
  where FORWARD/BACKWARD loops carry values between levels); a unit restricted to a
  horizontal region computes only where the region meets its extent, so only the points its
  reads touch there count (GT4Py's meaning);
- a stage is a run of consecutive units with one extent and no horizontal read-after-write
  or write-after-read between them, so one loop nest computes it;
- a FORWARD/BACKWARD multistage runs column by column (parallel over IJ, K sequential) when
  no unit reads a field written in it with a horizontal offset, else plane by plane;
- what has no well-defined meaning is rejected with ``AccessRuleError``.
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass

from .. import dtypes
from ..errors import AccessRuleError, UndefinedReadWarning
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
    """The constant offsets; a run-time K offset (``f[0, 0, lev]``) counts as 0 here."""
    # offsets are integer constants (the frontend's check); a tuple of 3: fields are 3-D
    return tuple(int(o.value) if isinstance(o, d.Const) else 0  # type: ignore[return-value, arg-type]
                 for o in a.offset[:3])


def data_index(a: d.Access) -> tuple[int, ...]:
    """The element read of a field with data dimensions (``f[0, 0, 0][3]``), else ()."""
    return tuple(int(o.value) for o in a.offset[3:])  # type: ignore[attr-defined]


def variable_k(a: d.Access) -> d.Expr | None:
    """The run-time K offset expression of ``f[0, 0, lev]``, or None for a constant one."""
    o = a.offset[2]
    return None if isinstance(o, d.Const) else o


def variable_k_reads(defn: c.ComputationDef) -> list[d.Access]:
    """Every read at a run-time K offset, in program order."""
    return [n for b in defn.blocks for iv in b.intervals for s in iv.body for n in walk(s)
            if isinstance(n, d.Access) and variable_k(n) is not None]


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
    typer = _ComputationTyper(defn.name, scalars, arrays, rules="numpy",
                              fields=frozenset(arrays))
    typer.temporaries = temps
    typer.declared = dict(defn.declared)
    typer.data_dims = {f.name: f.data_dims for f in defn.fields if f.data_dims}
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


class _ComputationTyper(Typer):
    """The typing of the definition IR plus the nodes only computations have."""

    data_dims: dict[str, tuple[int, ...]] = {}

    def _expr(self, e: d.Expr) -> d.Expr:
        if isinstance(e, c.InRegion):
            return dataclasses.replace(e, dtype=dtypes.BOOL)
        if isinstance(e, d.Access) and len(e.offset) != 3 + len(self.data_dims.get(e.field, ())):
            dims = self.data_dims.get(e.field, ())
            raise self.error(f"field '{e.field}' has data dimensions {dims}: read one element "
                             f"as {e.field}[0, 0, 0][i]", e.loc)
        if isinstance(e, d.Access) and e.field in self.temporaries and variable_k(e):
            offset = tuple(self.index(o) for o in e.offset)  # the base types fields' only
            typed = super()._expr(e)
            assert isinstance(typed, d.Access)
            return dataclasses.replace(typed, offset=offset)
        return super()._expr(e)

    def stmts(self, body: tuple[d.Stmt, ...]) -> tuple[d.Stmt, ...]:
        out: list[d.Stmt] = []
        for s in body:
            if isinstance(s, d.Assign) and len(getattr(s, "data_index", ())) != len(
                    self.data_dims.get(s.target, ())):
                raise self.error(f"field '{s.target}' has data dimensions "
                                 f"{self.data_dims[s.target]}: write one element as "
                                 f"{s.target}[0, 0, 0][i] = ...", s.loc)
            if isinstance(s, c.AssignAt):  # typed as the plain write, then put back at dk
                typed, = super().stmts((d.Assign(s.target, s.value, loc=s.loc),))
                out.append(dataclasses.replace(s, value=typed.value))  # type: ignore[attr-defined]
            else:
                out.extend(super().stmts((s,)))
        return tuple(out)


# ------------------------------------------------------------------ regions


def _axis_reach(lo: int, hi: int, bounds: c.Bounds, dd: int
                ) -> tuple[tuple[int, int], int] | None:
    """Along one axis, the points a read at offset ``dd`` touches from a statement computed on
    [lo, n - 1 + hi] and restricted to ``bounds``: (the halo it needs before and after the
    domain, the smallest domain size n for which that is exact), or None where the region
    cannot meet the computed points. A region bound counted from one end says nothing about
    the other end unless the domain is large enough, which the returned size guarantees."""
    s, e = bounds
    first = ("start", lo) if s is None else (("end", s.offset) if s.from_end
                                              else ("start", max(lo, s.offset)))
    # the last point, counted from the start, or from n (index n - 1 is "end" -1)
    last = ("end", hi - 1) if e is None else (("end", min(hi - 1, e.offset - 1)) if e.from_end
                                               else ("start", e.offset - 1))
    if first[0] == last[0] and first[1] > last[1]:
        return None
    if first[0] == "end" and last[0] == "start":  # an inverted region: no assumption
        return (min(0, lo + dd), max(0, hi + dd)), 0
    min_n = 0
    if first[0] == "start":
        before = min(0, first[1] + dd)
    else:
        before, min_n = 0, max(min_n, -(first[1] + dd))
    if last[0] == "end":
        after = max(0, last[1] + dd + 1)
    else:
        after, min_n = 0, max(min_n, last[1] + dd + 1)
    return (before, after), min_n


def access_extent(ext: c.Extent, di: int, dj: int, region: c.InRegion | None
                  ) -> tuple[c.Extent, tuple[int, int]] | None:
    """The halo a read at (di, dj) needs from a unit computed on ``ext`` (restricted to
    ``region``), with the smallest domain (ni, nj) for which it is exact; None where the
    region never meets the unit's points."""
    if region is None:
        return shift(ext, di, dj), (0, 0)
    ri = _axis_reach(ext[0], ext[1], region.i, di)
    rj = _axis_reach(ext[2], ext[3], region.j, dj)
    if ri is None or rj is None:
        return None
    return (*ri[0], *rj[0]), (ri[1], rj[1])


def unit_reads(unit: d.Stmt, ext: c.Extent) -> list[tuple[d.Access, c.Extent, tuple[int, int]]]:
    """Each read of ``unit`` with the halo it needs when the unit is computed on ``ext``."""
    region = c.region_of(unit)
    out = []
    for acc in reads(unit):
        di, dj, _ = offsets(acc)
        reach = access_extent(ext, di, dj, region)
        if reach is not None:
            out.append((acc, *reach))
    return out


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
    """Field ``name`` is read (or written) at K offsets [dk_lo, dk_hi] over the levels of
    ``interval``."""

    name: str
    interval: c.IntervalBlock
    dk_lo: int
    dk_hi: int


@dataclass(frozen=True)
class Schedule:
    multistages: tuple[MultiStage, ...]
    extents: tuple[tuple[str, c.Extent], ...]  # horizontal halo each field/temporary needs
    k_accesses: tuple[KAccess, ...]
    # smallest (ni, nj) for which the extents are exact: reads in horizontal regions counted
    # from one end of the domain are assumed not to reach the other end
    min_domain: tuple[int, int] = (0, 0)

    @property
    def written(self) -> frozenset[str]:
        """The fields and temporaries some multistage writes."""
        return frozenset().union(*(ms.written for ms in self.multistages))

    def extent(self, name: str) -> c.Extent:
        return dict(self.extents).get(name, ZERO)


def _rule_error(rule: str, message: str, defn: c.ComputationDef, loc, hint: str) -> AccessRuleError:
    return AccessRuleError(f"{rule}: {message}", stencil=defn.name, loc=loc, hint=hint)


def check_access_rules(defn: c.ComputationDef) -> None:
    """Reject what has no well-defined meaning (see the module docstring)."""
    _check_intervals_disjoint(defn)
    _check_definite_writes(defn)
    for block in defn.blocks:
        for iv in block.intervals:
            for unit in iv.body:
                written = writes(unit)
                for acc in reads(unit):
                    di, dj, _ = offsets(acc)
                    if acc.field in written and (di, dj) != (0, 0):
                        raise _rule_error(
                            "rule 2", f"'{acc.field}' is written by this statement and read "
                            f"by it with the horizontal offset ({di}, {dj})", defn, acc.loc,
                            "write the result to a new temporary, or split the statement so "
                            "that the offset read comes from a previous statement")
        if block.policy == "PARALLEL":
            _check_parallel_k_reads(defn, block)


def _bound_key(b: c.AxisBound) -> tuple[bool, int]:
    """Order of K bounds as GT4Py compares them: every START-relative level before every
    END-relative one (the domain is assumed deep enough)."""
    return (b.from_end, b.offset)


def _check_intervals_disjoint(defn: c.ComputationDef) -> None:
    for block in defn.blocks:
        seen: list[c.IntervalBlock] = []
        for iv in block.intervals:
            for other in seen:
                if _bound_key(iv.start) < _bound_key(other.end) and \
                        _bound_key(other.start) < _bound_key(iv.end):
                    raise AccessRuleError(
                        f"interval({iv.start}, {iv.end}) overlaps interval({other.start}, "
                        f"{other.end}) of the same computation", stencil=defn.name,
                        loc=iv.loc, hint="make the intervals of one computation disjoint, or "
                                         "put the second one in its own `with computation`")
            seen.append(iv)


def _check_definite_writes(defn: c.ComputationDef) -> None:
    """A temporary must be written before it is read, on the path that reads it: in program
    order; a read that no write precedes on any path is an error. A write inside an ``if``
    (or ``while``) body on one path only makes the value defined where that path ran: a read
    under the same conditions (``if c: t = ...`` ... ``if c: b = t``) is defined, as it is
    in GT4Py; a read outside them may read a value nothing wrote, and is reported with
    ``UndefinedReadWarning`` naming the branch that writes it (GT4Py reads uninitialized
    memory there; the definition still runs, as GT4Py's does)."""
    temps = {t for t, _ in defn.temporaries} | set(defn.planes)
    warned: set[tuple[str, object]] = set()

    def check(e: d.Node, definite: set[str], maybe: dict[str, list[tuple]],
              path: tuple) -> None:
        for acc in (n for n in walk(e) if isinstance(n, d.Access)):
            if acc.field not in temps or acc.field in definite:
                continue
            paths = maybe.get(acc.field)
            if not paths:
                raise _rule_error(
                    "undefined read", f"temporary '{acc.field}' is read before any statement "
                    "writes it, so its value is undefined", defn, acc.loc,
                    "assign the temporary first (or in an earlier computation)")
            keys = [step[:2] for step in path]
            if any(all(step[:2] in keys for step in p) for p in paths):
                continue  # read under the conditions it was written under
            if (acc.field, acc.loc) in warned:
                continue
            warned.add((acc.field, acc.loc))
            where = " and ".join(_branch(step) for step in paths[0] if step not in path)
            warnings.warn(UndefinedReadWarning(
                f"temporary '{acc.field}' is written only {where}, and read here outside "
                "that branch: where it did not run, the value read is undefined",
                stencil=defn.name, loc=acc.loc,
                hint=f"assign '{acc.field}' on every path before this read (e.g. a default "
                     "value before the `if`)"), stacklevel=5)

    def visit(body: tuple[d.Stmt, ...], definite: set[str], maybe: dict[str, list[tuple]],
              path: tuple) -> None:
        for s in body:
            match s:
                case d.Assign(target=t, value=v):
                    check(v, definite, maybe, path)
                    definite.add(t)
                case d.If(cond=cond, body=b, orelse=o):
                    check(cond, definite, maybe, path)
                    branches = []
                    for stmts, taken in ((b, True), (o, False)):
                        step: tuple = (cond, taken, s.loc)  # a path step: branch or loop
                        db, mb = set(definite), {k: list(v) for k, v in maybe.items()}
                        visit(stmts, db, mb, path + (step,))
                        branches.append((db, mb, step))
                    both = branches[0][0] & branches[1][0]
                    for db, mb, step in branches:
                        for name in db - both:
                            maybe.setdefault(name, []).append(path + (step,))
                        for name, paths in mb.items():
                            maybe.setdefault(name, [])
                            maybe[name] += [p for p in paths if p not in maybe[name]]
                    definite |= both
                case d.While(cond=cond, body=b):
                    check(cond, definite, maybe, path)
                    step = ("while", id(s), s.loc)  # the body may not run at all
                    db, mb = set(definite), {k: list(v) for k, v in maybe.items()}
                    visit(b, db, mb, path + (step,))
                    for name in db - definite:
                        maybe.setdefault(name, []).append(path + (step,))
                    for name, paths in mb.items():
                        maybe.setdefault(name, [])
                        maybe[name] += [p for p in paths if p not in maybe[name]]
                case _:
                    check(s, definite, maybe, path)
                    definite |= writes(s)

    written_before: set[str] = set()
    for block in defn.blocks:
        block_writes = set().union(*(writes(s) for iv in block.intervals for s in iv.body))
        # FORWARD/BACKWARD: a level may read what a later statement wrote at an earlier level
        visible = written_before | (block_writes if block.policy != "PARALLEL" else set())
        for iv in block.intervals:
            visit(iv.body, set(visible), {}, ())
        written_before |= block_writes


def _branch(step: tuple) -> str:
    kind, taken, loc = step
    if kind == "while":
        return f"inside the `while` at {loc}"
    return f"when the condition of the `if` at {loc} {'holds' if taken else 'fails'}"


def _levels(iv: c.IntervalBlock, nk: int) -> range:
    k0, k1 = iv.bounds(nk)
    return range(k0, max(k0, k1))


def _check_parallel_k_reads(defn: c.ComputationDef, block: c.VerticalBlock) -> None:
    """A read at a nonzero K offset of a name this PARALLEL computation writes is rejected
    only when a level it reads is also written by the computation (levels in any order)."""
    writers: dict[str, list[c.IntervalBlock]] = {}
    for iv in block.intervals:
        for s in iv.body:
            for w in writes(s):
                writers.setdefault(w, []).append(iv)
    for iv in block.intervals:
        for unit in iv.body:
            for acc in reads(unit):
                dk = offsets(acc)[2]
                if acc.field in writers and variable_k(acc) is not None:
                    raise _rule_error(
                        "PARALLEL", f"'{acc.field}' is written in this PARALLEL computation "
                        "and read at a run-time vertical offset, which may reach a level it "
                        "writes", defn, acc.loc, "use computation(FORWARD) or BACKWARD, or "
                        "compute the field in an earlier computation")
                if dk == 0 or acc.field not in writers:
                    continue
                bounds = [b for w in (iv, *writers[acc.field]) for b in (w.start, w.end)]
                # Levels are linear in nk: beyond every offset involved the answer repeats.
                top = 2 * (max(abs(b.offset) for b in bounds) + abs(dk)) + 2
                for nk in range(1, top + 1):
                    written = set().union(*(_levels(w, nk) for w in writers[acc.field]))
                    if any(k + dk in written for k in _levels(iv, nk)):
                        raise _rule_error(
                            "PARALLEL", f"'{acc.field}' is written in this PARALLEL "
                            f"computation and read with the vertical offset {dk} at levels "
                            "it writes", defn, acc.loc,
                            "use computation(FORWARD) or BACKWARD for vertical "
                            "dependencies, or compute the field in an earlier computation")


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
                for acc, reach, _ in unit_reads(unit, ext):
                    grown = union(need.get(acc.field, ZERO), reach)
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
    min_domain = (0, 0)
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
                for acc, reach, (ni, nj) in unit_reads(unit, ext):
                    dk = offsets(acc)[2]
                    field_extent[acc.field] = union(field_extent.get(acc.field, ZERO), reach)
                    min_domain = (max(min_domain[0], ni), max(min_domain[1], nj))
                    lo, hi = ks.get(acc.field, (dk, dk))
                    ks[acc.field] = (min(lo, dk), max(hi, dk))
                for w in walk(unit):
                    if isinstance(w, c.AssignAt):  # the level written needs room too
                        lo, hi = ks.get(w.target, (w.k_offset, w.k_offset))
                        ks[w.target] = (min(lo, w.k_offset), max(hi, w.k_offset))
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
    return Schedule(tuple(multistages), tuple(sorted(field_extent.items())), tuple(k_accesses),
                    min_domain)


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
