"""Which loops of a lowered point kernel may run as one GPU thread (or OpenCL work-item) per
iteration: ``mark_parallel_nests`` marks them ``parallel``, which is the only mark the GPU
planner (``platforms/gpu.py``, for CUDA and OpenCL) turns into grid dimensions.

Only point kernels are marked this way: their loops over the output write disjoint points
and read inputs only. A computation's lowering marks its own loops, and leaves the K loops of
FORWARD/BACKWARD sweeps unmarked (each level reads the one before).
"""

from __future__ import annotations

from ..ir import kernel as k
from ..ir.core import walk


def _unit(e: k.Expr) -> bool:
    return isinstance(e, k.Constant) and int(e.value) == 1


def mark_parallel_nests(body: tuple[k.Stmt, ...],
                        params: tuple[k.Symbol, ...] = ()) -> tuple[k.Stmt, ...]:
    """Point kernels, whose loops over the output write disjoint points and read inputs only:

    - the loops directly nested in a parallel loop over the output's dimensions (internal
      counters, unit steps) are independent too, so they are marked parallel;
    - a parallel loop whose body is declarations and several such loops (an interior row
      and its two border strips, in the border modes) becomes one parallel loop per inner
      loop, each with the declarations it reads, so that the interior keeps a work-item
      per point instead of one per row;
    - a serial loop over the output at the top of a section whose bounds are parameters
      (the border rows in 2-D, serial for CPU threads) is marked parallel too.

    User loops (whose counters are user names, ending with ``_``) are left alone."""
    names = {p.name for p in params}

    def internal(loop: k.Loop) -> bool:
        return not loop.counter.name.endswith("_") and _unit(loop.step)

    def visit(s: k.Stmt, inside: bool, top: bool = False) -> tuple[k.Stmt, ...]:
        match s:
            case k.Loop(counter=c, body=b, step=st):
                bounds = {n.symbol.name for e in (s.start, s.stop) for n in walk(e)
                          if isinstance(n, k.Sym)}
                mine = s.parallel is not None or (internal(s) and (
                    inside or (top and bool(names) and bounds <= names)))
                parts: list[tuple[k.Stmt, ...]] = []
                for part in _fission(b) if mine else (b,):
                    only = len(part) == 1 and isinstance(part[0], k.Loop)
                    done = tuple(x for y in part for x in visit(y, mine and only))
                    parts += _fission(done) if mine else (done,)  # inner loops split too
                par = s.parallel or (k.Parallel() if mine else None)
                return tuple(k.Loop(c, s.start, s.stop, st, part, par, s.vectorize, loc=s.loc,
                                    source=s.source) for part in parts)
            case k.Section(title=t, body=b):
                return (k.Section(t, tuple(x for y in b for x in visit(y, False, True)),
                                  loc=s.loc, source=s.source),)
            case k.Branch(cond=c, then=a, orelse=o):
                return (k.Branch(c, tuple(x for y in a for x in visit(y, False)),
                                 tuple(x for y in o for x in visit(y, False)), loc=s.loc,
                                 source=s.source),)
        return (s,)

    return tuple(x for s in body for x in visit(s, False))


def _fission(body: tuple[k.Stmt, ...]) -> tuple[tuple[k.Stmt, ...], ...]:
    """The bodies of the loops that one parallel loop over ``body`` splits into: one per
    inner loop with the declarations it reads, when ``body`` is only declarations and
    several loops with internal counters; else ``body`` whole."""
    loops = [s for s in body if isinstance(s, k.Loop)]
    if len(loops) < 2 or any(not isinstance(s, (k.Loop, k.Declare)) for s in body) \
            or any(lp.counter.name.endswith("_") for lp in loops):
        return (body,)

    def reads(s: k.Stmt) -> set[str]:
        return {n.symbol.name for n in walk(s) if isinstance(n, k.Sym)}

    parts = []
    for lp in loops:
        need = reads(lp)
        kept: list[k.Stmt] = []
        for s in reversed(body[:body.index(lp)]):
            if isinstance(s, k.Declare) and s.symbol.name in need:
                kept.insert(0, s)
                need |= reads(s)
        parts.append((*kept, lp))
    return tuple(parts)


