"""Compute temporaries of PARALLEL computations on the fly, once per offset, in registers.

Requires: a typed computation that passed the access rules. Ensures: in each PARALLEL
interval body without control flow, every read ``t[di, dj, dk]`` of a temporary defined
earlier in that body reads instead a new temporary ``t@di,dj,dk`` that holds ``t``'s
definition shifted by (di, dj, dk) and is itself read only at offset (0, 0, 0); definitions
nothing else reads any more are dropped. Values are identical (the same operations on the
same inputs). The interval then fuses into one stage whose temporaries are all registers:
each shifted value is computed once per point, instead of being stored to and reloaded from
a temporary array (GT4Py's "on-the-fly" merging, with common subexpressions kept).

A shifted value is computed where it is first read, unless a statement between the
definition and that read writes something the definition reads (``tmp = x; x = y; y = tmp``):
then it is computed right after the definition, where the inputs still hold the values the
definition saw. Either place gives the definition's value, because each statement acts on
the whole plane before the next; the later one merely keeps fewer values live.

Recomputation is bounded (``RECOMPUTE_BUDGET``): a temporary whose definition, computed at
each offset its readers need, would cost more than the budget of extra operations per point
stays a temporary array (written once, read at its offsets: a memory round trip and a stage
of its own), and the interval is inlined again without it. Chains multiply the offsets (a
smoother of a smoother of a smoother), so without a bound the work grows geometrically.

An ``if`` (not a horizontal region) whose branches only assign floating-point temporaries
is first rewritten as selections (``if@n = cond; t = if@n ? value : t``, each temporary's
old value defined earlier in the body), so that ``flx = res; if res * grad > 0: flx = 0.0`` fuses like
``flx = 0.0 if res * grad > 0 else res``; the values computed are the same, and evaluating
the branch not taken cannot trap (floating point only, no integer division).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection

import numpy as np

from .. import dtypes
from ..analysis.schedule import offsets, reads, variable_k, writes
from ..ir import computation as c
from ..ir import definition as d
from ..ir.core import Location, rewrite, walk

Offset = tuple[int, int, int]

#: The extra operations per point (arithmetic and loads, which hit the cache after the
#: first) that recomputing one temporary at its readers' offsets may cost instead of a
#: round trip through memory. A float64 temporary stored and reloaded moves 16 bytes per
#: point: about 300 float64 operations of a GPU's time at its bandwidth (an H100: 67
#: TFLOP/s over 3.35 TB/s), some 50 of a CPU core's; the bound stays below both. hdiff's
#: Laplacian, 10 operations at 5 offsets, costs 40.
RECOMPUTE_BUDGET = 48


def operations(e: d.Expr, registers: Collection[str]) -> int:
    """Arithmetic operations and loads of ``e``; reads of ``registers`` (values the
    inliner computes once per offset) cost nothing."""
    count = 0
    for n in walk(e):
        if isinstance(n, (d.BinOp, d.UnaryOp, d.Compare, d.BoolOp, d.IfExp, d.Call)):
            count += 1
        elif isinstance(n, d.Access) and n.field not in registers:
            count += 1
    return count


def _zero(name: str, e: d.Access, dtype) -> d.Access:
    return d.Access(name, tuple(d.Const(0, dtype=x.dtype) for x in e.offset), dtype=dtype,
                    loc=e.loc)


class _IntervalInliner:
    def __init__(self, temps: dict[str, np.dtype], keep: set[str],
                 eager: dict[tuple[str, int], set[Offset]]) -> None:
        self.temps = temps            # temporary -> dtype
        self.keep = keep              # temporaries read outside this interval
        self.eager = eager            # definitions whose shifted values are computed at once
        self.version: dict[str, int] = {}
        self.definitions: dict[tuple[str, int], tuple[d.Expr, dict[str, int], Location | None]] = {}
        self.defined_at: dict[tuple[str, int], int] = {}  # position in body of the definition
        self.made: dict[tuple[str, int, Offset], str] = {}
        self.made_at: dict[str, tuple[str, int, Offset]] = {}  # register -> its key
        self.body: list[d.Stmt] = []
        self.new_temps: dict[str, np.dtype] = {}

    def register(self, t: str, ver: int, off: Offset) -> str:
        """The name of a register holding version ``ver`` of ``t`` at ``off``, computed once."""
        key = (t, ver, off)
        if key not in self.made:
            expr, versions, loc = self.definitions[(t, ver)]
            value = self.replace(expr, versions, off)
            name = f"{t}_{ver}@{off[0]},{off[1]},{off[2]}"
            self.body.append(d.Assign(name, value, loc=loc))
            self.new_temps[name] = self.temps[t]
            self.made[key] = name
            self.made_at[name] = key
        return self.made[key]

    def replace(self, e: d.Expr, versions: dict[str, int], shift: Offset) -> d.Expr:
        def fn(n):
            if not isinstance(n, d.Access):
                return None
            o = offsets(n)
            total = (o[0] + shift[0], o[1] + shift[1], o[2] + shift[2])
            if n.field in self.temps and n.field in versions:
                name = self.register(n.field, versions[n.field], total)
                return _zero(name, n, n.dtype)
            if shift == (0, 0, 0):
                return None
            return dataclasses.replace(n, offset=tuple(
                d.Const(v, dtype=x.dtype) for v, x in zip(total, n.offset)) + n.offset[3:])

        return rewrite(e, fn)

    def statement(self, s: d.Assign, later: tuple[d.Stmt, ...]) -> None:
        if s.target in self.temps:
            ver = self.version.get(s.target, -1) + 1
            self.definitions[(s.target, ver)] = (s.value, dict(self.version), s.loc)
            self.defined_at[(s.target, ver)] = len(self.body)
            self.version[s.target] = ver
            for off in sorted(self.eager.get((s.target, ver), ())):
                self.register(s.target, ver, off)
            redefined = any(s.target in writes(x) for x in later)
            if s.target in self.keep and not redefined:  # others read the stored values
                value = self.replace(s.value, self.definitions[(s.target, ver)][1], (0, 0, 0))
                self.body.append(dataclasses.replace(s, value=value))
            return
        self.body.append(dataclasses.replace(s, value=self.replace(s.value, self.version,
                                                                    (0, 0, 0))))

    def stale(self) -> dict[tuple[str, int], set[Offset]]:
        """Shifted values computed after a statement that overwrote one of their inputs."""
        out: dict[tuple[str, int], set[Offset]] = {}
        for pos, s in enumerate(self.body):
            key = self.made_at.get(s.target)  # type: ignore[attr-defined]
            if key is None:
                continue
            inputs = {a.field for a in reads(s) if a.field not in self.made_at}
            start = self.defined_at[key[:2]]
            if any(set(writes(x)) & inputs for x in self.body[start:pos]):
                out.setdefault(key[:2], set()).add(key[2])
        return out


def _inline_interval(body: tuple[d.Assign, ...], temps: dict[str, np.dtype],
                     keep: set[str]) -> _IntervalInliner | None:
    """Inline one interval; computing every stale value early can make others stale in turn
    (they move up past the same writes), so repeat until none is; None if that fails."""
    eager: dict[tuple[str, int], set[Offset]] = {}
    for _ in range(len(body) + 2):
        inliner = _IntervalInliner(temps, keep, eager)
        for s_i, s in enumerate(body):
            inliner.statement(s, body[s_i + 1:])
        stale = inliner.stale()
        if not stale:
            return inliner
        for key, offs in stale.items():
            eager.setdefault(key, set()).update(offs)
    return None


def over_budget(inliner: _IntervalInliner) -> set[str]:
    """The temporaries whose shifted values cost more than ``RECOMPUTE_BUDGET`` extra
    operations per point: each definition computed at n offsets costs n - 1 times its
    own operations more than computing it once."""
    places: dict[tuple[str, int], int] = {}
    for t, ver, _ in inliner.made:
        places[(t, ver)] = places.get((t, ver), 0) + 1
    cost: dict[str, int] = {}
    for (t, ver), n in places.items():
        expr = inliner.definitions[(t, ver)][0]
        cost[t] = cost.get(t, 0) + (n - 1) * operations(expr, inliner.temps)
    return {t for t, c in cost.items() if c > RECOMPUTE_BUDGET and not t.startswith("if@")}


def _budgeted(body: tuple[d.Assign, ...], temps: dict[str, np.dtype],
              keep: set[str]) -> _IntervalInliner | None:
    """``_inline_interval`` with the temporaries over budget kept as arrays: dropping one
    lowers the offsets of those it reads, so repeat until every one left is within it."""
    materialized: set[str] = set()
    while True:
        inlined = {t: dt for t, dt in temps.items() if t not in materialized}
        inliner = _inline_interval(body, inlined, keep)
        if inliner is None:
            return None
        over = over_budget(inliner)
        if not over:
            return inliner
        materialized |= over


def _access(name: str, dtype, loc) -> d.Access:
    zero = d.Const(0, dtype=dtypes.INT64)
    return d.Access(name, (zero, zero, zero), dtype=dtype, loc=loc)


def _if_converted(body: tuple[d.Stmt, ...], temps: dict[str, np.dtype],
                  guards: dict[str, np.dtype]) -> tuple[d.Stmt, ...] | None:
    """``body`` with each ``if`` turned into selections (see the module docstring), or None
    when one cannot be: its branches hold other statements, assign fields or non-float
    values, divide integers, test a horizontal region (whose value depends on the point, which
shifting cannot move), or keep the old value of a temporary not defined before."""
    out: list[d.Stmt] = []
    defined: set[str] = set()
    for s in body:
        if isinstance(s, d.Assign):
            out.append(s)
            defined.add(s.target)
            continue
        if not isinstance(s, d.If):
            return None
        branches = (s.body, s.orelse)
        stmts = [x for b in branches for x in b]
        if not all(type(x) is d.Assign and x.target in temps
                   and np.dtype(temps[x.target]).kind == "f" for x in stmts):
            return None
        if any(isinstance(n, c.InRegion) for n in walk(s)):  # shifted values would need the
            return None                                   # region tested at their position
        if any(isinstance(n, d.BinOp) and n.op in ("/", "//", "%")
               and np.dtype(n.dtype).kind != "f" for x in stmts for n in walk(x)):
            return None
        guard = f"if@{len(guards)}"
        cond_type = s.cond.dtype
        assert cond_type is not None, "if-conversion runs on typed definitions"
        guards[guard] = cond_type
        out.append(d.Assign(guard, s.cond, loc=s.loc))
        g = _access(guard, cond_type, s.loc)
        for taken, branch in ((True, s.body), (False, s.orelse)):
            for x in branch:
                assert isinstance(x, d.Assign)  # (every statement is, checked above)
                if x.target not in defined:  # its old value would be the stale array's
                    return None
                old = _access(x.target, temps[x.target], x.loc)
                sel = d.IfExp(g, x.value, old) if taken else d.IfExp(g, old, x.value)
                out.append(d.Assign(x.target, dataclasses.replace(sel, dtype=x.value.dtype),
                                    loc=x.loc))
    return tuple(out)


def inline_temporaries(defn: c.ComputationDef) -> c.ComputationDef:
    temps = dict(defn.temporaries)
    readers: dict[str, set[tuple[int, int]]] = {}
    for b_i, block in enumerate(defn.blocks):
        for iv_i, iv in enumerate(block.intervals):
            for s in iv.body:
                for acc in reads(s):
                    if acc.field in temps:
                        readers.setdefault(acc.field, set()).add((b_i, iv_i))
    new_temps: dict[str, np.dtype] = {}
    blocks = []
    for b_i, block in enumerate(defn.blocks):
        if block.policy != "PARALLEL":
            blocks.append(block)
            continue
        intervals = []
        for iv_i, iv in enumerate(block.intervals):
            guards: dict[str, np.dtype] = {}
            body = iv.body
            if not all(isinstance(s, d.Assign) for s in body):
                converted = _if_converted(body, temps, guards)
                body = converted if converted is not None else body
            if not all(isinstance(s, d.Assign) for s in body) or any(
                    isinstance(n, d.Access) and variable_k(n) is not None
                    for s in body for n in walk(s)):  # no shifting of run-time offsets
                intervals.append(iv)
                continue
            keep = {t for t, where in readers.items() if where - {(b_i, iv_i)}}
            inliner = _budgeted(body, {**temps, **guards}, keep)  # type: ignore[arg-type]
            if inliner is None:
                intervals.append(iv)
                continue
            new_temps.update(inliner.new_temps)
            intervals.append(dataclasses.replace(iv, body=tuple(inliner.body)))
        blocks.append(dataclasses.replace(block, intervals=tuple(intervals)))
    used = {n.field for b in blocks for iv in b.intervals for s in iv.body for n in walk(s)
            if isinstance(n, d.Access)} | {w for b in blocks for iv in b.intervals
                                           for s in iv.body for w in writes(s)}
    temporaries = tuple((t, dt) for t, dt in (*defn.temporaries, *new_temps.items())
                        if t in used)
    return dataclasses.replace(defn, blocks=tuple(blocks), temporaries=temporaries)
