"""Inline temporaries of PARALLEL computations into the statements that read them.

Requires: a typed computation that passed the access rules. Ensures: in each PARALLEL
interval body without control flow, a read ``t[di, dj, dk]`` of a temporary defined earlier
in that body is replaced by ``t``'s defining expression shifted by (di, dj, dk); definitions
that nothing else reads any more are dropped. The values computed are identical (the same
operations on the same inputs); what changes is that the stages collapse into one loop nest
with no temporary arrays, at the price of recomputation. A definition larger than
``MAX_NODES`` after substitution stays a temporary.
"""

from __future__ import annotations

import dataclasses

from ..analysis.schedule import offsets, reads, writes
from ..ir import computation as c
from ..ir import definition as d
from ..ir.core import rewrite, walk

MAX_NODES = 400


def _shift(e: d.Expr, di: int, dj: int, dk: int) -> d.Expr:
    if (di, dj, dk) == (0, 0, 0):
        return e

    def fn(n):
        if isinstance(n, d.Access):
            o = offsets(n)
            return dataclasses.replace(n, offset=tuple(
                d.Const(a + b, dtype=x.dtype) for a, b, x in zip(o, (di, dj, dk), n.offset)))
        return None

    return rewrite(e, fn)


def _substitute(e: d.Expr, env: dict[str, d.Expr]) -> d.Expr:
    def fn(n):
        if isinstance(n, d.Access) and n.field in env:
            return _shift(env[n.field], *offsets(n))
        return None

    return rewrite(e, fn)


def _size(e: d.Expr) -> int:
    return sum(1 for _ in walk(e))


def inline_temporaries(defn: c.ComputationDef) -> c.ComputationDef:
    temps = {t for t, _ in defn.temporaries}
    # where each temporary is read: (block, interval) positions
    readers: dict[str, set[tuple[int, int]]] = {}
    for b_i, block in enumerate(defn.blocks):
        for iv_i, iv in enumerate(block.intervals):
            for s in iv.body:
                for acc in reads(s):
                    if acc.field in temps:
                        readers.setdefault(acc.field, set()).add((b_i, iv_i))
    blocks = []
    for b_i, block in enumerate(defn.blocks):
        if block.policy != "PARALLEL":
            blocks.append(block)
            continue
        intervals = []
        for iv_i, iv in enumerate(block.intervals):
            if not all(isinstance(s, d.Assign) for s in iv.body):
                intervals.append(iv)
                continue
            env: dict[str, d.Expr] = {}
            body: list[d.Stmt] = []
            for s_i, s in enumerate(iv.body):
                value = _substitute(s.value, env)
                if s.target in temps:
                    if _size(value) <= MAX_NODES:
                        env[s.target] = value
                        later = iv.body[s_i + 1:]
                        redefined_later = any(s.target in writes(x) for x in later)
                        read_elsewhere = readers.get(s.target, set()) - {(b_i, iv_i)}
                        if not read_elsewhere or redefined_later:
                            continue  # every read it has is inlined
                    else:
                        env.pop(s.target, None)
                body.append(dataclasses.replace(s, value=value))
            intervals.append(dataclasses.replace(iv, body=tuple(body)))
        blocks.append(dataclasses.replace(block, intervals=tuple(intervals)))
    kept = {n.field for b in blocks for iv in b.intervals for s in iv.body for n in walk(s)
            if isinstance(n, d.Access)} | {w for b in blocks for iv in b.intervals
                                           for s in iv.body for w in writes(s)}
    temporaries = tuple((t, dt) for t, dt in defn.temporaries if t in kept)
    return dataclasses.replace(defn, blocks=tuple(blocks), temporaries=temporaries)
